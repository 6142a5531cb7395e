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
import org.junit.jupiter.api.Timeout;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code client.dns.refresh.ms}: while the client holds a connection to a broker whose host is a name, the name is
 * resolved again every period on the client's resolver thread, through the resolver its dials use; a connection whose
 * address two successful answers in a row leave out is closed at once, its in-flight requests failing as
 * disconnected; a failed, timed-out or empty lookup closes nothing; a literal IP is never resolved; with the option at
 * 0 nothing is resolved after the dial and no thread exists.
 */
@Timeout(120)
public class ConnmgrDnsRefreshTest {

    private static final long REFRESH_MS = 1_000;
    private static final long RECONNECT_BACKOFF_MS = 50;
    private static final long WAIT_MS = 10_000;
    private static final String HOST = "broker1.example";
    private static final String LITERAL = "10.0.0.9";
    private static final Node NODE1 = new Node(1, HOST, 9092);
    private static final Node LITERAL_NODE = new Node(2, LITERAL, 9092);

    private static final InetAddress OLD = address(HOST, 10, 0, 0, 1);
    private static final InetAddress NEW = address(HOST, 10, 0, 0, 2);
    private static final InetAddress OTHER = address(HOST, 10, 0, 0, 3);

    private final MockTime time = new MockTime();
    /** Every address the client dialled, in order. */
    private final List<InetSocketAddress> dials = new ArrayList<>();
    private final MockSelector selector = new MockSelector(time, dials::add);
    private final ControlledResolver resolver = new ControlledResolver();
    private final List<NetworkClient> clients = new ArrayList<>();
    private Metadata metadata;
    private int clientNumber = 0;

    private static InetAddress address(String host, int a, int b, int c, int d) {
        try {
            return InetAddress.getByAddress(host, new byte[]{(byte) a, (byte) b, (byte) c, (byte) d});
        } catch (UnknownHostException e) {
            throw new AssertionError(e);
        }
    }

    /** What the resolver does for a host on its next calls. */
    private interface Behaviour {
        InetAddress[] resolve(String host) throws UnknownHostException;
    }

    /** A HostResolver the test controls; records the thread of every call. */
    private static final class ControlledResolver implements HostResolver {
        final Map<String, Behaviour> behaviours = new ConcurrentHashMap<>();
        final List<String> hosts = new CopyOnWriteArrayList<>();
        final List<Thread> threads = new CopyOnWriteArrayList<>();

        @Override
        public InetAddress[] resolve(String host) throws UnknownHostException {
            hosts.add(host);
            threads.add(Thread.currentThread());
            Behaviour behaviour = behaviours.get(host);
            if (behaviour == null)
                throw new UnknownHostException(host + ": no behaviour set");
            return behaviour.resolve(host);
        }

        void answer(String host, InetAddress... addresses) {
            behaviours.put(host, h -> addresses.clone());
        }

        void fail(String host) {
            behaviours.put(host, h -> {
                throw new UnknownHostException(h + ": NXDOMAIN");
            });
        }

        void answerEmpty(String host) {
            behaviours.put(host, h -> new InetAddress[0]);
        }

        int calls() {
            return hosts.size();
        }
    }

    @BeforeEach
    public void setup() {
        metadata = new Metadata(50, 50, 60_000, new LogContext(), new ClusterResourceListeners());
        updateMetadata();
        resolver.answer(HOST, OLD);
        resolver.answer(LITERAL, address(null, 10, 0, 0, 9));
    }

    /**
     * A Metadata response naming the nodes the tests dial (so that a metadata request goes to them as the tests do);
     * it also answers the update a disconnect requests, which would keep isReady() false until then.
     */
    private void updateMetadata() {
        metadata.updateWithCurrentRequestVersion(
                RequestTestUtils.metadataResponse(List.of(NODE1, LITERAL_NODE), "cluster", 1, List.of()), false,
                time.milliseconds());
    }

    @AfterEach
    public void teardown() {
        for (NetworkClient client : clients)
            client.close();
    }

    private String clientId() {
        return "connmgr-dns-" + System.identityHashCode(this) + "-" + clientNumber;
    }

    private NetworkClient client(long dnsRefreshMs) {
        clientNumber++;
        NetworkClient client = new NetworkClient(null, metadata, selector, clientId(), Integer.MAX_VALUE,
                RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MS, 64 * 1024, 64 * 1024, 30_000, 5_000, 5_000, time, false,
                new ApiVersions(), null, new LogContext(), resolver, null, Long.MAX_VALUE,
                MetadataRecoveryStrategy.NONE,
                ConnectionManagementOptions.DEFAULTS
                        .withBootstrapConnectionClose(false)
                        .withEndpointChangeRetire(false)
                        .withDnsRefreshMs(dnsRefreshMs));
        clients.add(client);
        return client;
    }

