package org.apache.kafka.clients;

import org.apache.kafka.clients.admin.internals.AdminMetadataManager;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.protocol.Errors;
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
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code endpoint.change.retire.enable}: when the metadata updater's node list gives a node another host or port
 * than its open connection was dialled to, that connection takes no new request and closes once it carries none in
 * flight (a chosen close: no backoff, no metadata request); the next {@code ready()} dials the new endpoint. With the
 * option off the socket keeps serving the node id, as in 4.3.1.
 */
public class ConnmgrEndpointChangeRetireTest {

    private static final String TOPIC = "t";
    private static final TopicPartition TP0 = new TopicPartition(TOPIC, 0);
    private static final Uuid TOPIC_ID = Uuid.randomUuid();
    private static final long RECONNECT_BACKOFF_MS = 10_000;

    private static final Node NODE0 = new Node(0, "localhost", 9090);
    private static final Node NODE1 = new Node(1, "localhost", 9091);
    /** Node 1 after its listener moved to another port. */
    private static final Node NODE1_MOVED = new Node(1, "localhost", 9191);
    /** The classic and KIP-848 consumers' connection to broker 1 as group coordinator. */
    private static final Node COORDINATOR1 = new Node(Integer.MAX_VALUE - 1, "localhost", 9091);

    private final MockTime time = new MockTime();
    /** Every address the client dialled, in order. */
    private final List<InetSocketAddress> dials = new ArrayList<>();
    private final MockSelector selector = new MockSelector(time, dials::add);
    private Metadata metadata;

    @BeforeEach
    public void setup() {
        metadata = new Metadata(50, 50, 60_000, new LogContext(), new ClusterResourceListeners());
        updateMetadata(NODE0, NODE1);
    }

    private NetworkClient client(boolean retireChangedEndpoints) {
        return client(null, retireChangedEndpoints);
    }

    private NetworkClient client(MetadataUpdater updater, boolean retireChangedEndpoints) {
        return new NetworkClient(updater, updater == null ? metadata : null, selector, "mock", Integer.MAX_VALUE,
                RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MS, 64 * 1024, 64 * 1024, 30_000, 5_000, 5_000, time, false,
                new ApiVersions(), null, new LogContext(), new DefaultHostResolver(), null, Long.MAX_VALUE,
                MetadataRecoveryStrategy.NONE,
                ConnectionManagementOptions.DEFAULTS
                        .withBootstrapConnectionClose(false)
                        .withEndpointChangeRetire(retireChangedEndpoints));
    }

    /** A Metadata response naming these brokers, partition 0 of TOPIC led by broker 1 at leader epoch 1. */
    private void updateMetadata(Node... nodes) {
        MetadataResponse.PartitionMetadata partition = new MetadataResponse.PartitionMetadata(Errors.NONE, TP0,
                Optional.of(1), Optional.of(1), List.of(1), List.of(1), Collections.emptyList());
        MetadataResponse.TopicMetadata topic = new MetadataResponse.TopicMetadata(Errors.NONE, TOPIC, TOPIC_ID, false,
                List.of(partition), MetadataResponse.AUTHORIZED_OPERATIONS_OMITTED);
        metadata.updateWithCurrentRequestVersion(
                RequestTestUtils.metadataResponse(List.of(nodes), "cluster", 0, List.of(topic)), false,
                time.milliseconds());
    }

    /** Dials the node and completes the connection (no ApiVersions exchange: discoverBrokerVersions is off). */
    private void connect(NetworkClient client, Node node) {
        assertFalse(client.ready(node, time.milliseconds()));
        client.poll(0, time.milliseconds());
        assertTrue(client.isReady(node, time.milliseconds()), "connected to " + node);
        selector.clear();
    }

    private int lastDialledPort() {
        return dials.get(dials.size() - 1).getPort();
    }

    /** Sends a request to the node and returns its header; it stays in flight until answered. */
    private RequestHeader sendRequest(NetworkClient client, Node node) {
        return ConnmgrSelectorExchange.send(client, selector, time, node,
                new MetadataRequest.Builder(Collections.singletonList(TOPIC), true));
    }

    private void respond(Node node, RequestHeader header) {
        ConnmgrSelectorExchange.respond(selector, node.idString(), header,
                RequestTestUtils.metadataUpdateWith(2, Collections.emptyMap()));
    }

