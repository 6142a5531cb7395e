package org.apache.kafka.clients;

import org.apache.kafka.common.Node;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.MetadataRequest;
import org.apache.kafka.common.requests.MetadataResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.test.MockSelector;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code bootstrap.connection.close.enable}: once a metadata response has replaced the bootstrap cluster, the
 * connection to the bootstrap node (negative id) closes as soon as it carries no request and no caller asked about it
 * since the last poll, in the same poll; with the option off it stays open as in 4.3.1.
 */
public class ConnmgrBootstrapConnectionCloseTest {

    private static final String BOOTSTRAP_ID = "-1";
    private static final int REQUEST_TIMEOUT_MS = 30_000;
    private static final long RECONNECT_BACKOFF_MS = 10_000;

    private final MockTime time = new MockTime();
    private final MockSelector selector = new MockSelector(time);
    private Metadata metadata;
    private Node bootstrapNode;

    @BeforeEach
    public void setup() {
        metadata = new Metadata(50, 50, 60_000, new LogContext(), new ClusterResourceListeners());
        metadata.bootstrap(Collections.singletonList(new InetSocketAddress("localhost", 9092)));
        bootstrapNode = metadata.fetch().nodes().get(0);
        assertEquals(BOOTSTRAP_ID, bootstrapNode.idString());
    }

    private NetworkClient client(boolean closeBootstrapConnections) {
        return new NetworkClient(null, metadata, selector, "mock", Integer.MAX_VALUE,
                RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MS, 64 * 1024, 64 * 1024, REQUEST_TIMEOUT_MS,
                5_000, 5_000, time, false, new ApiVersions(), null, new LogContext(),
                new DefaultHostResolver(), null, Long.MAX_VALUE, MetadataRecoveryStrategy.NONE,
                ConnectionManagementOptions.DEFAULTS.withBootstrapConnectionClose(closeBootstrapConnections));
    }

    /** Connects to the bootstrap node and leaves the client's own metadata request in flight on it. */
    private RequestHeader connectAndSendMetadataRequest(NetworkClient client) {
        client.poll(0, time.milliseconds());         // dials the bootstrap node, which connects at once
        assertTrue(bootstrapOpen(client));
        selector.clear();
        client.poll(0, time.milliseconds());         // sends the metadata request
        assertEquals(1, client.inFlightRequestCount(BOOTSTRAP_ID));
        return lastSentHeader();
    }

    private RequestHeader lastSentHeader() {
        return ConnmgrSelectorExchange.lastSentHeader(selector);
    }

    private void respond(String nodeId, RequestHeader header, AbstractResponse response) {
        ConnmgrSelectorExchange.respond(selector, nodeId, header, response);
    }

    /** One poll that handles the queued responses. */
    private List<ClientResponse> pollResponses(NetworkClient client) {
        return ConnmgrSelectorExchange.poll(client, selector, time);
    }

    private static MetadataResponse twoBrokers() {
        return RequestTestUtils.metadataUpdateWith(2, Collections.emptyMap());
    }

    /** The socket is open and the client holds the connection as established (connectionDelay is "forever"). */
    private boolean bootstrapOpen(NetworkClient client) {
        return selector.isChannelReady(BOOTSTRAP_ID)
                && client.connectionDelay(bootstrapNode, time.milliseconds()) == Long.MAX_VALUE;
    }

    @Test
    public void testIdleBootstrapConnectionClosesInThePollThatHandlesTheFirstMetadataResponse() {
        NetworkClient client = client(true);
        RequestHeader header = connectAndSendMetadataRequest(client);
        respond(BOOTSTRAP_ID, header, twoBrokers());

        pollResponses(client);

        assertEquals(2, metadata.fetch().nodes().size(), "the metadata response replaced the bootstrap cluster");
        assertFalse(selector.isChannelReady(BOOTSTRAP_ID), "the bootstrap socket is closed");
        assertFalse(bootstrapOpen(client));
        assertFalse(client.connectionFailed(bootstrapNode), "a chosen close is not a failure");
        assertEquals(0, client.connectionDelay(bootstrapNode, time.milliseconds()), "no reconnect backoff");
        assertFalse(metadata.updateRequested(), "no metadata update requested");
        assertEquals(0, client.inFlightRequestCount());
    }

    @Test
    public void testBootstrapConnectionStaysOpenWithTheOptionOff() {
        NetworkClient client = client(false);
        RequestHeader header = connectAndSendMetadataRequest(client);
        respond(BOOTSTRAP_ID, header, twoBrokers());

        pollResponses(client);
        time.sleep(1_000);
        client.poll(0, time.milliseconds());

        assertEquals(2, metadata.fetch().nodes().size());
        assertTrue(bootstrapOpen(client), "4.3.1 keeps the bootstrap connection until idle expiry");
    }

