package connmgr.probe;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.text.SimpleDateFormat;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.AdminClient;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Runs one real Kafka client (producer, consumer or admin client) through the phases the
 * Python side expects, with {@code org.apache.kafka.clients.NetworkClient} logging to a file.
 *
 * <p>Protocol on stdout (one JSON object per line, nothing else is ever written there):
 * <ol>
 *   <li>{@code start}: construct the client;</li>
 *   <li>producer: send {@code --records} records round-robin over {@code --partitions} with
 *       acks=all and wait for every ack; consumer: subscribe as {@code --group}, poll until
 *       {@code --records} records were read, commitSync;</li>
 *   <li>transactional producer ({@code --transactional-id}): initTransactions, then
 *       {@code --transactions} transactions, one starting every {@code --txn-interval-ms}:
 *       beginTransaction, its share of the records (round-robin as above), with
 *       {@code --offsets-group} also sendOffsetsToTransaction (the offset of partition 0 of
 *       {@code --offsets-topic} for that group: the producer side of consume-transform-produce),
 *       commitTransaction; every record must be acked;</li>
 *   <li>settle for {@code --settle-ms}, or until the wall-clock instant
 *       {@code --settle-until-epoch-ms} (the consumer keeps polling, as an application would);
 *       with {@code --life-every-ms N} the client lives through the settle: a plain producer
 *       sends one more record every N ms (round-robin, as above) and flushes at its end, so
 *       every record is acked before the steady line; a consumer commits (commitAsync, as a
 *       polling loop does) every N ms; a transactional producer with {@code --txn-life true}
 *       runs one more transaction of one record every N ms; an admin client
 *       ({@code --client admin}) asks describeCluster and listTopics every N ms (once, with no
 *       life); a life also ends as soon as the file {@code --settle-end-file} exists;</li>
 *   <li>with {@code --allow-send-errors true} a living producer does not fail on a record
 *       that was not acked (or a transaction that had to be aborted): it goes on and names
 *       them in {@code failed_records} / {@code aborted_records} on its steady line, so a
 *       long run still reports what happened;</li>
 *   <li>print {@code {"phase":"steady",...}} with record counts, the client's own
 *       connection metrics and its start-up timings, then block until a line (or EOF) arrives
 *       on stdin, so the caller can inspect the process's sockets while the client sits in its
 *       steady state;</li>
 *   <li>close the client and print {@code {"phase":"closed",...}} with the metrics again;
 *       exit 0.</li>
 * </ol>
 * Any failure prints {@code {"phase":"error","error":...}} and exits non-zero (2 for bad
 * arguments, 1 otherwise).
 *
 * <p>{@code --client serverless} is another protocol: short-lived producers, one after the
 * other, in this one JVM (a JVM per producer would time the JVM's start, not the client's).
 * It prints {@code {"phase":"ready",...}}, then for each line {@code N} read on stdin it
 * constructs a new producer (acks=all, the same settings as above), sends {@code --records}
 * records round-robin over {@code --partitions} partitions, each record's value
 * {@code <--value-prefix>:N:<i>}, waits for every ack (or error) and prints
 * {@code {"phase":"acked","start":N,...}} with its counts, errors and {@code ttfa_ms}, waits for
 * one more stdin line (the caller looks at the sockets meanwhile), closes the producer and
 * prints {@code {"phase":"closed","start":N,"metrics":...}} with its connection metrics read
 * after the close. A line {@code quit} (or EOF) instead of {@code N} ends the JVM, exit 0. A
 * record that was not acknowledged is reported, not fatal: the caller counts it lost.
 *
 * <p>Besides the three connection metrics every client has, the metrics map carries
 * {@code successful-authentication-total} and {@code failed-authentication-total} when the
 * client has them (TLS and SASL handshakes completed and failed). A producer's lines carry
 * {@code failed_records} and {@code aborted_records} (record numbers, normally empty), a
 * transactional one's {@code transactions_committed} and {@code transactions_aborted}, an
 * admin client's {@code admin_polls} and {@code admin_errors}.
 *
 * <p>The start-up timings, in milliseconds (a double, or null where there is none), measured
 * with {@code System.nanoTime()} from just before the client is constructed (so they include
 * the {@code --wait-ms} wait, if any): {@code ttfa_ms}, to the producer's first acknowledged
 * record (the first send callback without an exception, whichever record it is), and
 * {@code ttfc_ms}, to the consumer's first poll that returned a record. Both lines carry both
 * fields.
 *
 * <p>The source compiles against kafka-clients 2.1.0 and 4.x alike: it uses only APIs present
 * in both (e.g. {@code poll(Duration)}, added in 2.0; {@code Metric.metricValue()}, added in
 * 1.0; producer {@code close()} without a timeout, since {@code close(Duration)} is missing in
 * 2.1.0 and {@code close(long, TimeUnit)} is gone in 4.x).
 */
