/*
 * Licensed to the Apache Software Foundation (ASF) under one or more
 * contributor license agreements. See the NOTICE file distributed with
 * this work for additional information regarding copyright ownership.
 * The ASF licenses this file to You under the Apache License, Version 2.0
 * (the "License"); you may not use this file except in compliance with
 * the License. You may obtain a copy of the License at
 *
 *    http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */
package org.apache.kafka.jmh.connmgr;

import org.apache.kafka.clients.ClientResponse;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.HostResolver;
import org.apache.kafka.clients.Metadata;
import org.apache.kafka.clients.MetadataRecoveryStrategy;
import org.apache.kafka.clients.NetworkClient;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.requests.MetadataResponse;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.test.MockSelector;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * The cost of one {@link NetworkClient#poll} of a client whose metadata lists {@code brokers} nodes and which holds
 * READY connections to {@code ready} of them, the nodes a producer's partitions are led by; nothing is sent or
 * received, so what is measured is the poll path's own bookkeeping, the part the patch adds steps to.
 * <p>
 * The benchmark uses only kafka-clients 4.3.1's public API and runs over whichever kafka-clients jar is on the class
 * path: the released one, or the patch's build with its switches off or on. {@code variant} names the jar the runner
 * put there, and setup fails when the jar on the class path is not that variant, so a mislabelled run cannot be
 * reported. With the linger on (the switches-on build), setup publishes a producer's needs (the {@code ready} nodes)
 * through the patch's publisher, as the Sender does, found by reflection since the released API has none.
 * <p>
 * Time stands still ({@link MockTime} is never advanced and {@code poll(0, now)} waits for nothing), so no
 * metadata update, idle expiry, linger deadline or DNS refresh falls due inside the measurement: the per-poll work
 * is what the client does when nothing is due, which is the common case the steps must keep cheap.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class NetworkClientPollBenchmark {

    /**
     * Which kafka-clients jar the runner put on the class path: stock, off (patched, defaults) or on (switches on),
     * optionally with a suffix naming the build.
     */
    @Param({"stock"})
    public String variant;

    /** Nodes in the metadata / READY connections held (to the first nodes), as {@code brokers/ready}. */
    @Param({"3/3", "1000/50"})
    public String cluster;

    private static final byte[] LOOPBACK = {127, 0, 0, 1};

    private MockTime time;
    private MockSelector selector;
    private NetworkClient client;
    private Node[] readyNodes;

    @Setup(Level.Trial)
    public void setUp() throws Exception {
        checkVariant(variant);
        String[] shape = cluster.split("/");
        int brokers = Integer.parseInt(shape[0]);
        int ready = Integer.parseInt(shape[1]);
        if (ready > brokers)
            throw new IllegalArgumentException("cluster " + cluster + ": more ready connections than brokers");

        time = new MockTime(0, 1_000_000L, 0);
        selector = new MockSelector(time);
        // Every broker its own name, as in a real cluster; resolved without DNS (the benchmark dials nothing real).
        HostResolver resolver = host -> new InetAddress[] {InetAddress.getByAddress(host, LOOPBACK)};
        List<Node> nodes = new ArrayList<>(brokers);
        for (int i = 0; i < brokers; i++)
            nodes.add(new Node(i, "broker-" + i + ".kafka.invalid", 9092));
        Metadata metadata = new Metadata(100, 1000, 300_000, new LogContext(), new ClusterResourceListeners());
        MetadataResponse response = RequestTestUtils.metadataResponse(nodes, "jmh-cluster", 0, Collections.emptyList());
        metadata.updateWithCurrentRequestVersion(response, false, time.milliseconds());

        client = new NetworkClient(null, metadata, selector, "jmh", Integer.MAX_VALUE, 50, 1000,
                64 * 1024, 64 * 1024, 30_000, 10_000, 30_000, time, false,
                new org.apache.kafka.clients.ApiVersions(), null, new LogContext(), resolver, null, Long.MAX_VALUE,
                MetadataRecoveryStrategy.NONE);

        readyNodes = nodes.subList(0, ready).toArray(new Node[0]);
        publishProducerNeeds(client, readyNodes);
        for (Node node : readyNodes)
            client.ready(node, time.milliseconds());
        client.poll(0, time.milliseconds());
        // MockSelector reports a connection as connected until cleared: clear it once they are all READY.
        selector.clear();
        for (int i = 0; i < 3; i++)
            client.poll(0, time.milliseconds());
        for (Node node : readyNodes) {
            if (!client.isReady(node, time.milliseconds()))
                throw new IllegalStateException("node " + node.idString() + " is not READY after setup (" + variant + ")");
        }
        client.poll(0, time.milliseconds());
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        client.close();
    }

    /** One poll with nothing to send, receive or do: the poll path's fixed cost. */
    @Benchmark
    public List<ClientResponse> poll() {
        return client.poll(0, time.milliseconds());
    }

    /**
     * A producer's send loop without records: ask ready() of each leader (the Sender does, every loop, for each node
     * with a batch ready), then poll.
     */
    @Benchmark
    public List<ClientResponse> readyThenPoll() {
        long now = time.milliseconds();
        for (Node node : readyNodes)
            client.ready(node, now);
        return client.poll(0, now);
    }

    /**
     * Fails unless the kafka-clients jar on the class path is the named variant: stock, off or on, or one of those
     * with a suffix naming a build ({@code off-0013}: the patch with its switches off, from an earlier series).
     */
    static void checkVariant(String variant) throws Exception {
        String kind = variant.split("-", 2)[0];
        boolean patched;
        try {
            Class.forName("org.apache.kafka.clients.ConnectionNeeds");
            patched = true;
        } catch (ClassNotFoundException e) {
            patched = false;
        }
        String found;
        if (!patched) {
            found = "stock";
        } else {
            // Read the field's value at run time (javac would inline a constant reference at compile time).
            int linger = CommonClientConfigs.class.getField("DEFAULT_CONNECTIONS_LINGER_MS").getInt(null);
            found = linger < 0 ? "off" : "on";
        }
        if (!found.equals(kind))
            throw new IllegalStateException("variant " + variant + " asked, but the kafka-clients on the class path is "
                    + found);
    }

    /** With the patch's linger on, publish a producer's needs (the given leaders), as its Sender does. */
    private static void publishProducerNeeds(NetworkClient client, Node[] leaders) throws Exception {
        Class<?> needsClass;
        try {
            needsClass = Class.forName("org.apache.kafka.clients.ConnectionNeeds");
        } catch (ClassNotFoundException e) {
            return;
        }
        Object publisher = NetworkClient.class.getMethod("needsPublisher", String.class).invoke(client, "producer");
        Set<Node> nodes = new HashSet<>();
        Collections.addAll(nodes, leaders);
        Constructor<?> ctor = needsClass.getConstructor(Set.class, Set.class);
        Object needs = ctor.newInstance(nodes, Collections.emptySet());
        Method publish = Class.forName("org.apache.kafka.clients.ConnectionNeedsPublisher").getMethod("publish", needsClass);
        publish.invoke(publisher, needs);
    }
}
