package org.apache.kafka.clients;

import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.MetadataRequest;
import org.apache.kafka.common.requests.MetadataResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.test.MockSelector;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code connections.linger.ms} (KIP (b) rule 6): a ready connection that no published {@link ConnectionNeeds}
 * snapshot needs and that carries no request is closed once its linger has run out, as a chosen close (no reconnect
 * backoff, no metadata request, counted under reason {@code unneeded}); one connection to a node of the current
 * metadata is kept for any-node requests; with {@code -1}, or before any component has published, nothing is closed.
 */
public class ConnmgrConnectionsLingerTest {

    private static final String TOPIC = "t";
    private static final TopicPartition TP0 = new TopicPartition(TOPIC, 0);
    private static final Uuid TOPIC_ID = Uuid.randomUuid();
    private static final long RECONNECT_BACKOFF_MS = 10_000;
    private static final int REQUEST_TIMEOUT_MS = 30_000;
    private static final int LINGER_MS = 1_000;
    private static final String REASON_GROUP = "producer-connection-close-reason-metrics";

    private static final Node NODE0 = new Node(0, "localhost", 9090);
    private static final Node NODE1 = new Node(1, "localhost", 9091);
    private static final Node NODE2 = new Node(2, "localhost", 9092);

    private final MockTime time = new MockTime();
    /** Every address the client dialled, in order. */
    private final List<InetSocketAddress> dials = new ArrayList<>();
    private final MockSelector selector = new MockSelector(time, dials::add);
    private Metadata metadata;
    private Metrics metrics;

    @BeforeEach
    public void setup() {
        metadata = new Metadata(50, 50, 600_000, new LogContext(), new ClusterResourceListeners());
        metadata.updateWithCurrentRequestVersion(clusterResponse(), false, time.milliseconds());
        metrics = new Metrics(new MetricConfig().tags(Map.of("client-id", "p1")), time);
    }

    /** The cluster of nodes 0, 1 and 2, with topic t's partition 0 led by node 1. */
    private static MetadataResponse clusterResponse() {
        MetadataResponse.PartitionMetadata partition = new MetadataResponse.PartitionMetadata(Errors.NONE, TP0,
                Optional.of(1), Optional.of(1), List.of(1), List.of(1), Collections.emptyList());
        MetadataResponse.TopicMetadata topic = new MetadataResponse.TopicMetadata(Errors.NONE, TOPIC, TOPIC_ID, false,
                List.of(partition), MetadataResponse.AUTHORIZED_OPERATIONS_OMITTED);
        return RequestTestUtils.metadataResponse(List.of(NODE0, NODE1, NODE2), "cluster", 0, List.of(topic));
    }

    @AfterEach
    public void teardown() {
        metrics.close();
    }

    private NetworkClient client(int lingerMs) {
        return client(selector, lingerMs);
    }

    private NetworkClient client(MockSelector selector, int lingerMs) {
        return new NetworkClient(null, metadata, selector, "p1", Integer.MAX_VALUE, RECONNECT_BACKOFF_MS,
                RECONNECT_BACKOFF_MS, 64 * 1024, 64 * 1024, REQUEST_TIMEOUT_MS, 5_000, 5_000, time, false,
                new ApiVersions(), null, new LogContext(), new DefaultHostResolver(), null, Long.MAX_VALUE,
                MetadataRecoveryStrategy.NONE,
                ConnmgrOptions.allOff()
                        .withRoleMetrics(new ConnectionRoleMetrics(metrics, "producer"))
                        .withConnectionsLingerMs(lingerMs));
    }

    /**
     * Connects nodes 0 and 1, publishes {@code needed} as the producer's needs and polls once: the linger of each
     * connected node not needed starts in that poll. Returns the producer's publisher.
     */
    private ConnectionNeedsPublisher connectBothAndPublish(NetworkClient client, Node... needed) {
        ConnectionNeedsPublisher publisher = client.needsPublisher("producer");
        connect(client, NODE0);
        connect(client, NODE1);
        publisher.publish(needs(needed));
        poll(client);
        return publisher;
    }

    private static ConnectionNeeds needs(Node... nodes) {
        return new ConnectionNeeds(Set.of(nodes), Set.of());
    }

    /**
     * Dials the node and completes the connection (no ApiVersions exchange: discoverBrokerVersions is off). Checks it
     * on the selector, not with isReady(), which is a caller asking and so keeps the connection in the next step.
     */
    private void connect(NetworkClient client, Node node) {
        assertFalse(client.ready(node, time.milliseconds()));
        client.poll(0, time.milliseconds());
        assertTrue(open(node), "connected to " + node);
        selector.clear();
    }

