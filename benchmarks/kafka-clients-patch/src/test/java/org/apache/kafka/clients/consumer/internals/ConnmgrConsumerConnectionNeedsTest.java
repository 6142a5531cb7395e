package org.apache.kafka.clients.consumer.internals;

import org.apache.kafka.clients.ApiVersions;
import org.apache.kafka.clients.ConnectionNeeds;
import org.apache.kafka.clients.ConnectionNeedsPublisher;
import org.apache.kafka.clients.ConnmgrOptions;
import org.apache.kafka.clients.ConnmgrSelectorExchange;
import org.apache.kafka.clients.DefaultHostResolver;
import org.apache.kafka.clients.GroupRebalanceConfig;
import org.apache.kafka.clients.KafkaClient;
import org.apache.kafka.clients.MetadataRecoveryStrategy;
import org.apache.kafka.clients.MockClient;
import org.apache.kafka.clients.NetworkClient;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.internals.events.BackgroundEventHandler;
import org.apache.kafka.clients.consumer.internals.metrics.AsyncConsumerMetrics;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.message.FetchResponseData;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.common.requests.ApiVersionsRequest;
import org.apache.kafka.common.requests.FetchMetadata;
import org.apache.kafka.common.requests.FetchResponse;
import org.apache.kafka.common.requests.FindCoordinatorRequest;
import org.apache.kafka.common.requests.FindCoordinatorResponse;
import org.apache.kafka.common.requests.MetadataResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.test.MockSelector;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import static org.apache.kafka.clients.consumer.internals.ConnmgrGroupCoordinators.TestCoordinator;
import static org.apache.kafka.clients.consumer.internals.ConnmgrGroupCoordinators.coordinatorConnection;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.ArgumentMatchers.anyString;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

/**
 * {@code connections.linger.ms} in the classic and KIP-848 consumers: the fetcher ({@link AbstractFetch}, under both
 * {@link Fetcher} and {@link FetchRequestManager}) publishes the node every assigned partition is read from, paused,
 * buffered or not, and the group coordinator classes ({@link AbstractCoordinator}, {@link CoordinatorRequestManager})
 * publish the coordinator they use; each publishes again only when that changed. Over a {@link NetworkClient} with the
 * linger on, a broker the consumer neither reads from nor coordinates with is closed after the linger and the others
 * are kept. A {@code MockClient} compiled against 4.3.1 gets {@link ConnectionNeedsPublisher#NONE}: nothing is
 * published.
 */
public class ConnmgrConsumerConnectionNeedsTest {

    private static final String TOPIC = "t";
    private static final Uuid TOPIC_ID = Uuid.randomUuid();
    private static final String GROUP_ID = "group";
    private static final long RETRY_BACKOFF_MS = 100;

    private static final Node BROKER0 = new Node(0, "localhost", 9090);
    private static final Node BROKER1 = new Node(1, "localhost", 9091);
    private static final Node BROKER2 = new Node(2, "localhost", 9092);
    private static final TopicPartition TP0 = new TopicPartition(TOPIC, 0);
    private static final TopicPartition TP1 = new TopicPartition(TOPIC, 1);

    private final MockTime time = new MockTime();
    private final LogContext logContext = new LogContext();
    private final SubscriptionState subscriptions = new SubscriptionState(logContext, AutoOffsetResetStrategy.EARLIEST);
    // Expires after an hour: no metadata request is due while a test runs (Long.MAX_VALUE would overflow to "due").
    private final ConsumerMetadata metadata = new ConsumerMetadata(0, 0, 60 * 60 * 1000L, false, false, subscriptions,
            logContext, new ClusterResourceListeners());
    private final RecordingClient client = new RecordingClient(time, metadata);
    private final Metrics metrics = new Metrics(time);
    private final List<AutoCloseable> toClose = new ArrayList<>();

    /** A {@link MockClient} that records every snapshot published through its publishers, by component. */
    private static final class RecordingClient extends MockClient {
        final Map<String, List<ConnectionNeeds>> published = new HashMap<>();

