package org.apache.kafka.clients;

import org.apache.kafka.common.Node;

import java.util.Collections;
import java.util.HashSet;
import java.util.Objects;
import java.util.Set;

/**
 * What one component of a client needs connections to, as of when it was published (KIP (b), rule 6): the data
 * connections of the brokers it reads from or writes to ({@link #nodes()}) and the connections of its current
 * coordinators ({@link #coordinators()}, with the connection id the component addresses them by, e.g. the classic
 * consumer's {@code Integer.MAX_VALUE - brokerId}). Immutable: {@link NetworkClient} reads a published snapshot by
 * reference on its own thread while the component may already be building the next one.
 */
public final class ConnectionNeeds {

    /** Needs nothing. */
    public static final ConnectionNeeds NONE = new ConnectionNeeds(Collections.emptySet(), Collections.emptySet());

    private final Set<Node> nodes;
    private final Set<Node> coordinators;
    private final Set<String> connectionIds;

    /** Copies both sets; null elements are not allowed. */
    public ConnectionNeeds(Set<Node> nodes, Set<Node> coordinators) {
        this.nodes = Collections.unmodifiableSet(new HashSet<>(nodes));
        this.coordinators = Collections.unmodifiableSet(new HashSet<>(coordinators));
        Set<String> ids = new HashSet<>();
        for (Node node : this.nodes)
            ids.add(Objects.requireNonNull(node, "node").idString());
        for (Node node : this.coordinators)
            ids.add(Objects.requireNonNull(node, "coordinator").idString());
        this.connectionIds = Collections.unmodifiableSet(ids);
    }

    public Set<Node> nodes() {
        return nodes;
    }

    public Set<Node> coordinators() {
        return coordinators;
    }

    /** The connection ids ({@link Node#idString()}) of every node and coordinator needed. */
    public Set<String> connectionIds() {
        return connectionIds;
    }

    @Override
    public boolean equals(Object o) {
        if (this == o)
            return true;
        if (!(o instanceof ConnectionNeeds))
            return false;
        ConnectionNeeds that = (ConnectionNeeds) o;
        return nodes.equals(that.nodes) && coordinators.equals(that.coordinators);
    }

    @Override
    public int hashCode() {
        return Objects.hash(nodes, coordinators);
    }

    @Override
    public String toString() {
        return "ConnectionNeeds(nodes=" + nodes + ", coordinators=" + coordinators + ")";
    }
}
