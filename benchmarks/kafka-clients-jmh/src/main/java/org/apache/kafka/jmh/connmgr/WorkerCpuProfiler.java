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

import org.openjdk.jmh.infra.BenchmarkParams;
import org.openjdk.jmh.infra.IterationParams;
import org.openjdk.jmh.profile.InternalProfiler;
import org.openjdk.jmh.results.AggregationPolicy;
import org.openjdk.jmh.results.IterationResult;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.ScalarResult;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;

/**
 * {@code -prof org.apache.kafka.jmh.connmgr.WorkerCpuProfiler}: the CPU time the benchmark's worker threads spent per
 * operation ({@code cpu.time.norm}, ns/op), beside JMH's wall-clock score.
 * <p>
 * Why: on a machine shared with other work the wall clock also counts the time the worker waited for a core, which
 * differs from one fork to the next with the neighbours' load; the worker's own CPU time does not (cache and memory
 * contention still show). JIT compiler and GC threads are left out: allocation is reported by {@code -prof gc}.
 */
public class WorkerCpuProfiler implements InternalProfiler {

    private final ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    private Map<Long, Long> before = Collections.emptyMap();

    @Override
    public String getDescription() {
        return "CPU time of the JMH worker threads per operation";
    }

    @Override
    public void beforeIteration(BenchmarkParams benchmarkParams, IterationParams iterationParams) {
        before = workerCpuNanos();
    }

    @Override
    public Collection<? extends Result> afterIteration(BenchmarkParams benchmarkParams, IterationParams iterationParams,
                                                       IterationResult result) {
        Map<Long, Long> after = workerCpuNanos();
        long spent = 0;
        for (Map.Entry<Long, Long> entry : after.entrySet())
            spent += entry.getValue() - before.getOrDefault(entry.getKey(), 0L);
        long ops = result.getMetadata().getAllOps();
        double perOp = ops == 0 ? Double.NaN : (double) spent / ops;
        return Collections.singletonList(new ScalarResult("cpu.time.norm", perOp, "ns/op", AggregationPolicy.AVG));
    }

    /** CPU nanoseconds of each live JMH worker thread, by thread id. */
    private Map<Long, Long> workerCpuNanos() {
        Map<Long, Long> cpu = new HashMap<>();
        for (ThreadInfo info : threads.getThreadInfo(threads.getAllThreadIds())) {
            if (info == null || !info.getThreadName().contains("jmh-worker"))
                continue;
            long nanos = threads.getThreadCpuTime(info.getThreadId());
            if (nanos >= 0)
                cpu.put(info.getThreadId(), nanos);
        }
        return cpu;
    }
}
