package org.apache.kafka.clients;

import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.metrics.Gauge;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.Sensor;
import org.apache.kafka.common.metrics.stats.Meter;
import org.apache.kafka.common.metrics.stats.WindowedCount;

import java.util.EnumMap;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Connection metrics by role ({@code connection.role.metrics.enable}), group {@code <prefix>-connection-role-metrics},
 * tag {@code role} ({@code bootstrap}, {@code coordinator}, {@code broker}) beside the client's own tags (client-id).
 * <p>
 * The role is read from the node id, by the conventions the client already follows: a negative id is a bootstrap
 * server ({@code Cluster.bootstrap}), a group coordinator's separate connection is recognised by {@link CoordinatorIds}
 * ({@code Integer.MAX_VALUE - brokerId} up to Kafka 4.3, {@code "+" + brokerId} from 4.4), any other id is a broker's
 * connection.
 * <p>
 * Per role: {@code connection-count} (sockets held now: dialling, connected or awaiting ApiVersions),
 * {@code connection-count-peak} (the most held at once since the client started: an all-time mark, named so that it
 * is not read as one of Kafka's windowed {@code -max} statistics), and the meters {@code connection-attempt-*}
 * (dials started), {@code connection-creation-*} (TCP connects completed) and {@code connection-close-*} (sockets
 * closed, failed dials included). Summed over the roles, attempts minus closes equals the count.
 * <p>
 * Close reasons, registered with the same switch: group {@code <prefix>-connection-close-reason-metrics}, tag
 * {@code reason} (a {@link CloseReason}'s {@code tag}) beside the client's own tags, one meter
 * {@code connection-close-rate}/{@code connection-close-total} per reason, registered on that reason's first close. Every
 * close is counted under exactly one reason, at the same point and with the same once-per-socket rule as its role, so
 * summed over the reasons the close totals equal the sum over the roles.
 * <p>
 * Called from {@link NetworkClient} only, on its one thread; the gauges may be read from any thread.
 */
public final class ConnectionRoleMetrics {

    public enum Role {
        BOOTSTRAP("bootstrap"), COORDINATOR("coordinator"), BROKER("broker");

        public final String tag;

        Role(String tag) {
            this.tag = tag;
        }
    }

    /**
     * Why a connection closed: the {@code reason} tag of group {@code <prefix>-connection-close-reason-metrics}. Each
     * close {@link NetworkClient} makes or learns of maps to one value, passed to {@link #closed(String, CloseReason)};
     * every value is recorded by some close. Later values may be added; a reader of the metrics treats an unknown
     * reason as a close.
     */
    public enum CloseReason {
        /** The selector expired the idle connection ({@code connections.max.idle.ms}). */
        IDLE("idle"),
        /** A client component asked: {@code disconnect(nodeId)} or {@code close(nodeId)}. */
        REQUESTED("requested"),
        /** A request on it timed out ({@code request.timeout.ms}). */
        REQUEST_TIMEOUT("request_timeout"),
        /** The dial did not complete within {@code socket.connection.setup.timeout.ms}. */
        CONNECT_TIMEOUT("connect_timeout"),
        /** The dial failed (refused, unroutable), or the connection closed before it became ready. */
        CONNECT_FAILED("connect_failed"),
        /** The broker rejected the client's authentication. */
        AUTHENTICATION_FAILED("authentication_failed"),
        /** A ready connection was closed by the broker or failed on an I/O error. */
        CONNECTION_LOST("connection_lost"),
        /** The client rebootstrapped ({@code metadata.recovery.strategy=rebootstrap}) and closed its connections. */
        REBOOTSTRAP("rebootstrap"),
        /** KIP (b0): metadata replaced the bootstrap cluster ({@code bootstrap.connection.close.enable}). */
        BOOTSTRAP_REPLACED("bootstrap_replaced"),
        /** KIP (a) rule 2: metadata moved the node to another endpoint ({@code endpoint.change.retire.enable}). */
        ENDPOINT_CHANGED("endpoint_changed"),
        /** KIP (a) rule 3: two answers in a row for the host name left out the connection's address. */
        STALE_ADDRESS("stale_address"),
        /** KIP (b): nothing needed the connection for connections.linger.ms (its prompt close). */
        UNNEEDED("unneeded"),
        /** The client closed. */
        SHUTDOWN("shutdown");

        public final String tag;

        CloseReason(String tag) {
            this.tag = tag;
        }
    }

    /**
     * The role of a connection to {@code nodeId} (a node's {@code idString()}): a group coordinator's in either of
     * its forms ({@link CoordinatorIds}), a bootstrap entry's for a negative id, a broker's otherwise.
     */
    public static Role roleOf(String nodeId) {
        if (CoordinatorIds.isCoordinator(nodeId))
            return Role.COORDINATOR;
        final int id;
        try {
            id = Integer.parseInt(nodeId);
        } catch (NumberFormatException e) {
            return Role.BROKER;
        }
        return id < 0 ? Role.BOOTSTRAP : Role.BROKER;
    }

    private static final class RoleStats {
        final AtomicInteger count = new AtomicInteger();
        final AtomicInteger peak = new AtomicInteger();
        Sensor attempts;
        Sensor creations;
        Sensor closes;
    }

    private final Metrics metrics;
    private final String group;
    private final String reasonGroup;
    private final Map<Role, RoleStats> stats = new EnumMap<>(Role.class);
    /* One meter per reason, created on the reason's first close. */
    private final Map<CloseReason, Sensor> reasonCloses = new EnumMap<>(CloseReason.class);
    /* Sockets held now, by node id: what a close is counted against, so a second close of one id counts once. */
    private final Map<String, Role> held = new HashMap<>();

    public ConnectionRoleMetrics(Metrics metrics, String metricGrpPrefix) {
        this.metrics = metrics;
        this.group = metricGrpPrefix + "-connection-role-metrics";
        this.reasonGroup = metricGrpPrefix + "-connection-close-reason-metrics";
        for (Role role : Role.values()) {
            RoleStats s = new RoleStats();
            Map<String, String> tags = Map.of("role", role.tag);
            s.attempts = meter(metrics, role, tags, "connection-attempt", "dials started");
            s.creations = meter(metrics, role, tags, "connection-creation", "TCP connects completed");
            s.closes = meter(metrics, role, tags, "connection-close", "sockets closed, failed dials included");
            metrics.addMetric(metrics.metricName("connection-count", group,
                    "The number of " + role.tag + " connections held now", tags),
                    (Gauge<Integer>) (config, now) -> s.count.get());
            metrics.addMetric(metrics.metricName("connection-count-peak", group,
                    "The most " + role.tag + " connections held at once since the client started", tags),
                    (Gauge<Integer>) (config, now) -> s.peak.get());
            stats.put(role, s);
        }
    }

    private Sensor meter(Metrics metrics, Role role, Map<String, String> tags, String name, String what) {
        Sensor sensor = metrics.sensor(group + ":" + role.tag + ":" + name);
        MetricName rate = metrics.metricName(name + "-rate", group,
                "The number per second of " + role.tag + " " + what, tags);
        MetricName total = metrics.metricName(name + "-total", group,
                "The total number of " + role.tag + " " + what, tags);
        sensor.add(new Meter(new WindowedCount(), rate, total));
        return sensor;
    }

    /** A dial to {@code nodeId} starts: it holds a socket until {@link #closed}. */
    public void dialStarted(String nodeId) {
        Role role = roleOf(nodeId);
        if (held.put(nodeId, role) != null)
            return; // already held: not a new socket
        RoleStats s = stats.get(role);
        s.attempts.record();
        int now = s.count.incrementAndGet();
        s.peak.accumulateAndGet(now, Math::max);
    }

    /** The TCP connect to {@code nodeId} completed. */
    public void connected(String nodeId) {
        Role role = held.get(nodeId);
        if (role != null)
            stats.get(role).creations.record();
    }

    /**
     * The socket to {@code nodeId} is closed, for {@code reason}: one close of its role and one of the reason. A no-op
     * if none is held, so a second close of one id is not a second close.
     */
    public void closed(String nodeId, CloseReason reason) {
        Role role = held.remove(nodeId);
        if (role == null)
            return;
        RoleStats s = stats.get(role);
        s.closes.record();
        s.count.decrementAndGet();
        reasonCloses.computeIfAbsent(reason, this::reasonMeter).record();
    }

    private Sensor reasonMeter(CloseReason reason) {
        Map<String, String> tags = Map.of("reason", reason.tag);
        Sensor sensor = metrics.sensor(reasonGroup + ":" + reason.tag + ":connection-close");
        MetricName rate = metrics.metricName("connection-close-rate", reasonGroup,
                "The number per second of connections closed for reason " + reason.tag, tags);
        MetricName total = metrics.metricName("connection-close-total", reasonGroup,
                "The total number of connections closed for reason " + reason.tag, tags);
        sensor.add(new Meter(new WindowedCount(), rate, total));
        return sensor;
    }

    /** The client closes: every socket it holds is closed, for {@code reason}. */
    public void closeAll(CloseReason reason) {
        for (String nodeId : new HashMap<>(held).keySet())
            closed(nodeId, reason);
    }

    /** Sockets held now in {@code role} (what the {@code connection-count} gauge reads). */
    public int count(Role role) {
        return stats.get(role).count.get();
    }
}