    /** Sends a request to the node and returns its header; it stays in flight until answered. */
    private RequestHeader sendRequest(NetworkClient client, Node node) {
        return ConnmgrSelectorExchange.send(client, selector, time, node,
                new MetadataRequest.Builder(Collections.singletonList(TOPIC), true));
    }

    private void respond(Node node, RequestHeader header) {
        ConnmgrSelectorExchange.respond(selector, node.idString(), header,
                RequestTestUtils.metadataUpdateWith(3, Collections.emptyMap()));
    }

    private List<ClientResponse> poll(NetworkClient client) {
        return ConnmgrSelectorExchange.poll(client, selector, time);
    }

    private boolean open(Node node) {
        return selector.isChannelReady(node.idString());
    }

    private double unneededCloses() {
        return metrics.metrics().entrySet().stream()
                .filter(e -> e.getKey().group().equals(REASON_GROUP) && e.getKey().name().equals("connection-close-total")
                        && "unneeded".equals(e.getKey().tags().get("reason")))
                .mapToDouble(e -> ((Number) e.getValue().metricValue()).doubleValue())
                .sum();
    }

    /** The connection was closed by choice: no socket, no state left, so no failure and no reconnect backoff. */
    private void assertClosedByChoice(NetworkClient client, Node node) {
        assertFalse(open(node), node + ": the socket is closed");
        assertFalse(client.connectionFailed(node), node + ": a chosen close is not a failure");
        assertEquals(0, client.connectionDelay(node, time.milliseconds()), node + ": no reconnect backoff");
        assertFalse(metadata.updateRequested(), "no metadata update requested");
    }

    @Test
    public void testUnneededIdleConnectionClosesExactlyAtLingerExpiryAsAChosenCloseCountedUnderUnneeded() {
        NetworkClient client = client(LINGER_MS);
        connectBothAndPublish(client, NODE0); // the linger of node 1 starts in its poll
        time.sleep(LINGER_MS - 1);
        poll(client);
        assertTrue(open(NODE1), "kept until the linger has run out");
        assertEquals(0, unneededCloses());

        time.sleep(1);
        poll(client);
        assertClosedByChoice(client, NODE1);
        assertEquals(1, unneededCloses(), "counted under reason unneeded");
        assertTrue(client.isReady(NODE0, time.milliseconds()), "the needed connection is kept");

        int dialled = dials.size();
        assertFalse(client.ready(NODE1, time.milliseconds()));
        assertEquals(dialled + 1, dials.size(), "a caller that needs it again dials at once: no backoff");
    }

    @Test
    public void testNeededConnectionIsKept() {
        NetworkClient client = client(LINGER_MS);
        connect(client, NODE0);
        connect(client, NODE1);
        client.needsPublisher("producer").publish(needs(NODE0));
        client.needsPublisher("transactions").publish(new ConnectionNeeds(Set.of(), Set.of(NODE1)));
        for (int i = 0; i < 10; i++) {
            time.sleep(LINGER_MS);
            poll(client);
        }
        assertTrue(open(NODE0));
        assertTrue(open(NODE1), "a coordinator one component needs is kept");
        assertEquals(0, unneededCloses());
    }

    @Test
    public void testConnectionWithARequestInFlightIsKeptUntilItsResponseThenLingers() {
        NetworkClient client = client(LINGER_MS);
        connect(client, NODE0);
        connect(client, NODE1);
        client.needsPublisher("producer").publish(needs(NODE0));
        poll(client);
        RequestHeader header = sendRequest(client, NODE1);
        for (int i = 0; i < 5; i++) {
            time.sleep(LINGER_MS);
            poll(client);
            assertTrue(open(NODE1), "a busy connection is never closed by the linger");
        }

        respond(NODE1, header);
        List<ClientResponse> responses = poll(client);
        assertEquals(1, responses.size());
        assertFalse(responses.get(0).wasDisconnected());
        time.sleep(LINGER_MS - 1);
        poll(client);
        assertTrue(open(NODE1), "the linger starts when the response is read");
        time.sleep(1);
        poll(client);
        assertClosedByChoice(client, NODE1);
    }

