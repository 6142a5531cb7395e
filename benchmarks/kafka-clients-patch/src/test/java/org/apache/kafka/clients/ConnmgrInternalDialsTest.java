package org.apache.kafka.clients;

import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.message.ProduceRequestData;
import org.apache.kafka.common.message.ProduceResponseData;
import org.apache.kafka.common.message.PushTelemetryRequestData;
import org.apache.kafka.common.message.PushTelemetryResponseData;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.network.NetworkSend;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.GetTelemetrySubscriptionsResponse;
import org.apache.kafka.common.requests.MetadataResponse;
import org.apache.kafka.common.requests.ProduceRequest;
import org.apache.kafka.common.requests.ProduceResponse;
import org.apache.kafka.common.requests.PushTelemetryRequest;
import org.apache.kafka.common.requests.PushTelemetryResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.telemetry.internals.ClientTelemetrySender;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.test.MockSelector;
import org.apache.kafka.test.TestUtils;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code connections.linger.ms} at 0 and the client's two internal senders, the metadata updater and the telemetry
 * sender: neither asks {@code isReady()}, so a connection one of them dialled must still count as needed in the close
 * step of a poll in which it chose that node; otherwise, while the connection a component needs cannot take a request
 * (throttled, or its last send incomplete), each dial is closed as unneeded before the request it was made for is sent,
 * and the next poll dials again. The telemetry sender picks a new node as {@code leastLoadedNode} would when its sticky
 * node's connection has lingered out, instead of dialling the old node again only because it was sticky.
 */
public class ConnmgrInternalDialsTest {

    private static final String TOPIC = "t";
    private static final TopicPartition TP0 = new TopicPartition(TOPIC, 0);
    private static final Uuid TOPIC_ID = Uuid.randomUuid();
    private static final long RECONNECT_BACKOFF_MS = 50;
    private static final int REQUEST_TIMEOUT_MS = 30_000;
    private static final int THROTTLE_MS = 5_000;
    private static final int POLLS = 50;
    private static final long POLL_STEP_MS = 10;

    private static final Node NODE0 = new Node(0, "localhost", 9090);
    private static final Node NODE1 = new Node(1, "localhost", 9091);
    private static final Node NODE2 = new Node(2, "localhost", 9092);

    private final MockTime time = new MockTime();
    /** Every address the client dialled, in order. */
    private final List<InetSocketAddress> dials = new ArrayList<>();
    private final HoldingSelector selector = new HoldingSelector(time, dials);
    private final PushDue telemetry = new PushDue();
    private Metadata metadata;
    private Metrics metrics;

    /**
     * A {@link MockSelector} that can hold the sends to one node: they stay in progress (never written), so the
     * connection's in-flight request is incomplete and {@code canSendMore} is false, as on a socket whose peer stopped
     * reading.
     */
    private static final class HoldingSelector extends MockSelector {
        private final List<NetworkSend> held = new ArrayList<>();
        private final Map<String, RequestHeader> lastHeaders = new HashMap<>();
        private String holdFor = null;
        private boolean answerApiVersions = false;

        HoldingSelector(Time time, List<InetSocketAddress> dials) {
            super(time, dials::add);
        }

        void holdSendsTo(Node node) {
            holdFor = node.idString();
        }

        @Override
        public void send(NetworkSend send) {
            if (send.destinationId().equals(holdFor))
                held.add(send);
            else
                super.send(send);
        }

        /** Every broker answers each ApiVersions request in the poll that writes it, as NetworkClientTest's do. */
        void answerApiVersions() {
            answerApiVersions = true;
        }

        /**
         * Also keeps the header of the last request written to each node, which the tests' clear() drops, and answers
         * the ApiVersions requests written if asked to.
         */
        @Override
        public void poll(long timeout) throws IOException {
            super.poll(timeout);
            for (int i = 0; i < completedSends().size(); i++) {
                ByteBuffer buffer = completedSendBuffers().get(i).buffer().duplicate();
                buffer.getInt(); // size
                RequestHeader header = RequestHeader.parse(buffer.slice());
                String nodeId = completedSends().get(i).destinationId();
                lastHeaders.put(nodeId, header);
                if (answerApiVersions && header.apiKey() == ApiKeys.API_VERSIONS)
                    ConnmgrSelectorExchange.respond(this, nodeId, header,
                            TestUtils.defaultApiVersionsResponse(ApiMessageType.ListenerType.BROKER));
            }
        }

