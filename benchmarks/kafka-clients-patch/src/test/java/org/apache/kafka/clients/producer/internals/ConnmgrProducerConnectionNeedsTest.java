package org.apache.kafka.clients.producer.internals;

import org.apache.kafka.clients.ApiVersions;
import org.apache.kafka.clients.ConnectionNeeds;
import org.apache.kafka.clients.ConnectionNeedsPublisher;
import org.apache.kafka.clients.ConnmgrOptions;
import org.apache.kafka.clients.DefaultHostResolver;
import org.apache.kafka.clients.KafkaClient;
import org.apache.kafka.clients.MetadataRecoveryStrategy;
import org.apache.kafka.clients.MockClient;
import org.apache.kafka.clients.NetworkClient;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.message.InitProducerIdResponseData;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.FindCoordinatorRequest;
import org.apache.kafka.common.requests.FindCoordinatorRequest.CoordinatorType;
import org.apache.kafka.common.requests.FindCoordinatorResponse;
import org.apache.kafka.common.requests.InitProducerIdRequest;
import org.apache.kafka.common.requests.InitProducerIdResponse;
import org.apache.kafka.common.requests.MetadataResponse;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.test.MockSelector;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code connections.linger.ms}: the producer's {@link Sender} publishes the leaders of every partition of the topics
 * {@link ProducerMetadata} retains and the transaction manager's coordinators, and publishes again only when they
 * change. A {@code MockClient} compiled against 4.3.1 gets {@link ConnectionNeedsPublisher#NONE}, so nothing is
 * computed or published for it.
 */
public class ConnmgrProducerConnectionNeedsTest {

    private static final String TOPIC = "t";
    private static final Uuid TOPIC_ID = Uuid.randomUuid();
    private static final long METADATA_IDLE_MS = 60_000;

    private static final Node BROKER0 = new Node(0, "localhost", 9090);
    private static final Node BROKER1 = new Node(1, "localhost", 9091);
    private static final Node BROKER2 = new Node(2, "localhost", 9092);

    private final MockTime time = new MockTime();
    private final LogContext logContext = new LogContext();
    private final ProducerMetadata metadata = new ProducerMetadata(0, 0, Long.MAX_VALUE, METADATA_IDLE_MS, logContext,
            new ClusterResourceListeners(), time);
    private final RecordingClient client = new RecordingClient(time, metadata);

    /** A {@link MockClient} that records every snapshot published through its publisher. */
    private static final class RecordingClient extends MockClient {
        final List<ConnectionNeeds> published = new ArrayList<>();
        final List<String> components = new ArrayList<>();

        RecordingClient(Time time, ProducerMetadata metadata) {
            super(time, metadata);
        }

        @Override
        public ConnectionNeedsPublisher needsPublisher(String component) {
            components.add(component);
            return published::add;
        }

        ConnectionNeeds last() {
            return published.get(published.size() - 1);
        }
    }

    private Sender sender(KafkaClient client, TransactionManager transactionManager) {
        Metrics metrics = new Metrics(time);
        RecordAccumulator accumulator = new RecordAccumulator(logContext, 16 * 1024, Compression.NONE, 0, 0L, 0L,
                3_000, metrics, "producer-metrics", time, transactionManager,
                new BufferPool(1024 * 1024, 16 * 1024, metrics, time, "producer-metrics"));
        return new Sender(logContext, client, metadata, accumulator, true, 1024 * 1024, (short) -1,
                Integer.MAX_VALUE, new SenderMetricsRegistry(metrics), time, 30_000, 50, transactionManager);
    }

    /** Metadata naming the three brokers, with TOPIC's partition i led by {@code leaders[i]}. */
    private void updateMetadata(Node... leaders) {
        List<MetadataResponse.PartitionMetadata> partitions = new ArrayList<>();
        for (int i = 0; i < leaders.length; i++) {
            partitions.add(new MetadataResponse.PartitionMetadata(Errors.NONE, new TopicPartition(TOPIC, i),
                    Optional.of(leaders[i].id()), Optional.of(1), List.of(leaders[i].id()), List.of(leaders[i].id()),
                    Collections.emptyList()));
        }
        MetadataResponse.TopicMetadata topic = new MetadataResponse.TopicMetadata(Errors.NONE, TOPIC, TOPIC_ID, false,
                partitions, MetadataResponse.AUTHORIZED_OPERATIONS_OMITTED);
        client.updateMetadata(RequestTestUtils.metadataResponse(List.of(BROKER0, BROKER1, BROKER2), "cluster", 0,
                List.of(topic)));
    }

    @Test
    public void testSnapshotFollowsTheLeadersOfTheRetainedTopics() {
        Sender sender = sender(client, null);
        assertEquals(List.of("producer"), client.components);
        updateMetadata();
        sender.runOnce();
        assertEquals(new ConnectionNeeds(Set.of(), Set.of()), client.last(), "no topic yet: nothing needed");

        metadata.add(TOPIC, time.milliseconds());
        updateMetadata(BROKER1, BROKER2);
        sender.runOnce();
        assertEquals(new ConnectionNeeds(Set.of(BROKER1, BROKER2), Set.of()), client.last());
        int publishes = client.published.size();
        sender.runOnce();
        sender.runOnce();
        assertEquals(publishes, client.published.size(), "published again only when the needs change");
        assertSame(client.last(), sender.publishedConnectionNeeds());

        updateMetadata(BROKER1, BROKER0); // partition 1's leadership moved to broker 0
        sender.runOnce();
        assertEquals(new ConnectionNeeds(Set.of(BROKER1, BROKER0), Set.of()), client.last());

        // The topic is retained for metadata.max.idle.ms after its last send; the update after that drops it.
        time.sleep(METADATA_IDLE_MS - 1);
        updateMetadata(BROKER1, BROKER0);
        sender.runOnce();
        assertEquals(new ConnectionNeeds(Set.of(BROKER1, BROKER0), Set.of()), client.last(), "still retained");
        time.sleep(2);
        updateMetadata(BROKER1, BROKER0);
        sender.runOnce();
        assertEquals(new ConnectionNeeds(Set.of(), Set.of()), client.last(), "an expired topic's leaders are unneeded");
    }

    @Test
    public void testSnapshotHoldsTheTransactionCoordinator() {
        updateMetadata();
        TransactionManager transactionManager = new TransactionManager(logContext, "txn", 60_000, 100,
                new ApiVersions(), false);
        Sender sender = sender(client, transactionManager);
        TransactionalRequestResult init = transactionManager.initializeTransactions(false);
        client.prepareResponse(body -> body instanceof FindCoordinatorRequest
                        && CoordinatorType.forId(((FindCoordinatorRequest) body).data().keyType()) == CoordinatorType.TRANSACTION,
                FindCoordinatorResponse.prepareResponse(Errors.NONE, "txn", BROKER2));
        client.prepareResponse(body -> body instanceof InitProducerIdRequest, new InitProducerIdResponse(
                new InitProducerIdResponseData().setProducerId(7).setProducerEpoch((short) 0)));
        ProducerTestUtils.runUntil(sender, init::isCompleted);
        init.await(Long.MAX_VALUE, TimeUnit.MILLISECONDS, "initTransactions");
        sender.runOnce();
        assertEquals(new ConnectionNeeds(Set.of(), Set.of(BROKER2)), client.last(),
                "the transaction coordinator, by its broker id");
    }

    @Test
    public void testOverANetworkClientTheLeaderIsKeptAndAnotherBrokerClosesAfterTheLinger() {
        int lingerMs = 1_000;
        MockSelector selector = new MockSelector(time);
        NetworkClient network = new NetworkClient(null, metadata, selector, "p1", Integer.MAX_VALUE, 50, 50,
                64 * 1024, 64 * 1024, 30_000, 5_000, 5_000, time, false, new ApiVersions(), null, logContext,
                new DefaultHostResolver(), null, Long.MAX_VALUE, MetadataRecoveryStrategy.NONE,
                ConnmgrOptions.allOff().withConnectionsLingerMs(lingerMs));
        Sender sender = sender(network, null);
        metadata.add(TOPIC, time.milliseconds());
        updateMetadata(BROKER1);
        network.ready(BROKER0, time.milliseconds()); // e.g. the broker an InitProducerId or a metadata fetch used
        network.ready(BROKER1, time.milliseconds());
        network.poll(0, time.milliseconds());
        assertTrue(selector.isChannelReady(BROKER0.idString()));
        assertTrue(selector.isChannelReady(BROKER1.idString()));

        sender.runOnce(); // publishes {broker 1}; broker 0's linger starts in this loop's poll
        assertTrue(selector.isChannelReady(BROKER0.idString()), "kept for the linger");
        long lingerStart = time.milliseconds();
        sender.runOnce(); // an idle sender: the poll waits exactly until the linger runs out
        assertEquals(lingerMs, time.milliseconds() - lingerStart);
        assertFalse(selector.isChannelReady(BROKER0.idString()), "no retained topic is led by broker 0");
        for (int i = 0; i < 5; i++)
            sender.runOnce();
        assertTrue(selector.isChannelReady(BROKER1.idString()), "the leader of a retained topic is kept");
        network.close();
    }

    @Test
    public void testKafkasMockClientGetsTheDefaultAndNothingIsPublished() {
        Sender sender = sender(new MockClient(time, metadata), null);
        metadata.add(TOPIC, time.milliseconds());
        updateMetadata(BROKER1);
        sender.runOnce();
        assertNull(sender.publishedConnectionNeeds());
    }
}
