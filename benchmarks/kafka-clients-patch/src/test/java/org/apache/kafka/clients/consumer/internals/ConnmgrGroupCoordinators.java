package org.apache.kafka.clients.consumer.internals;

import org.apache.kafka.clients.ClientResponse;
import org.apache.kafka.clients.GroupRebalanceConfig;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.message.JoinGroupRequestData;
import org.apache.kafka.common.message.JoinGroupResponseData;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.FindCoordinatorRequest;
import org.apache.kafka.common.requests.FindCoordinatorResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.Timer;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The consumers' group coordinator classes as the project's tests drive them (not a test class): a classic
 * {@link AbstractCoordinator} with the least a group protocol needs, and a {@link CoordinatorRequestManager}'s
 * FindCoordinator answered.
 */
final class ConnmgrGroupCoordinators {

    private ConnmgrGroupCoordinators() {
    }

    /** The least a group protocol needs; exposes the coordinator handling under test. */
    static final class TestCoordinator extends AbstractCoordinator {
        TestCoordinator(GroupRebalanceConfig config, ConsumerNetworkClient client, Time time) {
            super(config, new LogContext(), client, new Metrics(time), "connmgr", time);
        }

        @Override
        protected String protocolType() {
            return "consumer";
        }

        @Override
        protected JoinGroupRequestData.JoinGroupRequestProtocolCollection metadata() {
            return new JoinGroupRequestData.JoinGroupRequestProtocolCollection();
        }

        @Override
        protected void onJoinComplete(int generation, String memberId, String protocol, ByteBuffer memberAssignment) {
        }

        @Override
        protected boolean onJoinPrepare(Timer timer, int generation, String memberId) {
            return true;
        }

        @Override
        protected Map<String, ByteBuffer> onLeaderElected(String leaderId, String protocol,
                                                          List<JoinGroupResponseData.JoinGroupResponseMember> allMemberMetadata,
                                                          boolean skipAssignment) {
            return Map.of();
        }

        Node currentCoordinator() {
            return checkAndGetCoordinator();
        }
    }

    /** The connection a coordinator found on {@code broker} goes on: id {@code Integer.MAX_VALUE - broker.id()}. */
    static Node coordinatorConnection(Node broker) {
        return new Node(Integer.MAX_VALUE - broker.id(), broker.host(), broker.port());
    }

    /**
     * Polls {@code manager}, expects one FindCoordinator for {@code groupId} and answers it, as if from
     * {@code from}, with {@code answer}.
     */
    static void answerFindCoordinator(CoordinatorRequestManager manager, Time time, String groupId, Node from,
                                      Node answer) {
        NetworkClientDelegate.PollResult result = manager.poll(time.milliseconds());
        assertEquals(1, result.unsentRequests.size(), "a FindCoordinator to send");
        NetworkClientDelegate.UnsentRequest request = result.unsentRequests.get(0);
        FindCoordinatorRequest findCoordinator = (FindCoordinatorRequest) request.requestBuilder().build();
        request.handler().onComplete(new ClientResponse(
                new RequestHeader(ApiKeys.FIND_COORDINATOR, findCoordinator.version(), "", 1), request.handler(),
                from.idString(), time.milliseconds(), time.milliseconds(), false, null, null,
                FindCoordinatorResponse.prepareResponse(Errors.NONE, groupId, answer)));
    }
}
