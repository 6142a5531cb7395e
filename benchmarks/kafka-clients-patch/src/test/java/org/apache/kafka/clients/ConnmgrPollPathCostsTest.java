package org.apache.kafka.clients;

import org.apache.kafka.common.Node;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.requests.MetadataRequest;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.test.MockSelector;
import org.apache.kafka.test.TestUtils;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Patch 0015: the poll path's steps read what they derive from the cluster, the connection states and the published
 * needs again only when those change, and skip the work of a poll in which nothing did. These tests change exactly
 * one of those inputs between two polls, with time standing still, and check that the step sees the change: a cache
 * or a skip that missed it would decide as before.
 */
public class ConnmgrPollPathCostsTest {

    private static final long RECONNECT_BACKOFF_MS = 10_000;
    private static final int REQUEST_TIMEOUT_MS = 30_000;
    private static final int LINGER_MS = 1_000;

    private static final Node NODE0 = new Node(0, "localhost", 9090);
    private static final Node NODE1 = new Node(1, "localhost", 9091);
    private static final Node NODE2 = new Node(2, "localhost", 9092);

    private final MockTime time = new MockTime();
    private final MockSelector selector = new MockSelector(time);
    private Metadata metadata;
    private Metrics metrics;

    @BeforeEach
    public void setup() {
        metadata = new Metadata(50, 50, 600_000, new LogContext(), new ClusterResourceListeners());
        updateCluster(NODE0, NODE1, NODE2);
        metrics = new Metrics(new MetricConfig().tags(Map.of("client-id", "p1")), time);
    }

    @AfterEach
    public void teardown() {
        metrics.close();
    }

    /** Replaces the metadata's cluster with one of the given nodes (a new Cluster, so a new node list). */
    private void updateCluster(Node... nodes) {
        metadata.updateWithCurrentRequestVersion(
                RequestTestUtils.metadataResponse(List.of(nodes), "cluster", nodes[0].id(), Collections.emptyList()),
                false, time.milliseconds());
    }

    private NetworkClient client(int lingerMs) {
        return new NetworkClient(null, metadata, selector, "p1", Integer.MAX_VALUE, RECONNECT_BACKOFF_MS,
                RECONNECT_BACKOFF_MS, 64 * 1024, 64 * 1024, REQUEST_TIMEOUT_MS, 5_000, 5_000, time, false,
                new ApiVersions(), null, new LogContext(), new DefaultHostResolver(), null, Long.MAX_VALUE,
                MetadataRecoveryStrategy.NONE,
                ConnmgrOptions.allOff()
                        .withRoleMetrics(new ConnectionRoleMetrics(metrics, "producer"))
                        .withConnectionsLingerMs(lingerMs));
    }

    /** Dials the node and completes the connection, checked on the selector (isReady() would count as an ask). */
    private void connect(NetworkClient client, Node node) {
        assertFalse(client.ready(node, time.milliseconds()));
        client.poll(0, time.milliseconds());
        assertTrue(open(node), "connected to " + node);
        selector.clear();
    }

    private void poll(NetworkClient client) {
        ConnmgrSelectorExchange.poll(client, selector, time);
    }

    private boolean open(Node node) {
        return selector.isChannelReady(node.idString());
    }

    /**
     * The any-node anchor is the one unneeded connection kept because it is to a node of the current metadata. When
     * a metadata update drops that node, the next poll must close it even though nothing else changed (no time
     * passed, no connection changed, no needs published): the close step has to read the new cluster, not a cached
     * set of the old one's ids, and must not skip the poll as one in which nothing it reads changed.
     */
    @Test
    public void testTheAnchorClosesInThePollAfterAMetadataUpdateDropsItsNode() {
        NetworkClient client = client(LINGER_MS);
        connect(client, NODE0);
        connect(client, NODE1);
        client.needsPublisher("admin").publish(ConnectionNeeds.NONE);
        poll(client);
        time.sleep(LINGER_MS / 2);
        ConnmgrSelectorExchange.respond(selector, NODE1.idString(),
                ConnmgrSelectorExchange.send(client, selector, time, NODE1,
                        new MetadataRequest.Builder(Collections.singletonList("t"), true)),
                RequestTestUtils.metadataUpdateWith(3, Collections.emptyMap()));
        poll(client); // node 1 is the last used: the anchor
        time.sleep(LINGER_MS);
        poll(client);
        assertFalse(open(NODE0), "node 0 lingered out");
        assertTrue(open(NODE1), "node 1, a node of the metadata, is kept for any-node requests");
        poll(client);
        poll(client);
        assertTrue(open(NODE1), "polls in which nothing changed keep the anchor");

        updateCluster(NODE0, NODE2);
        poll(client);
        assertFalse(open(NODE1), "node 1 left the metadata: it is no longer an anchor and its linger ran out long ago");
    }

