package org.apache.kafka.clients;

import java.util.Arrays;
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

    /* Each component's reference, in the order the components first asked for a publisher; replaced, never changed */
    private volatile AtomicReference<?>[] refs = new AtomicReference<?>[0];

    /*
     * The reader's cache: what each of refs held when the union was last computed (by reference; null: nothing
     * published), and that union (null: no component had published)
     */
    private Object[] lastRead = new Object[0];
    private Set<String> lastUnion = null;

    /**
     * The publisher of {@code component}; the same reference for every call with one name. Until the component
     * publishes, it counts as having no snapshot (not as needing nothing).
     */
    ConnectionNeedsPublisher publisher(String component) {
        AtomicReference<ConnectionNeeds> ref =
                snapshots.computeIfAbsent(Objects.requireNonNull(component, "component"), c -> addRef());
        return needs -> ref.set(Objects.requireNonNull(needs, "needs"));
    }

    /** A new component's reference, appended to {@link #refs} (copy on write: the reader iterates without a lock). */
    private synchronized AtomicReference<ConnectionNeeds> addRef() {
        AtomicReference<ConnectionNeeds> ref = new AtomicReference<>();
        AtomicReference<?>[] grown = Arrays.copyOf(refs, refs.length + 1);
        grown[refs.length] = ref;
        refs = grown;
        return ref;
    }

    /**
     * The connection ids some published snapshot needs, or null when no component has published yet: a client none
     * of whose components publishes keeps every connection, as without the linger. Recomputed only when a snapshot
     * changed by reference, so the same set (by reference) is returned until one does; otherwise O(components) and
     * no allocation, since the network thread calls this on every poll. Call on the network thread only.
     */
    Set<String> neededConnectionIds() {
        AtomicReference<?>[] current = refs;
        boolean changed = false;
        for (int i = 0; !changed && i < current.length; i++)
            changed = current[i].get() != (i < lastRead.length ? lastRead[i] : null);
        if (!changed) {
            // at most new components that have published nothing yet: the union stands
            if (current.length != lastRead.length)
                lastRead = Arrays.copyOf(lastRead, current.length);
            return lastUnion;
        }
        Object[] read = new Object[current.length];
        Set<String> union = null;
        for (int i = 0; i < current.length; i++) {
            ConnectionNeeds needs = (ConnectionNeeds) current[i].get();
            read[i] = needs;
            if (needs == null)
                continue;
            if (union == null)
                union = new HashSet<>();
            union.addAll(needs.connectionIds());
        }
        lastRead = read;
        lastUnion = union;
        return union;
    }
}