    /** Dials the node and completes the connection (no ApiVersions exchange: discoverBrokerVersions is off). */
    private void connect(NetworkClient client, Node node) {
        assertFalse(client.ready(node, time.milliseconds()));
        client.poll(0, time.milliseconds());
        assertTrue(client.isReady(node, time.milliseconds()), "connected to " + node);
        selector.clear();
    }

    private InetAddress lastDialledAddress() {
        return dials.get(dials.size() - 1).getAddress();
    }

    private List<ClientResponse> poll(NetworkClient client) {
        return ConnmgrSelectorExchange.poll(client, selector, time);
    }

    /**
     * One period passes: the poll hands the due name to the resolver thread, the test waits for its answer, and the
     * next poll reads it. Returns that poll's responses.
     */
    private List<ClientResponse> refresh(NetworkClient client) throws InterruptedException {
        DnsRefresher refresher = client.dnsRefresher();
        assertNotNull(refresher, "the option is on");
        int done = refresher.lookupsDone();
        time.sleep(REFRESH_MS);
        poll(client);
        TestUtils.waitForCondition(() -> refresher.lookupsDone() > done, WAIT_MS,
                "the resolver thread answers the lookup handed to it");
        return poll(client);
    }

    private boolean resolverThreadAlive(String clientId) {
        for (Thread thread : Thread.getAllStackTraces().keySet()) {
            if (thread.getName().equals(DnsRefresher.THREAD_NAME_PREFIX + clientId) && thread.isAlive())
                return true;
        }
        return false;
    }

    @Test
    public void testIdleConnectionWhoseAddressTwoAnswersInARowLeaveOutIsClosedAndTheNextDialUsesTheNewAddress()
            throws InterruptedException {
        NetworkClient client = client(REFRESH_MS);
        connect(client, NODE1);
        assertEquals(OLD, lastDialledAddress());

        resolver.answer(HOST, NEW);
        refresh(client);
        assertTrue(client.isReady(NODE1, time.milliseconds()), "one answer leaving the address out closes nothing");
        assertTrue(selector.isChannelReady(NODE1.idString()));

        List<ClientResponse> responses = refresh(client);
        assertTrue(responses.isEmpty(), "nothing was in flight");
        assertFalse(selector.isChannelReady(NODE1.idString()), "the second answer in a row closes the socket");
        assertFalse(client.isReady(NODE1, time.milliseconds()));
        assertTrue(client.connectionFailed(NODE1), "closed as a disconnect");
        assertTrue(metadata.updateRequested(), "the metadata updater is told, as after any disconnect");
        updateMetadata();

        time.sleep(2 * RECONNECT_BACKOFF_MS); // past the backoff and its jitter
        int dialled = dials.size();
        assertFalse(client.ready(NODE1, time.milliseconds()));
        assertEquals(dialled + 1, dials.size());
        assertEquals(NEW, lastDialledAddress(), "the next dial resolves the name again");
        poll(client);
        assertTrue(client.isReady(NODE1, time.milliseconds()));
        refresh(client);
        refresh(client);
        assertTrue(client.isReady(NODE1, time.milliseconds()), "the new connection's address is in the answers");
    }

    @Test
    public void testTheCloseIsCountedWithReasonStaleAddress() throws InterruptedException {
        try (Metrics metrics = new Metrics(new MetricConfig().tags(Map.of("client-id", "p1")), time)) {
            clientNumber++;
            NetworkClient client = new NetworkClient(null, metadata, selector, clientId(), Integer.MAX_VALUE,
                    RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MS, 64 * 1024, 64 * 1024, 30_000, 5_000, 5_000, time,
                    false, new ApiVersions(), null, new LogContext(), resolver, null, Long.MAX_VALUE,
                    MetadataRecoveryStrategy.NONE,
                    ConnectionManagementOptions.DEFAULTS
                            .withBootstrapConnectionClose(false)
                            .withRoleMetrics(new ConnectionRoleMetrics(metrics, "producer"))
                            .withEndpointChangeRetire(false)
                            .withDnsRefreshMs(REFRESH_MS));
            clients.add(client);
            connect(client, NODE1);
            resolver.answer(HOST, NEW);
            refresh(client);
            refresh(client);
            assertFalse(selector.isChannelReady(NODE1.idString()));
            Map<String, Double> reasons = new HashMap<>();
            metrics.metrics().forEach((name, metric) -> {
                if (name.group().equals("producer-connection-close-reason-metrics")
                        && name.name().equals("connection-close-total"))
                    reasons.put(name.tags().get("reason"), ((Number) metric.metricValue()).doubleValue());
            });
            assertEquals(Map.of("stale_address", 1.0), reasons, "one close, reason stale_address");
        }
    }

