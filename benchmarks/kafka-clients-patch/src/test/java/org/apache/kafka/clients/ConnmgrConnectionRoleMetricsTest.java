package org.apache.kafka.clients;

import org.apache.kafka.clients.ConnectionRoleMetrics.Role;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.test.MockSelector;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * {@code connection.role.metrics.enable}: connection metrics by role, the role read from the node id.
 */
public class ConnmgrConnectionRoleMetricsTest {

    private static final String GROUP = "producer-connection-role-metrics";

    private final MockTime time = new MockTime();
    private final MockSelector selector = new MockSelector(time);
    private Metrics metrics;
    private Metadata metadata;

    @BeforeEach
    public void setup() {
        metrics = new Metrics(new MetricConfig().tags(Map.of("client-id", "p1")), time);
        metadata = new Metadata(50, 50, 60_000, new LogContext(), new ClusterResourceListeners());
        metadata.bootstrap(Collections.singletonList(new InetSocketAddress("localhost", 9092)));
    }

    @AfterEach
    public void teardown() {
        metrics.close();
    }

    private NetworkClient client(boolean closeBootstrapConnections) {
        return new NetworkClient(null, metadata, selector, "p1", Integer.MAX_VALUE,
                10_000, 10_000, 64 * 1024, 64 * 1024, 30_000, 5_000, 5_000, time, false, new ApiVersions(), null,
                new LogContext(), new DefaultHostResolver(), null, Long.MAX_VALUE, MetadataRecoveryStrategy.NONE,
                ConnectionManagementOptions.DEFAULTS
                        .withBootstrapConnectionClose(closeBootstrapConnections)
                        .withRoleMetrics(new ConnectionRoleMetrics(metrics, "producer")));
    }

    private double value(String name, Role role) {
        MetricName metricName = metrics.metricName(name, GROUP, Map.of("role", role.tag));
        KafkaMetric metric = metrics.metric(metricName);
        return ((Number) metric.metricValue()).doubleValue();
    }

    private void assertRole(Role role, int count, int peak, int attempts, int creations, int closes) {
        String where = role.tag + ": ";
        assertEquals(count, value("connection-count", role), where + "count");
        assertEquals(peak, value("connection-count-peak", role), where + "peak");
        assertEquals(attempts, value("connection-attempt-total", role), where + "attempts");
        assertEquals(creations, value("connection-creation-total", role), where + "creations");
        assertEquals(closes, value("connection-close-total", role), where + "closes");
    }

    private void answerMetadataFromBootstrap(NetworkClient client) {
        ConnmgrSelectorExchange.answerMetadataFromBootstrap(client, selector, time,
                RequestTestUtils.metadataUpdateWith(2, Collections.emptyMap()));
    }

    @Test
    public void testRoleFromNodeId() {
        assertEquals(Role.BOOTSTRAP, ConnectionRoleMetrics.roleOf("-1"));
        assertEquals(Role.BOOTSTRAP, ConnectionRoleMetrics.roleOf("-3"));
        assertEquals(Role.BROKER, ConnectionRoleMetrics.roleOf("0"));
        assertEquals(Role.BROKER, ConnectionRoleMetrics.roleOf(String.valueOf(Integer.MAX_VALUE / 2)));
        assertEquals(Role.COORDINATOR, ConnectionRoleMetrics.roleOf(String.valueOf(Integer.MAX_VALUE / 2 + 1)));
        assertEquals(Role.COORDINATOR, ConnectionRoleMetrics.roleOf(String.valueOf(Integer.MAX_VALUE - 2)));
        assertEquals(Role.BROKER, ConnectionRoleMetrics.roleOf("not-a-number"));
        // Kafka 4.4's form (GroupCoordinatorNode)
        assertEquals(Role.COORDINATOR, ConnectionRoleMetrics.roleOf("+0"));
        assertEquals(Role.COORDINATOR, ConnectionRoleMetrics.roleOf("+2"));
    }

