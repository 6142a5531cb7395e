package org.apache.kafka.clients;

import org.apache.kafka.common.Node;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.message.GetTelemetrySubscriptionsRequestData;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.GetTelemetrySubscriptionsRequest;
import org.apache.kafka.common.requests.MetadataRequest;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.telemetry.internals.ClientTelemetrySender;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.test.MockSelector;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.ArgumentMatchers.anyLong;
import static org.mockito.Mockito.doReturn;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

/**
 * {@code bootstrap.connection.close.enable}: while the bootstrap cluster is current, a bootstrap node whose connection is
 * established but cannot take a request yet counts as connecting for {@code leastLoadedNode}, so no caller dials a second
 * bootstrap server while the first connection is being set up; a failed first connection still lets the next pick dial
 * another one. With the option off, 4.3.1's second dial is unchanged.
 */
public class ConnmgrBootstrapSecondDialTest {

    private static final int REQUEST_TIMEOUT_MS = 30_000;
    private static final long RECONNECT_BACKOFF_MS = 10_000;

    private final MockTime time = new MockTime();
    /** Ports dialled, in order; a port in {@link #hanging} is dialled but never connects. */
    private final List<Integer> dials = new ArrayList<>();
    private final Set<Integer> hanging = ConcurrentHashMap.newKeySet();
    private final MockSelector selector = new MockSelector(time, address -> {
        dials.add(address.getPort());
        return !hanging.contains(address.getPort());
    });
    private Metadata metadata;
    private List<Node> bootstrapNodes;
    private NetworkClient telemetryClient;

    @BeforeEach
    public void setup() {
        metadata = new Metadata(50, 50, 60_000, new LogContext(), new ClusterResourceListeners());
        metadata.bootstrap(Arrays.asList(new InetSocketAddress("localhost", 9092),
                new InetSocketAddress("localhost", 9093), new InetSocketAddress("localhost", 9094)));
        bootstrapNodes = new ArrayList<>(metadata.fetch().nodes());
        assertEquals(3, bootstrapNodes.size());
    }

    private NetworkClient client(boolean closeBootstrapConnections, int maxInFlight, ClientTelemetrySender telemetry) {
        return client(selector, closeBootstrapConnections, maxInFlight, telemetry);
    }

    private NetworkClient client(MockSelector selector, boolean closeBootstrapConnections, int maxInFlight,
                                 ClientTelemetrySender telemetry) {
        return new NetworkClient(null, metadata, selector, "mock", maxInFlight,
                RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MS, 64 * 1024, 64 * 1024, REQUEST_TIMEOUT_MS,
                5_000, 5_000, time, false, new ApiVersions(), null, new LogContext(),
                new DefaultHostResolver(), telemetry, Long.MAX_VALUE, MetadataRecoveryStrategy.NONE,
                ConnectionManagementOptions.DEFAULTS.withBootstrapConnectionClose(closeBootstrapConnections));
    }

    private NetworkClient client(boolean closeBootstrapConnections) {
        return client(closeBootstrapConnections, Integer.MAX_VALUE, null);
    }

    private Node nodeAtPort(int port) {
        return bootstrapNodes.stream().filter(node -> node.port() == port).findFirst().orElseThrow(AssertionError::new);
    }

    /** The first poll: the metadata updater dials one bootstrap node (it connects at once unless hanging). */
    private Node firstDial(NetworkClient client) {
        client.poll(0, time.milliseconds());
        assertEquals(1, dials.size(), "the metadata updater dialled one bootstrap server");
        selector.clear();
        return nodeAtPort(dials.get(0));
    }

    /** Queues a request to {@code node} without polling: it is in flight and not yet written. */
    private void sendWithoutPolling(NetworkClient client, Node node) {
        client.send(client.newClientRequest(node.idString(),
                new MetadataRequest.Builder(Collections.singletonList("topic"), true), time.milliseconds(), true),
                time.milliseconds());
    }