        RequestHeader lastHeader(Node node) {
            return lastHeaders.get(node.idString());
        }
    }

    /** A telemetry sender that is due to push whenever {@link #due} is set; records the pushes it created. */
    private static final class PushDue implements ClientTelemetrySender {
        boolean due = false;
        int pushes = 0;

        @Override
        public long timeToNextUpdate(long timeoutMs) {
            return due ? 0 : Long.MAX_VALUE;
        }

        @Override
        public Optional<AbstractRequest.Builder<?>> createRequest() {
            if (!due)
                return Optional.empty();
            due = false;
            pushes++;
            return Optional.of(new PushTelemetryRequest.Builder(new PushTelemetryRequestData(), true));
        }

        @Override
        public void handleResponse(GetTelemetrySubscriptionsResponse response) {
        }

        @Override
        public void handleResponse(PushTelemetryResponse response) {
        }

        @Override
        public void handleFailedGetTelemetrySubscriptionsRequest(KafkaException kafkaException) {
        }

        @Override
        public void handleFailedPushTelemetryRequest(KafkaException kafkaException) {
        }

        @Override
        public Optional<Uuid> clientInstanceId(Duration timeout) {
            return Optional.empty();
        }

        @Override
        public void initiateClose() {
        }

        @Override
        public void close() {
        }
    }

    @BeforeEach
    public void setup() {
        metadata = new Metadata(50, 50, 600_000, new LogContext(), new ClusterResourceListeners());
        metadata.updateWithCurrentRequestVersion(clusterResponse(), false, time.milliseconds());
        metrics = new Metrics(new MetricConfig().tags(Map.of("client-id", "p1")), time);
    }

    @AfterEach
    public void teardown() {
        metrics.close();
    }

    /** The cluster of nodes 0, 1 and 2, with topic t's partition 0 led by node 1. */
    private static MetadataResponse clusterResponse() {
        MetadataResponse.PartitionMetadata partition = new MetadataResponse.PartitionMetadata(Errors.NONE, TP0,
                Optional.of(1), Optional.of(1), List.of(1), List.of(1), Collections.emptyList());
        MetadataResponse.TopicMetadata topic = new MetadataResponse.TopicMetadata(Errors.NONE, TOPIC, TOPIC_ID, false,
                List.of(partition), MetadataResponse.AUTHORIZED_OPERATIONS_OMITTED);
        return RequestTestUtils.metadataResponse(List.of(NODE0, NODE1, NODE2), "cluster", 0, List.of(topic));
    }

    private NetworkClient client(int lingerMs) {
        return client(lingerMs, false);
    }

    private NetworkClient client(int lingerMs, boolean discoverBrokerVersions) {
        return new NetworkClient(null, metadata, selector, "p1", Integer.MAX_VALUE, RECONNECT_BACKOFF_MS,
                RECONNECT_BACKOFF_MS, 64 * 1024, 64 * 1024, REQUEST_TIMEOUT_MS, 5_000, 5_000, time,
                discoverBrokerVersions,
                new ApiVersions(), null, new LogContext(), new DefaultHostResolver(), telemetry, Long.MAX_VALUE,
                MetadataRecoveryStrategy.NONE,
                ConnmgrOptions.allOff()
                        .withRoleMetrics(new ConnectionRoleMetrics(metrics, "producer"))
                        .withConnectionsLingerMs(lingerMs));
    }

    /** Dials the node and completes the connection (no ApiVersions exchange: discoverBrokerVersions is off). */
    private void connect(NetworkClient client, Node node) {
        assertFalse(client.ready(node, time.milliseconds()));
        client.poll(0, time.milliseconds());
        assertTrue(selector.isChannelReady(node.idString()), "connected to " + node);
        selector.clear();
    }

