package org.apache.kafka.clients.consumer.internals;

import org.apache.kafka.clients.ApiVersions;
import org.apache.kafka.clients.ClientRequest;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.GroupRebalanceConfig;
import org.apache.kafka.clients.MockClient;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.internals.events.BackgroundEventHandler;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.FindCoordinatorRequest;
import org.apache.kafka.common.requests.FindCoordinatorResponse;
import org.apache.kafka.common.requests.HeartbeatRequest;
import org.apache.kafka.common.requests.MetadataResponse;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.Utils;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static org.apache.kafka.clients.consumer.internals.ConnmgrGroupCoordinators.TestCoordinator;
import static org.apache.kafka.clients.consumer.internals.ConnmgrGroupCoordinators.coordinatorConnection;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.Mockito.mock;

/**
 * {@code endpoint.change.retire.enable} in the consumers' coordinator classes: when the metadata moves the group
 * coordinator's broker to another host or port after the coordinator was looked up, the classic consumer's
 * {@link AbstractCoordinator} and the KIP-848 and share consumers' {@link CoordinatorRequestManager} mark it unknown,
 * the next FindCoordinator supplies the new endpoint, and the next coordinator request is addressed to it. Metadata
 * that does not move the broker keeps the coordinator; with the option off the coordinator stays at the old endpoint,
 * as in 4.3.1.
 */
public class ConnmgrCoordinatorEndpointChangeTest {

    private static final String GROUP_ID = "group";
    private static final long RETRY_BACKOFF_MS = 100;
    private static final int REQUEST_TIMEOUT_MS = 30_000;
    private static final int SESSION_TIMEOUT_MS = 10_000;
    private static final int HEARTBEAT_INTERVAL_MS = 3_000;

    private static final Node BROKER0 = new Node(0, "localhost", 9090);
    private static final Node BROKER1 = new Node(1, "localhost", 9091);
    /** Broker 0 after its listener moved to another port. */
    private static final Node BROKER0_MOVED_PORT = new Node(0, "localhost", 9190);
    /** Broker 0 after it moved to another host, same port. */
    private static final Node BROKER0_MOVED_HOST = new Node(0, "otherhost", 9090);

    private final MockTime time = new MockTime();
    private final LogContext logContext = new LogContext();
    private final ConsumerMetadata metadata = new ConsumerMetadata(RETRY_BACKOFF_MS, RETRY_BACKOFF_MS, 60 * 60 * 1000L,
            false, false, new SubscriptionState(logContext, AutoOffsetResetStrategy.EARLIEST), logContext,
            new ClusterResourceListeners());
    private final EndpointRecordingClient client = new EndpointRecordingClient(time, metadata);
    private ConsumerNetworkClient consumerClient;
    private TestCoordinator coordinator;

    /** A {@link MockClient} that records the endpoint of each node it is asked to be ready for, by connection id. */
    private static final class EndpointRecordingClient extends MockClient {
        final Map<String, List<String>> readyEndpoints = new HashMap<>();

        EndpointRecordingClient(Time time, ConsumerMetadata metadata) {
            super(time, metadata);
        }

        @Override
        public boolean ready(Node node, long now) {
            readyEndpoints.computeIfAbsent(node.idString(), id -> new ArrayList<>()).add(node.host() + ":" + node.port());
            return super.ready(node, now);
        }

        String lastEndpoint(Node node) {
            List<String> endpoints = readyEndpoints.get(node.idString());
            return endpoints == null ? null : endpoints.get(endpoints.size() - 1);
        }
    }

    @AfterEach
    public void close() {
        Utils.closeQuietly(coordinator, "coordinator");
        Utils.closeQuietly(consumerClient, "consumer client");
    }

    private void updateMetadata(Node... brokers) {
        MetadataResponse response = RequestTestUtils.metadataResponse(List.of(brokers), "cluster", 0, List.of());
        client.updateMetadata(response);
    }

    private static GroupRebalanceConfig rebalanceConfig(boolean endpointChangeRetireEnabled) {
        return new GroupRebalanceConfig(SESSION_TIMEOUT_MS, 60_000, HEARTBEAT_INTERVAL_MS, GROUP_ID, Optional.empty(),
                null, RETRY_BACKOFF_MS, RETRY_BACKOFF_MS, endpointChangeRetireEnabled);
    }