    /** What a caller of leastLoadedNode (the telemetry sender, the transaction manager, a coordinator lookup) does. */
    private Node pickAndReady(NetworkClient client) {
        Node pick = client.leastLoadedNode(time.milliseconds()).node();
        if (pick != null)
            client.ready(pick, time.milliseconds());
        return pick;
    }

    /**
     * An idempotent producer's start, for {@code clients} new clients: the transaction manager picks a node for
     * InitProducerId before any connection exists, awaitReady polls once (the metadata updater dials its own pick) and
     * then calls ready() on the first pick. Returns, per client, the ports dialled (no connection completes).
     */
    private List<List<Integer>> producerStarts(boolean closeBootstrapConnections, int clients) {
        List<List<Integer>> starts = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            List<Integer> ports = new ArrayList<>();
            MockSelector own = new MockSelector(time, address -> {
                ports.add(address.getPort());
                return false;
            });
            NetworkClient client = client(own, closeBootstrapConnections, Integer.MAX_VALUE, null);
            Node pick = client.leastLoadedNode(time.milliseconds()).node();
            client.poll(0, time.milliseconds());
            client.ready(pick, time.milliseconds());
            assertTrue(ports.contains(pick.port()));
            starts.add(ports);
        }
        return starts;
    }

    @Test
    public void testAPickBeforeAnyConnectionAndTheMetadataUpdatersPickAreTheSameBootstrapServer() {
        for (List<Integer> ports : producerStarts(true, 20))
            assertEquals(1, ports.size(), "one bootstrap server dialled, the one both picked: " + ports);
    }

    @Test
    public void testEachClientDrawsItsOwnBootstrapScanOffset() {
        Set<Integer> first = new HashSet<>();
        for (List<Integer> ports : producerStarts(true, 30))
            first.add(ports.get(0));
        assertTrue(first.size() > 1, "clients spread over the bootstrap servers: " + first);
    }

    @Test
    public void testWithTheOptionOffTwoPicksBeforeAnyConnectionDialTwoServersAsIn431() {
        long twice = producerStarts(false, 20).stream().filter(ports -> ports.size() == 2).count();
        assertTrue(twice > 0, "4.3.1 draws a new offset per pick: some starts dial two bootstrap servers");
    }

    @Test
    public void testPickWhileTheFirstBootstrapConnectionIsConnectingDialsNothing() {
        hanging.addAll(Arrays.asList(9092, 9093, 9094));
        NetworkClient client = client(true);
        Node first = firstDial(client);

        assertEquals(first, pickAndReady(client));
        client.poll(0, time.milliseconds());
        assertEquals(1, dials.size());
    }

    @Test
    public void testPickWhileTheFirstBootstrapConnectionWritesItsFirstRequestDialsNothing() {
        NetworkClient client = client(true);
        Node first = firstDial(client);
        sendWithoutPolling(client, first);

        assertEquals(first, pickAndReady(client), "the busy bootstrap node counts as connecting");
        assertEquals(1, dials.size(), "no second bootstrap server dialled");

        client.poll(0, time.milliseconds()); // the request is written
        selector.clear();
        assertEquals(first, pickAndReady(client), "once written, the node takes the next request");
        assertEquals(1, dials.size());
    }

    @Test
    public void testPickWhileTheFirstBootstrapConnectionIsAtItsInFlightLimitDialsNothing() {
        NetworkClient client = client(true, 1, null);
        Node first = firstDial(client);
        sendWithoutPolling(client, first);
        client.poll(0, time.milliseconds()); // written, unanswered: the one request allowed in flight
        selector.clear();
        assertEquals(1, client.inFlightRequestCount(first.idString()));

        assertEquals(first, pickAndReady(client));
        client.poll(0, time.milliseconds());
        assertEquals(1, dials.size());
    }

    @Test
    public void testWithTheOptionOffThePickDialsASecondBootstrapServer() {
        NetworkClient client = client(false);
        Node first = firstDial(client);
        sendWithoutPolling(client, first);

        Node second = pickAndReady(client);
        assertNotNull(second);
        assertNotEquals(first, second, "4.3.1 skips the busy bootstrap node");
        assertEquals(2, dials.size(), "and its caller dials another bootstrap server");
    }

    @Test
    public void testTelemetrySenderDialsNoSecondBootstrapServer() {
        assertEquals(1, telemetryStartDials(true).size());
        assertEquals(2, telemetryClient.inFlightRequestCount(nodeAtPort(dials.get(0)).idString()),
                "the metadata and telemetry requests went to the first bootstrap node");
    }

    @Test
    public void testWithTheOptionOffTheTelemetrySenderDialsASecondBootstrapServer() {
        assertEquals(2, telemetryStartDials(false).size(), "4.3.1: two bootstrap connections at every start");
    }

    /**
     * A client with a telemetry sender that wants to send at once, polled through its start: the metadata updater dials
     * a bootstrap node, sends the metadata request on it once it is ready, and the telemetry sender picks in that same
     * poll. Returns the ports dialled.
     */
    private List<Integer> telemetryStartDials(boolean closeBootstrapConnections) {
        ClientTelemetrySender telemetry = mock(ClientTelemetrySender.class);
        when(telemetry.timeToNextUpdate(anyLong())).thenReturn(0L);
        AbstractRequest.Builder<?> request =
                new GetTelemetrySubscriptionsRequest.Builder(new GetTelemetrySubscriptionsRequestData(), true);
        doReturn(Optional.of(request)).when(telemetry).createRequest();
        NetworkClient client = client(closeBootstrapConnections, Integer.MAX_VALUE, telemetry);

        firstDial(client);
        client.poll(0, time.milliseconds()); // the metadata request, and the telemetry sender's pick
        selector.clear();
        client.poll(0, time.milliseconds());
        selector.clear();
        telemetryClient = client;
        return dials;
    }

    @Test
    public void testFailedFirstBootstrapConnectionLetsTheNextPickDialAnother() {
        hanging.addAll(Arrays.asList(9092, 9093, 9094));
        NetworkClient client = client(true);
        Node first = firstDial(client);

        selector.serverDisconnect(first.idString());
        client.poll(0, time.milliseconds());
        selector.clear();
        assertTrue(client.connectionFailed(first));

        Node second = pickAndReady(client);
        assertNotNull(second);
        assertNotEquals(first, second);
        assertEquals(2, dials.size(), "failover: another bootstrap server is dialled");
    }

    @Test
    public void testLostFirstBootstrapConnectionLetsTheNextPickDialAnother() {
        NetworkClient client = client(true);
        Node first = firstDial(client);
        sendWithoutPolling(client, first);
        client.poll(0, time.milliseconds());
        selector.clear();

        selector.serverDisconnect(first.idString());
        client.poll(0, time.milliseconds());
        selector.clear();

        Node second = pickAndReady(client);
        assertNotNull(second);
        assertNotEquals(first, second);
        assertEquals(2, dials.size());
    }

    @Test
    public void testBusyBrokerConnectionStillLetsThePickDialAnotherBroker() {
        NetworkClient client = client(true);
        Node first = firstDial(client);
        client.poll(0, time.milliseconds()); // the metadata request
        RequestHeader header = ConnmgrSelectorExchange.lastSentHeader(selector);
        selector.clear();
        ConnmgrSelectorExchange.respond(selector, first.idString(), header,
                RequestTestUtils.metadataUpdateWith(2, Collections.emptyMap()));
        ConnmgrSelectorExchange.poll(client, selector, time);
        assertEquals(2, metadata.fetch().nodes().size(), "the metadata response replaced the bootstrap cluster");
        dials.clear();

        Node broker = pickAndReady(client);
        client.poll(0, time.milliseconds());
        selector.clear();
        assertTrue(client.isReady(broker, time.milliseconds()));
        sendWithoutPolling(client, broker);

        Node other = pickAndReady(client);
        assertNotNull(other);
        assertNotEquals(broker, other, "the rule is for bootstrap nodes only: 4.3.1's choice among brokers");
        assertEquals(2, dials.size());
    }
}