    private List<ClientResponse> poll(NetworkClient client) {
        return ConnmgrSelectorExchange.poll(client, selector, time);
    }

    /** The connection was closed by choice: no socket, no state left, so no failure and no reconnect backoff. */
    private void assertClosedByChoice(NetworkClient client, Node node) {
        assertFalse(selector.isChannelReady(node.idString()), node + ": the socket is closed");
        assertFalse(client.connectionFailed(node), node + ": a chosen close is not a failure");
        assertEquals(0, client.connectionDelay(node, time.milliseconds()), node + ": no reconnect backoff");
        assertFalse(metadata.updateRequested(), "no metadata update requested");
    }

    @Test
    public void testReadyConnectionMovedToAnotherPortClosesInThePollAfterTheUpdateAndTheNextReadyDialsTheNewPort() {
        NetworkClient client = client(true);
        connect(client, NODE0);
        connect(client, NODE1);
        assertEquals(9091, lastDialledPort());
        int dialled = dials.size();

        updateMetadata(NODE0, NODE1_MOVED);
        assertTrue(selector.isChannelReady(NODE1.idString()), "nothing happens before the poll");
        poll(client);

        assertClosedByChoice(client, NODE1_MOVED);
        assertTrue(client.isReady(NODE0, time.milliseconds()), "the node that did not move keeps its connection");
        assertEquals(dialled, dials.size(), "nothing dialled before a caller asks");

        assertFalse(client.ready(NODE1_MOVED, time.milliseconds()));
        assertEquals(dialled + 1, dials.size());
        assertEquals(9191, lastDialledPort(), "the new endpoint is dialled");
        client.poll(0, time.milliseconds());
        assertTrue(client.isReady(NODE1_MOVED, time.milliseconds()));
        poll(client);
        assertTrue(client.isReady(NODE1_MOVED, time.milliseconds()), "the new connection is not retired");
    }

    @Test
    public void testBusyConnectionKeepsItsSocketUntilItsResponseArrivesAndTakesNoNewRequest() {
        NetworkClient client = client(true);
        connect(client, NODE1);
        RequestHeader header = sendRequest(client, NODE1);
        assertEquals(1, client.inFlightRequestCount(NODE1.idString()));
        int dialled = dials.size();

        updateMetadata(NODE0, NODE1_MOVED);
        poll(client);
        assertTrue(selector.isChannelReady(NODE1.idString()), "kept while a request is in flight on it");
        assertEquals(1, client.inFlightRequestCount(NODE1.idString()));
        assertFalse(client.isReady(NODE1_MOVED, time.milliseconds()), "a retiring connection takes no new request");
        assertFalse(client.ready(NODE1_MOVED, time.milliseconds()));
        assertEquals(dialled, dials.size(), "no second connection to the id while the first drains");
        time.sleep(1_000);
        poll(client);
        assertTrue(selector.isChannelReady(NODE1.idString()));
        assertFalse(client.isReady(NODE1_MOVED, time.milliseconds()));

        respond(NODE1, header);
        List<ClientResponse> responses = poll(client);
        assertEquals(1, responses.size());
        assertFalse(responses.get(0).wasDisconnected(), "the caller gets its response, not a disconnect");
        assertClosedByChoice(client, NODE1_MOVED);

        assertFalse(client.ready(NODE1_MOVED, time.milliseconds()));
        assertEquals(9191, lastDialledPort());
    }

    @Test
    public void testUnchangedUpdateClosesNothing() {
        NetworkClient client = client(true);
        connect(client, NODE0);
        connect(client, NODE1);
        List<Node> before = metadata.fetch().nodes();
        int dialled = dials.size();

        updateMetadata(new Node(0, "localhost", 9090), new Node(1, "localhost", 9091));
        assertNotSame(before, metadata.fetch().nodes(), "a new list with the same endpoints");
        poll(client);
        time.sleep(1_000);
        poll(client);

        assertTrue(client.isReady(NODE0, time.milliseconds()));
        assertTrue(client.isReady(NODE1, time.milliseconds()));
        assertEquals(dialled, dials.size());
    }

