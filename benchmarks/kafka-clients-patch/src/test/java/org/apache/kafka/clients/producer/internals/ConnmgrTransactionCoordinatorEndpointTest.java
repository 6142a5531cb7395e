package org.apache.kafka.clients.producer.internals;

import org.apache.kafka.clients.ApiVersions;
import org.apache.kafka.clients.ClientRequest;
import org.apache.kafka.clients.MockClient;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.message.AddOffsetsToTxnResponseData;
import org.apache.kafka.common.message.InitProducerIdResponseData;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.AddOffsetsToTxnRequest;
import org.apache.kafka.common.requests.AddOffsetsToTxnResponse;
import org.apache.kafka.common.requests.FindCoordinatorRequest;
import org.apache.kafka.common.requests.FindCoordinatorRequest.CoordinatorType;
import org.apache.kafka.common.requests.FindCoordinatorResponse;
import org.apache.kafka.common.requests.InitProducerIdRequest;
import org.apache.kafka.common.requests.InitProducerIdResponse;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.requests.TxnOffsetCommitRequest;
import org.apache.kafka.common.requests.TxnOffsetCommitResponse;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.common.utils.Time;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;

/**
 * {@code endpoint.change.retire.enable} in the producer's {@link TransactionManager}: when the metadata moves the
 * broker of the transaction coordinator or of the consumer group coordinator to another host or port after it was
 * looked up, the next transactional request to that coordinator is preceded by a FindCoordinator and goes to the new
 * endpoint. Metadata that does not move the broker keeps both coordinators; with the option off they stay at the old
 * endpoint, as in 4.3.1. Driven through {@link Sender}, as Kafka's {@code TransactionManagerTest} drives it.
 */
public class ConnmgrTransactionCoordinatorEndpointTest {

    private static final String TRANSACTIONAL_ID = "txn";
    private static final String GROUP_ID = "group";
    private static final TopicPartition TP = new TopicPartition("t", 0);
    private static final long PRODUCER_ID = 7;

    private static final Node BROKER0 = new Node(0, "localhost", 9090);
    private static final Node BROKER1 = new Node(1, "localhost", 9091);
    /** Broker 0 after its listener moved to another port. */
    private static final Node BROKER0_MOVED = new Node(0, "localhost", 9190);

    private final MockTime time = new MockTime();
    private final LogContext logContext = new LogContext();
    private final ProducerMetadata metadata = new ProducerMetadata(0, 0, Long.MAX_VALUE, Long.MAX_VALUE, logContext,
            new ClusterResourceListeners(), time);
    private final EndpointRecordingClient client = new EndpointRecordingClient(time, metadata);
    private TransactionManager transactionManager;
    private Sender sender;

    /**
     * A {@link MockClient} that records, for each request sent, its kind and the endpoint of the node it was last
     * asked about ({@code isReady} or {@code ready}) under the request's destination id.
     */
    private static final class EndpointRecordingClient extends MockClient {
        private final Map<String, String> readyEndpoint = new HashMap<>();
        final List<String> sent = new ArrayList<>();

        EndpointRecordingClient(Time time, ProducerMetadata metadata) {
            super(time, metadata);
        }

        @Override
        public boolean ready(Node node, long now) {
            readyEndpoint.put(node.idString(), node.host() + ":" + node.port());
            return super.ready(node, now);
        }

        @Override
        public boolean isReady(Node node, long now) {
            // Sender's awaitNodeReady asks isReady first, and ready only if that is false.
            readyEndpoint.put(node.idString(), node.host() + ":" + node.port());
            return super.isReady(node, now);
        }

        @Override
        public void send(ClientRequest request, long now) {
            // A FindCoordinator goes to the least loaded node, whichever it is: only its kind is recorded.
            sent.add(request.apiKey() == ApiKeys.FIND_COORDINATOR ? request.apiKey().name()
                    : request.apiKey() + " " + readyEndpoint.get(request.destination()));
            super.send(request, now);
        }
    }

    private void updateMetadata(Node... brokers) {
        client.updateMetadata(RequestTestUtils.metadataResponse(List.of(brokers), "cluster", 0, List.of()));
    }