    @Test
    public void testConstructorsWithoutTheOptionUseItsDefault() {
        NetworkClient client = new NetworkClient(selector, metadata, "mock", Integer.MAX_VALUE,
                RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MS, 64 * 1024, 64 * 1024, REQUEST_TIMEOUT_MS,
                5_000, 5_000, time, false, new ApiVersions(), new LogContext(), MetadataRecoveryStrategy.NONE);
        RequestHeader header = connectAndSendMetadataRequest(client);
        respond(BOOTSTRAP_ID, header, twoBrokers());

        pollResponses(client);

        assertEquals(!CommonClientConfigs.DEFAULT_BOOTSTRAP_CONNECTION_CLOSE_ENABLE, bootstrapOpen(client));
    }

    @Test
    public void testBusyBootstrapConnectionClosesWhenItsLastResponseArrives() {
        NetworkClient client = client(true);
        RequestHeader metadataHeader = connectAndSendMetadataRequest(client);
        // A caller's request on the same connection (as a FindCoordinator sent to the least loaded node would be).
        ClientRequest request = client.newClientRequest(BOOTSTRAP_ID,
                new MetadataRequest.Builder(Collections.singletonList("topic"), true), time.milliseconds(), true);
        client.send(request, time.milliseconds());
        client.poll(0, time.milliseconds());
        RequestHeader callerHeader = lastSentHeader();
        assertEquals(2, client.inFlightRequestCount(BOOTSTRAP_ID));

        respond(BOOTSTRAP_ID, metadataHeader, twoBrokers());
        pollResponses(client);
        assertEquals(2, metadata.fetch().nodes().size());
        assertTrue(bootstrapOpen(client), "kept while a request is in flight on it");
        assertEquals(1, client.inFlightRequestCount(BOOTSTRAP_ID));

        respond(BOOTSTRAP_ID, callerHeader, twoBrokers());
        List<ClientResponse> responses = pollResponses(client);
        assertEquals(1, responses.size());
        assertFalse(responses.get(0).wasDisconnected(), "the caller gets its response, not a disconnect");
        assertFalse(selector.isChannelReady(BOOTSTRAP_ID), "closed in the poll that completed its last request");
        assertFalse(client.connectionFailed(bootstrapNode));
    }

    @Test
    public void testBootstrapNodeDialledAfterTheClusterWasReplacedIsLeftToTheCaller() {
        NetworkClient client = client(true);
        RequestHeader header = connectAndSendMetadataRequest(client);
        respond(BOOTSTRAP_ID, header, twoBrokers());
        pollResponses(client);
        assertFalse(selector.isChannelReady(BOOTSTRAP_ID));

        // A request built for the bootstrap node before the cluster was replaced dials it again: the rule must not
        // close that connection before the caller can send on it (it would redial forever).
        client.ready(bootstrapNode, time.milliseconds());
        client.poll(0, time.milliseconds());
        client.poll(0, time.milliseconds());
        assertTrue(bootstrapOpen(client));
    }

    @Test
    public void testBootstrapConnectionAfterRebootstrapClosesOnTheNextMetadataResponse() {
        NetworkClient client = client(true);
        RequestHeader header = connectAndSendMetadataRequest(client);
        respond(BOOTSTRAP_ID, header, twoBrokers());
        pollResponses(client);

        metadata.rebootstrap();
        time.sleep(100); // past the metadata refresh backoff
        assertEquals(BOOTSTRAP_ID, metadata.fetch().nodes().get(0).idString());
        header = connectAndSendMetadataRequest(client);
        assertTrue(bootstrapOpen(client), "a bootstrap node of the current cluster is kept");
        respond(BOOTSTRAP_ID, header, twoBrokers());
        pollResponses(client);
        assertFalse(selector.isChannelReady(BOOTSTRAP_ID));
    }

