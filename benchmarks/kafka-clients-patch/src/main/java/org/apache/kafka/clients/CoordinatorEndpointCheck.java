package org.apache.kafka.clients;

import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;

/**
 * {@code endpoint.change.retire.enable} for a class that caches a coordinator's {@link Node} as FindCoordinator gave
 * it (the classic consumer's {@code AbstractCoordinator}, the KIP-848 and share consumers'
 * {@code CoordinatorRequestManager}, the producer's {@code TransactionManager}): tells whether the metadata now gives
 * the coordinator's broker another host or port, so that the holder marks its coordinator unknown and the next
 * FindCoordinator supplies the new endpoint (KIP (a), "Coordinators").
 * <p>
 * A move is a change the metadata makes after the lookup. The first check of a newly cached {@code Node} records the
 * endpoint the metadata gives its broker then (none if the broker is not listed) and reports no move, and so does every
 * check at which the metadata gives the cached endpoint; a check reports a move when the metadata lists the broker at
 * an endpoint that differs both from the cached {@code Node} and from the one last recorded. Why not compare the cached
 * {@code Node} with the metadata alone: FindCoordinator's answer is often newer than the metadata (after a broker
 * moved, the failed coordinator connection is looked up again before the metadata refresh it requested has arrived),
 * and the plain comparison would then mark the fresh coordinator unknown and look it up again at every check until the
 * metadata catches up. The price: if the lookup was the stale one at its first check, the move is seen at the
 * metadata's next change of that broker's endpoint, not before. A broker absent from the metadata is not a move.
 * <p>
 * One instance per cached coordinator; not thread-safe (each holder calls it under its own lock or on its own
 * thread). Costs one map lookup ({@link Cluster#nodeById(int)}) per check.
 */
public final class CoordinatorEndpointCheck {

    /** The cached coordinator node the recorded endpoint belongs to (compared by reference); null before a check. */
    private Node checked = null;

    /**
     * The broker's node in the metadata at the first check of {@link #checked}, or at the last check where the
     * metadata gave the cached endpoint; null if the broker was not listed then.
     */
    private Node listedAgreed = null;

    /**
     * Returns the node the metadata now gives the coordinator's broker if the broker moved after the lookup that
     * produced {@code coordinator} (see the class comment), or null if it did not.
     * @param coordinator the cached coordinator node (its id may be a coordinator connection's, see
     *                    {@link CoordinatorIds})
     * @param brokerId the id of the coordinator's broker
     * @param cluster the client's current metadata
     */
    public Node movedTo(Node coordinator, int brokerId, Cluster cluster) {
        Node listed = cluster.nodeById(brokerId);
        if (coordinator != checked) {
            checked = coordinator;
            listedAgreed = listed;
            return null;
        }
        if (listed == null)
            return null;
        if (sameEndpoint(listed, coordinator)) {
            // The metadata agrees with the lookup (or has caught up with it): from now on any change is a move.
            listedAgreed = listed;
            return null;
        }
        if (listedAgreed != null && sameEndpoint(listed, listedAgreed))
            return null;
        return listed;
    }

    /**
     * As {@link #movedTo(Node, int, Cluster)} for the broker {@code coordinator} stands for: the one its connection id
     * names if it is a group coordinator's ({@link CoordinatorIds#brokerIdOf(String)}: {@code Integer.MAX_VALUE -
     * brokerId} up to Kafka 4.3, {@code "+" + brokerId} from 4.4), otherwise its own id (a coordinator reached over the
     * broker's connection, as the producer's transaction coordinator is).
     */
    public Node movedTo(Node coordinator, Cluster cluster) {
        int brokerId = CoordinatorIds.brokerIdOf(coordinator.idString());
        return movedTo(coordinator, brokerId == CoordinatorIds.NOT_A_COORDINATOR ? coordinator.id() : brokerId, cluster);
    }

    /** True if both nodes name the same host and port (their ids may differ). */
    static boolean sameEndpoint(Node a, Node b) {
        return a.port() == b.port() && a.host().equals(b.host());
    }
}