    @Test
    public void testNodeAbsentFromTheNewMetadataIsNotClosed() {
        NetworkClient client = client(true);
        connect(client, NODE0);
        connect(client, NODE1);

        updateMetadata(NODE0);
        assertEquals(1, metadata.fetch().nodes().size());
        poll(client);

        assertTrue(client.isReady(NODE1, time.milliseconds()), "an absent id is not a move");
        assertTrue(client.isReady(NODE0, time.milliseconds()));
    }

    @Test
    public void testWithTheOptionOffTheMovedNodeKeepsItsSocket() {
        NetworkClient client = client(false);
        connect(client, NODE1);
        RequestHeader header = sendRequest(client, NODE1);
        int dialled = dials.size();

        updateMetadata(NODE0, NODE1_MOVED);
        poll(client);
        respond(NODE1, header);
        poll(client);
        time.sleep(1_000);
        poll(client);

        assertTrue(selector.isChannelReady(NODE1.idString()), "4.3.1 keeps the socket to the old endpoint");
        assertTrue(client.ready(NODE1_MOVED, time.milliseconds()), "and serves the moved id on it");
        assertEquals(dialled, dials.size());
    }

    @Test
    public void testConstructorsWithoutTheOptionUseItsDefault() {
        NetworkClient client = new NetworkClient(null, metadata, selector, "mock", Integer.MAX_VALUE,
                RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MS, 64 * 1024, 64 * 1024, 30_000, 5_000, 5_000, time, false,
                new ApiVersions(), null, new LogContext(), new DefaultHostResolver(), null, Long.MAX_VALUE,
                MetadataRecoveryStrategy.NONE);
        connect(client, NODE1);
        updateMetadata(NODE0, NODE1_MOVED);
        poll(client);
        assertEquals(!CommonClientConfigs.DEFAULT_ENDPOINT_CHANGE_RETIRE_ENABLE,
                selector.isChannelReady(NODE1.idString()));
    }

    @Test
    public void testLeaderNodeMergedFromAResponseAtANewPortRetiresTheConnection() {
        NetworkClient client = client(true);
        connect(client, NODE0);
        connect(client, NODE1);
        int version = metadata.updateVersion();

        // As Sender and the fetchers do with the leader nodes of a Produce or Fetch response (KIP-951).
        metadata.updatePartitionLeadership(
                Collections.singletonMap(TP0, new Metadata.LeaderIdAndEpoch(Optional.of(1), Optional.of(2))),
                List.of(NODE1_MOVED));
        assertEquals(version, metadata.updateVersion(), "the merge does not bump the update version");
        assertTrue(metadata.fetch().nodes().contains(NODE1_MOVED));
        poll(client);

        assertClosedByChoice(client, NODE1_MOVED);
        assertTrue(client.isReady(NODE0, time.milliseconds()));
        assertFalse(client.ready(NODE1_MOVED, time.milliseconds()));
        assertEquals(9191, lastDialledPort());
    }

    @Test
    public void testAdminMetadataManagerUpdateRetiresTheConnection() {
        AdminMetadataManager manager = new AdminMetadataManager(new LogContext(), 100, 60_000, false);
        manager.update(new Cluster("cluster", List.of(NODE0, NODE1), List.of(), Collections.emptySet(),
                Collections.emptySet()), time.milliseconds());
        NetworkClient client = client(manager.updater(), true);
        connect(client, NODE0);
        connect(client, NODE1);

        manager.update(new Cluster("cluster", List.of(NODE0, NODE1_MOVED), List.of(), Collections.emptySet(),
                Collections.emptySet()), time.milliseconds());
        poll(client);

        assertFalse(selector.isChannelReady(NODE1.idString()));
        assertFalse(client.connectionFailed(NODE1_MOVED));
        assertTrue(client.isReady(NODE0, time.milliseconds()));
        assertFalse(client.ready(NODE1_MOVED, time.milliseconds()));
        assertEquals(9191, lastDialledPort());
    }