    @Test
    public void testASendWithoutResponseRestartsTheLinger() {
        NetworkClient client = client(LINGER_MS);
        connect(client, NODE0);
        connect(client, NODE1);
        client.needsPublisher("producer").publish(needs(NODE0));
        poll(client);
        time.sleep(LINGER_MS - 1);
        // Like an acks=0 Produce: no response, so it leaves the in-flight set in the poll that sends it.
        client.send(client.newClientRequest(NODE1.idString(),
                new MetadataRequest.Builder(Collections.singletonList(TOPIC), true), time.milliseconds(), false),
                time.milliseconds());
        poll(client);
        assertEquals(0, client.inFlightRequestCount(NODE1.idString()));
        time.sleep(1);
        poll(client);
        assertTrue(open(NODE1), "the linger runs from the last use");
        time.sleep(LINGER_MS - 1);
        poll(client);
        assertClosedByChoice(client, NODE1);
    }

    @Test
    public void testNeedPublishedAgainBeforeExpiryKeepsTheConnectionAndALaterLossStartsTheLingerAgain() {
        NetworkClient client = client(LINGER_MS);
        ConnectionNeedsPublisher publisher = connectBothAndPublish(client, NODE0);
        time.sleep(LINGER_MS / 2);
        publisher.publish(needs(NODE0, NODE1));
        poll(client);
        time.sleep(5 * LINGER_MS);
        poll(client);
        assertTrue(open(NODE1), "needed again before its linger ran out");

        publisher.publish(needs(NODE0));
        poll(client);
        time.sleep(LINGER_MS - 1);
        poll(client);
        assertTrue(open(NODE1), "a full linger from the new loss, not from the first");
        time.sleep(1);
        poll(client);
        assertClosedByChoice(client, NODE1);
    }

    @Test
    public void testWithALingerOfZeroAConnectionACallerWaitsForIsKeptAsItBecomesReadyThenClosedOnceNobodyAsks()
            throws IOException {
        // Found by running the probe's idempotent producer with connections.linger.ms=0: the Sender waits for the
        // node of its InitProducerId with NetworkClientUtils.awaitReady, which asks isReady() before each poll; the
        // poll that made the connection ready closed it as unneeded, and the Sender waited out its request timeout.
        MockSelector selector = new MockSelector(time, dials::add) {
            @Override
            public List<String> connected() {
                List<String> connected = new ArrayList<>(super.connected());
                clear(); // handed over once, as a real selector does
                return connected;
            }
        };
        NetworkClient client = client(selector, 0);
        assertFalse(client.ready(NODE0, time.milliseconds()));
        client.poll(0, time.milliseconds());
        client.needsPublisher("producer").publish(needs(NODE0)); // node 0 holds the any-node anchor
        client.poll(0, time.milliseconds());

        assertTrue(NetworkClientUtils.awaitReady(client, NODE1, time, REQUEST_TIMEOUT_MS),
                "ready: not closed in the poll that made it ready");
        List<Integer> dialledPorts = dials.stream().map(InetSocketAddress::getPort).collect(Collectors.toList());
        assertEquals(List.of(NODE0.port(), NODE1.port()), dialledPorts, "dialled once");
        client.poll(0, time.milliseconds());
        assertTrue(selector.isChannelReady(NODE1.idString()), "the last isReady() asked: kept in the next step");
        client.poll(0, time.milliseconds());
        assertFalse(selector.isChannelReady(NODE1.idString()), "nobody asked since: closed");
        assertEquals(1, unneededCloses());
    }

    /** Ten lingers pass, with a poll after each: nodes 0 and 1 are still open and nothing closed as unneeded. */
    private void assertNothingClosedThroughTenLingers(NetworkClient client) {
        for (int i = 0; i < 10; i++) {
            time.sleep(LINGER_MS);
            poll(client);
        }
        assertTrue(open(NODE0));
        assertTrue(open(NODE1));
        assertEquals(0, unneededCloses());
    }

    /**
     * A restart in small: the connection to node 1, a leader the producer needs, is reset by the broker; the leader
     * moves away (the snapshot no longer needs node 1) and the client dials node 1 again for some request.
     */
    private ConnectionNeedsPublisher loseLeaderOfNode1AndRedial(NetworkClient client) {
        ConnectionNeedsPublisher publisher = connectBothAndPublish(client, NODE0, NODE1);
        selector.serverDisconnect(NODE1.idString());
        poll(client);
        assertEquals(1, client.lostRoleCount(), "a needed connection reset by its peer is a lost role");
        publisher.publish(needs(NODE0)); // the leader moved away while the broker restarted
        time.sleep(RECONNECT_BACKOFF_MS);
        answerTheMetadataRefresh(client);
        connect(client, NODE1);
        poll(client); // the caller that dialled it asks no more
        return publisher;
    }

