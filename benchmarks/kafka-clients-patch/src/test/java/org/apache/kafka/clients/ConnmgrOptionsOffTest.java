package org.apache.kafka.clients;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.KafkaAdminClient;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.requests.MetadataRequest;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.test.MockSelector;
import org.apache.kafka.test.TestUtils;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every option of the patch off: {@code connections.linger.ms} at -1 hands every component
 * {@link ConnectionNeedsPublisher#NONE}, so no component builds a snapshot nobody reads, and a client's life leaves
 * none of the patch's per-poll state behind. The switches-on run flips the defaults, so the network clients here are
 * given every option and the admin clients the linger explicitly, except where the default itself is checked.
 */
public class ConnmgrOptionsOffTest {

    /** The component names the patch's publishers use: Sender, KafkaAdminClient, AbstractFetch, the coordinators. */
    private static final List<String> COMPONENTS = List.of("producer", "admin", "fetch", "coordinator");
    private static final long RECONNECT_BACKOFF_MS = 10_000;
    private static final int REQUEST_TIMEOUT_MS = 30_000;
    private static final Node NODE0 = new Node(0, "localhost", 9090);
    private static final Node NODE1 = new Node(1, "localhost", 9091);

    private final MockTime time = new MockTime();
    private final MockSelector selector = new MockSelector(time);
    private Metadata metadata;

    @BeforeEach
    public void setup() {
        metadata = new Metadata(50, 50, 60_000, new LogContext(), new ClusterResourceListeners());
        metadata.bootstrap(Collections.singletonList(new InetSocketAddress("localhost", 9092)));
    }

    /** A client with every option of the patch off but the linger, which is {@code lingerMs}. */
    private NetworkClient client(int lingerMs) {
        return new NetworkClient(null, metadata, selector, "c1", Integer.MAX_VALUE, RECONNECT_BACKOFF_MS,
                RECONNECT_BACKOFF_MS, 64 * 1024, 64 * 1024, REQUEST_TIMEOUT_MS, 5_000, 5_000, time, false,
                new ApiVersions(), null, new LogContext(), new DefaultHostResolver(), null, Long.MAX_VALUE,
                MetadataRecoveryStrategy.NONE,
                ConnmgrOptions.allOff().withConnectionsLingerMs(lingerMs));
    }

    private static ConnectionNeedsFeed feed(NetworkClient client) {
        return TestUtils.fieldValue(client, NetworkClient.class, "needsFeed");
    }

    @Test
    public void testWithTheLingerOffEveryComponentGetsNoneAndNothingReachesTheClient() {
        NetworkClient client = client(-1);
        for (String component : COMPONENTS) {
            ConnectionNeedsPublisher publisher = client.needsPublisher(component);
            assertSame(ConnectionNeedsPublisher.NONE, publisher, component + ": no live publisher with the option off");
            publisher.publish(new ConnectionNeeds(Set.of(NODE0), Set.of()));
        }
        assertNull(feed(client).neededConnectionIds(), "nothing published reaches the client");
        client.close();

        // A constructor without the option (Kafka's own tests use these) gets the default.
        NetworkClient byDefault = new NetworkClient(selector, metadata, "c2", Integer.MAX_VALUE, RECONNECT_BACKOFF_MS,
                RECONNECT_BACKOFF_MS, 64 * 1024, 64 * 1024, REQUEST_TIMEOUT_MS, 5_000, 5_000, time, false,
                new ApiVersions(), new LogContext(), MetadataRecoveryStrategy.NONE);
        for (String component : COMPONENTS) {
            assertEquals(CommonClientConfigs.DEFAULT_CONNECTIONS_LINGER_MS < 0,
                    byDefault.needsPublisher(component) == ConnectionNeedsPublisher.NONE, component);
        }
        byDefault.close();
    }

    @Test
    public void testWithALingerOfZeroOrMoreEachComponentGetsALivePublisher() {
        for (int lingerMs : new int[] {0, 1_000}) {
            NetworkClient client = client(lingerMs);
            for (String component : COMPONENTS)
                assertNotSame(ConnectionNeedsPublisher.NONE, client.needsPublisher(component), component);
            client.needsPublisher("fetch").publish(new ConnectionNeeds(Set.of(NODE0), Set.of()));
            assertEquals(Set.of(NODE0.idString()), feed(client).neededConnectionIds(), "linger " + lingerMs);
            client.close();
        }
    }

    @Test
    public void testWithEveryOptionOffAClientsLifeLeavesNoStateOfThePatch() {
        NetworkClient client = client(-1);
        // Its components ask for their publishers and publish, as a producer's or a consumer's would.
        for (String component : COMPONENTS)
            client.needsPublisher(component).publish(new ConnectionNeeds(Set.of(NODE0, NODE1), Set.of()));

        // The bootstrap connection, the metadata answer that replaces the bootstrap cluster, two brokers dialled,
        // a request and its answer on one, the other reset by its peer, and callers asking about both.
        ConnmgrSelectorExchange.answerMetadataFromBootstrap(client, selector, time,
                RequestTestUtils.metadataUpdateWith(2, Collections.emptyMap()));
        assertEquals(2, metadata.fetch().nodes().size(), "the metadata answer replaced the bootstrap cluster");
        for (Node node : List.of(NODE0, NODE1))
            client.ready(node, time.milliseconds());
        ConnmgrSelectorExchange.poll(client, selector, time);
        assertTrue(client.isReady(NODE0, time.milliseconds()));
        assertTrue(client.isReady(NODE1, time.milliseconds()));
        RequestHeader header = ConnmgrSelectorExchange.send(client, selector, time, NODE0,
                new MetadataRequest.Builder(Collections.singletonList("t"), true));
        ConnmgrSelectorExchange.respond(selector, NODE0.idString(), header,
                RequestTestUtils.metadataUpdateWith(2, Collections.emptyMap()));
        ConnmgrSelectorExchange.poll(client, selector, time);
        selector.serverDisconnect(NODE1.idString());
        ConnmgrSelectorExchange.poll(client, selector, time);
        time.sleep(60_000);
        ConnmgrSelectorExchange.poll(client, selector, time);

        assertTrue(selector.isChannelReady("-1"), "the bootstrap connection is kept, as in 4.3.1");
        assertTrue(selector.isChannelReady(NODE0.idString()), "an idle connection is kept, as in 4.3.1");
        for (String field : List.of("bootstrapConnections", "retiringConnections",
                "chosenByInternalSendersSinceCloseStep")) {
            Collection<?> state = TestUtils.fieldValue(client, NetworkClient.class, field);
            assertTrue(state.isEmpty(), field + " stays empty");
        }
        NetworkClient.StepIdSet asked = TestUtils.fieldValue(client, NetworkClient.class, "askedSinceCloseStep");
        assertTrue(asked.isEmpty(), "askedSinceCloseStep stays empty");
        for (String field : List.of("addressMisses", "lingerStarts", "lostRoles")) {
            Map<?, ?> state = TestUtils.fieldValue(client, NetworkClient.class, field);
            assertTrue(state.isEmpty(), field + " stays empty");
        }
        assertNull(TestUtils.fieldValue(client, NetworkClient.class, "endpointCheckedNodes"), "no endpoint compared");
        assertNull(client.dnsRefresher(), "no resolver");
        assertNull(TestUtils.fieldValue(client, NetworkClient.class, "roleMetrics"), "no role metrics");
        assertEquals(Long.MAX_VALUE, (long) TestUtils.fieldValue(client, NetworkClient.class, "nextLingerDeadlineMs"),
                "no linger deadline bounds the poll");
        assertNull(feed(client).neededConnectionIds(), "no component registered or published");
        client.close();
    }

    /** A loopback port nothing listens on: every dial to it is refused. */
    private static int closedPort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return socket.getLocalPort();
        }
    }

    /** An admin client with its own network thread and a real NetworkClient, dialling a port that refuses. */
    private static Admin admin(int lingerMs) throws IOException {
        Map<String, Object> props = new HashMap<>();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, "127.0.0.1:" + closedPort());
        props.put(CommonClientConfigs.CONNECTIONS_LINGER_MS_CONFIG, lingerMs);
        props.put(CommonClientConfigs.CLIENT_DNS_REFRESH_MS_CONFIG, 0L);
        return Admin.create(props);
    }

    private static Object runnable(Admin admin) {
        return TestUtils.fieldValue(admin, KafkaAdminClient.class, "runnable");
    }

    @Test
    public void testAnAdminClientWithTheLingerOffNeverBuildsASnapshot() throws Exception {
        Admin admin = admin(-1);
        try {
            Object runnable = runnable(admin);
            // The network thread has run its loop (publishConnectionNeeds comes before each poll) until the call
            // timed out.
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> admin.describeCluster(new DescribeClusterOptions().timeoutMs(200)).nodes().get());
            assertInstanceOf(TimeoutException.class, e.getCause());
            assertNull(TestUtils.fieldValue(runnable, runnable.getClass(), "publishedNeeds"), "no snapshot built");
            assertSame(ConnectionNeedsPublisher.NONE, TestUtils.fieldValue(runnable, runnable.getClass(),
                    "needsPublisher"), "the admin client's publisher is NONE");
        } finally {
            admin.close(Duration.ZERO);
        }

        // With the option on, the same loop builds and publishes its first snapshot at once.
        Admin lingering = admin(1_000);
        try {
            Object runnable = runnable(lingering);
            TestUtils.waitForCondition(
                () -> TestUtils.fieldValue(runnable, runnable.getClass(), "publishedNeeds") != null,
                "the admin client's first loop publishes");
        } finally {
            lingering.close(Duration.ZERO);
        }
    }
}
