package org.apache.kafka.clients.admin;

import org.apache.kafka.clients.ConnectionNeeds;
import org.apache.kafka.clients.ConnectionNeedsPublisher;
import org.apache.kafka.clients.MockClient;
import org.apache.kafka.clients.NodeApiVersions;
import org.apache.kafka.clients.admin.internals.AdminMetadataManager;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.message.DescribeConfigsResponseData;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.DescribeConfigsResponse;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.test.TestUtils;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * {@code connections.linger.ms}: the admin client's network thread publishes the nodes of its calls queued for a node
 * and of its calls in flight, so a connection is needed only while a call targets it.
 */
public class ConnmgrAdminConnectionNeedsTest {

    private static final Node NODE0 = new Node(0, "localhost", 9090);
    private static final Node NODE1 = new Node(1, "localhost", 9091);
    private static final Node NODE2 = new Node(2, "localhost", 9092);

    /** A {@link MockClient} over a fixed cluster that keeps the last snapshot published through its publisher. */
    private static final class RecordingClient extends MockClient {
        final AtomicReference<ConnectionNeeds> last = new AtomicReference<>();
        final AtomicReference<String> component = new AtomicReference<>();

        RecordingClient(Time time, Cluster cluster) {
            super(time, new MockClient.MockMetadataUpdater() {
                @Override
                public List<Node> fetchNodes() {
                    return cluster.nodes();
                }

                @Override
                public boolean isUpdateNeeded() {
                    return false;
                }

                @Override
                public void update(Time time, MockClient.MetadataUpdate update) {
                    throw new UnsupportedOperationException();
                }
            });
        }

        @Override
        public ConnectionNeedsPublisher needsPublisher(String component) {
            this.component.set(component);
            return last::set;
        }
    }

    private final MockTime time = new MockTime();
    private final Cluster cluster = new Cluster("c", List.of(NODE0, NODE1, NODE2), List.of(), Set.of(), Set.of(), NODE0);
    private final RecordingClient client = new RecordingClient(time, cluster);

    private Admin admin() throws InterruptedException {
        AdminClientConfig config = new AdminClientConfig(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG,
                "localhost:9090"));
        AdminMetadataManager metadataManager = new AdminMetadataManager(new LogContext(), 100, 300_000, false);
        metadataManager.update(cluster, time.milliseconds());
        client.setNodeApiVersions(NodeApiVersions.create());
        Admin admin = KafkaAdminClient.createInternal(config, metadataManager, client, time);
        assertEquals("admin", client.component.get());
        TestUtils.waitForCondition(() -> new ConnectionNeeds(Set.of(), Set.of()).equals(client.last.get()),
                "an idle admin client needs nothing");
        return admin;
    }

    private static DescribeConfigsResponse describeConfigsResponse(String broker) {
        return new DescribeConfigsResponse(new DescribeConfigsResponseData().setResults(
                Collections.singletonList(new DescribeConfigsResponseData.DescribeConfigsResult()
                        .setResourceName(broker).setResourceType(ConfigResource.Type.BROKER.id())
                        .setErrorCode(Errors.NONE.code()).setConfigs(Collections.emptyList()))));
    }

    @Test
    public void testSnapshotHoldsTheNodeOfACallQueuedForItWhileItsConnectionIsNotReady() throws Exception {
        client.delayReady(NODE2, 1_000);
        Admin admin = admin();
        try {
            ConfigResource broker2 = new ConfigResource(ConfigResource.Type.BROKER, "2");
            client.prepareResponseFrom(describeConfigsResponse("2"), NODE2);
            KafkaFuture<Config> config2 = admin.describeConfigs(Collections.singleton(broker2)).values().get(broker2);
            TestUtils.waitForCondition(() -> new ConnectionNeeds(Set.of(NODE2), Set.of()).equals(client.last.get()),
                    () -> "a call waiting for its node's connection needs it, got " + client.last.get());
            time.sleep(1_000);
            config2.get(10, TimeUnit.SECONDS);
            TestUtils.waitForCondition(() -> new ConnectionNeeds(Set.of(), Set.of()).equals(client.last.get()),
                    () -> "needed no longer once the call completed, got " + client.last.get());
        } finally {
            admin.close(Duration.ZERO); // a call left unanswered must not hold the close
        }
    }

    @Test
    public void testSnapshotHoldsTheNodeOfACallInFlightUntilItsResponse() throws Exception {
        Admin admin = admin();
        try {
            ConfigResource broker1 = new ConfigResource(ConfigResource.Type.BROKER, "1");
            KafkaFuture<Config> config1 = admin.describeConfigs(Collections.singleton(broker1)).values().get(broker1);
            client.waitForRequests(1, 10_000);
            TestUtils.waitForCondition(() -> new ConnectionNeeds(Set.of(NODE1), Set.of()).equals(client.last.get()),
                    () -> "the broker a call is in flight to is needed, got " + client.last.get());

            client.respondFrom(describeConfigsResponse("1"), NODE1);
            config1.get(10, TimeUnit.SECONDS);
            TestUtils.waitForCondition(() -> new ConnectionNeeds(Set.of(), Set.of()).equals(client.last.get()),
                    () -> "needed no longer once the call completed, got " + client.last.get());
        } finally {
            admin.close(Duration.ZERO); // a call left unanswered must not hold the close
        }
    }
}