    /**
     * Answers the metadata request a disconnection asks for, sent to node 0 (the only ready node) in the next poll, so
     * that no request stays in flight and no update stays requested.
     */
    private void answerTheMetadataRefresh(NetworkClient client) {
        assertTrue(metadata.updateRequested(), "a disconnection asks for metadata");
        client.poll(0, time.milliseconds());
        RequestHeader header = ConnmgrSelectorExchange.lastSentHeader(selector);
        assertEquals(ApiKeys.METADATA, header.apiKey());
        selector.clear();
        ConnmgrSelectorExchange.respond(selector, NODE0.idString(), header, clusterResponse());
        poll(client);
        assertFalse(metadata.updateRequested());
        assertEquals(0, client.inFlightRequestCount());
    }

    @Test
    public void testAConnectionToABrokerWhoseRoleWasLostWaitsForTheRoleInsteadOfLingeringOut() {
        NetworkClient client = client(LINGER_MS);
        ConnectionNeedsPublisher publisher = loseLeaderOfNode1AndRedial(client);
        for (int i = 0; i < 10; i++) {
            time.sleep(LINGER_MS);
            poll(client);
        }
        assertTrue(open(NODE1), "unneeded for ten lingers, but kept: its role is expected back");
        assertEquals(0, unneededCloses());

        publisher.publish(needs(NODE0, NODE1)); // the preferred leader is back
        poll(client);
        assertEquals(0, client.lostRoleCount(), "the role came back: the wait is over");
        publisher.publish(needs(NODE0)); // and is let go for good later
        poll(client);
        time.sleep(LINGER_MS - 1);
        poll(client);
        assertTrue(open(NODE1), "an ordinary linger from the second loss of need");
        time.sleep(1);
        poll(client);
        assertClosedByChoice(client, NODE1);
        assertEquals(1, unneededCloses());
    }

    @Test
    public void testTheWaitForALostRoleEndsAfterNineMinutesThenTheConnectionLingers() {
        NetworkClient client = client(LINGER_MS);
        loseLeaderOfNode1AndRedial(client);
        long lostAt = time.milliseconds() - RECONNECT_BACKOFF_MS;
        time.sleep(NetworkClient.LOST_ROLE_WAIT_MS - RECONNECT_BACKOFF_MS - 1);
        poll(client);
        assertEquals(lostAt + NetworkClient.LOST_ROLE_WAIT_MS - 1, time.milliseconds());
        assertTrue(open(NODE1));
        assertEquals(1, client.lostRoleCount());
        time.sleep(1);
        poll(client);
        assertEquals(0, client.lostRoleCount(), "the wait is bounded");
        time.sleep(LINGER_MS);
        poll(client);
        assertClosedByChoice(client, NODE1);
    }

    @Test
    public void testTheWaitForALostRoleEndsWhenTheBrokerLeavesTheMetadata() {
        NetworkClient client = client(LINGER_MS);
        loseLeaderOfNode1AndRedial(client);
        metadata.updateWithCurrentRequestVersion(RequestTestUtils.metadataResponse(List.of(NODE0, NODE2),
                "cluster", 0, List.of()), false, time.milliseconds());
        assertEquals(Set.of(NODE0, NODE2), Set.copyOf(metadata.fetch().nodes()));
        poll(client);
        assertEquals(0, client.lostRoleCount(), "a broker gone from the metadata has no role to come back");
        time.sleep(LINGER_MS);
        poll(client);
        assertFalse(open(NODE1));
    }

    /**
     * The consumer's group coordinator connection to broker 1, in the given id form, is reset by the broker while the
     * consumer needs it: a lost role, whose wait goes on while broker 1 is listed and ends when broker 1 leaves the
     * metadata (the connection id stands for its broker).
     */
    private void assertALostCoordinatorWaitsForItsBroker(Node coordinator) {
        NetworkClient client = client(LINGER_MS);
        connect(client, NODE0);
        connect(client, coordinator);
        client.needsPublisher("consumer").publish(new ConnectionNeeds(Set.of(NODE0), Set.of(coordinator)));
        poll(client);
        selector.serverDisconnect(coordinator.idString());
        poll(client);
        assertEquals(1, client.lostRoleCount(), coordinator.idString() + ": a needed connection reset is a lost role");
        time.sleep(LINGER_MS);
        poll(client);
        assertEquals(1, client.lostRoleCount(), coordinator.idString() + ": broker 1 is listed, the wait goes on");
        metadata.updateWithCurrentRequestVersion(RequestTestUtils.metadataResponse(List.of(NODE0, NODE2),
                "cluster", 0, List.of()), false, time.milliseconds());
        poll(client);
        assertEquals(0, client.lostRoleCount(), coordinator.idString() + ": broker 1 left, no role comes back");
    }

