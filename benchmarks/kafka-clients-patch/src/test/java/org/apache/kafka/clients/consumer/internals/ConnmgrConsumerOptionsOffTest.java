package org.apache.kafka.clients.consumer.internals;

import org.apache.kafka.clients.ApiVersions;
import org.apache.kafka.clients.ConnectionNeeds;
import org.apache.kafka.clients.ConnectionNeedsPublisher;
import org.apache.kafka.clients.ConnmgrOptions;
import org.apache.kafka.clients.DefaultHostResolver;
import org.apache.kafka.clients.GroupRebalanceConfig;
import org.apache.kafka.clients.MetadataRecoveryStrategy;
import org.apache.kafka.clients.NetworkClient;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.internals.events.BackgroundEventHandler;
import org.apache.kafka.clients.consumer.internals.metrics.AsyncConsumerMetrics;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.MetadataResponse;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.test.MockSelector;
import org.apache.kafka.test.TestUtils;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import static org.apache.kafka.clients.consumer.internals.ConnmgrGroupCoordinators.TestCoordinator;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.mockito.Mockito.mock;

/**
 * {@code connections.linger.ms} at -1: the classic consumer's {@link Fetcher} and {@link AbstractCoordinator} and the
 * KIP-848 consumer's {@link FetchRequestManager} and {@link CoordinatorRequestManager}, over a {@link NetworkClient},
 * get {@link ConnectionNeedsPublisher#NONE}; preparing fetches builds no snapshot.
 */
public class ConnmgrConsumerOptionsOffTest {

    private static final String TOPIC = "t";
    private static final Uuid TOPIC_ID = Uuid.randomUuid();
    private static final String GROUP_ID = "group";
    private static final long RETRY_BACKOFF_MS = 100;
    private static final Node BROKER0 = new Node(0, "localhost", 9090);
    private static final Node BROKER1 = new Node(1, "localhost", 9091);

    private final MockTime time = new MockTime();
    private final LogContext logContext = new LogContext();
    private final List<AutoCloseable> toClose = new ArrayList<>();

    private Metrics metrics;
    private SubscriptionState subscriptions;
    private ConsumerMetadata metadata;

    @AfterEach
    public void close() {
        for (AutoCloseable closeable : toClose)
            Utils.closeQuietly(closeable, "test resource");
    }

    /** Fresh metrics, subscriptions and metadata, and a network client with every option off but the linger. */
    private NetworkClient networkClient(int lingerMs) {
        metrics = new Metrics(time);
        toClose.add(metrics);
        subscriptions = new SubscriptionState(logContext, AutoOffsetResetStrategy.EARLIEST);
        // Expires after an hour: no metadata request is due while a test runs.
        metadata = new ConsumerMetadata(0, 0, 60 * 60 * 1000L, false, false, subscriptions, logContext,
                new ClusterResourceListeners());
        NetworkClient network = new NetworkClient(null, metadata, new MockSelector(time), "c1", Integer.MAX_VALUE, 50,
                50, 64 * 1024, 64 * 1024, 30_000, 5_000, 5_000, time, false, new ApiVersions(), null, logContext,
                new DefaultHostResolver(), null, Long.MAX_VALUE, MetadataRecoveryStrategy.NONE,
                ConnmgrOptions.allOff().withConnectionsLingerMs(lingerMs));
        toClose.add(network);
        return network;
    }

    /** Assigns TOPIC's partition 0, led by broker 1, positioned at offset 0. */
    private void assignPartitionLedByBroker1() {
        TopicPartition partition = new TopicPartition(TOPIC, 0);
        subscriptions.assignFromUser(Set.of(partition));
        MetadataResponse.PartitionMetadata partitionMetadata = new MetadataResponse.PartitionMetadata(Errors.NONE,
                partition, Optional.of(BROKER1.id()), Optional.of(1), List.of(0, 1), List.of(0, 1),
                Collections.emptyList());
        MetadataResponse.TopicMetadata topic = new MetadataResponse.TopicMetadata(Errors.NONE, TOPIC, TOPIC_ID, false,
                List.of(partitionMetadata), MetadataResponse.AUTHORIZED_OPERATIONS_OMITTED);
        metadata.updateWithCurrentRequestVersion(RequestTestUtils.metadataResponse(List.of(BROKER0, BROKER1),
                "cluster", 0, List.of(topic)), false, time.milliseconds());
        subscriptions.seekValidated(partition, new SubscriptionState.FetchPosition(0, Optional.empty(),
                metadata.currentLeader(partition)));
    }

    private static ConnectionNeedsPublisher publisherOf(Object component, Class<?> declaringClass) {
        return TestUtils.fieldValue(component, declaringClass, "needsPublisher");
    }