    /** A transactional producer whose transaction and group coordinators are broker 0 at its first endpoint. */
    private void setUp(boolean endpointChangeRetireEnabled) {
        updateMetadata(BROKER0, BROKER1);
        transactionManager = new TransactionManager(logContext, TRANSACTIONAL_ID, 60_000, 100, new ApiVersions(),
                false, endpointChangeRetireEnabled);
        Metrics metrics = new Metrics(time);
        RecordAccumulator accumulator = new RecordAccumulator(logContext, 16 * 1024, Compression.NONE, 0, 0L, 0L,
                3_000, metrics, "producer-metrics", time, transactionManager,
                new BufferPool(1024 * 1024, 16 * 1024, metrics, time, "producer-metrics"));
        sender = new Sender(logContext, client, metadata, accumulator, true, 1024 * 1024, (short) -1,
                Integer.MAX_VALUE, new SenderMetricsRegistry(metrics), time, 30_000, 50, transactionManager);

        TransactionalRequestResult init = transactionManager.initializeTransactions(false);
        expectFindCoordinator(CoordinatorType.TRANSACTION, TRANSACTIONAL_ID, BROKER0);
        client.prepareResponse(body -> body instanceof InitProducerIdRequest, new InitProducerIdResponse(
                new InitProducerIdResponseData().setProducerId(PRODUCER_ID).setProducerEpoch((short) 0)));
        ProducerTestUtils.runUntil(sender, init::isCompleted);
        init.await(Long.MAX_VALUE, TimeUnit.MILLISECONDS, "initTransactions");
        transactionManager.beginTransaction();

        sendOffsets(null, BROKER0);
        assertEquals(List.of(
                "FIND_COORDINATOR",
                "INIT_PRODUCER_ID localhost:9090",
                "ADD_OFFSETS_TO_TXN localhost:9090",
                "FIND_COORDINATOR",
                "TXN_OFFSET_COMMIT localhost:9090"), client.sent);
        client.sent.clear();
    }

    private void expectFindCoordinator(CoordinatorType type, String key, Node answer) {
        client.prepareResponse(body -> body instanceof FindCoordinatorRequest
                        && CoordinatorType.forId(((FindCoordinatorRequest) body).data().keyType()) == type,
                FindCoordinatorResponse.prepareResponse(Errors.NONE, key, answer));
    }

    /**
     * Sends offsets to the transaction: AddOffsetsToTxn to the transaction coordinator, TxnOffsetCommit to the group
     * coordinator, each looked up first (answered with the given node) if the transaction manager asks.
     */
    private void sendOffsets(Node transactionCoordinatorAnswer, Node groupCoordinatorAnswer) {
        TransactionalRequestResult result = transactionManager.sendOffsetsToTransaction(
                Map.of(TP, new OffsetAndMetadata(1)), new ConsumerGroupMetadata(GROUP_ID));
        if (transactionCoordinatorAnswer != null)
            expectFindCoordinator(CoordinatorType.TRANSACTION, TRANSACTIONAL_ID, transactionCoordinatorAnswer);
        client.prepareResponse(body -> body instanceof AddOffsetsToTxnRequest,
                new AddOffsetsToTxnResponse(new AddOffsetsToTxnResponseData()));
        if (groupCoordinatorAnswer != null)
            expectFindCoordinator(CoordinatorType.GROUP, GROUP_ID, groupCoordinatorAnswer);
        client.prepareResponse(body -> body instanceof TxnOffsetCommitRequest,
                new TxnOffsetCommitResponse(0, Map.of(TP, Errors.NONE)));
        ProducerTestUtils.runUntil(sender, result::isCompleted, 20);
        result.await(Long.MAX_VALUE, TimeUnit.MILLISECONDS, "sendOffsetsToTransaction");
        assertFalse(client.hasPendingResponses(), "every prepared response was asked for");
    }

    @Test
    public void testCoordinatorsMovedToAnotherPortAreLookedUpAgainAndTheNextRequestsGoToTheNewEndpoint() {
        setUp(true);
        updateMetadata(BROKER0_MOVED, BROKER1);
        sendOffsets(BROKER0_MOVED, BROKER0_MOVED);
        assertEquals(List.of(
                "FIND_COORDINATOR",
                "ADD_OFFSETS_TO_TXN localhost:9190",
                "FIND_COORDINATOR",
                "TXN_OFFSET_COMMIT localhost:9190"), client.sent);
        assertEquals(BROKER0_MOVED, transactionManager.coordinator(CoordinatorType.TRANSACTION));
        assertEquals(BROKER0_MOVED, transactionManager.coordinator(CoordinatorType.GROUP));
    }

    @Test
    public void testCoordinatorsKeptWhenTheMetadataDoesNotMoveTheirBroker() {
        setUp(true);
        Node transactionCoordinator = transactionManager.coordinator(CoordinatorType.TRANSACTION);
        Node groupCoordinator = transactionManager.coordinator(CoordinatorType.GROUP);
        // A new node list (new order, another broker moved): broker 0 is where it was.
        updateMetadata(BROKER1, BROKER0);
        updateMetadata(BROKER0, new Node(1, "localhost", 9191));
        sendOffsets(null, null);
        assertEquals(List.of(
                "ADD_OFFSETS_TO_TXN localhost:9090",
                "TXN_OFFSET_COMMIT localhost:9090"), client.sent);
        assertSame(transactionCoordinator, transactionManager.coordinator(CoordinatorType.TRANSACTION));
        assertSame(groupCoordinator, transactionManager.coordinator(CoordinatorType.GROUP));
    }

    @Test
    public void testWithTheOptionOffTheCoordinatorsStayAtTheOldEndpoint() {
        setUp(false);
        updateMetadata(BROKER0_MOVED, BROKER1);
        sendOffsets(null, null);
        assertEquals(List.of(
                "ADD_OFFSETS_TO_TXN localhost:9090",
                "TXN_OFFSET_COMMIT localhost:9090"), client.sent,
                "4.3.1 keeps the coordinators it found and dials the old endpoint again");
    }
}