    /**
     * Two bootstrap servers: the metadata updater dials one and sends the metadata request on it; a caller (as the
     * producer's transaction manager for InitProducerId) dials the other with ready() and asks isReady() about it before
     * each poll, as NetworkClientUtils.awaitReady does. Returns {metadata updater's node, caller's node}.
     */
    private Node[] twoBootstrapConnectionsWithACallerWaitingOnTheSecond(NetworkClient client) {
        metadata.bootstrap(Arrays.asList(new InetSocketAddress("localhost", 9092), new InetSocketAddress("localhost", 9093)));
        List<Node> nodes = metadata.fetch().nodes();
        assertEquals(2, nodes.size());
        client.poll(0, time.milliseconds());         // the metadata updater dials one bootstrap node
        Node updaterNode = selector.isChannelReady(nodes.get(0).idString()) ? nodes.get(0) : nodes.get(1);
        Node callerNode = updaterNode == nodes.get(0) ? nodes.get(1) : nodes.get(0);
        assertFalse(selector.isChannelReady(callerNode.idString()));
        selector.clear();
        assertFalse(client.ready(callerNode, time.milliseconds()), "the caller dials the other bootstrap node");
        client.poll(0, time.milliseconds());         // sends the metadata request; the caller's connection completes
        assertEquals(1, client.inFlightRequestCount(updaterNode.idString()));
        assertEquals(0, client.inFlightRequestCount(callerNode.idString()));
        return new Node[] {updaterNode, callerNode};
    }

    @Test
    public void testBootstrapConnectionACallerWaitsForIsKeptAndItsRequestCompletesThenItCloses() {
        NetworkClient client = client(true);
        Node[] nodes = twoBootstrapConnectionsWithACallerWaitingOnTheSecond(client);
        Node updaterNode = nodes[0];
        Node callerNode = nodes[1];
        RequestHeader metadataHeader = lastSentHeader();
        selector.clear();

        respond(updaterNode.idString(), metadataHeader, twoBrokers());
        client.isReady(callerNode, time.milliseconds()); // awaitReady asks before its poll
        pollResponses(client);

        assertEquals(2, metadata.fetch().nodes().size(), "the metadata response replaced the bootstrap cluster");
        assertFalse(selector.isChannelReady(updaterNode.idString()), "the idle bootstrap connection closed, as before");
        assertTrue(selector.isChannelReady(callerNode.idString()), "the connection a caller waits for is kept");
        assertTrue(client.isReady(callerNode, time.milliseconds()), "and the caller can send on it");

        RequestHeader callerHeader = ConnmgrSelectorExchange.send(client, selector, time, callerNode,
                new MetadataRequest.Builder(Collections.singletonList("topic"), true));
        assertEquals(1, client.inFlightRequestCount(callerNode.idString()));
        respond(callerNode.idString(), callerHeader, twoBrokers());
        List<ClientResponse> responses = pollResponses(client);

        assertEquals(1, responses.size());
        assertFalse(responses.get(0).wasDisconnected(), "the caller's request completes");
        assertFalse(selector.isChannelReady(callerNode.idString()), "closed in the poll that completed its request");
        assertFalse(client.connectionFailed(callerNode), "a chosen close is not a failure");
        assertEquals(0, client.connectionDelay(callerNode, time.milliseconds()), "no reconnect backoff");
    }

    @Test
    public void testBootstrapConnectionNoCallerAskedAboutSinceTheLastPollCloses() {
        NetworkClient client = client(true);
        Node[] nodes = twoBootstrapConnectionsWithACallerWaitingOnTheSecond(client);
        Node updaterNode = nodes[0];
        Node callerNode = nodes[1];
        RequestHeader metadataHeader = lastSentHeader();
        selector.clear();
        respond(updaterNode.idString(), metadataHeader, twoBrokers());
        client.isReady(callerNode, time.milliseconds());
        pollResponses(client);
        assertEquals(2, metadata.fetch().nodes().size());
        assertTrue(selector.isChannelReady(callerNode.idString()), "asked about before this poll: kept");

        // The caller no longer waits for it (it gave up, or sent elsewhere): the next poll closes it.
        pollResponses(client);

        assertFalse(selector.isChannelReady(callerNode.idString()), "nobody asked since the last poll: closed");
        assertFalse(client.connectionFailed(callerNode));
        assertEquals(0, client.connectionDelay(callerNode, time.milliseconds()), "no reconnect backoff");
    }

    @Test
    public void testEveryClientConfigDefinesTheOptionWithItsDefault() {
        ConnmgrClientConfigs.assertEveryClientDefines(CommonClientConfigs.BOOTSTRAP_CONNECTION_CLOSE_ENABLE_CONFIG,
            CommonClientConfigs.DEFAULT_BOOTSTRAP_CONNECTION_CLOSE_ENABLE, !CommonClientConfigs.DEFAULT_BOOTSTRAP_CONNECTION_CLOSE_ENABLE,
            ClientUtils::bootstrapConnectionCloseEnabled);
    }
}
