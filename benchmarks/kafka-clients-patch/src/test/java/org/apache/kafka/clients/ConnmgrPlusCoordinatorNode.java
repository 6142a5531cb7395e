package org.apache.kafka.clients;

import org.apache.kafka.common.Node;

/**
 * Kafka 4.4's {@code GroupCoordinatorNode} on 4.3.1's classes: the broker's own id, connection id {@code "+" + id}.
 * 4.3.1's {@link Node} has no constructor that takes an id string (4.4 adds a protected one), but
 * {@link Node#idString()} may be overridden, and {@link NetworkClient} keys every connection by it, so this node
 * reaches the client's connection rules exactly as 4.4's does. Its {@code toString()} still prints the numeric id.
 */
public final class ConnmgrPlusCoordinatorNode extends Node {

    public ConnmgrPlusCoordinatorNode(int brokerId, String host, int port) {
        super(brokerId, host, port);
    }

    /** The coordinator connection of {@code broker}, at its endpoint. */
    public static ConnmgrPlusCoordinatorNode of(Node broker) {
        return new ConnmgrPlusCoordinatorNode(broker.id(), broker.host(), broker.port());
    }

    @Override
    public String idString() {
        return "+" + id();
    }
}