    /** A classic coordinator whose FindCoordinator was answered with {@code found}; metadata lists broker 0 and 1. */
    private TestCoordinator classicCoordinatorAt(Node found, boolean endpointChangeRetireEnabled) {
        updateMetadata(BROKER0, BROKER1);
        consumerClient = new ConsumerNetworkClient(logContext, client, metadata, time, RETRY_BACKOFF_MS,
                REQUEST_TIMEOUT_MS, HEARTBEAT_INTERVAL_MS);
        coordinator = new TestCoordinator(rebalanceConfig(endpointChangeRetireEnabled), consumerClient, time);
        expectFindCoordinator(found);
        assertTrue(coordinator.ensureCoordinatorReady(time.timer(0)), "coordinator found");
        assertEquals(coordinatorConnection(found), coordinator.currentCoordinator());
        return coordinator;
    }

    private void expectFindCoordinator(Node answer) {
        client.prepareResponse(body -> body instanceof FindCoordinatorRequest,
                FindCoordinatorResponse.prepareResponse(Errors.NONE, GROUP_ID, answer));
    }

    /** Sends a heartbeat to the coordinator and returns the endpoint the client was asked to be ready for. */
    private String heartbeatEndpoint(TestCoordinator coordinator) {
        Node node = coordinator.currentCoordinator();
        assertNotNull(node, "coordinator known");
        coordinator.sendHeartbeatRequest();
        consumerClient.poll(time.timer(0));
        ClientRequest last = null;
        for (ClientRequest request : client.requests())
            last = request;
        assertNotNull(last, "a request in flight");
        assertInstanceOf(HeartbeatRequest.Builder.class, last.requestBuilder(), "a heartbeat is in flight");
        return client.lastEndpoint(node);
    }

    @Test
    public void testClassicCoordinatorMovedToAnotherPortIsLookedUpAgainAndTheNextRequestGoesToTheNewEndpoint() {
        TestCoordinator coordinator = classicCoordinatorAt(BROKER0, true);
        assertEquals("localhost:9090", heartbeatEndpoint(coordinator));

        updateMetadata(BROKER0_MOVED_PORT, BROKER1);
        assertTrue(coordinator.coordinatorUnknown(), "metadata moved the coordinator's broker: coordinator unknown");
        consumerClient.poll(time.timer(0));
        assertFalse(client.hasInFlightRequests(), "the old coordinator connection was disconnected");

        expectFindCoordinator(BROKER0_MOVED_PORT);
        assertTrue(coordinator.ensureCoordinatorReady(time.timer(0)), "looked up again");
        assertFalse(client.hasPendingResponses(), "the FindCoordinator was sent and answered");
        assertEquals(coordinatorConnection(BROKER0_MOVED_PORT), coordinator.currentCoordinator());
        assertEquals("localhost:9190", heartbeatEndpoint(coordinator), "the next coordinator request dials the new port");
    }

    @Test
    public void testClassicCoordinatorMovedToAnotherHostIsLookedUpAgain() {
        TestCoordinator coordinator = classicCoordinatorAt(BROKER0, true);
        assertFalse(coordinator.coordinatorUnknown());

        updateMetadata(BROKER0_MOVED_HOST, BROKER1);
        assertTrue(coordinator.coordinatorUnknown(), "another host, same port, is a move");
        expectFindCoordinator(BROKER0_MOVED_HOST);
        assertTrue(coordinator.ensureCoordinatorReady(time.timer(0)));
        assertEquals("otherhost:9090", heartbeatEndpoint(coordinator));
    }

    @Test
    public void testClassicCoordinatorKeptWhenTheMetadataDoesNotMoveItsBroker() {
        TestCoordinator coordinator = classicCoordinatorAt(BROKER0, true);
        Node found = coordinator.currentCoordinator();
        assertEquals("localhost:9090", heartbeatEndpoint(coordinator));

        // A new node list (new order, another broker moved): the coordinator's broker is where it was.
        updateMetadata(BROKER1, BROKER0);
        assertSame(found, coordinator.currentCoordinator(), "unchanged broker: coordinator kept");
        updateMetadata(BROKER0, new Node(1, "localhost", 9191));
        assertSame(found, coordinator.currentCoordinator(), "another broker moved: coordinator kept");
        assertFalse(coordinator.coordinatorUnknown());
        assertEquals("localhost:9090", heartbeatEndpoint(coordinator));
        assertFalse(client.hasPendingResponses());
    }

    @Test
    public void testClassicCoordinatorWhoseBrokerLeftTheMetadataIsKept() {
        TestCoordinator coordinator = classicCoordinatorAt(BROKER0, true);
        Node found = coordinator.currentCoordinator();
        updateMetadata(BROKER1);
        assertSame(found, coordinator.currentCoordinator(), "a broker absent from the metadata is not a move");
    }

