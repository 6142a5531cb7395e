package org.apache.kafka.clients;

import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.test.MockSelector;
import org.apache.kafka.test.TestUtils;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * {@link ConnectionManagementOptions}: the one construction path of the patch's switches into a {@link NetworkClient}.
 * 4.3.1's constructors pass {@link ConnectionManagementOptions#DEFAULTS}, {@code ClientUtils.createNetworkClient} the
 * options its configuration asks for, and each {@code with...} method changes exactly one switch.
 */
public class ConnmgrConnectionManagementOptionsTest {

    private final MockTime time = new MockTime();
    private final MockSelector selector = new MockSelector(time);
    private Metrics metrics;
    private Metadata metadata;

    @BeforeEach
    public void setup() {
        metrics = new Metrics(time);
        metadata = new Metadata(50, 50, 60_000, new LogContext(), new ClusterResourceListeners());
        metadata.bootstrap(Collections.singletonList(new InetSocketAddress("localhost", 9092)));
    }

    @AfterEach
    public void teardown() {
        metrics.close();
    }

    /** What a client was given, read back from its fields: the five switches, role metrics as present or not. */
    private static List<Object> switchesOf(NetworkClient client) {
        return List.of(
                TestUtils.<Boolean>fieldValue(client, NetworkClient.class, "closeBootstrapConnections"),
                TestUtils.fieldValue(client, NetworkClient.class, "roleMetrics") != null,
                TestUtils.<Boolean>fieldValue(client, NetworkClient.class, "retireChangedEndpoints"),
                client.dnsRefresher() == null ? 0L : TestUtils.<Long>fieldValue(client.dnsRefresher(),
                        DnsRefresher.class, "refreshMs"),
                TestUtils.<Integer>fieldValue(client, NetworkClient.class, "connectionsLingerMs"));
    }

    private static List<Object> switchesOf(ConnectionManagementOptions options) {
        return List.of(options.closeBootstrapConnections(), options.roleMetrics() != null,
                options.retireChangedEndpoints(), options.dnsRefreshMs(), options.connectionsLingerMs());
    }

    private static List<Object> configDefaults() {
        return List.of(CommonClientConfigs.DEFAULT_BOOTSTRAP_CONNECTION_CLOSE_ENABLE, false,
                CommonClientConfigs.DEFAULT_ENDPOINT_CHANGE_RETIRE_ENABLE,
                CommonClientConfigs.DEFAULT_CLIENT_DNS_REFRESH_MS, CommonClientConfigs.DEFAULT_CONNECTIONS_LINGER_MS);
    }

    @Test
    public void testDefaultsAreTheConfigurationsDefaultsWithoutRoleMetrics() {
        assertEquals(configDefaults(), switchesOf(ConnectionManagementOptions.DEFAULTS));
        assertNull(ConnectionManagementOptions.DEFAULTS.roleMetrics(), "role metrics need the client's Metrics");
    }

    @Test
    public void testEach431ConstructorPassesTheDefaults() {
        List<Supplier<NetworkClient>> constructors = List.of(
            () -> new NetworkClient(selector, metadata, "c1", Integer.MAX_VALUE, 50, 50, 64 * 1024, 64 * 1024,
                    30_000, 5_000, 5_000, time, false, new ApiVersions(), new LogContext(),
                    MetadataRecoveryStrategy.NONE),
            () -> new NetworkClient(selector, metadata, "c1", Integer.MAX_VALUE, 50, 50, 64 * 1024, 64 * 1024,
                    30_000, 5_000, 5_000, time, false, new ApiVersions(), new LogContext(), Long.MAX_VALUE,
                    MetadataRecoveryStrategy.NONE),
            () -> new NetworkClient(selector, metadata, "c1", Integer.MAX_VALUE, 50, 50, 64 * 1024, 64 * 1024,
                    30_000, 5_000, 5_000, time, false, new ApiVersions(), null, new LogContext(),
                    MetadataRecoveryStrategy.NONE),
            () -> new NetworkClient(selector, new ManualMetadataUpdater(), "c1", Integer.MAX_VALUE, 50, 50, 64 * 1024,
                    64 * 1024, 30_000, 5_000, 5_000, time, false, new ApiVersions(), new LogContext(),
                    MetadataRecoveryStrategy.NONE),
            () -> new NetworkClient(null, metadata, selector, "c1", Integer.MAX_VALUE, 50, 50, 64 * 1024, 64 * 1024,
                    30_000, 5_000, 5_000, time, false, new ApiVersions(), null, new LogContext(),
                    new DefaultHostResolver(), null, Long.MAX_VALUE, MetadataRecoveryStrategy.NONE));
        for (Supplier<NetworkClient> constructor : constructors) {
            NetworkClient client = constructor.get();
            assertEquals(configDefaults(), switchesOf(client));
            client.close();
        }
    }