        RecordingClient(Time time, ConsumerMetadata metadata) {
            super(time, metadata);
        }

        @Override
        public ConnectionNeedsPublisher needsPublisher(String component) {
            List<ConnectionNeeds> snapshots = published.computeIfAbsent(component, c -> new ArrayList<>());
            return snapshots::add;
        }

        List<ConnectionNeeds> of(String component) {
            return published.getOrDefault(component, List.of());
        }

        ConnectionNeeds last(String component) {
            List<ConnectionNeeds> snapshots = of(component);
            return snapshots.isEmpty() ? null : snapshots.get(snapshots.size() - 1);
        }
    }

    @AfterEach
    public void close() throws Exception {
        for (AutoCloseable closeable : toClose)
            closeable.close();
    }

    /** Metadata naming the three brokers, with TOPIC's partition i led by {@code leaders[i]}. */
    private void updateMetadata(KafkaClient target, Node... leaders) {
        List<MetadataResponse.PartitionMetadata> partitions = new ArrayList<>();
        for (int i = 0; i < leaders.length; i++) {
            partitions.add(new MetadataResponse.PartitionMetadata(Errors.NONE, new TopicPartition(TOPIC, i),
                    Optional.of(leaders[i].id()), Optional.of(1), List.of(0, 1, 2), List.of(0, 1, 2),
                    Collections.emptyList()));
        }
        MetadataResponse.TopicMetadata topic = new MetadataResponse.TopicMetadata(Errors.NONE, TOPIC, TOPIC_ID, false,
                partitions, MetadataResponse.AUTHORIZED_OPERATIONS_OMITTED);
        MetadataResponse response = RequestTestUtils.metadataResponse(List.of(BROKER0, BROKER1, BROKER2), "cluster", 0,
                List.of(topic));
        if (target instanceof MockClient)
            ((MockClient) target).updateMetadata(response);
        else
            metadata.updateWithCurrentRequestVersion(response, false, time.milliseconds());
    }

    /**
     * Assigns TOPIC's partitions {@code 0 .. leaders.length - 1}, updates the metadata through {@code target} with
     * partition i led by {@code leaders[i]} (after the assignment: the consumer's metadata keeps only the topics it
     * needs), and positions each at offset 0 on its leader.
     */
    private void assign(KafkaClient target, Node... leaders) {
        List<TopicPartition> partitions = new ArrayList<>();
        for (int i = 0; i < leaders.length; i++)
            partitions.add(new TopicPartition(TOPIC, i));
        subscriptions.assignFromUser(Set.copyOf(partitions));
        updateMetadata(target, leaders);
        for (TopicPartition partition : partitions)
            subscriptions.seekValidated(partition, new SubscriptionState.FetchPosition(0, Optional.empty(),
                    metadata.currentLeader(partition)));
    }

    private ConsumerNetworkClient consumerClient(KafkaClient network) {
        ConsumerNetworkClient consumerClient = new ConsumerNetworkClient(logContext, network, metadata, time,
                RETRY_BACKOFF_MS, 30_000, 3_000);
        toClose.add(consumerClient);
        return consumerClient;
    }

    private Fetcher<byte[], byte[]> fetcher(ConsumerNetworkClient consumerClient) {
        FetchConfig config = new FetchConfig(1, 1024 * 1024, 500, 1024 * 1024, 500, true, "",
                IsolationLevel.READ_UNCOMMITTED);
        Fetcher<byte[], byte[]> fetcher = new Fetcher<>(logContext, consumerClient, metadata, subscriptions, config,
                new Deserializers<>(new ByteArrayDeserializer(), new ByteArrayDeserializer(), metrics),
                new FetchMetricsManager(metrics, new FetchMetricsRegistry(Set.of(), "consumer")), time,
                new ApiVersions());
        toClose.add(fetcher);
        return fetcher;
    }

