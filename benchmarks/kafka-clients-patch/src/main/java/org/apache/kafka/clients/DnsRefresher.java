package org.apache.kafka.clients;

import java.net.InetAddress;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Pattern;

/**
 * {@code client.dns.refresh.ms}: resolves again, every period, the host names a client holds connections to, on one
 * daemon thread of the client, never the caller's.
 * <p>
 * Two sides. The network thread (the owner of the {@link NetworkClient}) calls {@link #schedule}, {@link #nextAnswer}
 * and {@link #timeToNextRefresh}: they keep the per-host schedule, which only that thread touches, and never block.
 * The resolver thread takes names from a lock-free queue, resolves each through the client's {@link HostResolver}
 * (via {@link ClientUtils#resolve}, as a dial does) and posts the answer, addresses or the exception, to another
 * lock-free queue, then calls the wake-up hook (the selector's {@code wakeup}) so that a blocked {@code poll} reads it.
 * No lock is shared: a hung lookup delays only the refresh of its own name, never the network thread.
 * <p>
 * The thread is started at the first lookup, so a client that never holds a connection to a name never starts it,
 * and stopped by {@link #close}. A name whose lookup is still running is not asked again.
 */
final class DnsRefresher implements AutoCloseable {

    /** The prefix of the resolver thread's name; the client id follows. */
    static final String THREAD_NAME_PREFIX = "kafka-dns-refresh | ";

    private static final Pattern IPV4_LITERAL = Pattern.compile("\\d{1,3}(\\.\\d{1,3}){3}");

    /** One lookup's outcome: the addresses, or the exception the lookup threw (then {@code addresses} is empty). */
    static final class Answer {
        final String host;
        final List<InetAddress> addresses;
        final Exception error;

        Answer(String host, List<InetAddress> addresses, Exception error) {
            this.host = host;
            this.addresses = addresses;
            this.error = error;
        }

        /** A successful lookup: no exception and at least one address. Only such an answer may count a miss. */
        boolean succeeded() {
            return error == null && !addresses.isEmpty();
        }
    }

    private final HostResolver resolver;
    private final long refreshMs;
    private final String threadName;
    private final Runnable wakeup;

    private final Queue<String> lookups = new ConcurrentLinkedQueue<>();
    private final Queue<Answer> answers = new ConcurrentLinkedQueue<>();
    private final AtomicInteger lookupsDone = new AtomicInteger();
    private volatile boolean closed = false;
    private volatile Thread thread = null;

    // Network thread only.
    private final Map<String, Long> nextRefreshMs = new HashMap<>();
    private final Set<String> pending = new HashSet<>();
    // The earliest due time of a name whose lookup is not running, Long.MAX_VALUE if none: kept by schedule() and
    // nextAnswer(), so that timeToNextRefresh() and isDue() cost O(1) on every poll, not O(names).
    private long nextDueMs = Long.MAX_VALUE;

    /**
     * @param resolver the client's resolver, the one its dials use
     * @param refreshMs the period, above 0
     * @param clientId names the thread
     * @param wakeup run on the resolver thread after each answer is posted; must be thread-safe and must not block
     */
    DnsRefresher(HostResolver resolver, long refreshMs, String clientId, Runnable wakeup) {
        if (refreshMs <= 0)
            throw new IllegalArgumentException("refreshMs must be above 0, got " + refreshMs);
        this.resolver = resolver;
        this.refreshMs = refreshMs;
        this.threadName = THREAD_NAME_PREFIX + clientId;
        this.wakeup = wakeup;
    }

    /**
     * True if {@code host} is a literal IPv4 or IPv6 address, which is never resolved: nothing is looked up for it
     * and no connection to it is ever closed by the refresh.
     */
    static boolean isLiteralAddress(String host) {
        return host.indexOf(':') >= 0 || IPV4_LITERAL.matcher(host).matches();
    }