    @Test
    public void testALostCoordinatorConnectionOfTheFormUpToFourThreeWaitsForItsBroker() {
        assertALostCoordinatorWaitsForItsBroker(new Node(Integer.MAX_VALUE - 1, NODE1.host(), NODE1.port()));
    }

    @Test
    public void testALostCoordinatorConnectionOfTheFourFourFormWaitsForItsBroker() {
        assertALostCoordinatorWaitsForItsBroker(ConnmgrPlusCoordinatorNode.of(NODE1));
    }

    @Test
    public void testAConnectionLostWhileNothingNeededItLingersOutAsBefore() {
        NetworkClient client = client(LINGER_MS);
        connectBothAndPublish(client, NODE0);
        selector.serverDisconnect(NODE1.idString());
        poll(client);
        assertEquals(0, client.lostRoleCount(), "no role was lost with it");
        time.sleep(RECONNECT_BACKOFF_MS);
        answerTheMetadataRefresh(client);
        connect(client, NODE1);
        poll(client);
        time.sleep(LINGER_MS);
        poll(client);
        assertClosedByChoice(client, NODE1);
    }

    @Test
    public void testOffClosesNothing() {
        NetworkClient client = client(-1);
        connect(client, NODE0);
        connect(client, NODE1);
        client.needsPublisher("producer").publish(ConnectionNeeds.NONE);
        assertNothingClosedThroughTenLingers(client);
    }

    @Test
    public void testNothingIsClosedBeforeAnyComponentPublishes() {
        NetworkClient client = client(0);
        client.needsPublisher("consumer"); // registered, never published: a client kind without a publisher
        connect(client, NODE0);
        connect(client, NODE1);
        assertNothingClosedThroughTenLingers(client);
    }

    @Test
    public void testAnyNodeAnchorKeepsTheLastUsedConnectionWhenNothingElseIsHeld() {
        NetworkClient client = client(LINGER_MS);
        connect(client, NODE0);
        connect(client, NODE1);
        connect(client, NODE2);
        client.needsPublisher("admin").publish(ConnectionNeeds.NONE);
        poll(client);
        time.sleep(LINGER_MS / 2);
        respond(NODE1, sendRequest(client, NODE1)); // node 1 is the last used
        poll(client);
        time.sleep(LINGER_MS);
        poll(client);
        assertFalse(open(NODE0));
        assertFalse(open(NODE2));
        assertTrue(open(NODE1), "the last used connection to a node of the metadata is kept for any-node requests");
        for (int i = 0; i < 10; i++) {
            time.sleep(LINGER_MS);
            poll(client);
        }
        assertTrue(open(NODE1), "the anchor stays while it is the only connection");
        assertEquals(2, unneededCloses());

        // Once a needed connection holds a node of the metadata, the anchor is no longer kept: its linger ran out
        // long ago, so it closes in the poll that makes the needed connection ready.
        client.needsPublisher("admin").publish(needs(NODE0));
        connect(client, NODE0);
        assertFalse(open(NODE1));
        assertTrue(open(NODE0));
        assertEquals(3, unneededCloses());
    }

    @Test
    public void testPollTimeoutIncludesTheNextLingerDeadline() {
        NetworkClient client = client(LINGER_MS);
        connect(client, NODE0);
        connect(client, NODE1);
        client.needsPublisher("producer").publish(needs(NODE0));
        poll(client);
        time.sleep(LINGER_MS / 4);
        long start = time.milliseconds();
        client.poll(Long.MAX_VALUE, start); // MockSelector sleeps the timeout it is given
        assertEquals(LINGER_MS - LINGER_MS / 4, time.milliseconds() - start, "woken at the deadline");
        assertFalse(open(NODE1), "and closed in that poll");

        start = time.milliseconds();
        client.poll(Long.MAX_VALUE, start);
        assertEquals(REQUEST_TIMEOUT_MS, time.milliseconds() - start, "no deadline left: the usual bound");
    }

