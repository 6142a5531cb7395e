package org.apache.kafka.clients;

import org.apache.kafka.clients.ConnectionRoleMetrics.CloseReason;
import org.apache.kafka.clients.ConnectionRoleMetrics.Role;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.metrics.JmxReporter;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.KafkaMetricsContext;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.network.ChannelState;
import org.apache.kafka.common.network.PlaintextChannelBuilder;
import org.apache.kafka.common.network.Selectable;
import org.apache.kafka.common.network.Selector;
import org.apache.kafka.common.requests.MetadataRequest;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.test.MockSelector;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code connection.role.metrics.enable}: every connection close is counted under one reason, in group
 * {@code <prefix>-connection-close-reason-metrics}, tag {@code reason}, meter {@code connection-close}; a reason is
 * registered on its first close; summed over the reasons, the closes equal the selector's own
 * {@code connection-close-total}.
 */
public class ConnmgrConnectionCloseReasonTest {

    private static final String GROUP = "producer-connection-close-reason-metrics";
    private static final String ROLE_GROUP = "producer-connection-role-metrics";
    private static final long RECONNECT_BACKOFF_MS = 50;
    private static final int REQUEST_TIMEOUT_MS = 30_000;
    private static final long CONNECT_TIMEOUT_MS = 5_000;

    private static final Node NODE0 = new Node(0, "localhost", 9090);
    private static final Node NODE1 = new Node(1, "localhost", 9091);
    private static final Node NODE1_MOVED = new Node(1, "localhost", 9191);
    /** A port MockSelector never connects: dials to it stay pending until they time out or fail. */
    private static final int UNANSWERED_PORT = 9999;
    private static final Node UNANSWERED = new Node(2, "localhost", UNANSWERED_PORT);

    private final MockTime time = new MockTime();
    private final MockSelector selector = new MockSelector(time, address -> address.getPort() != UNANSWERED_PORT);
    private Metrics metrics;
    private final List<AutoCloseable> closeables = new ArrayList<>();

    @BeforeEach
    public void setup() {
        metrics = new Metrics(new MetricConfig().tags(Map.of("client-id", "p1")), time);
    }

    @AfterEach
    public void teardown() throws Exception {
        for (AutoCloseable closeable : closeables)
            closeable.close();
        metrics.close();
    }

    /** A client with the switch on over {@code updater}'s nodes (or {@code metadata}'s when the updater is null). */
    private NetworkClient client(Selectable selector, MetadataUpdater updater, Metadata metadata,
                                 boolean discoverBrokerVersions, MetadataRecoveryStrategy recovery,
                                 boolean closeBootstrapConnections, boolean retireChangedEndpoints) {
        return new NetworkClient(updater, metadata, selector, "p1", Integer.MAX_VALUE,
                RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MS, 64 * 1024, 64 * 1024, REQUEST_TIMEOUT_MS,
                CONNECT_TIMEOUT_MS, CONNECT_TIMEOUT_MS, time, discoverBrokerVersions, new ApiVersions(), null,
                new LogContext(), new DefaultHostResolver(), null, 0, recovery,
                ConnectionManagementOptions.DEFAULTS
                        .withBootstrapConnectionClose(closeBootstrapConnections)
                        .withRoleMetrics(new ConnectionRoleMetrics(metrics, "producer"))
                        .withEndpointChangeRetire(retireChangedEndpoints));
    }

    private NetworkClient client(MetadataUpdater updater) {
        return client(selector, updater, null, false, MetadataRecoveryStrategy.NONE, false, false);
    }

    /** Each reason's {@code connection-close-total}, for the reasons registered so far. */
    private Map<String, Double> closesByReason() {
        return metrics.metrics().entrySet().stream()
                .filter(e -> e.getKey().group().equals(GROUP) && e.getKey().name().equals("connection-close-total"))
                .collect(Collectors.toMap(e -> e.getKey().tags().get("reason"),
                    e -> ((Number) e.getValue().metricValue()).doubleValue()));
    }

    private static double sum(Map<String, Double> totals) {
        return totals.values().stream().mapToDouble(Double::doubleValue).sum();
    }

    private double roleCloses() {
        double closes = 0;
        for (Role role : Role.values())
            closes += ((Number) metrics.metric(metrics.metricName("connection-close-total", ROLE_GROUP,
                    Map.of("role", role.tag))).metricValue()).doubleValue();
        return closes;
    }

    /** The reasons recorded so far are exactly {@code expected}, and they count what the roles count. */
    private void assertReasons(Map<String, Double> expected) {
        Map<String, Double> actual = closesByReason();
        assertEquals(expected, actual);
        assertEquals(roleCloses(), sum(actual), "summed over the reasons, the closes are the roles' closes");
    }