    @Test
    public void testAFourFourCoordinatorConnectionCountsAsACoordinator() {
        NetworkClient client = client(true);
        answerMetadataFromBootstrap(client);
        Node broker = metadata.fetch().nodes().get(0);
        Node coordinator = ConnmgrPlusCoordinatorNode.of(broker);
        client.ready(broker, time.milliseconds());
        client.ready(coordinator, time.milliseconds());
        client.poll(0, time.milliseconds());
        selector.clear();
        assertRole(Role.BROKER, 1, 1, 1, 1, 0);
        assertRole(Role.COORDINATOR, 1, 1, 1, 1, 0);

        client.close(coordinator.idString());
        assertRole(Role.COORDINATOR, 0, 1, 1, 1, 1);
        assertRole(Role.BROKER, 1, 1, 1, 1, 0);
    }

    @Test
    public void testEveryRoleIsRegisteredAtStartWithItsOwnNames() {
        new ConnectionRoleMetrics(metrics, "producer");
        Map<String, List<String>> byRole = metrics.metrics().keySet().stream()
                .filter(name -> name.group().equals(GROUP))
                .collect(Collectors.groupingBy(name -> name.tags().get("role"),
                        Collectors.mapping(MetricName::name, Collectors.toList())));
        assertEquals(3, byRole.size());
        for (List<String> names : byRole.values()) {
            assertEquals(List.of("connection-attempt-rate", "connection-attempt-total", "connection-close-rate",
                    "connection-close-total", "connection-count", "connection-count-peak",
                    "connection-creation-rate", "connection-creation-total"),
                    names.stream().sorted().collect(Collectors.toList()));
        }
        metrics.metrics().keySet().stream().filter(name -> name.group().equals(GROUP))
                .forEach(name -> assertEquals("p1", name.tags().get("client-id")));
    }

    @Test
    public void testCountsFollowDialsConnectsAndClosesByRole() {
        NetworkClient client = client(true);
        answerMetadataFromBootstrap(client);
        // the bootstrap connection was dialled, connected, and closed once metadata replaced the bootstrap cluster
        assertRole(Role.BOOTSTRAP, 0, 1, 1, 1, 1);

        Node broker = metadata.fetch().nodes().get(0);
        Node coordinator = new Node(Integer.MAX_VALUE - broker.id(), broker.host(), broker.port());
        client.ready(broker, time.milliseconds());
        client.ready(coordinator, time.milliseconds());
        client.poll(0, time.milliseconds());
        selector.clear();
        assertRole(Role.BROKER, 1, 1, 1, 1, 0);
        assertRole(Role.COORDINATOR, 1, 1, 1, 1, 0);

        selector.serverDisconnect(broker.idString());
        client.poll(0, time.milliseconds());
        selector.clear();
        assertRole(Role.BROKER, 0, 1, 1, 1, 1);

        client.close(coordinator.idString());
        client.close(coordinator.idString());   // a second close of the same id is not a second socket
        assertRole(Role.COORDINATOR, 0, 1, 1, 1, 1);
    }

    @Test
    public void testClientCloseClosesEveryHeldConnection() {
        NetworkClient client = client(false);
        answerMetadataFromBootstrap(client);
        assertRole(Role.BOOTSTRAP, 1, 1, 1, 1, 0);
        client.close();
        assertRole(Role.BOOTSTRAP, 0, 1, 1, 1, 1);
    }

    @Test
    public void testOptionDefaultAndOverride() {
        Map<String, Object> producer = new HashMap<>();
        producer.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:9092");
        producer.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        producer.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        boolean dflt = CommonClientConfigs.DEFAULT_CONNECTION_ROLE_METRICS_ENABLE;
        assertEquals(dflt, ClientUtils.connectionRoleMetricsEnabled(new ProducerConfig(producer)));
        producer.put(CommonClientConfigs.CONNECTION_ROLE_METRICS_ENABLE_CONFIG, !dflt);
        assertEquals(!dflt, ClientUtils.connectionRoleMetricsEnabled(new ProducerConfig(producer)));
    }
}