    /**
     * Network thread. {@code hostsInUse} are the host names of the connections held now (literal addresses are
     * ignored). A name seen for the first time is due one period later; a due name whose lookup is not running is
     * handed to the resolver thread and is due again one period later. A name no longer in use is forgotten, so a
     * later connection to it starts a new period.
     */
    void schedule(Set<String> hostsInUse, long now) {
        Iterator<Map.Entry<String, Long>> iter = nextRefreshMs.entrySet().iterator();
        while (iter.hasNext()) {
            if (!hostsInUse.contains(iter.next().getKey()))
                iter.remove();
        }
        for (String host : hostsInUse) {
            if (isLiteralAddress(host))
                continue;
            Long next = nextRefreshMs.get(host);
            if (next == null) {
                nextRefreshMs.put(host, now + refreshMs);
            } else if (now >= next && !pending.contains(host)) {
                pending.add(host);
                nextRefreshMs.put(host, now + refreshMs);
                submit(host);
            }
        }
        nextDueMs = Long.MAX_VALUE;
        for (Map.Entry<String, Long> entry : nextRefreshMs.entrySet()) {
            if (!pending.contains(entry.getKey()))
                nextDueMs = Math.min(nextDueMs, entry.getValue());
        }
    }

    /** Network thread. The next answer posted by the resolver thread, or null; never blocks. */
    Answer nextAnswer() {
        Answer answer = answers.poll();
        if (answer != null && pending.remove(answer.host)) {
            // its lookup no longer running, the name's due time bounds the wait again
            Long next = nextRefreshMs.get(answer.host);
            if (next != null)
                nextDueMs = Math.min(nextDueMs, next);
        }
        return answer;
    }

    /** Network thread. True if the resolver thread has posted an answer {@link #nextAnswer} has not read; O(1). */
    boolean hasAnswers() {
        return !answers.isEmpty();
    }

    /**
     * Network thread. True if a name whose lookup is not running is due at {@code now}, so that {@link #schedule}
     * would hand one to the resolver thread; O(1).
     */
    boolean isDue(long now) {
        return now >= nextDueMs;
    }

    /**
     * Network thread. Milliseconds until the next name whose lookup is not running is due (0 if one is due now),
     * or {@code Long.MAX_VALUE} if there is none: a bound for the selector's wait. A running lookup does not bound it,
     * since its answer wakes the selector. O(1): the due time is kept as names are scheduled and answered.
     */
    long timeToNextRefresh(long now) {
        return nextDueMs == Long.MAX_VALUE ? Long.MAX_VALUE : Math.max(0, nextDueMs - now);
    }

    /** The resolver thread, or null before the first lookup (and always with the option off). */
    Thread thread() {
        return thread;
    }

    /** Lookups the resolver thread has finished (answer posted), for tests. */
    int lookupsDone() {
        return lookupsDone.get();
    }

    private void submit(String host) {
        if (closed)
            return;
        Thread t = thread;
        if (t == null) {
            t = new Thread(this::run, threadName);
            t.setDaemon(true);
            thread = t;
            t.start();
        }
        lookups.add(host);
        LockSupport.unpark(t);
    }

    private void run() {
        while (!closed) {
            String host = lookups.poll();
            if (host == null) {
                // A lookup added between poll() and park() has unparked us already: park() then returns at once.
                LockSupport.park(this);
                continue;
            }
            Answer answer;
            try {
                List<InetAddress> addresses = ClientUtils.resolve(host, resolver);
                answer = new Answer(host, addresses == null ? Collections.emptyList() : addresses, null);
            } catch (Exception e) {
                // UnknownHostException (no such name, or the resolver timed out) or anything a custom resolver throws.
                answer = new Answer(host, Collections.emptyList(), e);
            }
            if (closed)
                return;
            answers.add(answer);
            lookupsDone.incrementAndGet();
            try {
                wakeup.run();
            } catch (RuntimeException e) {
                // The client may be closing its selector: the answer is read, or dropped, by the next poll.
            }
        }
    }

    /** Stops the resolver thread (a lookup under way finishes on its own; its answer is dropped). */
    @Override
    public void close() {
        closed = true;
        Thread t = thread;
        if (t != null) {
            LockSupport.unpark(t);
            t.interrupt();
        }
    }
}