    private static Map<String, Double> reasons(Object... tagsAndCounts) {
        Map<String, Double> map = new HashMap<>();
        for (int i = 0; i < tagsAndCounts.length; i += 2)
            map.put((String) tagsAndCounts[i], ((Number) tagsAndCounts[i + 1]).doubleValue());
        return map;
    }

    private void poll(NetworkClient client) {
        client.poll(0, time.milliseconds());
        selector.clear();
    }

    private void connect(NetworkClient client, Node node) {
        assertFalse(client.ready(node, time.milliseconds()));
        poll(client);
        assertTrue(client.isReady(node, time.milliseconds()), "connected to " + node);
    }

    @Test
    public void testReasonTagsAreTheKips() {
        assertEquals(List.of("idle", "requested", "request_timeout", "connect_timeout", "connect_failed",
                "authentication_failed", "connection_lost", "rebootstrap", "bootstrap_replaced", "endpoint_changed",
                "stale_address", "unneeded", "shutdown"),
                Arrays.stream(CloseReason.values()).map(reason -> reason.tag).collect(Collectors.toList()));
    }

    @Test
    public void testObjectNamesAreTheKipsAndAReasonAppearsOnItsFirstClose() throws Exception {
        Metrics jmxMetrics = new Metrics(new MetricConfig().tags(Map.of("client-id", "p1")),
                List.of(new JmxReporter()), time, new KafkaMetricsContext("kafka.producer"));
        closeables.add(jmxMetrics);
        ConnectionRoleMetrics recorder = new ConnectionRoleMetrics(jmxMetrics, "producer");
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        ObjectName idle = new ObjectName(
                "kafka.producer:type=producer-connection-close-reason-metrics,client-id=p1,reason=idle");
        ObjectName requested = new ObjectName(
                "kafka.producer:type=producer-connection-close-reason-metrics,client-id=p1,reason=requested");
        assertTrue(server.isRegistered(new ObjectName(
                "kafka.producer:type=producer-connection-role-metrics,client-id=p1,role=broker")));
        assertFalse(server.isRegistered(idle), "no reason before its first close");

        recorder.dialStarted("0");
        recorder.closed("0", CloseReason.IDLE);
        assertTrue(server.isRegistered(idle));
        assertEquals(1.0, server.getAttribute(idle, "connection-close-total"));
        assertTrue(server.getAttribute(idle, "connection-close-rate") instanceof Double);
        assertFalse(server.isRegistered(requested), "only the reasons seen are registered");
        // Read from the registry, not the MBean server: other test classes in this JVM may hold producer MBeans.
        assertEquals(Set.of(GROUP, ROLE_GROUP), jmxMetrics.metrics().keySet().stream().map(MetricName::group)
                .filter(group -> !group.equals("kafka-metrics-count")).collect(Collectors.toSet()),
                "nothing is added to an existing group");
    }

    @Test
    public void testRequestedClosesCountOncePerSocket() {
        NetworkClient client = client(new ManualMetadataUpdater(List.of(NODE0, NODE1)));
        connect(client, NODE0);
        connect(client, NODE1);
        client.disconnect(NODE0.idString());
        client.close(NODE0.idString());           // the socket is already closed: not a second close
        client.close(NODE1.idString());
        client.close(NODE1.idString());
        assertReasons(reasons("requested", 2));
    }

    @Test
    public void testEachTimeoutIsItsOwnReason() {
        NetworkClient client = client(new ManualMetadataUpdater(List.of(NODE0, UNANSWERED)));
        connect(client, NODE0);
        client.send(client.newClientRequest(NODE0.idString(),
                new MetadataRequest.Builder(Collections.singletonList("t"), true), time.milliseconds(), true),
                time.milliseconds());
        poll(client);
        assertFalse(client.ready(UNANSWERED, time.milliseconds()));
        poll(client);
        assertFalse(client.connectionFailed(UNANSWERED), "dialling");
        time.sleep(REQUEST_TIMEOUT_MS + 1);
        poll(client);
        assertTrue(client.connectionFailed(UNANSWERED), "the dial timed out");
        assertTrue(client.connectionFailed(NODE0), "the request timed out");
        assertReasons(reasons("request_timeout", 1, "connect_timeout", 1));
    }

