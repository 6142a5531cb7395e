package org.apache.kafka.clients.producer.internals;

import org.apache.kafka.clients.ApiVersions;
import org.apache.kafka.clients.ConnectionNeeds;
import org.apache.kafka.clients.ConnectionNeedsPublisher;
import org.apache.kafka.clients.ConnmgrOptions;
import org.apache.kafka.clients.DefaultHostResolver;
import org.apache.kafka.clients.KafkaClient;
import org.apache.kafka.clients.MetadataRecoveryStrategy;
import org.apache.kafka.clients.NetworkClient;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.MetadataResponse;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.test.MockSelector;
import org.apache.kafka.test.TestUtils;

import org.junit.jupiter.api.Test;

import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

/**
 * {@code connections.linger.ms} at -1: the producer's {@link Sender} over a {@link NetworkClient} gets
 * {@link ConnectionNeedsPublisher#NONE} and its loop builds no snapshot (no leaders computed, nothing published).
 */
public class ConnmgrProducerOptionsOffTest {

    private static final String TOPIC = "t";
    private static final Uuid TOPIC_ID = Uuid.randomUuid();
    private static final Node BROKER0 = new Node(0, "localhost", 9090);
    private static final Node BROKER1 = new Node(1, "localhost", 9091);

    private final MockTime time = new MockTime();
    private final LogContext logContext = new LogContext();
    private final ProducerMetadata metadata = new ProducerMetadata(0, 0, Long.MAX_VALUE, 60_000, logContext,
            new ClusterResourceListeners(), time);

    /** A network client over a MockSelector with every option of the patch off but the linger. */
    private NetworkClient networkClient(int lingerMs) {
        return new NetworkClient(null, metadata, new MockSelector(time), "p1", Integer.MAX_VALUE, 50, 50, 64 * 1024,
                64 * 1024, 30_000, 5_000, 5_000, time, false, new ApiVersions(), null, logContext,
                new DefaultHostResolver(), null, Long.MAX_VALUE, MetadataRecoveryStrategy.NONE,
                ConnmgrOptions.allOff().withConnectionsLingerMs(lingerMs));
    }

    private Sender sender(KafkaClient client) {
        Metrics metrics = new Metrics(time);
        RecordAccumulator accumulator = new RecordAccumulator(logContext, 16 * 1024, Compression.NONE, 0, 0L, 0L,
                3_000, metrics, "producer-metrics", time, null,
                new BufferPool(1024 * 1024, 16 * 1024, metrics, time, "producer-metrics"));
        return new Sender(logContext, client, metadata, accumulator, true, 1024 * 1024, (short) -1,
                Integer.MAX_VALUE, new SenderMetricsRegistry(metrics), time, 30_000, 50, null);
    }

    /** Retains TOPIC, its partition 0 led by broker 1. */
    private void retainTopicLedByBroker1() {
        metadata.add(TOPIC, time.milliseconds());
        MetadataResponse.PartitionMetadata partition = new MetadataResponse.PartitionMetadata(Errors.NONE,
                new TopicPartition(TOPIC, 0), Optional.of(BROKER1.id()), Optional.of(1), List.of(BROKER1.id()),
                List.of(BROKER1.id()), Collections.emptyList());
        MetadataResponse.TopicMetadata topic = new MetadataResponse.TopicMetadata(Errors.NONE, TOPIC, TOPIC_ID, false,
                List.of(partition), MetadataResponse.AUTHORIZED_OPERATIONS_OMITTED);
        metadata.updateWithCurrentRequestVersion(RequestTestUtils.metadataResponse(List.of(BROKER0, BROKER1),
                "cluster", 0, List.of(topic)), false, time.milliseconds());
    }

    @Test
    public void testASenderOverANetworkClientWithTheLingerOffBuildsNoSnapshot() {
        retainTopicLedByBroker1();
        NetworkClient off = networkClient(-1);
        Sender sender = sender(off);
        for (int i = 0; i < 3; i++)
            sender.runOnce();
        assertNull(sender.publishedConnectionNeeds(), "no snapshot built");
        assertNull(TestUtils.fieldValue(sender, Sender.class, "neededLeadersCluster"), "no leaders computed");
        assertSame(ConnectionNeedsPublisher.NONE, TestUtils.fieldValue(sender, Sender.class, "needsPublisher"),
                "the sender's publisher is NONE");
        off.close();

        // The same loop with the option on builds and publishes the retained topic's leader.
        NetworkClient on = networkClient(1_000);
        Sender lingering = sender(on);
        lingering.runOnce();
        assertEquals(new ConnectionNeeds(Set.of(BROKER1), Set.of()), lingering.publishedConnectionNeeds());
        on.close();
    }
}
