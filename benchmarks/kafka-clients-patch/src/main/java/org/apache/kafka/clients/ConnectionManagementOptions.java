package org.apache.kafka.clients;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.metrics.Metrics;

/**
 * The patch's connection-management switches for one {@link NetworkClient}, as one immutable value: what
 * {@code bootstrap.connection.close.enable}, {@code connection.role.metrics.enable},
 * {@code endpoint.change.retire.enable}, {@code client.dns.refresh.ms} and {@code connections.linger.ms} ask of it.
 * <p>
 * One construction path: the producer, the consumers and the admin client build theirs with
 * {@link #fromConfig(AbstractConfig, Metrics, String)} in {@code ClientUtils.createNetworkClient}; every constructor of
 * {@code NetworkClient} that takes no options (4.3.1's, which Kafka's own tests and callers use) passes
 * {@link #DEFAULTS}; a test starts from {@link #DEFAULTS} and changes one switch with a {@code with...} method, each of
 * which returns a new value and validates its argument as the configuration does.
 */
public final class ConnectionManagementOptions {

    /**
     * Each switch at its configuration's default ({@code CommonClientConfigs.DEFAULT_...}, every one off as released)
     * and no role metrics, which need the client's {@link Metrics}. Read from the defaults rather than written out, so
     * that the {@code switches-on} build, which flips those defaults, runs Kafka's own tests through the rules.
     */
    public static final ConnectionManagementOptions DEFAULTS = new ConnectionManagementOptions(
            CommonClientConfigs.DEFAULT_BOOTSTRAP_CONNECTION_CLOSE_ENABLE,
            null,
            CommonClientConfigs.DEFAULT_ENDPOINT_CHANGE_RETIRE_ENABLE,
            CommonClientConfigs.DEFAULT_CLIENT_DNS_REFRESH_MS,
            CommonClientConfigs.DEFAULT_CONNECTIONS_LINGER_MS);

    private final boolean closeBootstrapConnections;
    private final ConnectionRoleMetrics roleMetrics;
    private final boolean retireChangedEndpoints;
    private final long dnsRefreshMs;
    private final int connectionsLingerMs;

    private ConnectionManagementOptions(boolean closeBootstrapConnections,
                                        ConnectionRoleMetrics roleMetrics,
                                        boolean retireChangedEndpoints,
                                        long dnsRefreshMs,
                                        int connectionsLingerMs) {
        if (dnsRefreshMs < 0)
            throw new IllegalArgumentException("dnsRefreshMs must not be negative, got " + dnsRefreshMs);
        if (connectionsLingerMs < -1)
            throw new IllegalArgumentException("connectionsLingerMs must be -1 or more, got " + connectionsLingerMs);
        this.closeBootstrapConnections = closeBootstrapConnections;
        this.roleMetrics = roleMetrics;
        this.retireChangedEndpoints = retireChangedEndpoints;
        this.dnsRefreshMs = dnsRefreshMs;
        this.connectionsLingerMs = connectionsLingerMs;
    }

    /**
     * The options a client's configuration asks for; a key the configuration does not define (a caller outside the
     * producer, consumer and admin client) gets its default. With {@code connection.role.metrics.enable} the role
     * metrics are registered here, once, in {@code metrics} under {@code metricGrpPrefix}.
     */
    public static ConnectionManagementOptions fromConfig(AbstractConfig config, Metrics metrics, String metricGrpPrefix) {
        return new ConnectionManagementOptions(
                ClientUtils.bootstrapConnectionCloseEnabled(config),
                ClientUtils.connectionRoleMetricsEnabled(config) ? new ConnectionRoleMetrics(metrics, metricGrpPrefix) : null,
                ClientUtils.endpointChangeRetireEnabled(config),
                ClientUtils.dnsRefreshMs(config),
                ClientUtils.connectionsLingerMs(config));
    }

    /** These options with {@code bootstrap.connection.close.enable} set to {@code enabled}. */
    public ConnectionManagementOptions withBootstrapConnectionClose(boolean enabled) {
        return new ConnectionManagementOptions(enabled, roleMetrics, retireChangedEndpoints, dnsRefreshMs,
                connectionsLingerMs);
    }

    /** These options with the given role metrics ({@code connection.role.metrics.enable}); null: none. */
    public ConnectionManagementOptions withRoleMetrics(ConnectionRoleMetrics metrics) {
        return new ConnectionManagementOptions(closeBootstrapConnections, metrics, retireChangedEndpoints, dnsRefreshMs,
                connectionsLingerMs);
    }

    /** These options with {@code endpoint.change.retire.enable} set to {@code enabled}. */
    public ConnectionManagementOptions withEndpointChangeRetire(boolean enabled) {
        return new ConnectionManagementOptions(closeBootstrapConnections, roleMetrics, enabled, dnsRefreshMs,
                connectionsLingerMs);
    }

    /**
     * These options with {@code client.dns.refresh.ms} set to {@code refreshMs}; 0 is off.
     *
     * @throws IllegalArgumentException if {@code refreshMs} is negative
     */
    public ConnectionManagementOptions withDnsRefreshMs(long refreshMs) {
        return new ConnectionManagementOptions(closeBootstrapConnections, roleMetrics, retireChangedEndpoints, refreshMs,
                connectionsLingerMs);
    }

    /**
     * These options with {@code connections.linger.ms} set to {@code lingerMs}; -1 is off.
     *
     * @throws IllegalArgumentException if {@code lingerMs} is less than -1
     */
    public ConnectionManagementOptions withConnectionsLingerMs(int lingerMs) {
        return new ConnectionManagementOptions(closeBootstrapConnections, roleMetrics, retireChangedEndpoints,
                dnsRefreshMs, lingerMs);
    }

    /** {@code bootstrap.connection.close.enable} */
    public boolean closeBootstrapConnections() {
        return closeBootstrapConnections;
    }

    /** The role metrics to record in ({@code connection.role.metrics.enable}); null when off. */
    public ConnectionRoleMetrics roleMetrics() {
        return roleMetrics;
    }

    /** {@code endpoint.change.retire.enable} */
    public boolean retireChangedEndpoints() {
        return retireChangedEndpoints;
    }

    /** {@code client.dns.refresh.ms}; 0: off */
    public long dnsRefreshMs() {
        return dnsRefreshMs;
    }

    /** {@code connections.linger.ms}; -1: off */
    public int connectionsLingerMs() {
        return connectionsLingerMs;
    }

    @Override
    public String toString() {
        return "ConnectionManagementOptions(" +
                "closeBootstrapConnections=" + closeBootstrapConnections +
                ", roleMetrics=" + (roleMetrics != null) +
                ", retireChangedEndpoints=" + retireChangedEndpoints +
                ", dnsRefreshMs=" + dnsRefreshMs +
                ", connectionsLingerMs=" + connectionsLingerMs +
                ')';
    }
}