    /** A network client over a MockSelector that connects at once, with the given linger. */
    private NetworkClient lingeringNetworkClient(MockSelector selector, int lingerMs) {
        return new NetworkClient(null, metadata, selector, "c1", Integer.MAX_VALUE, 50, 50, 64 * 1024, 64 * 1024,
                30_000, 5_000, 5_000, time, false, new ApiVersions(), null, logContext, new DefaultHostResolver(), null,
                Long.MAX_VALUE, MetadataRecoveryStrategy.NONE,
                ConnmgrOptions.allOff().withConnectionsLingerMs(lingerMs));
    }

    /** Sends the fetches queued and answers the one to {@code leader} with one record of {@code partition}. */
    private void answerFetchWithARecord(ConsumerNetworkClient consumerClient, TopicPartition partition, Node leader) {
        consumerClient.poll(time.timer(0));
        client.respondFrom(fetchResponseWithARecord(partition), leader);
        consumerClient.poll(time.timer(0));
    }

    /** A fetch response with one record of {@code partition} (and nothing of any other). */
    private static FetchResponse fetchResponseWithARecord(TopicPartition partition) {
        LinkedHashMap<TopicIdPartition, FetchResponseData.PartitionData> data = new LinkedHashMap<>();
        data.put(new TopicIdPartition(TOPIC_ID, partition), new FetchResponseData.PartitionData()
                .setPartitionIndex(partition.partition())
                .setHighWatermark(100)
                .setRecords(MemoryRecords.withRecords(Compression.NONE,
                        new SimpleRecord("v".getBytes(StandardCharsets.UTF_8)))));
        return FetchResponse.of(Errors.NONE, 0, FetchMetadata.INVALID_SESSION_ID, data, List.of());
    }

    @Test
    public void testFetcherPublishesTheNodeEveryAssignedPartitionIsReadFrom() {
        ConsumerNetworkClient consumerClient = consumerClient(client);
        Fetcher<byte[], byte[]> fetcher = fetcher(consumerClient);
        fetcher.sendFetches();
        assertEquals(new ConnectionNeeds(Set.of(), Set.of()), client.last("fetch"), "nothing assigned: nothing needed");

        assign(client, BROKER1, BROKER2);
        fetcher.sendFetches();
        assertEquals(new ConnectionNeeds(Set.of(BROKER1, BROKER2), Set.of()), client.last("fetch"));
        int publishes = client.of("fetch").size();
        fetcher.sendFetches();
        assertEquals(publishes, client.of("fetch").size(), "published again only when the needs change");
        assertSame(client.last("fetch"), fetcher.publishedConnectionNeeds());

        // Data buffered for partition 0: no fetch goes to broker 1 until it is taken, but broker 1 stays needed.
        answerFetchWithARecord(consumerClient, TP0, BROKER1);
        assertTrue(fetcher.hasAvailableFetches(), "partition 0's record is buffered");
        fetcher.sendFetches();
        assertEquals(new ConnectionNeeds(Set.of(BROKER1, BROKER2), Set.of()), client.last("fetch"),
                "a partition with buffered data still needs its node");

        subscriptions.pause(TP1);
        fetcher.sendFetches();
        assertEquals(new ConnectionNeeds(Set.of(BROKER1, BROKER2), Set.of()), client.last("fetch"),
                "a paused partition still needs its node");
        subscriptions.resume(TP1);

        // A preferred read replica is read from while its lease holds; then the leader again.
        subscriptions.updatePreferredReadReplica(TP1, BROKER0.id(), () -> time.milliseconds() + 1_000);
        fetcher.sendFetches();
        assertEquals(new ConnectionNeeds(Set.of(BROKER1, BROKER0), Set.of()), client.last("fetch"));
        time.sleep(1_001);
        fetcher.sendFetches();
        assertEquals(new ConnectionNeeds(Set.of(BROKER1, BROKER2), Set.of()), client.last("fetch"), "lease expired");

        subscriptions.assignFromUser(Set.of());
        fetcher.sendFetches();
        assertEquals(new ConnectionNeeds(Set.of(), Set.of()), client.last("fetch"), "unassigned: nothing needed");
    }