    /**
     * The classic consumer's fetcher and coordinator over {@code network}, three fetches prepared; asserts whether
     * their publishers are NONE after the fetcher's last snapshot, which it returns.
     */
    private ConnectionNeeds classicConsumer(NetworkClient network, boolean off) {
        ConsumerNetworkClient consumerClient = new ConsumerNetworkClient(logContext, network, metadata, time,
                RETRY_BACKOFF_MS, 30_000, 3_000);
        toClose.add(consumerClient);
        Fetcher<byte[], byte[]> fetcher = new Fetcher<>(logContext, consumerClient, metadata, subscriptions,
                new FetchConfig(1, 1024 * 1024, 500, 1024 * 1024, 500, true, "", IsolationLevel.READ_UNCOMMITTED),
                new Deserializers<>(new ByteArrayDeserializer(), new ByteArrayDeserializer(), metrics),
                new FetchMetricsManager(metrics, new FetchMetricsRegistry(Set.of(), "consumer")), time,
                new ApiVersions());
        toClose.add(fetcher);
        TestCoordinator coordinator = new TestCoordinator(new GroupRebalanceConfig(10_000, 60_000, 3_000, GROUP_ID,
                Optional.empty(), null, RETRY_BACKOFF_MS, RETRY_BACKOFF_MS), consumerClient, time);
        toClose.add(coordinator);
        assignPartitionLedByBroker1();
        for (int i = 0; i < 3; i++) {
            fetcher.sendFetches();
            consumerClient.poll(time.timer(0));
        }
        ConnectionNeeds published = fetcher.publishedConnectionNeeds();
        if (off)
            assertNull(published, "no snapshot built");
        assertEquals(off, publisherOf(fetcher, AbstractFetch.class) == ConnectionNeedsPublisher.NONE,
                "the fetcher's publisher is NONE");
        assertEquals(off, publisherOf(coordinator, AbstractCoordinator.class) == ConnectionNeedsPublisher.NONE,
                "the coordinator's publisher is NONE");
        return published;
    }

    @Test
    public void testTheClassicConsumerOverANetworkClientWithTheLingerOffBuildsNoSnapshot() {
        classicConsumer(networkClient(-1), true);
        assertEquals(new ConnectionNeeds(Set.of(BROKER1), Set.of()), classicConsumer(networkClient(1_000), false),
                "with the option on the same fetches publish the leader");
    }

    /** The KIP-848 consumer's request managers over {@code network}, through a real NetworkClientDelegate. */
    private RequestManagers kip848Managers(NetworkClient network) {
        Map<String, Object> props = new HashMap<>();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:9092");
        props.put(ConsumerConfig.GROUP_ID_CONFIG, GROUP_ID);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        ConsumerConfig config = new ConsumerConfig(props);
        NetworkClientDelegate delegate = new NetworkClientDelegate(time, config, logContext, network, metadata,
                mock(BackgroundEventHandler.class), false, new AsyncConsumerMetrics(metrics, "consumer"));
        RequestManagers managers = RequestManagers.supplier(time, logContext, mock(BackgroundEventHandler.class),
                metadata, subscriptions, new FetchBuffer(logContext), config,
                new GroupRebalanceConfig(config, GroupRebalanceConfig.ProtocolType.CONSUMER), new ApiVersions(),
                new FetchMetricsManager(metrics, new FetchMetricsRegistry(Set.of(), "consumer")), () -> delegate,
                Optional.empty(), metrics, mock(OffsetCommitCallbackInvoker.class), (memberEpoch, memberId) -> { },
                Optional.empty(), new PositionsValidator(logContext, time, subscriptions, metadata)).get();
        toClose.add(managers);
        assignPartitionLedByBroker1();
        for (int i = 0; i < 3; i++) {
            managers.fetchRequestManager.createFetchRequests(); // as the application thread asks on every poll
            delegate.addAll(managers.fetchRequestManager.poll(time.milliseconds()));
            delegate.poll(0, time.milliseconds());
        }
        return managers;
    }

    @Test
    public void testTheKip848ConsumerOverANetworkClientWithTheLingerOffBuildsNoSnapshot() {
        RequestManagers off = kip848Managers(networkClient(-1));
        assertNull(off.fetchRequestManager.publishedConnectionNeeds(), "no snapshot built");
        assertSame(ConnectionNeedsPublisher.NONE, publisherOf(off.fetchRequestManager, AbstractFetch.class),
                "the fetch request manager's publisher is NONE");
        assertSame(ConnectionNeedsPublisher.NONE,
                publisherOf(off.coordinatorRequestManager.orElseThrow(), CoordinatorRequestManager.class),
                "the coordinator request manager's publisher is NONE");

        RequestManagers on = kip848Managers(networkClient(1_000));
        assertNotSame(ConnectionNeedsPublisher.NONE,
                publisherOf(on.coordinatorRequestManager.orElseThrow(), CoordinatorRequestManager.class));
        assertEquals(new ConnectionNeeds(Set.of(BROKER1), Set.of()), on.fetchRequestManager.publishedConnectionNeeds(),
                "with the option on the same fetches publish the leader");
    }
}
