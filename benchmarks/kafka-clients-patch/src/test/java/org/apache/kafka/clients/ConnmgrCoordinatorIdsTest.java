package org.apache.kafka.clients;

import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;

import org.junit.jupiter.api.Test;

import java.util.Collections;
import java.util.List;

import static org.apache.kafka.clients.CoordinatorIds.NOT_A_COORDINATOR;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link CoordinatorIds}: a group coordinator's connection id read in the form of Kafka up to 4.3
 * ({@code Integer.MAX_VALUE - brokerId}) and in 4.4's ({@code "+" + brokerId}), and the coordinator move check that
 * reads the broker from it.
 */
public class ConnmgrCoordinatorIdsTest {

    private static Cluster cluster(Node... nodes) {
        return new Cluster("cluster", List.of(nodes), Collections.emptyList(), Collections.emptySet(),
                Collections.emptySet());
    }

    @Test
    public void testBrokerIdOfTheFormUpToFourThree() {
        assertEquals(0, CoordinatorIds.brokerIdOf(String.valueOf(Integer.MAX_VALUE)));
        assertEquals(3, CoordinatorIds.brokerIdOf(String.valueOf(Integer.MAX_VALUE - 3)));
        assertEquals(Integer.MAX_VALUE / 2, CoordinatorIds.brokerIdOf(String.valueOf(Integer.MAX_VALUE / 2 + 1)));
        assertEquals(NOT_A_COORDINATOR, CoordinatorIds.brokerIdOf(String.valueOf(Integer.MAX_VALUE / 2)),
                "at or below Integer.MAX_VALUE / 2 an id is a broker's");
    }

    @Test
    public void testBrokerIdOfTheFourFourForm() {
        assertEquals(0, CoordinatorIds.brokerIdOf("+0"));
        assertEquals(3, CoordinatorIds.brokerIdOf("+3"));
        assertEquals(Integer.MAX_VALUE, CoordinatorIds.brokerIdOf("+" + Integer.MAX_VALUE));
        assertEquals(3, CoordinatorIds.brokerIdOf(new ConnmgrPlusCoordinatorNode(3, "h", 1).idString()));
    }

    @Test
    public void testIdsThatAreNotACoordinatorsAreNeitherForm() {
        for (String id : new String[] {"0", "3", "-1", "-3", "+", "+-1", "++1", "+x", "+2147483648", "x", "", null})
            assertEquals(NOT_A_COORDINATOR, CoordinatorIds.brokerIdOf(id), "id " + id);
        assertFalse(CoordinatorIds.isCoordinator("3"));
        assertTrue(CoordinatorIds.isCoordinator("+3"));
        assertTrue(CoordinatorIds.isCoordinator(String.valueOf(Integer.MAX_VALUE - 3)));
    }

    @Test
    public void testConnectionIdsOfABrokerAreBothFormsAndReadBackToIt() {
        assertArrayEquals(new String[] {String.valueOf(Integer.MAX_VALUE - 3), "+3"}, CoordinatorIds.connectionIdsOf(3));
        for (int brokerId : new int[] {0, 1, 1000, Integer.MAX_VALUE / 2, Integer.MAX_VALUE / 2 + 1, Integer.MAX_VALUE}) {
            for (String id : CoordinatorIds.connectionIdsOf(brokerId))
                assertEquals(brokerId, CoordinatorIds.brokerIdOf(id), "id " + id);
        }
        assertArrayEquals(new String[] {"+" + Integer.MAX_VALUE}, CoordinatorIds.connectionIdsOf(Integer.MAX_VALUE),
                "an older form at or below Integer.MAX_VALUE / 2 would read back as a broker's id");
        assertArrayEquals(new String[0], CoordinatorIds.connectionIdsOf(-1), "a bootstrap entry has no coordinator");
    }

    /** First check records, a later metadata change of the broker's endpoint is a move, for each form. */
    private static void assertMoveSeen(Node coordinator) {
        Node broker1 = new Node(1, "localhost", 9091);
        Node broker1Moved = new Node(1, "localhost", 9191);
        Node broker0 = new Node(0, "localhost", 9090);
        CoordinatorEndpointCheck check = new CoordinatorEndpointCheck();
        assertNull(check.movedTo(coordinator, cluster(broker0, broker1)), "the first check records");
        assertNull(check.movedTo(coordinator, cluster(broker0, broker1)), "unchanged: no move");
        assertEquals(broker1Moved, check.movedTo(coordinator, cluster(broker0, broker1Moved)),
                coordinator.idString() + ": broker 1 moved");
    }

    @Test
    public void testMovedToReadsTheBrokerOfTheFormUpToFourThree() {
        assertMoveSeen(new Node(Integer.MAX_VALUE - 1, "localhost", 9091));
    }

    @Test
    public void testMovedToReadsTheBrokerOfTheFourFourForm() {
        assertMoveSeen(new ConnmgrPlusCoordinatorNode(1, "localhost", 9091));
    }

    @Test
    public void testMovedToReadsAPlainBrokerNodeAsItsOwnBroker() {
        // the producer's transaction coordinator goes over the broker's own connection
        assertMoveSeen(new Node(1, "localhost", 9091));
    }
}