    @Test
    public void testClassicCoordinatorPublishesTheCoordinatorItUses() {
        updateMetadata(client, BROKER1);
        ConsumerNetworkClient consumerClient = consumerClient(client);
        TestCoordinator coordinator = new TestCoordinator(new GroupRebalanceConfig(10_000, 60_000, 3_000, GROUP_ID,
                Optional.empty(), null, RETRY_BACKOFF_MS, RETRY_BACKOFF_MS), consumerClient, time);
        toClose.add(coordinator);
        assertNull(client.last("coordinator"), "nothing published before a coordinator is found");

        client.prepareResponse(body -> body instanceof FindCoordinatorRequest,
                FindCoordinatorResponse.prepareResponse(Errors.NONE, GROUP_ID, BROKER2));
        assertTrue(coordinator.ensureCoordinatorReady(time.timer(0)));
        assertEquals(new ConnectionNeeds(Set.of(), Set.of(coordinatorConnection(BROKER2))), client.last("coordinator"),
                "the coordinator, by its coordinator connection id");

        coordinator.markCoordinatorUnknown("test");
        assertEquals(ConnectionNeeds.NONE, client.last("coordinator"), "no coordinator: none needed");
    }

    /** Polls the manager, expects one FindCoordinator and answers it with {@code answer}. */
    private void answerFindCoordinator(CoordinatorRequestManager manager, Node answer) {
        ConnmgrGroupCoordinators.answerFindCoordinator(manager, time, GROUP_ID, BROKER1, answer);
    }

    @Test
    public void testRequestManagerPublishesTheCoordinatorItUses() {
        List<ConnectionNeeds> published = new ArrayList<>();
        CoordinatorRequestManager manager = new CoordinatorRequestManager(logContext, RETRY_BACKOFF_MS,
                RETRY_BACKOFF_MS, GROUP_ID, metadata, false, published::add);
        answerFindCoordinator(manager, BROKER2);
        assertEquals(List.of(new ConnectionNeeds(Set.of(), Set.of(coordinatorConnection(BROKER2)))), published);
        manager.markCoordinatorUnknown("test", time.milliseconds());
        assertEquals(ConnectionNeeds.NONE, published.get(published.size() - 1), "no coordinator: none needed");
    }

    @Test
    public void testKip848ConsumersManagersPublishThroughTheirNetworkClient() {
        Map<String, Object> props = new HashMap<>();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:9092");
        props.put(ConsumerConfig.GROUP_ID_CONFIG, GROUP_ID);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        ConsumerConfig config = new ConsumerConfig(props);
        NetworkClientDelegate delegate = mock(NetworkClientDelegate.class);
        when(delegate.needsPublisher(anyString())).thenAnswer(call -> client.needsPublisher(call.getArgument(0)));
        RequestManagers managers = RequestManagers.supplier(time, logContext, mock(BackgroundEventHandler.class),
                metadata, subscriptions, new FetchBuffer(logContext), config,
                new GroupRebalanceConfig(config, GroupRebalanceConfig.ProtocolType.CONSUMER), new ApiVersions(),
                new FetchMetricsManager(metrics, new FetchMetricsRegistry(Set.of(), "consumer")), () -> delegate,
                Optional.empty(), metrics, mock(OffsetCommitCallbackInvoker.class), (memberEpoch, memberId) -> { },
                Optional.empty(), new PositionsValidator(logContext, time, subscriptions, metadata)).get();

        assign(client, BROKER1);
        managers.fetchRequestManager.createFetchRequests(); // as the application thread asks on every poll
        managers.fetchRequestManager.poll(time.milliseconds());
        assertEquals(new ConnectionNeeds(Set.of(BROKER1), Set.of()), client.last("fetch"));

        CoordinatorRequestManager coordinator = managers.coordinatorRequestManager.orElseThrow();
        answerFindCoordinator(coordinator, BROKER0);
        assertEquals(new ConnectionNeeds(Set.of(), Set.of(coordinatorConnection(BROKER0))), client.last("coordinator"));
    }