    /**
     * A producer asks ready() about its leaders on every loop. Asks about connections the needs hold change nothing
     * the close step decides, so polls with only such asks skip it; an ask about a connection the needs do not hold
     * runs it (that connection is kept), and so does the next poll (which lets it linger).
     */
    @Test
    public void testAsksAboutNeededConnectionsDoNotRunTheCloseStepButAnAskAboutAnotherDoes() {
        NetworkClient client = client(0);
        connect(client, NODE0);
        connect(client, NODE1);
        client.needsPublisher("producer").publish(new ConnectionNeeds(Set.of(NODE0), Set.of()));
        poll(client);
        poll(client);
        long runs = client.closeStepRuns();
        for (int i = 0; i < 10; i++) {
            client.isReady(NODE0, time.milliseconds());
            poll(client);
        }
        assertEquals(runs, client.closeStepRuns(), "asks about a needed connection: the step is skipped");
        assertFalse(open(NODE1), "node 1, unneeded, closed at a linger of 0 (node 0 holds the anchor)");

        connect(client, NODE1);
        long afterDial = client.closeStepRuns();
        client.isReady(NODE1, time.milliseconds());
        poll(client);
        assertEquals(afterDial + 1, client.closeStepRuns(), "an ask about an unneeded connection runs the step");
        assertTrue(open(NODE1), "asked about since the last step: kept");
        poll(client);
        assertEquals(afterDial + 2, client.closeStepRuns(), "the step after one that kept a connection for an ask runs");
        assertFalse(open(NODE1), "nobody asked since: closed");
    }

    /**
     * An ask about a connection the needs held counts when the needs drop it before the next step: that step keeps
     * the connection (a caller is about to use it), the one after lets it go. Only the decision to skip ignores asks
     * about needed connections, never the step itself.
     */
    @Test
    public void testAConnectionAskedAboutWhileNeededIsKeptByTheStepThatSeesItsNeedGo() {
        NetworkClient client = client(0);
        connect(client, NODE0);
        connect(client, NODE1);
        ConnectionNeedsPublisher producer = client.needsPublisher("producer");
        producer.publish(new ConnectionNeeds(Set.of(NODE0, NODE1), Set.of()));
        poll(client);
        poll(client);
        client.isReady(NODE1, time.milliseconds());
        producer.publish(new ConnectionNeeds(Set.of(NODE0), Set.of()));
        poll(client);
        assertTrue(open(NODE1), "asked about since the last step: kept, though no longer needed");
        poll(client);
        assertFalse(open(NODE1), "nobody asked since: closed");
    }

    /**
     * The set of needed ids is read again when a component that had only asked for a publisher publishes later, and
     * stays the same set (by reference) while nothing is published.
     */
    @Test
    public void testNeededIdsAreReadAgainWhenALaterComponentPublishes() {
        ConnectionNeedsFeed feed = new ConnectionNeedsFeed();
        assertNull(feed.neededConnectionIds(), "no component: no snapshot");
        feed.publisher("producer").publish(new ConnectionNeeds(Set.of(NODE0), Set.of()));
        Set<String> first = feed.neededConnectionIds();
        assertEquals(Set.of("0"), first);
        ConnectionNeedsPublisher admin = feed.publisher("admin");
        assertSame(first, feed.neededConnectionIds(), "a publisher that has published nothing changes nothing");
        admin.publish(new ConnectionNeeds(Set.of(NODE1), Set.of()));
        assertEquals(Set.of("0", "1"), feed.neededConnectionIds());
        feed.publisher("producer").publish(new ConnectionNeeds(Set.of(NODE2), Set.of()));
        assertEquals(Set.of("1", "2"), feed.neededConnectionIds());
    }

    /**
     * A name whose lookup was running does not bound the poll's wait; once its answer is read, its due time does
     * again: the refresher keeps its next due time as names are scheduled and answered instead of scanning every name
     * on every poll, and must not lose a name on the way.
     */
    @Test
    public void testANameIsDueAgainOnceItsAnswerIsRead() throws Exception {
        HostResolver resolver = host -> new InetAddress[] {InetAddress.getByAddress(host, new byte[] {127, 0, 0, 1})};
        try (DnsRefresher refresher = new DnsRefresher(resolver, 100, "p1", () -> { })) {
            assertEquals(Long.MAX_VALUE, refresher.timeToNextRefresh(0));
            refresher.schedule(Set.of("a.example", "b.example"), 0);
            assertEquals(100, refresher.timeToNextRefresh(0));
            assertFalse(refresher.isDue(99));
            refresher.schedule(Set.of("a.example"), 50); // b is forgotten
            refresher.schedule(Set.of("a.example", "b.example"), 60); // b again: due one period later
            assertTrue(refresher.isDue(100));
            refresher.schedule(Set.of("a.example", "b.example"), 100); // a is looked up, due again at 200
            assertEquals(60, refresher.timeToNextRefresh(100), "b, not a (running), bounds the wait");
            long deadline = System.currentTimeMillis() + 10_000;
            while (!refresher.hasAnswers() && System.currentTimeMillis() < deadline)
                Thread.sleep(5);
            assertTrue(refresher.hasAnswers());
            refresher.schedule(Set.of("a.example", "b.example"), 160); // b is looked up, due again at 260
            assertEquals(Long.MAX_VALUE, refresher.timeToNextRefresh(160), "both lookups running (a not read yet)");
            assertEquals("a.example", refresher.nextAnswer().host);
            assertEquals(40, refresher.timeToNextRefresh(160), "a's answer read: a is due again at 200");
        }
    }