    private List<ClientResponse> poll(NetworkClient client) {
        return ConnmgrSelectorExchange.poll(client, selector, time);
    }

    /** Connects node 1, the leader of t-0, and publishes it as the producer's only need. */
    private void connectLeader(NetworkClient client) {
        connect(client, NODE1);
        client.needsPublisher("producer").publish(new ConnectionNeeds(Set.of(NODE1), Set.of()));
        poll(client);
    }

    /** Node 1 answers a produce request with a throttle time: its connection takes no request for THROTTLE_MS. */
    private void throttleLeader(NetworkClient client) {
        ProduceRequest.Builder produce = ProduceRequest.builder(new ProduceRequestData()
                .setTopicData(new ProduceRequestData.TopicProduceDataCollection())
                .setAcks((short) 1)
                .setTimeoutMs(1000));
        RequestHeader header = ConnmgrSelectorExchange.send(client, selector, time, NODE1, produce);
        ConnmgrSelectorExchange.respond(selector, NODE1.idString(), header,
                new ProduceResponse(new ProduceResponseData().setThrottleTimeMs(THROTTLE_MS)));
        poll(client);
        assertTrue(client.throttleDelayMs(NODE1, time.milliseconds()) > 0, "node 1 is throttled");
    }

    /** Node 1's next send is never written: its request stays in flight, incomplete, and it takes no other. */
    private void holdLeaderSend(NetworkClient client) {
        selector.holdSendsTo(NODE1);
        ProduceRequest.Builder produce = ProduceRequest.builder(new ProduceRequestData()
                .setTopicData(new ProduceRequestData.TopicProduceDataCollection())
                .setAcks((short) 1)
                .setTimeoutMs(1000));
        client.send(client.newClientRequest(NODE1.idString(), produce, time.milliseconds(), true),
                time.milliseconds());
        poll(client);
        assertEquals(1, client.inFlightRequestCount(NODE1.idString()));
    }

    /** Polls POLLS times, POLL_STEP_MS apart (well inside the throttle), and returns the dials made meanwhile. */
    private int dialsOverPolls(NetworkClient client) {
        int before = dials.size();
        for (int i = 0; i < POLLS; i++) {
            time.sleep(POLL_STEP_MS);
            poll(client);
        }
        return dials.size() - before;
    }

    /** Requests a metadata update and waits out its refresh backoff: the next poll's updater picks a node. */
    private void dueMetadataUpdate() {
        metadata.requestUpdate(false);
        time.sleep(50);
    }

    private boolean open(Node node) {
        return selector.isChannelReady(node.idString());
    }

    /** The node another than 0 or 1 that the updater or telemetry sender dialled, checked to be connected now. */
    private Node theOneDialledNode(int dialled) {
        assertEquals(1, dialled, "one dial, then the request it was made for; dials: " + dials);
        InetSocketAddress address = dials.get(dials.size() - 1);
        Node node = address.getPort() == NODE0.port() ? NODE0 : NODE2;
        assertEquals(node.port(), address.getPort(), "dialled node 0 or 2, not the throttled leader: " + dials);
        return node;
    }

    @Test
    public void testMetadataUpdaterDialsOnceAtLingerZeroWhileTheNeededNodeIsThrottled() {
        NetworkClient client = client(0);
        connectLeader(client);
        throttleLeader(client);
        dueMetadataUpdate();

        Node dialled = theOneDialledNode(dialsOverPolls(client));
        assertTrue(open(dialled), "the metadata request is in flight on the connection dialled for it");
        assertEquals(1, client.inFlightRequestCount(dialled.idString()));
        assertTrue(open(NODE1), "the needed leader is kept");
    }