    @Test
    public void testOverANetworkClientTheFetchTargetAndCoordinatorAreKeptAndAnotherBrokerClosesAfterTheLinger() {
        int lingerMs = 1_000;
        MockSelector selector = new MockSelector(time);
        NetworkClient network = lingeringNetworkClient(selector, lingerMs);
        ConsumerNetworkClient consumerClient = consumerClient(network);
        Fetcher<byte[], byte[]> fetcher = fetcher(consumerClient);
        assign(network, BROKER1);
        Node coordinatorNode = coordinatorConnection(BROKER2);
        CoordinatorRequestManager coordinator = new CoordinatorRequestManager(logContext, RETRY_BACKOFF_MS,
                RETRY_BACKOFF_MS, GROUP_ID, metadata, false, network.needsPublisher("coordinator"));
        answerFindCoordinator(coordinator, BROKER2);
        List<Node> connected = List.of(BROKER0, BROKER1, BROKER2, coordinatorNode);
        for (Node node : connected)
            network.ready(node, time.milliseconds());
        network.poll(0, time.milliseconds());
        for (Node node : connected)
            assertTrue(selector.isChannelReady(node.idString()), node + " connected");

        // Broker 1 (partition 0's leader) answers the fetch with a record the application has not taken yet: no
        // fetch goes to it while that data is buffered, so only the published need keeps its connection.
        assertEquals(1, fetcher.sendFetches());
        consumerClient.poll(time.timer(0));
        RequestHeader fetchHeader = ConnmgrSelectorExchange.lastSentHeader(selector);
        selector.clear();
        assertEquals(1, network.inFlightRequestCount(BROKER1.idString()), "the fetch is in flight");
        ConnmgrSelectorExchange.respond(selector, BROKER1.idString(), fetchHeader, fetchResponseWithARecord(TP0));
        ConnmgrSelectorExchange.poll(network, selector, time);
        consumerClient.poll(time.timer(0)); // runs the fetch's completion handler
        assertEquals(0, network.inFlightRequestCount(BROKER1.idString()), "the fetch was answered");
        assertTrue(fetcher.hasAvailableFetches(), "partition 0's record is buffered");
        assertEquals(0, fetcher.sendFetches(), "no fetch to a node with buffered data");
        // Broker 0 carries a request that is never answered: kept for it, it is the any-node anchor.
        consumerClient.send(BROKER0, new ApiVersionsRequest.Builder());
        consumerClient.poll(time.timer(0));
        selector.clear(); // MockSelector keeps what it completed until cleared

        time.sleep(lingerMs - 1);
        consumerClient.poll(time.timer(0));
        assertTrue(selector.isChannelReady(BROKER2.idString()), "kept for the linger");
        time.sleep(1);
        consumerClient.poll(time.timer(0));
        assertFalse(selector.isChannelReady(BROKER2.idString()), "neither read from nor a coordinator: closed");
        time.sleep(10 * lingerMs);
        fetcher.sendFetches();
        consumerClient.poll(time.timer(0));
        assertTrue(selector.isChannelReady(BROKER1.idString()), "the fetch target is kept");
        assertTrue(selector.isChannelReady(coordinatorNode.idString()), "the coordinator is kept");
        assertTrue(selector.isChannelReady(BROKER0.idString()), "a connection with a request in flight is kept");
        Utils.closeQuietly(network, "network client");
    }

    /** A selector that records the id of every connection dialled, in order. */
    private MockSelector dialRecordingSelector(List<String> dials) {
        return new MockSelector(time) {
            @Override
            public void connect(String id, InetSocketAddress address, int sendBuffer, int receiveBuffer) throws IOException {
                dials.add(id);
                super.connect(id, address, sendBuffer, receiveBuffer);
            }
        };
    }