    @Test
    public void testClassicLookupNewerThanTheMetadataIsTrustedUntilTheMetadataMovesTheBroker() {
        // FindCoordinator already gives the new port while the metadata still lists the old one.
        TestCoordinator coordinator = classicCoordinatorAt(BROKER0_MOVED_PORT, true);
        Node found = coordinator.currentCoordinator();
        assertSame(found, coordinator.currentCoordinator(), "not looked up again while the metadata is older");
        updateMetadata(BROKER1, BROKER0);
        assertSame(found, coordinator.currentCoordinator(), "a new list with the same old endpoint: still kept");
        updateMetadata(BROKER0_MOVED_PORT, BROKER1);
        assertSame(found, coordinator.currentCoordinator(), "the metadata caught up with the lookup");
        assertEquals("localhost:9190", heartbeatEndpoint(coordinator));

        // A later move is seen.
        updateMetadata(BROKER0, BROKER1);
        assertTrue(coordinator.coordinatorUnknown(), "moved after the lookup");
    }

    @Test
    public void testClassicCoordinatorWithTheOptionOffStaysAtTheOldEndpoint() {
        TestCoordinator coordinator = classicCoordinatorAt(BROKER0, false);
        Node found = coordinator.currentCoordinator();
        assertEquals("localhost:9090", heartbeatEndpoint(coordinator));

        updateMetadata(BROKER0_MOVED_PORT, BROKER1);
        assertSame(found, coordinator.currentCoordinator(), "4.3.1 keeps the coordinator it found");
        assertEquals("localhost:9090", heartbeatEndpoint(coordinator), "4.3.1 dials the old endpoint again");
    }

    @Test
    public void testRebalanceConfigReadsTheOptionAndItsConstructorsWithoutItUseTheDefault() {
        assertEquals(CommonClientConfigs.DEFAULT_ENDPOINT_CHANGE_RETIRE_ENABLE,
                new GroupRebalanceConfig(SESSION_TIMEOUT_MS, 60_000, HEARTBEAT_INTERVAL_MS, GROUP_ID, Optional.empty(),
                        null, RETRY_BACKOFF_MS, RETRY_BACKOFF_MS).endpointChangeRetireEnabled);
        for (boolean value : new boolean[] {false, true}) {
            Map<String, Object> props = new HashMap<>();
            props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:9092");
            props.put(ConsumerConfig.GROUP_ID_CONFIG, GROUP_ID);
            props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
            props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
            props.put(CommonClientConfigs.ENDPOINT_CHANGE_RETIRE_ENABLE_CONFIG, value);
            GroupRebalanceConfig config = new GroupRebalanceConfig(new ConsumerConfig(props),
                    GroupRebalanceConfig.ProtocolType.CONSUMER);
            assertEquals(value, config.endpointChangeRetireEnabled);
        }
    }

    // The KIP-848 and share consumers' CoordinatorRequestManager.

    private CoordinatorRequestManager requestManagerAt(Node found, boolean endpointChangeRetireEnabled) {
        updateMetadata(BROKER0, BROKER1);
        CoordinatorRequestManager manager = new CoordinatorRequestManager(logContext, RETRY_BACKOFF_MS,
                RETRY_BACKOFF_MS, GROUP_ID, metadata, endpointChangeRetireEnabled);
        answerFindCoordinator(manager, found);
        assertEquals(Optional.of(coordinatorConnection(found)), manager.coordinator());
        return manager;
    }

    /** Polls the manager, expects one FindCoordinator and answers it with {@code answer}. */
    private void answerFindCoordinator(CoordinatorRequestManager manager, Node answer) {
        ConnmgrGroupCoordinators.answerFindCoordinator(manager, time, GROUP_ID, BROKER1, answer);
    }

    @Test
    public void testRequestManagerLooksUpACoordinatorMovedToAnotherPortAgain() {
        CoordinatorRequestManager manager = requestManagerAt(BROKER0, true);
        assertEquals(0, manager.poll(time.milliseconds()).unsentRequests.size(), "coordinator known");

        updateMetadata(BROKER0_MOVED_PORT, BROKER1);
        // The poll that sees the move marks the coordinator unknown; the FindCoordinator follows the retry backoff
        // since the last one, as after a disconnect.
        manager.poll(time.milliseconds());
        assertEquals(Optional.empty(), manager.coordinator(), "metadata moved the coordinator's broker: unknown");
        time.sleep(RETRY_BACKOFF_MS);
        answerFindCoordinator(manager, BROKER0_MOVED_PORT);
        Node next = manager.coordinator().orElseThrow();
        assertEquals(coordinatorConnection(BROKER0_MOVED_PORT), next);
        assertEquals("localhost:9190", next.host() + ":" + next.port(),
                "the next coordinator request is addressed to the new port");
        assertEquals(0, manager.poll(time.milliseconds()).unsentRequests.size(), "found: no further lookup");
    }

