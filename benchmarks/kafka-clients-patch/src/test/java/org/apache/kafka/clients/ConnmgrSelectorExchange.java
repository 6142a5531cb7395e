package org.apache.kafka.clients;

import org.apache.kafka.common.Node;
import org.apache.kafka.common.network.NetworkReceive;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.MetadataResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.test.MockSelector;

import java.nio.ByteBuffer;
import java.util.List;

/**
 * Requests sent through a {@link NetworkClient} over a {@link MockSelector}, and their answers, as the project's tests
 * drive them (not a test class). {@code MockSelector} keeps what it completed until cleared, so every step that sends
 * or receives clears it after the poll that handled it.
 */
public final class ConnmgrSelectorExchange {

    private ConnmgrSelectorExchange() {
    }

    /** The header of the last request the selector completed sending. */
    public static RequestHeader lastSentHeader(MockSelector selector) {
        List<?> buffers = selector.completedSendBuffers();
        ByteBuffer buffer = selector.completedSendBuffers().get(buffers.size() - 1).buffer();
        buffer.getInt(); // size
        return RequestHeader.parse(buffer.slice());
    }

    /** Sends {@code request} to {@code node} (connected) and returns its header; it stays in flight until answered. */
    public static RequestHeader send(NetworkClient client, MockSelector selector, Time time, Node node,
                                     AbstractRequest.Builder<?> request) {
        client.send(client.newClientRequest(node.idString(), request, time.milliseconds(), true), time.milliseconds());
        client.poll(0, time.milliseconds());
        RequestHeader header = lastSentHeader(selector);
        selector.clear();
        return header;
    }

    /** Queues {@code response} from {@code nodeId} to the request of {@code header}; the next poll reads it. */
    public static void respond(MockSelector selector, String nodeId, RequestHeader header, AbstractResponse response) {
        selector.completeReceive(new NetworkReceive(nodeId,
                RequestTestUtils.serializeResponseWithHeader(response, header.apiVersion(), header.correlationId())));
    }

    /** One poll, then the selector cleared. */
    public static List<ClientResponse> poll(NetworkClient client, MockSelector selector, Time time) {
        List<ClientResponse> responses = client.poll(0, time.milliseconds());
        selector.clear();
        return responses;
    }

    /**
     * A client whose metadata holds only the bootstrap node: dials it, sends the metadata request and answers it with
     * {@code response}, in three polls.
     */
    public static void answerMetadataFromBootstrap(NetworkClient client, MockSelector selector, Time time,
                                                   MetadataResponse response) {
        client.poll(0, time.milliseconds()); // dial the bootstrap node
        selector.clear();
        client.poll(0, time.milliseconds()); // send the metadata request
        respond(selector, "-1", lastSentHeader(selector), response);
        poll(client, selector, time);
    }
}