    @Test
    public void testOneAnswerIsNotEnoughAndAnAnswerWithTheAddressClearsTheMiss() throws InterruptedException {
        NetworkClient client = client(REFRESH_MS);
        connect(client, NODE1);

        resolver.answer(HOST, NEW);
        refresh(client);
        assertTrue(client.isReady(NODE1, time.milliseconds()), "one answer is not enough");
        resolver.answer(HOST, OTHER, OLD);
        refresh(client);
        assertTrue(client.isReady(NODE1, time.milliseconds()), "a round-robin answer holding the address");
        resolver.answer(HOST, NEW);
        refresh(client);
        assertTrue(client.isReady(NODE1, time.milliseconds()),
                "the answer holding the address cleared the first miss: two misses, but not in a row");
        refresh(client);
        assertFalse(client.isReady(NODE1, time.milliseconds()), "two in a row");
        assertFalse(selector.isChannelReady(NODE1.idString()));
    }

    @Test
    public void testBusyConnectionIsClosedAtOnceAndItsRequestFailsAsDisconnected() throws InterruptedException {
        NetworkClient client = client(REFRESH_MS);
        connect(client, NODE1);
        ClientRequest request = client.newClientRequest(NODE1.idString(),
                new MetadataRequest.Builder(Collections.singletonList("t"), true), time.milliseconds(), true);
        client.send(request, time.milliseconds());
        poll(client);
        assertEquals(1, client.inFlightRequestCount(NODE1.idString()));

        resolver.answer(HOST, NEW);
        refresh(client);
        assertTrue(selector.isChannelReady(NODE1.idString()));
        assertEquals(1, client.inFlightRequestCount(NODE1.idString()));

        List<ClientResponse> responses = refresh(client);
        assertFalse(selector.isChannelReady(NODE1.idString()), "closed at once, busy or not");
        assertEquals(0, client.inFlightRequestCount(NODE1.idString()));
        assertEquals(1, responses.size());
        assertTrue(responses.get(0).wasDisconnected(), "the request fails as disconnected, to be retried");
        assertEquals(request.correlationId(), responses.get(0).requestHeader().correlationId());
    }

    @Test
    public void testFailedLookupsCloseNothingAndNeitherCountNorReset() throws InterruptedException {
        NetworkClient client = client(REFRESH_MS);
        connect(client, NODE1);

        resolver.fail(HOST);
        for (int i = 1; i <= 3; i++) {
            refresh(client);
            assertTrue(client.isReady(NODE1, time.milliseconds()), "failed lookups close nothing, after " + i);
        }

        resolver.answer(HOST, NEW);
        refresh(client);
        resolver.fail(HOST);
        refresh(client);
        assertTrue(client.isReady(NODE1, time.milliseconds()), "a failed lookup after a miss is not a second miss");
        refresh(client);
        resolver.answer(HOST, NEW);
        refresh(client);
        assertFalse(client.isReady(NODE1, time.milliseconds()),
                "failed lookups between two misses do not reset the first");
    }

    @Test
    public void testEmptyAnswersCloseNothing() throws InterruptedException {
        NetworkClient client = client(REFRESH_MS);
        connect(client, NODE1);

        resolver.answerEmpty(HOST);
        for (int i = 1; i <= 3; i++) {
            refresh(client);
            assertTrue(client.isReady(NODE1, time.milliseconds()), "an answer with no address closes nothing, after " + i);
        }
        assertTrue(selector.isChannelReady(NODE1.idString()));
    }

