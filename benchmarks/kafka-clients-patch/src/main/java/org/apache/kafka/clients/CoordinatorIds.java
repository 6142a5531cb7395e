package org.apache.kafka.clients;

/**
 * The connection ids a group coordinator's separate connection goes by, in the one place the patch reads them.
 * <p>
 * The classic and KIP-848 consumers reach their group coordinator over a connection of its own, keyed apart from the
 * broker's data connection. Kafka up to 4.3 keys it by the node id {@code Integer.MAX_VALUE - brokerId}
 * ({@code AbstractCoordinator}, {@code CoordinatorRequestManager}); Kafka 4.4 keys it {@code "+" + brokerId}
 * ({@code GroupCoordinatorNode}, a {@code Node} whose {@code id()} is the broker's id and whose {@code idString()} is
 * {@code "+N"}). A connection id is a {@code Node#idString()}. On 4.3 the {@code "+N"} form never occurs; reading both
 * keeps the patch's coordinator rules (role metrics, endpoint-change retire, coordinator move checks, lost-role waits)
 * working on either release.
 * <p>
 * A numeric id above {@code Integer.MAX_VALUE / 2} is read as the older form: broker ids stay far below it (the same
 * threshold {@code ConnectionRoleMetrics} has always used).
 */
public final class CoordinatorIds {

    /** What {@link #brokerIdOf(String)} returns for an id that is not a coordinator connection's. */
    public static final int NOT_A_COORDINATOR = -1;

    private CoordinatorIds() {
    }

    /**
     * The id of the broker that the group coordinator connection {@code connectionId} reaches, or
     * {@link #NOT_A_COORDINATOR}: {@code "+N"} (N a non-negative int) gives N, a numeric id above
     * {@code Integer.MAX_VALUE / 2} gives {@code Integer.MAX_VALUE - id}; anything else (a broker's data connection,
     * a bootstrap entry's negative id, a string that is neither) is not a coordinator's.
     */
    public static int brokerIdOf(String connectionId) {
        if (connectionId == null || connectionId.isEmpty())
            return NOT_A_COORDINATOR;
        if (connectionId.charAt(0) == '+') {
            // only digits follow the '+': parsing from index 1 would otherwise read "+-1" as -1
            if (connectionId.length() == 1 || !Character.isDigit(connectionId.charAt(1)))
                return NOT_A_COORDINATOR;
            try {
                return Integer.parseInt(connectionId, 1, connectionId.length(), 10);
            } catch (NumberFormatException e) {
                return NOT_A_COORDINATOR;
            }
        }
        final int id;
        try {
            id = Integer.parseInt(connectionId);
        } catch (NumberFormatException e) {
            return NOT_A_COORDINATOR;
        }
        return id > Integer.MAX_VALUE / 2 ? Integer.MAX_VALUE - id : NOT_A_COORDINATOR;
    }

    /** True if {@code connectionId} is a group coordinator connection's, in either form. */
    public static boolean isCoordinator(String connectionId) {
        return brokerIdOf(connectionId) != NOT_A_COORDINATOR;
    }

    /**
     * The connection ids a group coordinator on broker {@code brokerId} may go by: the older form first
     * ({@code Integer.MAX_VALUE - brokerId}), then 4.4's ({@code "+" + brokerId}). Empty for a negative id (a
     * bootstrap entry has no coordinator) and for an id whose older form would not read back as a coordinator's.
     */
    public static String[] connectionIdsOf(int brokerId) {
        if (brokerId < 0)
            return new String[0];
        int legacy = Integer.MAX_VALUE - brokerId;
        if (legacy <= Integer.MAX_VALUE / 2)
            return new String[] {"+" + brokerId};
        return new String[] {Integer.toString(legacy), "+" + brokerId};
    }
}