    @Test
    public void testSelectorClosesTakeTheirReasonFromTheChannelStateAndTheConnectionsReadiness() {
        Node node3 = new Node(3, "localhost", 9093);
        NetworkClient client = client(new ManualMetadataUpdater(List.of(NODE0, NODE1, UNANSWERED, node3)));
        connect(client, NODE0);
        connect(client, NODE1);
        connect(client, node3);
        assertFalse(client.ready(UNANSWERED, time.milliseconds()));
        poll(client);

        selector.disconnected().put(NODE0.idString(), ChannelState.EXPIRED);
        selector.close(NODE0.idString());
        selector.serverDisconnect(NODE1.idString());                                // READY: the broker closed
        selector.disconnected().put(UNANSWERED.idString(), ChannelState.NOT_CONNECTED); // refused
        selector.serverAuthenticationFailed(node3.idString());
        client.poll(0, time.milliseconds());
        selector.clear();
        assertReasons(reasons("idle", 1, "connection_lost", 1, "connect_failed", 1, "authentication_failed", 1));

        // FAILED_SEND on a ready connection is a lost connection too
        connectAfterBackoff(client, NODE1);
        selector.disconnected().put(NODE1.idString(), ChannelState.FAILED_SEND);
        selector.close(NODE1.idString());
        poll(client);
        assertReasons(reasons("idle", 1, "connection_lost", 2, "connect_failed", 1, "authentication_failed", 1));
    }

    private void connectAfterBackoff(NetworkClient client, Node node) {
        time.sleep(RECONNECT_BACKOFF_MS * 10);
        connect(client, node);
    }

    @Test
    public void testBrokerCloseBeforeTheApiVersionsAnswerIsAFailedConnect() {
        NetworkClient client = client(selector, new ManualMetadataUpdater(List.of(NODE0)), null, true,
                MetadataRecoveryStrategy.NONE, false, false);
        assertFalse(client.ready(NODE0, time.milliseconds()));
        poll(client);                              // connected, ApiVersions sent
        assertFalse(client.isReady(NODE0, time.milliseconds()), "awaiting ApiVersions");
        selector.serverDisconnect(NODE0.idString()); // the channel was READY, the connection was not
        client.poll(0, time.milliseconds());
        selector.clear();
        assertReasons(reasons("connect_failed", 1));
    }

    @Test
    public void testBootstrapReplacedAndEndpointChangedAreThePatchsChosenCloses() {
        Metadata metadata = new Metadata(50, 50, 60_000, new LogContext(), new ClusterResourceListeners());
        metadata.bootstrap(Collections.singletonList(new InetSocketAddress("localhost", 9092)));
        NetworkClient client = client(selector, null, metadata, false, MetadataRecoveryStrategy.NONE, true, true);
        ConnmgrSelectorExchange.answerMetadataFromBootstrap(client, selector, time,
                RequestTestUtils.metadataResponse(List.of(NODE0, NODE1), "cluster", 0, Collections.emptyList()));
        assertReasons(reasons("bootstrap_replaced", 1));

        connect(client, NODE1);
        metadata.updateWithCurrentRequestVersion(RequestTestUtils.metadataResponse(List.of(NODE0, NODE1_MOVED),
                "cluster", 0, Collections.emptyList()), false, time.milliseconds());
        poll(client);
        assertFalse(selector.isChannelReady(NODE1.idString()), "retired");
        assertReasons(reasons("bootstrap_replaced", 1, "endpoint_changed", 1));
    }

    @Test
    public void testRebootstrapAndShutdown() {
        boolean[] rebootstrapDue = {false};
        ManualMetadataUpdater updater = new ManualMetadataUpdater(List.of(NODE0, NODE1)) {
            @Override
            public boolean needsRebootstrap(long now, long rebootstrapTriggerMs) {
                return rebootstrapDue[0];
            }
        };
        NetworkClient client = client(selector, updater, null, false, MetadataRecoveryStrategy.REBOOTSTRAP, false,
                false);
        connect(client, NODE0);
        connect(client, NODE1);
        rebootstrapDue[0] = true;
        poll(client);
        rebootstrapDue[0] = false;
        assertReasons(reasons("rebootstrap", 2));

        connectAfterBackoff(client, NODE0);
        client.close();
        assertReasons(reasons("rebootstrap", 2, "shutdown", 1));
    }