    @Test
    public void testTimedOutLookupClosesNothingIsNotAskedAgainWhileRunningAndNeverBlocksThePoll()
            throws InterruptedException {
        NetworkClient client = client(REFRESH_MS);
        connect(client, NODE1);
        int callsAtDial = resolver.calls();

        CountDownLatch started = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        resolver.behaviours.put(HOST, h -> {
            started.countDown();
            try {
                // Bounded, so that a lookup wrongly run on the network thread ends and the test reports it.
                release.await(WAIT_MS, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            throw new UnknownHostException(h + ": timed out");
        });
        time.sleep(REFRESH_MS);
        poll(client);
        assertTrue(started.await(WAIT_MS, TimeUnit.MILLISECONDS), "the lookup started");
        assertNotEquals(Thread.currentThread(), resolver.threads.get(resolver.threads.size() - 1),
                "the hung lookup runs on the resolver thread, not the network thread");
        // The network thread goes on while the lookup hangs: polls return, the name is not asked again.
        for (int i = 0; i < 5; i++) {
            time.sleep(REFRESH_MS);
            poll(client);
        }
        assertEquals(callsAtDial + 1, resolver.calls(), "a name whose lookup is running is not asked again");
        assertTrue(client.isReady(NODE1, time.milliseconds()));

        DnsRefresher refresher = client.dnsRefresher();
        int done = refresher.lookupsDone();
        release.countDown();
        TestUtils.waitForCondition(() -> refresher.lookupsDone() > done, WAIT_MS, "the timed-out lookup answers");
        // Reading its answer hands the name over again at once (its period passed long ago); the lookup, released,
        // times out again at once.
        poll(client);
        TestUtils.waitForCondition(() -> refresher.lookupsDone() > done + 1, WAIT_MS, "the next lookup answers");
        poll(client);
        assertEquals(callsAtDial + 2, resolver.calls());
        assertTrue(client.isReady(NODE1, time.milliseconds()), "a timed-out lookup closes nothing");
        resolver.answer(HOST, NEW);
        refresh(client);
        assertTrue(client.isReady(NODE1, time.milliseconds()), "the timeout was not a miss");
    }

    @Test
    public void testLiteralIpIsNeverResolvedAgain() throws InterruptedException {
        NetworkClient client = client(REFRESH_MS);
        connect(client, LITERAL_NODE);
        int callsAtDial = resolver.calls();
        resolver.fail(LITERAL);
        for (int i = 0; i < 3; i++) {
            time.sleep(REFRESH_MS);
            poll(client);
        }
        // Give a wrongly started lookup time to run.
        Thread.sleep(50);
        assertEquals(callsAtDial, resolver.calls(), "a literal address is never looked up after the dial");
        assertNull(client.dnsRefresher().thread(), "no name held: the resolver thread never started");
        assertTrue(client.isReady(LITERAL_NODE, time.milliseconds()));
    }

    @Test
    public void testWithTheOptionAtZeroNoThreadExistsAndNothingIsResolvedAfterTheDial() throws InterruptedException {
        NetworkClient client = client(0);
        assertNull(client.dnsRefresher(), "no refresher with the option at 0");
        connect(client, NODE1);
        assertEquals(1, resolver.calls(), "the dial resolves the name");

        resolver.answer(HOST, NEW);
        for (int i = 0; i < 5; i++) {
            time.sleep(REFRESH_MS);
            poll(client);
        }
        Thread.sleep(50);
        assertEquals(1, resolver.calls(), "nothing is resolved after the dial");
        assertFalse(resolverThreadAlive(clientId()), "no resolver thread");
        assertTrue(client.isReady(NODE1, time.milliseconds()), "4.3.1 keeps the socket whatever the name resolves to");
    }

    @Test
    public void testLookupsRunOnTheClientsDaemonResolverThreadNeverTheNetworkThread() throws InterruptedException {
        NetworkClient client = client(REFRESH_MS);
        connect(client, NODE1);
        assertEquals(Thread.currentThread(), resolver.threads.get(0), "the dial resolves on the network thread");
        assertFalse(resolverThreadAlive(clientId()), "started at the first lookup, not before");

        refresh(client);
        refresh(client);
        List<Thread> refreshThreads = resolver.threads.subList(1, resolver.threads.size());
        assertEquals(2, refreshThreads.size());
        Thread resolverThread = client.dnsRefresher().thread();
        for (Thread thread : refreshThreads) {
            assertNotEquals(Thread.currentThread(), thread, "never the network (calling) thread");
            assertEquals(resolverThread, thread, "one resolver thread per client");
        }
        assertEquals(DnsRefresher.THREAD_NAME_PREFIX + clientId(), resolverThread.getName());
        assertTrue(resolverThread.isDaemon());
        assertTrue(resolverThreadAlive(clientId()));

        client.close();
        clients.remove(client);
        resolverThread.join(WAIT_MS);
        assertFalse(resolverThread.isAlive(), "closing the client stops its resolver thread");
    }

    @Test
    public void testEveryClientDefinesTheOptionAndConstructorsWithoutItUseItsDefault() {
        long dflt = CommonClientConfigs.DEFAULT_CLIENT_DNS_REFRESH_MS;
        ConnmgrClientConfigs.assertEveryClientDefines(CommonClientConfigs.CLIENT_DNS_REFRESH_MS_CONFIG, dflt, 30_000L,
                ClientUtils::dnsRefreshMs);
        ConnmgrClientConfigs.assertEveryClientRejects(CommonClientConfigs.CLIENT_DNS_REFRESH_MS_CONFIG, -1L);

        // 4.3.1's longest constructor, which every other 4.3.1 constructor calls, takes the default.
        clientNumber++;
        NetworkClient client = new NetworkClient(null, metadata, selector, clientId(), Integer.MAX_VALUE,
                RECONNECT_BACKOFF_MS, RECONNECT_BACKOFF_MS, 64 * 1024, 64 * 1024, 30_000, 5_000, 5_000, time, false,
                new ApiVersions(), null, new LogContext(), resolver, null, Long.MAX_VALUE,
                MetadataRecoveryStrategy.NONE);
        clients.add(client);
        assertEquals(dflt > 0, client.dnsRefresher() != null);
    }
}