    @Test
    public void testCoordinatorConnectionIsComparedWithItsBrokersEndpoint() {
        NetworkClient client = client(true);
        connect(client, NODE1);
        connect(client, COORDINATOR1);
        Node coordinator0 = new Node(Integer.MAX_VALUE, "localhost", 9090);
        connect(client, coordinator0);

        updateMetadata(NODE0, NODE1_MOVED);
        poll(client);

        assertFalse(selector.isChannelReady(COORDINATOR1.idString()), "broker 1 moved: its coordinator connection too");
        assertFalse(client.connectionFailed(COORDINATOR1));
        assertFalse(selector.isChannelReady(NODE1.idString()));
        assertTrue(client.isReady(coordinator0, time.milliseconds()), "broker 0 did not move");
    }

    @Test
    public void testFourFourCoordinatorConnectionIsComparedWithItsBrokersEndpoint() {
        NetworkClient client = client(true);
        Node plusCoordinator1 = ConnmgrPlusCoordinatorNode.of(NODE1);
        Node plusCoordinator0 = ConnmgrPlusCoordinatorNode.of(NODE0);
        connect(client, plusCoordinator1);
        connect(client, plusCoordinator0);

        updateMetadata(NODE0, NODE1_MOVED);
        poll(client);

        assertFalse(selector.isChannelReady("+1"), "broker 1 moved: its coordinator connection \"+1\" too");
        assertClosedByChoice(client, plusCoordinator1);
        assertTrue(client.isReady(plusCoordinator0, time.milliseconds()), "broker 0 did not move");
    }

    @Test
    public void testBootstrapConnectionIsNeverCompared() {
        Node bootstrap = new Node(-1, "localhost", 9092);
        ManualMetadataUpdater updater = new ManualMetadataUpdater(List.of(bootstrap));
        NetworkClient client = client(updater, true);
        connect(client, bootstrap);

        // The same negative id now names another address: a bootstrap entry is not a broker that moved.
        Node otherBootstrap = new Node(-1, "localhost", 9093);
        updater.setNodes(List.of(otherBootstrap));
        poll(client);

        assertTrue(client.isReady(otherBootstrap, time.milliseconds()));
        assertTrue(selector.isChannelReady(bootstrap.idString()));
    }

    @Test
    public void testConnectionMovedBackBeforeItClosedIsKept() {
        NetworkClient client = client(true);
        connect(client, NODE1);
        RequestHeader header = sendRequest(client, NODE1);

        updateMetadata(NODE0, NODE1_MOVED);
        poll(client);
        assertFalse(client.isReady(NODE1_MOVED, time.milliseconds()));

        updateMetadata(NODE0, NODE1);
        respond(NODE1, header);
        poll(client);

        assertTrue(client.isReady(NODE1, time.milliseconds()), "listed again at the endpoint it was dialled to");
    }

    @Test
    public void testEndpointChangedComparesHostAndPortOfLiveStates() {
        ClusterConnectionStates states = new ClusterConnectionStates(100, 1000, 5_000, 5_000, new LogContext(),
                new DefaultHostResolver());
        states.connecting("1", time.milliseconds(), "localhost", 9091);
        assertFalse(states.endpointChanged("1", "localhost", 9091));
        assertTrue(states.endpointChanged("1", "localhost", 9191), "a port-only change");
        assertTrue(states.endpointChanged("1", "other-host", 9091), "a host change");
        assertEquals("localhost:9091", states.endpoint("1"));
        states.ready("1");
        assertTrue(states.endpointChanged("1", "localhost", 9191));
        states.disconnected("1", time.milliseconds());
        assertFalse(states.endpointChanged("1", "localhost", 9191), "a disconnected state is not live");
        assertFalse(states.endpointChanged("2", "localhost", 9191), "no state");

        // A dial through the 4.3.1 signature records no port: only the host is compared.
        states.connecting("3", time.milliseconds(), "localhost");
        assertFalse(states.endpointChanged("3", "localhost", 9191));
        assertTrue(states.endpointChanged("3", "other-host", 9191));
    }

    @Test
    public void testEveryClientConfigDefinesTheOptionWithItsDefault() {
        ConnmgrClientConfigs.assertEveryClientDefines(CommonClientConfigs.ENDPOINT_CHANGE_RETIRE_ENABLE_CONFIG,
            CommonClientConfigs.DEFAULT_ENDPOINT_CHANGE_RETIRE_ENABLE, !CommonClientConfigs.DEFAULT_ENDPOINT_CHANGE_RETIRE_ENABLE,
            ClientUtils::endpointChangeRetireEnabled);
    }
}