    /**
     * Patch 0017: the asks since the last close step are a StepIdSet, cleared by a new generation. Checked against a
     * HashSet over many generations of random adds among more ids than its first table holds, so that absent ids'
     * slots are taken by other ids, probe paths run through absent slots and the table is rebuilt: after each add and
     * each clear, every id is present in one exactly when it is in the other. Ids are new strings each time, as a
     * node's id string is after a metadata update. Half the adds go through addAndCheck with a set of needed ids that
     * is replaced (a new set, some ids the same) every few generations: each answer is that set's.
     */
    @Test
    public void testStepIdSetHoldsWhatAHashSetHoldsAcrossClears() {
        NetworkClient.StepIdSet set = new NetworkClient.StepIdSet();
        Set<String> model = new HashSet<>();
        Random random = new Random(17);
        Set<String> needed = Set.of();
        for (int generation = 0; generation < 200; generation++) {
            if (generation % 3 == 0) {
                Set<String> next = new HashSet<>();
                for (int n = 0; n < 20; n++)
                    next.add(String.valueOf(random.nextInt(40) - 1));
                needed = next;
            }
            int adds = random.nextInt(generation % 20 == 19 ? 150 : 12);
            for (int a = 0; a < adds; a++) {
                String id = String.valueOf(random.nextInt(generation < 100 ? 40 : 400) - 1);
                if (random.nextBoolean())
                    assertEquals(needed.contains(id), set.addAndCheck(new String(id), needed), "needed: " + id);
                else
                    set.add(new String(id));
                model.add(id);
                assertTrue(set.contains(id), "added: " + id);
            }
            assertEquals(model.size(), set.size(), "size in generation " + generation);
            for (int id = -1; id < 400; id++) {
                String key = String.valueOf(id);
                assertEquals(model.contains(key), set.contains(key), "id " + id + " in generation " + generation);
            }
            set.clear();
            model.clear();
            assertTrue(set.isEmpty());
            assertFalse(set.contains("0"), "cleared");
        }
    }

    /**
     * Patch 0017: a producer asking ready() about 60 leaders that no published needs hold (at a linger of 0) keeps
     * each connection through the step after the asks, loop after loop, and the asks are recorded in the same table
     * every loop (no allocation once it holds the ids); once nobody asks, the next step closes them all but the
     * needed one. An ask about a connection that is then closed and re-dialled (by ready(), before the next step)
     * keeps the new connection too: the ask is about the id, not about one connection object.
     */
    @Test
    public void testAsksAboutManyConnectionsAreKeptLoopAfterLoopInTheSameTable() {
        List<Node> nodes = new ArrayList<>();
        for (int id = 0; id < 60; id++)
            nodes.add(new Node(id, "localhost", 9090 + id));
        updateCluster(nodes.toArray(new Node[0]));
        NetworkClient client = client(0);
        client.needsPublisher("producer").publish(new ConnectionNeeds(Set.of(nodes.get(0)), Set.of()));
        for (Node node : nodes)
            assertFalse(client.ready(node, time.milliseconds()), "dialling " + node);
        client.poll(0, time.milliseconds());
        for (Node node : nodes)
            assertTrue(open(node), "asked about before the dial: kept in the poll that connects it, " + node);

        Object table = null;
        for (int loop = 0; loop < 5; loop++) {
            for (Node node : nodes)
                assertTrue(client.ready(node, time.milliseconds()), "ready: " + node);
            client.poll(0, time.milliseconds());
            for (Node node : nodes)
                assertTrue(open(node), "asked about in loop " + loop + ": kept, " + node);
            NetworkClient.StepIdSet asked = TestUtils.fieldValue(client, NetworkClient.class, "askedSinceCloseStep");
            Object ids = TestUtils.fieldValue(asked, NetworkClient.StepIdSet.class, "ids");
            if (loop > 0)
                assertSame(table, ids, "loop " + loop + " recorded its asks in the table of the loop before");
            table = ids;
        }

        Node redialled = nodes.get(7);
        assertTrue(client.isReady(redialled, time.milliseconds()));
        client.close(redialled.idString());
        assertFalse(open(redialled), "closed");
        assertFalse(client.ready(redialled, time.milliseconds()), "dialled again");
        client.poll(0, time.milliseconds());
        assertTrue(open(redialled), "asked about in this window: the new connection is kept");

        client.poll(0, time.milliseconds());
        assertTrue(open(nodes.get(0)), "needed: kept");
        for (Node node : nodes.subList(1, nodes.size()))
            assertFalse(open(node), "nobody asked since the last step: closed, " + node);
    }
}