public final class Probe {

    /** Same pattern as log4j 1's {@code %d}: the timestamps of the log file. */
    private static final String LOG_TIME_FORMAT = "yyyy-MM-dd HH:mm:ss,SSS";

    /** "Not yet" for a nanoTime field: nanoTime never returns it in practice (it would take
     *  a clock origin 292 years away). */
    private static final long NO_TIME = Long.MIN_VALUE;

    private static final List<String> METRICS = List.of(
            "connection-creation-total", "connection-close-total", "connection-count");

    /** Reported when the client has them (every 2.x/4.x client does; none is required). */
    private static final List<String> OPTIONAL_METRICS = List.of(
            "successful-authentication-total", "failed-authentication-total");

    private Probe() {
    }

    /** Parsed command line. */
    static final class Args {
        String client;
        String bootstrap;
        String topic;
        int partitions = 1;
        int records = 0;
        String group;
        long settleMs = 0;
        /** The settle ends at this wall-clock instant (epoch ms) instead of after settleMs
         *  (0: not given): every client of a long run ends its life together, however long
         *  its JVM took to start. */
        long settleUntilEpochMs = 0;
        /** A living settle (--life-every-ms) also ends as soon as this file exists (null: not
         *  given): the caller ends every life of a long run on a condition it watches. */
        String settleEndFile;
        /** Wait after construction (and subscribe) before the first send or poll. */
        long waitMs = 0;
        /** A scaled life: work every this many ms through the settle (0: idle settle). */
        long lifeEveryMs = 0;
        String log;
        String logLevel = "TRACE";
        long timeoutMs = 60_000;
        /** Transactional producer: its transactional.id (null: a plain producer). */
        String transactionalId;
        int transactions = 1;
        long txnIntervalMs = 0;
        /** Consume-transform-produce: the group whose offsets each transaction commits. */
        String offsetsGroup;
        String offsetsTopic;
        /** A transactional producer's life: a transaction of one record every life period. */
        boolean txnLife;
        /** A living producer reports records it could not deliver instead of failing. */
        boolean allowSendErrors;
        /** Serverless producers: each record's value is {@code <valuePrefix>:<start>:<i>}. */
        String valuePrefix = "record";
        final Map<String, String> extra = new LinkedHashMap<>();

        static Args parse(String[] argv) {
            Args a = new Args();
            for (int i = 0; i < argv.length; i++) {
                String flag = argv[i];
                if (i + 1 >= argv.length) {
                    throw new UsageError("missing value after " + flag);
                }
                String value = argv[++i];
                switch (flag) {
                    case "--client": a.client = value; break;
                    case "--bootstrap": a.bootstrap = value; break;
                    case "--topic": a.topic = value; break;
                    case "--partitions": a.partitions = positiveInt(flag, value); break;
                    case "--records": a.records = nonNegativeInt(flag, value); break;
                    case "--group": a.group = value; break;
                    case "--settle-ms": a.settleMs = nonNegativeInt(flag, value); break;
                    case "--settle-until-epoch-ms": a.settleUntilEpochMs = positiveLong(flag, value); break;
                    case "--settle-end-file": a.settleEndFile = value; break;
                    case "--wait-ms": a.waitMs = nonNegativeInt(flag, value); break;
                    case "--life-every-ms": a.lifeEveryMs = nonNegativeInt(flag, value); break;
                    case "--log": a.log = value; break;
                    case "--log-level": a.logLevel = value; break;
                    case "--timeout-ms": a.timeoutMs = positiveInt(flag, value); break;
                    case "--transactional-id": a.transactionalId = value; break;
                    case "--transactions": a.transactions = positiveInt(flag, value); break;
                    case "--txn-interval-ms": a.txnIntervalMs = nonNegativeInt(flag, value); break;
                    case "--offsets-group": a.offsetsGroup = value; break;
                    case "--offsets-topic": a.offsetsTopic = value; break;
                    case "--txn-life": a.txnLife = bool(flag, value); break;
                    case "--allow-send-errors": a.allowSendErrors = bool(flag, value); break;
                    case "--value-prefix": a.valuePrefix = value; break;
                    case "--extra": {
                        int eq = value.indexOf('=');
                        if (eq <= 0) {
                            throw new UsageError("--extra wants key=value, got " + value);
                        }
                        a.extra.put(value.substring(0, eq), value.substring(eq + 1));
                        break;
                    }
                    default: throw new UsageError("unknown option " + flag);
                }
            }
            if (!List.of("producer", "consumer", "admin", "serverless").contains(a.client)) {
                throw new UsageError("--client must be producer, consumer, admin or serverless, got "
                        + a.client);
            }
            require("--bootstrap", a.bootstrap);
            if (!"admin".equals(a.client)) {
                require("--topic", a.topic);
            }
            require("--log", a.log);
            if ("consumer".equals(a.client)) {
                require("--group", a.group);
            }
            if (a.transactionalId != null && !"producer".equals(a.client)) {
                throw new UsageError("--transactional-id is for --client producer");
            }
            if (a.txnLife && a.transactionalId == null) {
                throw new UsageError("--txn-life is for a transactional producer (--transactional-id)");
            }
            if ((a.offsetsGroup != null || a.offsetsTopic != null)
                    && (a.transactionalId == null || a.offsetsGroup == null || a.offsetsTopic == null)) {
                throw new UsageError("--offsets-group and --offsets-topic go together, with --transactional-id");
            }
            if (!List.of("TRACE", "DEBUG", "INFO").contains(a.logLevel)) {
                throw new UsageError("--log-level must be TRACE, DEBUG or INFO, got " + a.logLevel);
            }
            return a;
        }