    @Test
    public void testPublishingFromAnotherThreadWhilePollRunsTakesNoLock() throws Exception {
        CountDownLatch published = new CountDownLatch(1);
        AtomicReference<NetworkClient> clientRef = new AtomicReference<>();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        // A selector whose poll, on the network thread inside NetworkClient.poll, waits for a publish from another
        // thread: that publish would never finish if it needed anything the polling thread holds.
        MockSelector blocking = new MockSelector(time) {
            @Override
            public void poll(long timeout) throws IOException {
                Thread publisher = new Thread(() -> {
                    try {
                        clientRef.get().needsPublisher("producer").publish(needs(NODE0));
                        published.countDown();
                    } catch (Throwable t) {
                        failure.set(t);
                    }
                });
                publisher.start();
                try {
                    assertTrue(published.await(10, TimeUnit.SECONDS), "the publish completed while poll ran");
                    publisher.join();
                } catch (InterruptedException e) {
                    throw new IOException(e);
                }
                super.poll(timeout);
            }
        };
        NetworkClient client = client(blocking, LINGER_MS);
        clientRef.set(client);
        assertFalse(client.ready(NODE0, time.milliseconds()));
        assertFalse(client.ready(NODE1, time.milliseconds()));
        client.poll(0, time.milliseconds());
        assertNull(failure.get());
        assertTrue(blocking.isChannelReady(NODE0.idString()));
        assertTrue(blocking.isChannelReady(NODE1.idString()));
        client.poll(0, time.milliseconds()); // node 1's linger starts: asked (ready()) only before the first poll
        time.sleep(LINGER_MS);
        client.poll(0, time.milliseconds());
        assertFalse(blocking.isChannelReady(NODE1.idString()), "the snapshot published during poll is read");
    }

    @Test
    public void testConcurrentPublishesWhilePolling() throws Exception {
        NetworkClient client = client(0);
        connect(client, NODE0);
        connect(client, NODE1);
        ConnectionNeedsPublisher publisher = client.needsPublisher("producer");
        publisher.publish(needs(NODE0, NODE1));
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread other = new Thread(() -> {
            try {
                for (int i = 0; i < 20_000; i++)
                    client.needsPublisher("consumer").publish(i % 2 == 0 ? needs(NODE0, NODE1) : needs(NODE1));
            } catch (Throwable t) {
                failure.set(t);
            }
        });
        other.start();
        for (int i = 0; i < 2_000 && other.isAlive(); i++)
            poll(client);
        other.join();
        assertNull(failure.get());
        assertTrue(open(NODE0), "needed by the producer's snapshot throughout");
        assertTrue(open(NODE1), "needed by the producer's snapshot throughout");
    }

    @Test
    public void testPublisherIsStablePerComponentAndMockClientPublishesNothing() {
        NetworkClient client = client(LINGER_MS);
        ConnectionNeedsFeed feed = new ConnectionNeedsFeed();
        assertNull(feed.neededConnectionIds(), "no snapshot yet");
        feed.publisher("a").publish(needs(NODE0));
        feed.publisher("b").publish(new ConnectionNeeds(Set.of(), Set.of(new Node(Integer.MAX_VALUE - 1, "h", 1))));
        assertEquals(Set.of("0", String.valueOf(Integer.MAX_VALUE - 1)), feed.neededConnectionIds());
        Set<String> union = feed.neededConnectionIds();
        assertSame(union, feed.neededConnectionIds(), "recomputed only when a snapshot changed");
        feed.publisher("a").publish(ConnectionNeeds.NONE);
        assertEquals(Set.of(String.valueOf(Integer.MAX_VALUE - 1)), feed.neededConnectionIds());
        assertThrows(NullPointerException.class, () -> client.needsPublisher("x").publish(null));

        // Kafka's MockClient, compiled against 4.3.1's KafkaClient, gets the interface's default.
        KafkaClient mock = new MockClient(time);
        assertSame(ConnectionNeedsPublisher.NONE, mock.needsPublisher("producer"));
        mock.needsPublisher("producer").publish(needs(NODE0));
    }

    @Test
    public void testEveryClientDefinesTheOptionWithDefaultOffAndAtLeastMinusOne() {
        ConnmgrClientConfigs.assertEveryClientDefines(CommonClientConfigs.CONNECTIONS_LINGER_MS_CONFIG,
                CommonClientConfigs.DEFAULT_CONNECTIONS_LINGER_MS, 3000, ClientUtils::connectionsLingerMs);
        ConnmgrClientConfigs.assertEveryClientRejects(CommonClientConfigs.CONNECTIONS_LINGER_MS_CONFIG, -2);
    }
}