    @Test
    public void testMetadataUpdaterDialsOnceAtLingerZeroWithTheApiVersionsCheck() {
        // Every client ClientUtils builds checks API versions: a dial is READY only in the poll that reads the
        // ApiVersions answer, and without the pick kept it was closed in that poll.
        selector.answerApiVersions();
        NetworkClient client = client(0, true);
        assertFalse(client.ready(NODE1, time.milliseconds()));
        for (int i = 0; i < 3; i++)
            poll(client);
        assertTrue(client.isReady(NODE1, time.milliseconds()), "node 1 ready after its ApiVersions answer");
        client.needsPublisher("producer").publish(new ConnectionNeeds(Set.of(NODE1), Set.of()));
        poll(client);
        throttleLeader(client);
        dueMetadataUpdate();

        Node dialled = theOneDialledNode(dialsOverPolls(client));
        assertEquals(1, client.inFlightRequestCount(dialled.idString()), "the metadata request is in flight");
    }

    @Test
    public void testMetadataUpdaterDialsOnceAtLingerZeroWhileTheNeededNodeHasAnIncompleteSend() {
        NetworkClient client = client(0);
        connectLeader(client);
        holdLeaderSend(client);
        dueMetadataUpdate();

        Node dialled = theOneDialledNode(dialsOverPolls(client));
        assertEquals(1, client.inFlightRequestCount(dialled.idString()), "the metadata request is in flight");
    }

    @Test
    public void testMetadataUpdatersDialIsNeededForItsStepOnlyAndClosesOnceAnswered() {
        NetworkClient client = client(0);
        connectLeader(client);
        throttleLeader(client);
        dueMetadataUpdate();
        Node dialled = theOneDialledNode(dialsOverPolls(client));

        ConnmgrSelectorExchange.respond(selector, dialled.idString(), selector.lastHeader(dialled), clusterResponse());
        poll(client);
        assertFalse(metadata.updateRequested(), "the update is done");
        assertFalse(open(dialled), "answered and needed by nothing: it lingers out at 0 in the poll that read it");
        assertEquals(0, dialsOverPolls(client), "and nothing dials it again");
    }

    @Test
    public void testTelemetrySenderDialsOnceAtLingerZeroWhileTheNeededNodeHasAnIncompleteSend() {
        NetworkClient client = client(0);
        connectLeader(client);
        holdLeaderSend(client);
        telemetry.due = true;

        Node dialled = theOneDialledNode(dialsOverPolls(client));
        assertEquals(1, telemetry.pushes, "the push was sent on the connection dialled for it");
        assertEquals(1, client.inFlightRequestCount(dialled.idString()));
    }

    @Test
    public void testTelemetryPicksAConnectedNodeWhenItsStickyNodeLingeredOut() {
        NetworkClient client = client(0);
        connect(client, NODE0);
        telemetry.due = true;
        poll(client); // node 0, the only connection, becomes the sticky node and carries the push
        assertEquals(1, telemetry.pushes);
        ConnmgrSelectorExchange.respond(selector, NODE0.idString(),
                selector.lastHeader(NODE0),
                new PushTelemetryResponse(new PushTelemetryResponseData()));
        connectLeader(client); // reads the push's answer; node 0, unused and needed by nothing, lingers out
        assertFalse(open(NODE0), "the sticky node lingered out");

        int before = dials.size();
        telemetry.due = true;
        poll(client);
        assertEquals(before, dials.size(), "the old sticky node is not dialled again: " + dials);
        assertEquals(1, client.inFlightRequestCount(NODE1.idString()), "the push went to the connected node");
        assertEquals(2, telemetry.pushes);
        assertEquals(0, dialsOverPolls(client));
    }

    @Test
    public void testOffTelemetryDialsItsStickyNodeAgainAsBefore() {
        NetworkClient client = client(-1);
        connect(client, NODE0);
        telemetry.due = true;
        poll(client);
        assertEquals(1, telemetry.pushes);
        ConnmgrSelectorExchange.respond(selector, NODE0.idString(),
                selector.lastHeader(NODE0),
                new PushTelemetryResponse(new PushTelemetryResponseData()));
        poll(client);
        connect(client, NODE1);
        client.close(NODE0.idString()); // a chosen close: no backoff, no state left

        int before = dials.size();
        telemetry.due = true;
        poll(client);
        assertEquals(before + 1, dials.size(), "4.3.1's sender dials the node it had stuck to: " + dials);
        assertEquals(NODE0.port(), dials.get(dials.size() - 1).getPort());
    }
}