        private static boolean bool(String flag, String value) {
            if (!"true".equals(value) && !"false".equals(value)) {
                throw new UsageError(flag + " wants true or false, got " + value);
            }
            return "true".equals(value);
        }

        private static void require(String flag, String value) {
            if (value == null || value.isEmpty()) {
                throw new UsageError(flag + " is required");
            }
        }

        /** {@code value} as an integer of at least {@code min} and at most {@code max}. */
        private static long integerAtLeast(String flag, String value, long min, long max) {
            long n;
            try {
                n = Long.parseLong(value);
            } catch (NumberFormatException e) {
                throw new UsageError(flag + " wants an integer, got " + value);
            }
            if (n < min || n > max) {
                throw new UsageError(flag + " must be >= " + min + " and <= " + max + ", got " + value);
            }
            return n;
        }

        private static int nonNegativeInt(String flag, String value) {
            return (int) integerAtLeast(flag, value, 0, Integer.MAX_VALUE);
        }

        private static long positiveLong(String flag, String value) {
            return integerAtLeast(flag, value, 1, Long.MAX_VALUE);
        }

        private static int positiveInt(String flag, String value) {
            return (int) integerAtLeast(flag, value, 1, Integer.MAX_VALUE);
        }
    }

    static final class UsageError extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageError(String message) {
            super(message);
        }
    }

    public static void main(String[] argv) {
        // stdout is the JSON channel to the Python side: keep the real stream for ourselves and
        // send anything else that writes to System.out (a library's stray println) to stderr.
        PrintStream json = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        Args args;
        try {
            args = Args.parse(argv);
        } catch (UsageError e) {
            emitError(json, "usage: " + e.getMessage(), null);
            System.exit(2);
            return;
        }
        // log4j.properties reads these when log4j initialises, i.e. when the first Kafka class
        // asks for a logger, so they must be set before any Kafka class is touched.
        System.setProperty("probe.log.file", args.log);
        System.setProperty("probe.log.level", args.logLevel);
        int status;
        try {
            status = "serverless".equals(args.client)
                    ? new Serverless(args, json).run()
                    : new Run(args, json).run();
        } catch (Throwable t) {
            emitError(json, describe(t), t);
            status = 1;
        }
        json.flush();
        // The clients' threads are daemon threads once closed, but an error path may leave one
        // running: exit explicitly rather than wait for it.
        System.exit(status);
    }

    /**
     * One run of the scenario; holds what the JSON lines report.
     *
     * <p>On an error path the client is deliberately not closed: main() exits the JVM right
     * after the error line, which ends its threads and sockets without waiting on a broker that
     * may be the very thing failing (and producer close-with-timeout has no signature common to
     * 2.1.0, which lacks close(Duration), and 4.x, which dropped close(long, TimeUnit)).
     */
    static final class Run {
        private final Args args;
        private final PrintStream json;
        private final String startedAt = logTime();
        private final AtomicInteger sent = new AtomicInteger();
        private final AtomicInteger acked = new AtomicInteger();
        private int consumed;
        private final ConcurrentLinkedQueue<String> sendErrors = new ConcurrentLinkedQueue<>();
        /** Numbers of the records whose send failed, and of those in aborted transactions. */
        private final ConcurrentLinkedQueue<Integer> failedRecords = new ConcurrentLinkedQueue<>();
        private final List<Integer> abortedRecords = new ArrayList<>();
        private int transactionsCommitted;
        private int transactionsAborted;
        private int adminPolls;
        private int adminErrors;
        private String releasedAt;
        /** nanoTime just before the client is constructed: the origin of the timings. */
        private long clientStart;
        /** nanoTime of the first successful send callback (set once, by the I/O thread);
         *  NO_TIME until then. */
        private final AtomicLong firstAck = new AtomicLong(NO_TIME);
        private long firstConsumed;
        private boolean firstConsumedSeen;

        Run(Args args, PrintStream json) {
            this.args = args;
            this.json = json;
        }

        int run() throws Exception {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(args.timeoutMs);
            if ("producer".equals(args.client) && args.transactionalId != null) {
                return runTransactionalProducer(deadline);
            }
            if ("producer".equals(args.client)) {
                return runProducer(deadline);
            }
            if ("admin".equals(args.client)) {
                return runAdmin();
            }
            return runConsumer(deadline);
        }

        private int runProducer(long deadline) throws Exception {
            Properties props = new Properties();
            props.put("bootstrap.servers", args.bootstrap);
            props.put("acks", "all");
            props.put("key.serializer", ByteArraySerializer.class.getName());
            props.put("value.serializer", ByteArraySerializer.class.getName());
            props.putAll(args.extra);
            clientStart = System.nanoTime();
            KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
            waitPhase();
            List<Future<RecordMetadata>> futures = new ArrayList<>(args.records);
            for (int i = 0; i < args.records; i++) {
                futures.add(sendOne(producer, i));
            }
            for (Future<RecordMetadata> f : futures) {
                f.get(remainingMs(deadline), TimeUnit.MILLISECONDS);
            }
            producer.flush();
            if (acked.get() != args.records) {
                throw new IllegalStateException("acked " + acked.get() + " of " + args.records
                        + " records; errors: " + sendErrors);
            }
            if (args.lifeEveryMs > 0) {
                liveProducer(producer);
            } else {
                Thread.sleep(settleMs());
            }
            return finish(producer, connectionMetrics(producer.metrics(), "producer-metrics"));
        }

        /**
         * The transactional producer: what a real transactional (or consume-transform-produce)
         * application does with its producer. Records are split over the transactions as
         * evenly as they go; each transaction's sends are awaited through commitTransaction,
         * which flushes them.
         */
        private int runTransactionalProducer(long deadline) throws Exception {
            Properties props = new Properties();
            props.put("bootstrap.servers", args.bootstrap);
            props.put("acks", "all");
            props.put("transactional.id", args.transactionalId);
            props.put("key.serializer", ByteArraySerializer.class.getName());
            props.put("value.serializer", ByteArraySerializer.class.getName());
            props.putAll(args.extra);
            clientStart = System.nanoTime();
            KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
            waitPhase();
            producer.initTransactions();
            List<Future<RecordMetadata>> futures = new ArrayList<>(args.records);
            int next = 0;
            for (int t = 0; t < args.transactions; t++) {
                long startAt = clientStart + TimeUnit.MILLISECONDS.toNanos(t * args.txnIntervalMs);
                long wait = TimeUnit.NANOSECONDS.toMillis(startAt - System.nanoTime());
                if (t > 0 && wait > 0) {
                    Thread.sleep(wait);
                }
                producer.beginTransaction();
                int end = (int) ((long) args.records * (t + 1) / args.transactions);
                for (; next < end; next++) {
                    futures.add(sendOne(producer, next));
                }
                if (args.offsetsGroup != null) {
                    sendOffsets(producer, new TopicPartition(args.offsetsTopic, 0), t + 1L, args.offsetsGroup);
                }
                producer.commitTransaction();
                if (remainingMs(deadline) <= 0) {
                    throw new IllegalStateException("timed out after " + args.timeoutMs + " ms in transaction " + t);
                }
            }
            for (Future<RecordMetadata> f : futures) {
                f.get(remainingMs(deadline), TimeUnit.MILLISECONDS);
            }
            if (acked.get() != args.records) {
                throw new IllegalStateException("acked " + acked.get() + " of " + args.records
                        + " records; errors: " + sendErrors);
            }
            transactionsCommitted = args.transactions;
            if (args.txnLife && args.lifeEveryMs > 0) {
                liveTransactions(producer);
            } else {
                Thread.sleep(settleMs());
            }
            return finish(producer, connectionMetrics(producer.metrics(), "producer-metrics"));
        }

        /** The producer's life: a record every --life-every-ms through --settle-ms, then
         *  flush; every record sent must be acked (a send through a broker restart waits). */
        private void liveProducer(KafkaProducer<byte[], byte[]> producer) throws Exception {
            long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settleMs());
            int[] next = {args.records};
            eachLifeTick(end, () -> sendOne(producer, next[0]++));
            producer.flush();
            if (acked.get() != sent.get() && !args.allowSendErrors) {
                throw new IllegalStateException("acked " + acked.get() + " of " + sent.get()
                        + " records over the life; errors: " + sendErrors);
            }
        }

        /** The transactional producer's life: a transaction of one record every
         *  --life-every-ms through --settle-ms. A transaction that fails to commit is aborted
         *  and, with --allow-send-errors, its record named in aborted_records (otherwise the
         *  run fails); an error that forbids the abort (a fenced producer) always fails it. */
        private void liveTransactions(KafkaProducer<byte[], byte[]> producer) throws Exception {
            long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settleMs());
            int[] next = {args.records};
            eachLifeTick(end, () -> {
                int number = next[0]++;
                producer.beginTransaction();
                try {
                    sendOne(producer, number);
                    producer.commitTransaction();
                    transactionsCommitted++;
                } catch (KafkaException e) {
                    if (!args.allowSendErrors) {
                        throw e;
                    }
                    sendErrors.add(describe(e));
                    producer.abortTransaction();
                    abortedRecords.add(number);
                    transactionsAborted++;
                }
            });
        }

        /** What a client does at each tick of its life. */
        @FunctionalInterface
        private interface LifeTick {
            void run() throws Exception;
        }

        /** How long the settle lasts from now: until --settle-until-epoch-ms if given, else
         *  --settle-ms. */
        private long settleMs() {
            if (args.settleUntilEpochMs > 0) {
                return Math.max(0, args.settleUntilEpochMs - System.currentTimeMillis());
            }
            return args.settleMs;
        }

        /** Whether --settle-end-file exists: the caller has ended the settle early. */
        private boolean settleEnded() {
            return args.settleEndFile != null && Files.exists(Paths.get(args.settleEndFile));
        }

        /** Sleeps --life-every-ms at a time until {@code end} ({@link System#nanoTime()}) or
         *  --settle-end-file, running {@code tick} after every sleep that ends before both. */
        private void eachLifeTick(long end, LifeTick tick) throws Exception {
            while (true) {
                long left = TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime());
                if (left <= 0 || settleEnded()) {
                    break;
                }
                Thread.sleep(Math.min(left, args.lifeEveryMs));
                if (System.nanoTime() >= end || settleEnded()) {
                    break;
                }
                tick.run();
            }
        }

        private Future<RecordMetadata> sendOne(KafkaProducer<byte[], byte[]> producer, int i) {
            byte[] value = ("record-" + i).getBytes(StandardCharsets.UTF_8);
            ProducerRecord<byte[], byte[]> record =
                    new ProducerRecord<>(args.topic, i % args.partitions, null, value);
            Future<RecordMetadata> future = producer.send(record, (metadata, exception) -> {
                if (exception == null) {
                    firstAck.compareAndSet(NO_TIME, System.nanoTime());
                    acked.incrementAndGet();
                } else {
                    sendErrors.add(describe(exception));
                    failedRecords.add(i);
                }
            });
            sent.incrementAndGet();
            return future;
        }

        /** The admin client: describeCluster and listTopics once, then every --life-every-ms
         *  through --settle-ms (an application's health check, a dashboard). A failed poll is
         *  counted (admin_errors), not fatal: a broker restarting is part of a life. */
        private int runAdmin() throws Exception {
            Properties props = new Properties();
            props.put("bootstrap.servers", args.bootstrap);
            props.putAll(args.extra);
            clientStart = System.nanoTime();
            AdminClient admin = AdminClient.create(props);
            waitPhase();
            long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settleMs());
            pollAdmin(admin);
            if (args.lifeEveryMs > 0) {
                eachLifeTick(end, () -> pollAdmin(admin));
            } else {
                Thread.sleep(settleMs());
            }
            return finish(admin, connectionMetrics(admin.metrics(), "admin-client-metrics"));
        }

        private void pollAdmin(AdminClient admin) throws InterruptedException {
            try {
                admin.describeCluster().nodes().get();
                admin.listTopics().names().get();
            } catch (ExecutionException e) {
                adminErrors++;
            }
            adminPolls++;
        }

        private int runConsumer(long deadline) throws Exception {
            Properties props = new Properties();
            props.put("bootstrap.servers", args.bootstrap);
            props.put("group.id", args.group);
            props.put("auto.offset.reset", "earliest");
            props.put("enable.auto.commit", "false");
            props.put("key.deserializer", ByteArrayDeserializer.class.getName());
            props.put("value.deserializer", ByteArrayDeserializer.class.getName());
            props.putAll(args.extra);
            clientStart = System.nanoTime();
            KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
            consumer.subscribe(Collections.singletonList(args.topic));
            waitPhase();
            while (consumed < args.records) {
                if (remainingMs(deadline) <= 0) {
                    throw new IllegalStateException("timed out after " + args.timeoutMs
                            + " ms having consumed " + consumed + " of " + args.records + " records");
                }
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(100));
                if (!firstConsumedSeen && batch.count() > 0) {
                    firstConsumed = System.nanoTime();
                    firstConsumedSeen = true;
                }
                consumed += batch.count();
            }
            commitRetrying(consumer);
            // Keep polling while settling, as a live application would: the fetch sessions
            // and heartbeats it keeps up are part of the steady state being measured.
            long settleEnd = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settleMs());
            long nextCommit = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(args.lifeEveryMs);
            while (System.nanoTime() < settleEnd && !(args.lifeEveryMs > 0 && settleEnded())) {
                long left = TimeUnit.NANOSECONDS.toMillis(settleEnd - System.nanoTime());
                consumed += consumer.poll(Duration.ofMillis(Math.max(1, Math.min(100, left)))).count();
                if (args.lifeEveryMs > 0 && System.nanoTime() >= nextCommit) {
                    // Asynchronous, as a polling loop commits: a commit refused while the
                    // coordinator moves is retried by the next one, not waited for.
                    consumer.commitAsync();
                    nextCommit += TimeUnit.MILLISECONDS.toNanos(args.lifeEveryMs);
                }
            }
            return finish(consumer, connectionMetrics(consumer.metrics(), "consumer-metrics"));
        }

        /** commitSync, tried again (up to 5 times, a short poll between tries) when the
         *  commit is refused, then given up on with a line on stderr: during a rolling restart
         *  the embedded cluster fences a commit that carries the leader epoch of records
         *  fetched before the restart (kafka-clients 4.4.0: "Unexpected error in commit: The
         *  leader epoch in the request is older than the epoch on the broker"), and the
         *  consumer commits that epoch until it fetches again. The life measures connections,
         *  not commits: a refused commit must not end it. */
        private void commitRetrying(KafkaConsumer<byte[], byte[]> consumer) {
            for (int attempt = 1; attempt <= 5; attempt++) {
                try {
                    consumer.commitSync();
                    return;
                } catch (KafkaException e) {
                    System.err.println("commitSync refused (attempt " + attempt + "): " + e);
                }
                try {
                    consumer.poll(Duration.ofMillis(200));
                } catch (KafkaException e) {
                    System.err.println("poll after a refused commit: " + e);
                }
            }
            System.err.println("commitSync refused 5 times: going on without it");
        }

        /** The "wait" phase, marked in the client's own log so that connections made during
         *  it (or not) can be read off the same clock as the NetworkClient lines. */
        private void waitPhase() throws InterruptedException {
            if (args.waitMs <= 0) {
                return;
            }
            // Looked up here, not in a static field: log4j must not start before main() has
            // set probe.log.file.
            Logger phases = LoggerFactory.getLogger("connmgr.probe.Phases");
            phases.info("Probe phase wait begins ({} ms)", args.waitMs);
            Thread.sleep(args.waitMs);
            phases.info("Probe phase wait ends");
        }

        /**
         * The end of every run: report the steady phase and wait (so the caller can sample the
         * JVM's sockets), close the client, report the closed phase. Returns the exit code.
         */
        private int finish(AutoCloseable client, Map<String, List<Metric>> metrics) throws Exception {
            steadyThenWait(metrics);
            client.close();
            emitPhase("closed", metrics);
            return 0;
        }

        private void steadyThenWait(Map<String, List<Metric>> metrics) throws Exception {
            emitPhase("steady", metrics);
            BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            // A line or EOF both mean "go on": if the caller died, closing is still right.
            stdin.readLine();
            releasedAt = logTime();
        }

        private void emitPhase(String phase, Map<String, List<Metric>> metrics) {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("phase", phase);
            out.put("client", args.client);
            out.put("version", clientVersion());
            out.put("pid", ProcessHandle.current().pid());
            out.put("records_sent", sent.get());
            out.put("records_acked", acked.get());
            out.put("records_consumed", consumed);
            out.put("metrics", metricValues(metrics));
            if ("producer".equals(args.client)) {
                List<Integer> failed = new ArrayList<>(failedRecords);
                Collections.sort(failed);
                out.put("failed_records", failed);
                out.put("aborted_records", abortedRecords);
            }
            if (args.transactionalId != null) {
                out.put("transactions_committed", transactionsCommitted);
                out.put("transactions_aborted", transactionsAborted);
            }
            if ("admin".equals(args.client)) {
                out.put("admin_polls", adminPolls);
                out.put("admin_errors", adminErrors);
            }
            long ack = firstAck.get();
            out.put("ttfa_ms", ack != NO_TIME ? millisSince(clientStart, ack) : null);
            out.put("ttfc_ms", firstConsumedSeen ? millisSince(clientStart, firstConsumed) : null);
            out.put("started_at", startedAt);
            out.put("log_time", logTime());
            if (releasedAt != null) {
                out.put("released_at", releasedAt);
            }
            json.println(Json.write(out));
            json.flush();
        }
    }

    /** Each metric's value now, summed over its instances; an optional metric the client
     *  does not have is left out. */
    static Map<String, Object> metricValues(Map<String, List<Metric>> metrics) {
        Map<String, Object> values = new LinkedHashMap<>();
        for (Map.Entry<String, List<Metric>> e : metrics.entrySet()) {
            if (e.getValue().isEmpty()) {
                continue;  // an optional metric the client does not have
            }
            double sum = 0;
            for (Metric m : e.getValue()) {
                Object v = m.metricValue();
                sum += v instanceof Number ? ((Number) v).doubleValue() : Double.NaN;
            }
            values.put(e.getKey(), sum);
        }
        return values;
    }

    /**
     * {@code --client serverless}: a new producer per start, driven line by line from stdin
     * (see the class comment). One producer exists at a time; each is closed before the next
     * start is read.
     */
    static final class Serverless {
        private final Args args;
        private final PrintStream json;
        private final BufferedReader stdin =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

        Serverless(Args args, PrintStream json) {
            this.args = args;
            this.json = json;
        }

        int run() throws Exception {
            Map<String, Object> ready = new LinkedHashMap<>();
            ready.put("phase", "ready");
            ready.put("version", clientVersion());
            ready.put("pid", ProcessHandle.current().pid());
            emit(ready);
            while (true) {
                String line = stdin.readLine();
                if (line == null || "quit".equals(line.trim())) {
                    return 0;
                }
                int start;
                try {
                    start = Integer.parseInt(line.trim());
                } catch (NumberFormatException e) {
                    throw new UsageError("a start number or quit on stdin, got " + line);
                }
                runStart(start);
            }
        }

        private void runStart(int start) throws Exception {
            Properties props = new Properties();
            props.put("bootstrap.servers", args.bootstrap);
            props.put("acks", "all");
            props.put("key.serializer", ByteArraySerializer.class.getName());
            props.put("value.serializer", ByteArraySerializer.class.getName());
            props.putAll(args.extra);
            AtomicInteger acked = new AtomicInteger();
            AtomicLong firstAck = new AtomicLong(NO_TIME);
            ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(args.timeoutMs);
            long clientStart = System.nanoTime();
            KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
            Map<String, List<Metric>> metrics = connectionMetrics(producer.metrics(), "producer-metrics");
            List<Future<RecordMetadata>> futures = new ArrayList<>(args.records);
            for (int i = 0; i < args.records; i++) {
                byte[] value = (args.valuePrefix + ":" + start + ":" + i).getBytes(StandardCharsets.UTF_8);
                ProducerRecord<byte[], byte[]> record =
                        new ProducerRecord<>(args.topic, i % args.partitions, null, value);
                futures.add(producer.send(record, (metadata, exception) -> {
                    if (exception == null) {
                        firstAck.compareAndSet(NO_TIME, System.nanoTime());
                        acked.incrementAndGet();
                    } else {
                        errors.add(describe(exception));
                    }
                }));
            }
            for (Future<RecordMetadata> f : futures) {
                try {
                    f.get(remainingMs(deadline), TimeUnit.MILLISECONDS);
                } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
                    // Counted: the callback names a failed send; a timeout leaves it unacked.
                    errors.add(describe(e));
                }
            }
            Map<String, Object> done = new LinkedHashMap<>();
            done.put("phase", "acked");
            done.put("start", start);
            done.put("sent", args.records);
            done.put("acked", acked.get());
            done.put("errors", new ArrayList<>(errors));
            long ack = firstAck.get();
            done.put("ttfa_ms", ack != NO_TIME ? millisSince(clientStart, ack) : null);
            emit(done);
            // The caller samples the sockets now; a line (or EOF) means "close".
            stdin.readLine();
            producer.close();
            Map<String, Object> closed = new LinkedHashMap<>();
            closed.put("phase", "closed");
            closed.put("start", start);
            // Read after close: the Metric objects still hold the final counts.
            closed.put("metrics", metricValues(metrics));
            closed.put("closed_ms", millisSince(clientStart, System.nanoTime()));
            emit(closed);
        }

        private void emit(Map<String, Object> out) {
            out.put("log_time", logTime());
            json.println(Json.write(out));
            json.flush();
        }
    }

    /**
     * The client's connection metrics, by name, from its Selector's group ({@code
     * producer-metrics} / {@code consumer-metrics} / {@code admin-client-metrics}); all three
     * names of METRICS exist since Kafka 1.0, those of OPTIONAL_METRICS are listed empty when
     * the client lacks them.
     *
     * <p>The Metric objects themselves are kept, not their values: closing a client removes its
     * Selector's metrics from the registry (SelectorMetrics.close), and a closed 4.x consumer
     * refuses {@code metrics()} altogether, yet the objects still measure the final counts.
     */
    static Map<String, List<Metric>> connectionMetrics(Map<MetricName, ? extends Metric> all, String group) {
        Map<String, List<Metric>> found = new LinkedHashMap<>();
        for (String name : METRICS) {
            found.put(name, new ArrayList<>());
        }
        for (String name : OPTIONAL_METRICS) {
            found.put(name, new ArrayList<>());
        }
        for (Map.Entry<MetricName, ? extends Metric> e : all.entrySet()) {
            MetricName n = e.getKey();
            if (group.equals(n.group()) && found.containsKey(n.name())) {
                found.get(n.name()).add(e.getValue());
            }
        }
        for (Map.Entry<String, List<Metric>> e : found.entrySet()) {
            if (e.getValue().isEmpty() && METRICS.contains(e.getKey())) {
                throw new IllegalStateException("metric " + group + "/" + e.getKey() + " not found");
            }
        }
        return found;
    }

    /**
     * The version of kafka-clients on the classpath, from the {@code kafka/kafka-version.properties}
     * resource in its jar: read directly because AppInfoParser, which exposes it, moved to an
     * internals package in 4.x.
     */
    static String clientVersion() {
        try (InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in == null) {
                return "unknown";
            }
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version", "unknown");
        } catch (IOException e) {
            return "unknown";
        }
    }

    /**
     * {@code producer.sendOffsetsToTransaction(offsets, group)}, through whichever signature the
     * client has: {@code (Map, ConsumerGroupMetadata)} since 2.5 (the only one in 4.x), else
     * {@code (Map, String)} (2.1.0 has no ConsumerGroupMetadata). Reflection keeps the source
     * compiling against both.
     */
    static void sendOffsets(KafkaProducer<byte[], byte[]> producer, TopicPartition tp, long offset, String group)
            throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets = Collections.singletonMap(tp, new OffsetAndMetadata(offset));
        Object groupArg;
        Class<?> groupType;
        try {
            groupType = Class.forName("org.apache.kafka.clients.consumer.ConsumerGroupMetadata");
            groupArg = groupType.getConstructor(String.class).newInstance(group);
        } catch (ClassNotFoundException e) {
            groupType = String.class;
            groupArg = group;
        }
        Method method = KafkaProducer.class.getMethod("sendOffsetsToTransaction", Map.class, groupType);
        try {
            method.invoke(producer, offsets, groupArg);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            throw cause instanceof Exception ? (Exception) cause : e;
        }
    }

    static Double millisSince(long startNanos, long endNanos) {
        return (endNanos - startNanos) / 1e6;
    }

    static long remainingMs(long deadlineNanos) {
        return Math.max(0, TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime()));
    }

    static String logTime() {
        return new SimpleDateFormat(LOG_TIME_FORMAT).format(new Date());
    }

    /** The exception and its causes, one "Class: message" each, outermost first. */
    static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
            if (sb.length() > 0) {
                sb.append(" <- caused by ");
            }
            sb.append(c.getClass().getName()).append(": ").append(c.getMessage());
        }
        return sb.toString();
    }

    static void emitError(PrintStream json, String error, Throwable t) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("phase", "error");
        out.put("error", error);
        out.put("log_time", logTime());
        json.println(Json.write(out));
        json.flush();
        if (t != null) {
            t.printStackTrace(System.err);
        }
    }

    /** Just enough JSON writing for maps and lists of strings, numbers, booleans, maps and lists. */
    static final class Json {
        private Json() {
        }

        static String write(Object value) {
            StringBuilder sb = new StringBuilder();
            append(sb, value);
            return sb.toString();
        }

        private static void append(StringBuilder sb, Object value) {
            if (value == null) {
                sb.append("null");
            } else if (value instanceof Map) {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    string(sb, String.valueOf(e.getKey()));
                    sb.append(':');
                    append(sb, e.getValue());
                }
                sb.append('}');
            } else if (value instanceof List) {
                sb.append('[');
                boolean first = true;
                for (Object item : (List<?>) value) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    append(sb, item);
                }
                sb.append(']');
            } else if (value instanceof Double || value instanceof Float) {
                double d = ((Number) value).doubleValue();
                // JSON has no NaN/Infinity; null says "no value" without breaking the parser.
                sb.append(Double.isFinite(d) ? Double.toString(d) : "null");
            } else if (value instanceof Number || value instanceof Boolean) {
                sb.append(value);
            } else {
                string(sb, value.toString());
            }
        }

        private static void string(StringBuilder sb, String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"': sb.append("\\\""); break;
                    case '\\': sb.append("\\\\"); break;
                    case '\n': sb.append("\\n"); break;
                    case '\r': sb.append("\\r"); break;
                    case '\t': sb.append("\\t"); break;
                    default:
                        if (c < 0x20) {
                            sb.append(String.format("\\u%04x", (int) c));
                        } else {
                            sb.append(c);
                        }
                }
            }
            sb.append('"');
        }
    }
}