    @Test
    public void testRequestManagerKeepsTheCoordinatorWhenTheMetadataDoesNotMoveItsBroker() {
        CoordinatorRequestManager manager = requestManagerAt(BROKER0, true);
        Node found = manager.coordinator().orElseThrow();
        assertEquals(0, manager.poll(time.milliseconds()).unsentRequests.size());
        updateMetadata(BROKER1, BROKER0);
        assertEquals(0, manager.poll(time.milliseconds()).unsentRequests.size(), "unchanged broker: no lookup");
        updateMetadata(BROKER0, new Node(1, "localhost", 9191));
        assertEquals(0, manager.poll(time.milliseconds()).unsentRequests.size(), "another broker moved: no lookup");
        assertSame(found, manager.coordinator().orElseThrow());
    }

    @Test
    public void testRequestManagerWithTheOptionOffKeepsTheCoordinatorAtTheOldEndpoint() {
        CoordinatorRequestManager manager = requestManagerAt(BROKER0, false);
        Node found = manager.coordinator().orElseThrow();
        manager.poll(time.milliseconds());
        updateMetadata(BROKER0_MOVED_PORT, BROKER1);
        assertEquals(0, manager.poll(time.milliseconds()).unsentRequests.size(), "4.3.1 does not look it up again");
        assertSame(found, manager.coordinator().orElseThrow());
    }

    @Test
    public void testKip848ConsumersRequestManagersPassTheConsumersMetadataAndOption() {
        for (boolean enabled : new boolean[] {false, true}) {
            Map<String, Object> props = new HashMap<>();
            props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:9092");
            props.put(ConsumerConfig.GROUP_ID_CONFIG, GROUP_ID);
            props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
            props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
            props.put(CommonClientConfigs.ENDPOINT_CHANGE_RETIRE_ENABLE_CONFIG, enabled);
            ConsumerConfig config = new ConsumerConfig(props);
            SubscriptionState subscriptions = new SubscriptionState(logContext, AutoOffsetResetStrategy.EARLIEST);
            RequestManagers managers = RequestManagers.supplier(time, logContext, mock(BackgroundEventHandler.class),
                    metadata, subscriptions, mock(FetchBuffer.class), config,
                    new GroupRebalanceConfig(config, GroupRebalanceConfig.ProtocolType.CONSUMER), new ApiVersions(),
                    mock(FetchMetricsManager.class), () -> mock(NetworkClientDelegate.class), Optional.empty(),
                    new Metrics(time), mock(OffsetCommitCallbackInvoker.class), (memberEpoch, memberId) -> { },
                    Optional.empty(), new PositionsValidator(logContext, time, subscriptions, metadata)).get();
            CoordinatorRequestManager manager = managers.coordinatorRequestManager.orElseThrow();

            updateMetadata(BROKER0, BROKER1);
            answerFindCoordinator(manager, BROKER0);
            manager.poll(time.milliseconds());
            updateMetadata(BROKER0_MOVED_PORT, BROKER1);
            manager.poll(time.milliseconds());
            assertEquals(!enabled, manager.coordinator().isPresent(),
                    "option " + enabled + ": the consumer's coordinator manager compares with the consumer's metadata");
            time.sleep(RETRY_BACKOFF_MS);
        }
    }

    @Test
    public void testRequestManagerWithoutMetadataComparesNothing() {
        // The 4.3.1 constructor has no metadata to compare with, whatever the option's default.
        CoordinatorRequestManager manager = new CoordinatorRequestManager(logContext, RETRY_BACKOFF_MS,
                RETRY_BACKOFF_MS, GROUP_ID);
        updateMetadata(BROKER0, BROKER1);
        answerFindCoordinator(manager, BROKER0);
        manager.poll(time.milliseconds());
        updateMetadata(BROKER0_MOVED_PORT, BROKER1);
        assertEquals(0, manager.poll(time.milliseconds()).unsentRequests.size());
        assertEquals(Optional.of(coordinatorConnection(BROKER0)), manager.coordinator());
    }
}
