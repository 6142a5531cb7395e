package org.apache.kafka.clients;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The latest {@link ConnectionNeeds} of each component of one client (KIP (b), rule 6). Components publish from any
 * thread through {@link #publisher(String)}; {@link NetworkClient} reads on its own thread with
 * {@link #neededConnectionIds()}. A publish is one volatile write to the component's {@link AtomicReference}: no
 * lock of the client's or the component's is taken, and the reader never calls into a component.
 */
final class ConnectionNeedsFeed {

    private final Map<String, AtomicReference<ConnectionNeeds>> snapshots = new ConcurrentHashMap<>();

    /* The reader's cache: the snapshots the union was last computed from (by reference), and that union */
    private Map<String, ConnectionNeeds> lastRead = Map.of();
    private Set<String> lastUnion = null;

    /**
     * The publisher of {@code component}; the same reference for every call with one name. Until the component
     * publishes, it counts as having no snapshot (not as needing nothing).
     */
    ConnectionNeedsPublisher publisher(String component) {
        AtomicReference<ConnectionNeeds> ref =
                snapshots.computeIfAbsent(Objects.requireNonNull(component, "component"), c -> new AtomicReference<>());
        return needs -> ref.set(Objects.requireNonNull(needs, "needs"));
    }

    /**
     * The connection ids some published snapshot needs, or null when no component has published yet: a client none
     * of whose components publishes keeps every connection, as without the linger. Recomputed only when a snapshot
     * changed by reference; call on the network thread only.
     */
    Set<String> neededConnectionIds() {
        Map<String, ConnectionNeeds> current = new HashMap<>();
        for (Map.Entry<String, AtomicReference<ConnectionNeeds>> entry : snapshots.entrySet()) {
            ConnectionNeeds needs = entry.getValue().get();
            if (needs != null)
                current.put(entry.getKey(), needs);
        }
        if (current.isEmpty())
            return null;
        if (!sameReferences(current, lastRead)) {
            Set<String> union = new HashSet<>();
            for (ConnectionNeeds needs : current.values())
                union.addAll(needs.connectionIds());
            lastRead = current;
            lastUnion = union;
        }
        return lastUnion;
    }

    private static boolean sameReferences(Map<String, ConnectionNeeds> a, Map<String, ConnectionNeeds> b) {
        if (a.size() != b.size())
            return false;
        for (Map.Entry<String, ConnectionNeeds> entry : a.entrySet()) {
            if (b.get(entry.getKey()) != entry.getValue())
                return false;
        }
        return true;
    }
}