    /**
     * A real {@link Selector} over loopback sockets: a requested close, a broker close, a refused dial, an idle expiry
     * and the client's close each count once under their reason, and the reasons sum to the selector's own
     * {@code connection-close-total}.
     */
    @Test
    public void testReasonsSumToTheSelectorsOwnCloseTotal() throws Exception {
        ServerSocketChannel server = ServerSocketChannel.open();
        closeables.add(server);
        server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        String loopback = InetAddress.getLoopbackAddress().getHostAddress();
        Node listening = new Node(0, loopback, server.socket().getLocalPort());
        Node refusing = new Node(1, loopback, freePort());
        long idleMs = 60_000;
        PlaintextChannelBuilder channelBuilder = new PlaintextChannelBuilder(null);
        channelBuilder.configure(new HashMap<>());
        Selector realSelector = new Selector(idleMs, metrics, time, "producer", channelBuilder, new LogContext());
        KafkaMetric selectorCloses = metrics.metric(metrics.metricName("connection-close-total", "producer-metrics"));
        NetworkClient client = client(realSelector, new ManualMetadataUpdater(List.of(listening, refusing)), null,
                false, MetadataRecoveryStrategy.NONE, false, false);

        closeables.add(connectReal(client, listening, server));
        client.disconnect(listening.idString());

        time.sleep(RECONNECT_BACKOFF_MS * 10);
        SocketChannel accepted = connectReal(client, listening, server);
        accepted.close();                          // the broker closes
        pollUntil(client, () -> client.connectionFailed(listening), "the broker's close is seen");

        client.ready(refusing, time.milliseconds());
        pollUntil(client, () -> client.connectionFailed(refusing), "the dial is refused");

        time.sleep(RECONNECT_BACKOFF_MS * 10);
        closeables.add(connectReal(client, listening, server));
        time.sleep(idleMs + 1);
        pollUntil(client, () -> !client.isReady(listening, time.milliseconds()), "the idle connection expires");

        time.sleep(RECONNECT_BACKOFF_MS * 10);
        closeables.add(connectReal(client, listening, server));
        client.close();

        assertReasons(reasons("requested", 1, "connection_lost", 1, "connect_failed", 1, "idle", 1, "shutdown", 1));
        assertEquals(((Number) selectorCloses.metricValue()).doubleValue(), sum(closesByReason()),
                "summed over the reasons, the selector's own connection-close-total");
    }

    private SocketChannel connectReal(NetworkClient client, Node node, ServerSocketChannel server) throws IOException {
        client.ready(node, time.milliseconds());
        pollUntil(client, () -> client.isReady(node, time.milliseconds()), "connected to " + node);
        return server.accept();
    }

    private void pollUntil(NetworkClient client, BooleanSupplier condition, String what) {
        for (int i = 0; i < 500 && !condition.getAsBoolean(); i++)
            client.poll(10, time.milliseconds());
        assertTrue(condition.getAsBoolean(), what);
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return socket.getLocalPort();
        }
    }

    /**
     * The client {@code ClientUtils.createNetworkClient} builds (a real selector) counts a refused bootstrap dial
     * under {@code connect_failed} with the switch on, and registers neither new group with it off.
     */
    @Test
    public void testWithTheSwitchOffNothingIsRegistered() throws Exception {
        for (boolean enabled : new boolean[] {true, false}) {
            Metrics clientMetrics = new Metrics(new MetricConfig().tags(Map.of("client-id", "p1")), Time.SYSTEM);
            closeables.add(clientMetrics);
            int port = freePort();
            Map<String, Object> props = new HashMap<>();
            props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:" + port);
            props.put(ProducerConfig.CLIENT_ID_CONFIG, "p1");
            props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
            props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
            props.put(CommonClientConfigs.CONNECTION_ROLE_METRICS_ENABLE_CONFIG, enabled);
            Metadata metadata = new Metadata(50, 50, 60_000, new LogContext(), new ClusterResourceListeners());
            metadata.bootstrap(Collections.singletonList(new InetSocketAddress("localhost", port)));
            NetworkClient client = ClientUtils.createNetworkClient(new ProducerConfig(props), clientMetrics,
                    "producer", new LogContext(), new ApiVersions(), Time.SYSTEM, 5, metadata, null, null);
            closeables.add(0, client);
            MetricName closeTotal = clientMetrics.metricName("connection-close-total", "producer-metrics");
            for (int i = 0; i < 500 && value(clientMetrics, closeTotal) < 1; i++)
                client.poll(10, Time.SYSTEM.milliseconds());
            double selectorCloses = value(clientMetrics, closeTotal);
            assertTrue(selectorCloses >= 1, "the refused dial closed");

            List<MetricName> added = clientMetrics.metrics().keySet().stream()
                    .filter(name -> name.group().equals(GROUP) || name.group().equals(ROLE_GROUP))
                    .collect(Collectors.toList());
            if (enabled) {
                MetricName failed = clientMetrics.metricName("connection-close-total", GROUP,
                        Map.of("reason", "connect_failed"));
                assertEquals(selectorCloses, value(clientMetrics, failed), "switch on: every close a failed dial");
            } else {
                assertEquals(List.of(), added, "switch off: nothing registered");
                assertNull(clientMetrics.metric(clientMetrics.metricName("connection-close-total", GROUP,
                        Map.of("reason", "connect_failed"))));
            }
        }
    }

    private static double value(Metrics metrics, MetricName name) {
        KafkaMetric metric = metrics.metric(name);
        return metric == null ? 0 : ((Number) metric.metricValue()).doubleValue();
    }
}
