package connmgr.probe;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import javax.management.Attribute;
import javax.management.AttributeList;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

/**
 * Reads the brokers' own connection counts over remote JMX, every {@code --every-ms}: the
 * {@code kafka.server:type=socket-server-metrics,listener=L,networkProcessor=N} MBeans of each
 * broker, summed over its network processors, per listener.
 *
 * <p>Usage: {@code BrokerJmx --broker 1=127.0.0.1:9999 [--broker 2=HOST:PORT ...] --every-ms 5000}.
 * JDK classes only ({@code javax.management.remote}); it needs no Kafka class.
 *
 * <p>stdout, one JSON object per line, nothing else: per broker per sample either
 * {@code {"t_ms":EPOCH_MS,"broker":1,"up":true,"listeners":{"SASL_SSL":{"connection-count":3.0,...},...}}}
 * with every attribute of {@link #ATTRIBUTES} the broker has, or
 * {@code {"t_ms":EPOCH_MS,"broker":1,"up":false,"error":"..."}} when it cannot be read (a
 * broker restarting). A failed read drops that broker's connection; the next sample connects
 * again, so a restarted broker is read again as soon as its JMX port answers. A line (or EOF)
 * on stdin ends the polling: the last line is {@code {"phase":"closed"}}, then exit 0.
 */
public final class BrokerJmx {

    /** The Selector metrics of a broker's listener, per network processor. */
    static final String[] ATTRIBUTES = {
        "connection-count",
        "connection-creation-total",
        "connection-close-total",
        "successful-authentication-total",
        "failed-authentication-total",
    };

    private BrokerJmx() {
    }

    public static void main(String[] argv) throws Exception {
        PrintStream json = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        // A broker that accepts and then hangs must not stall the others' samples for long.
        System.setProperty("sun.rmi.transport.connectionTimeout", "3000");
        System.setProperty("sun.rmi.transport.tcp.responseTimeout", "5000");
        Map<Integer, String> brokers = new TreeMap<>();
        long everyMs = 5000;
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if ("--broker".equals(argv[i])) {
                int eq = argv[i + 1].indexOf('=');
                brokers.put(Integer.parseInt(argv[i + 1].substring(0, eq)), argv[i + 1].substring(eq + 1));
            } else if ("--every-ms".equals(argv[i])) {
                everyMs = Long.parseLong(argv[i + 1]);
            } else {
                throw new IllegalArgumentException("unknown option " + argv[i]);
            }
        }
        if (brokers.isEmpty() || everyMs <= 0 || argv.length % 2 != 0) {
            throw new IllegalArgumentException("usage: BrokerJmx --broker ID=HOST:PORT ... --every-ms N");
        }
        CountDownLatch stop = new CountDownLatch(1);
        Thread stdin = new Thread(() -> {
            try {
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
            } catch (IOException e) {
                // EOF or a broken pipe: stop all the same.
            }
            stop.countDown();
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();

        Map<Integer, JMXConnector> open = new TreeMap<>();
        long next = System.nanoTime();
        do {
            for (Map.Entry<Integer, String> b : brokers.entrySet()) {
                json.println(Probe.Json.write(sample(b.getKey(), b.getValue(), open)));
            }
            json.flush();
            next += TimeUnit.MILLISECONDS.toNanos(everyMs);
        } while (!stop.await(Math.max(0, next - System.nanoTime()), TimeUnit.NANOSECONDS));
        for (JMXConnector c : open.values()) {
            close(c);
        }
        Map<String, Object> closed = new LinkedHashMap<>();
        closed.put("phase", "closed");
        json.println(Probe.Json.write(closed));
        json.flush();
        System.exit(0);
    }

    /** One broker's sample; connects first if it has no connection, drops it on failure. */
    static Map<String, Object> sample(int broker, String address, Map<Integer, JMXConnector> open) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("t_ms", System.currentTimeMillis());
        out.put("broker", broker);
        try {
            JMXConnector connector = open.get(broker);
            if (connector == null) {
                JMXServiceURL url = new JMXServiceURL("service:jmx:rmi:///jndi/rmi://" + address + "/jmxrmi");
                connector = JMXConnectorFactory.connect(url);
                open.put(broker, connector);
            }
            out.put("listeners", listeners(connector.getMBeanServerConnection()));
            out.put("up", true);
        } catch (Exception e) {
            JMXConnector dead = open.remove(broker);
            if (dead != null) {
                close(dead);
            }
            out.put("up", false);
            out.put("error", Probe.describe(e));
        }
        return out;
    }

    /** Listener -> attribute -> value summed over the listener's network processors. */
    static Map<String, Map<String, Double>> listeners(MBeanServerConnection server) throws Exception {
        ObjectName pattern = new ObjectName("kafka.server:type=socket-server-metrics,listener=*,networkProcessor=*");
        Map<String, Map<String, Double>> found = new TreeMap<>();
        for (ObjectName name : server.queryNames(pattern, null)) {
            Map<String, Double> sums = found.computeIfAbsent(name.getKeyProperty("listener"), k -> new TreeMap<>());
            AttributeList values = server.getAttributes(name, ATTRIBUTES);
            for (Attribute a : values.asList()) {
                if (a.getValue() instanceof Number) {
                    sums.merge(a.getName(), ((Number) a.getValue()).doubleValue(), Double::sum);
                }
            }
        }
        return found;
    }

    private static void close(JMXConnector connector) {
        try {
            connector.close();
        } catch (IOException e) {
            // Already broken: nothing more to release.
        }
    }
}