    /**
     * A network client at a linger of 0 with the metadata's three brokers and broker 0 connected and needed (it holds
     * the any-node anchor, so no other connection is kept as the anchor).
     */
    private NetworkClient lingerZeroClientHoldingBroker0(MockSelector selector) {
        NetworkClient network = lingeringNetworkClient(selector, 0);
        updateMetadata(network, BROKER1);
        network.needsPublisher("fetch").publish(new ConnectionNeeds(Set.of(BROKER0), Set.of()));
        network.ready(BROKER0, time.milliseconds());
        network.poll(0, time.milliseconds());
        selector.clear();
        return network;
    }

    @Test
    public void testWithALingerOfZeroARequestQueuedForANodeStillConnectingIsSentNotClosedAndDialledAgain() {
        // Found by running the probe's classic consumer with connections.linger.ms=0: its ListOffsets waited in
        // ConsumerNetworkClient for the leader's connection, which became ready inside NetworkClient.poll and was
        // closed there as unneeded before the next send; the consumer dialled the leader again, forever. The
        // ConsumerNetworkClient asks ready() for the node before each poll, which keeps the connection in that poll.
        List<String> dials = new ArrayList<>();
        MockSelector selector = dialRecordingSelector(dials);
        NetworkClient network = lingerZeroClientHoldingBroker0(selector);
        ConsumerNetworkClient consumerClient = consumerClient(network);
        consumerClient.send(BROKER1, new ApiVersionsRequest.Builder());
        assertSentAfterOneDialToBroker1(network, selector, dials, () -> consumerClient.poll(time.timer(0)));
    }

    @Test
    public void testWithALingerOfZeroTheKip848DelegateSendsARequestQueuedForANodeStillConnecting() {
        // The KIP-848 consumer's network thread queues in NetworkClientDelegate, which also asks ready() for the node
        // of each unsent request before its poll.
        List<String> dials = new ArrayList<>();
        MockSelector selector = dialRecordingSelector(dials);
        NetworkClient network = lingerZeroClientHoldingBroker0(selector);
        Map<String, Object> props = new HashMap<>();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:9092");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        NetworkClientDelegate delegate = new NetworkClientDelegate(time, new ConsumerConfig(props), logContext, network,
                metadata, mock(BackgroundEventHandler.class), false, new AsyncConsumerMetrics(metrics, "consumer"));
        delegate.add(new NetworkClientDelegate.UnsentRequest(new ApiVersionsRequest.Builder(), Optional.of(BROKER1)));
        assertSentAfterOneDialToBroker1(network, selector, dials, () -> delegate.poll(0, time.milliseconds()));
    }

    /**
     * Three polls of a consumer queue holding one request for broker 1 (not yet connected) send it after one dial:
     * the connection is not closed in the poll that makes it ready. Closes the network client.
     */
    private void assertSentAfterOneDialToBroker1(NetworkClient network, MockSelector selector, List<String> dials,
                                                 Runnable queuePoll) {
        for (int i = 0; i < 3; i++) {
            queuePoll.run();
            selector.clear();
        }
        assertEquals(1, network.inFlightRequestCount(BROKER1.idString()), "the queued request was sent");
        assertEquals(List.of(BROKER0.idString(), BROKER1.idString()), dials,
                "one dial to broker 1: its connection was not closed before the send");
        Utils.closeQuietly(network, "network client");
    }

    @Test
    public void testKafkasMockClientGetsTheDefaultAndNothingIsPublished() {
        MockClient mockClient = new MockClient(time, metadata);
        Fetcher<byte[], byte[]> fetcher = fetcher(consumerClient(mockClient));
        assign(mockClient, BROKER1);
        fetcher.sendFetches();
        assertNull(fetcher.publishedConnectionNeeds());
    }
}