    @Test
    public void testFromConfigReadsEveryKeyAndCreateNetworkClientPassesIt() {
        Map<String, Object> props = new HashMap<>();
        props.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, "localhost:9092");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        props.put(CommonClientConfigs.BOOTSTRAP_CONNECTION_CLOSE_ENABLE_CONFIG,
                !CommonClientConfigs.DEFAULT_BOOTSTRAP_CONNECTION_CLOSE_ENABLE);
        props.put(CommonClientConfigs.CONNECTION_ROLE_METRICS_ENABLE_CONFIG,
                !CommonClientConfigs.DEFAULT_CONNECTION_ROLE_METRICS_ENABLE);
        props.put(CommonClientConfigs.ENDPOINT_CHANGE_RETIRE_ENABLE_CONFIG,
                !CommonClientConfigs.DEFAULT_ENDPOINT_CHANGE_RETIRE_ENABLE);
        props.put(CommonClientConfigs.CLIENT_DNS_REFRESH_MS_CONFIG, 30_000L);
        props.put(CommonClientConfigs.CONNECTIONS_LINGER_MS_CONFIG, 5_000);
        ProducerConfig config = new ProducerConfig(props);
        List<Object> asked = List.of(!CommonClientConfigs.DEFAULT_BOOTSTRAP_CONNECTION_CLOSE_ENABLE,
                !CommonClientConfigs.DEFAULT_CONNECTION_ROLE_METRICS_ENABLE,
                !CommonClientConfigs.DEFAULT_ENDPOINT_CHANGE_RETIRE_ENABLE, 30_000L, 5_000);

        assertEquals(asked, switchesOf(ConnectionManagementOptions.fromConfig(config, metrics, "producer")));

        // Another group prefix: the role metrics above are registered under "producer" in the same Metrics.
        NetworkClient client = ClientUtils.createNetworkClient(config, metrics, "admin", new LogContext(),
                new ApiVersions(), time, 5, metadata, null, null);
        try {
            assertEquals(asked, switchesOf(client));
        } finally {
            client.close();
        }

        // A configuration that defines none of the keys gets every default.
        ConnectionManagementOptions undefined = ConnectionManagementOptions.fromConfig(
                new AbstractConfig(new ConfigDef(), Map.of()), metrics, "other");
        assertEquals(List.of(CommonClientConfigs.DEFAULT_BOOTSTRAP_CONNECTION_CLOSE_ENABLE,
                        CommonClientConfigs.DEFAULT_CONNECTION_ROLE_METRICS_ENABLE,
                        CommonClientConfigs.DEFAULT_ENDPOINT_CHANGE_RETIRE_ENABLE,
                        CommonClientConfigs.DEFAULT_CLIENT_DNS_REFRESH_MS,
                        CommonClientConfigs.DEFAULT_CONNECTIONS_LINGER_MS),
                switchesOf(undefined));
    }

    @Test
    public void testEachWithMethodChangesOneSwitchAndLeavesTheOthers() {
        ConnectionManagementOptions off = ConnmgrOptions.allOff();
        assertEquals(List.of(false, false, false, 0L, -1), switchesOf(off));
        ConnectionRoleMetrics roleMetrics = new ConnectionRoleMetrics(metrics, "producer");

        assertEquals(List.of(true, false, false, 0L, -1), switchesOf(off.withBootstrapConnectionClose(true)));
        assertSame(roleMetrics, off.withRoleMetrics(roleMetrics).roleMetrics());
        assertEquals(List.of(false, true, false, 0L, -1), switchesOf(off.withRoleMetrics(roleMetrics)));
        assertEquals(List.of(false, false, true, 0L, -1), switchesOf(off.withEndpointChangeRetire(true)));
        assertEquals(List.of(false, false, false, 7L, -1), switchesOf(off.withDnsRefreshMs(7L)));
        assertEquals(List.of(false, false, false, 0L, 3), switchesOf(off.withConnectionsLingerMs(3)));

        // Immutable: the value a with... method was called on is unchanged.
        assertEquals(List.of(false, false, false, 0L, -1), switchesOf(off));
    }

    @Test
    public void testValuesTheConfigurationRejectsAreRejected() {
        ConnectionManagementOptions off = ConnmgrOptions.allOff();
        assertThrows(IllegalArgumentException.class, () -> off.withDnsRefreshMs(-1L));
        assertThrows(IllegalArgumentException.class, () -> off.withConnectionsLingerMs(-2));
        assertEquals(0L, off.withDnsRefreshMs(0L).dnsRefreshMs(), "0 is off, not invalid");
        assertEquals(-1, off.withConnectionsLingerMs(-1).connectionsLingerMs(), "-1 is off, not invalid");
    }
}
