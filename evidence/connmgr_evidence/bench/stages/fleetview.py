"""The fleet as the brokers see it: every client's sockets added up per broker and time
bucket, in Spark tasks (or here, for tests and replay).

Clients share nothing, so a broker's sockets at an instant are the sum of every client's
sockets there, and its handshakes the sum of theirs. The Spark job (:func:`run_fleet`)
ships nothing but client indices: each task draws its clients
(:mod:`connmgr_evidence.bench.stages.fleet`),
simulates each under every policy, and groups the sockets by (policy, broker); a shuffle
brings each broker's sockets together, and one pass over them
(:func:`broker_series`) gives per ``bucket_ms``:

* ``sockets_avg``: the time-average of the sockets open at the broker (socket-seconds in
  the bucket over its length; additive over clients),
* ``sockets_max``: the most open at once within the bucket (not additive: computed from
  the merged opens and closes),
* ``handshakes``: connections established there;

and the fleet's handshakes per second, per policy. The driver gathers one compressed blob
per task and fills in the brokers nothing reached. :func:`fleet_local` computes the same
without Spark: the test checks they agree exactly (every sum is taken in sorted order).

Measured: 10,000 clients x 1,000 brokers x one hour (the full grid's ``[fleet]``, 30,000
simulations) took 416 s on ``local[2]`` while another job shared the two cores (load 3.5 to
4.6), 397 s of it CPU in the tasks -- about 3.5 minutes on two idle cores. The simulations
are nearly all of it (13 ms a client and policy; the shuffle, the brokers' series and the
gathering a few seconds). Of a simulation, about a third is O(brokers) cluster work: the
metadata answers listing 1,000 brokers (a fifth), the failover's scan of live brokers, and
building the client's 1,000-broker cluster (under a tenth: not worth sharing between runs,
which would need a copy of a mutable model); the rest is the client's and the policy's
event handling.
"""

from __future__ import annotations

import pickle
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from connmgr_evidence.bench.fleetplan import DURATION_MS, FleetSettings
from connmgr_evidence.bench.runtime.sparkjob import Progress, spark_job
from connmgr_evidence.bench.stages.fleet import FLEET_POLICIES, ClientSockets, fleet_sockets
from connmgr_evidence.bench.stages.sweep import default_slices

SECONDS = DURATION_MS // 1000

Gathered = tuple[list[tuple[float, float]], list[float], list[float]]
"""A broker's sockets under one policy: (from, to) of each, handshake times, refused dials."""
BrokerKey = tuple[str, int]


@dataclass(frozen=True)
class BrokerSeries:
    """One broker under one policy, per time bucket of the hour."""

    policy: str
    broker: int
    sockets_avg: tuple[float, ...]
    sockets_max: tuple[int, ...]
    handshakes: tuple[int, ...]
    refused: int
    """Dials meant for it that it refused (it was down)."""


@dataclass(frozen=True)
class FleetView:
    """The whole fleet: a :class:`BrokerSeries` per policy and broker (every broker, in
    policy then broker order) and the handshakes per second of the hour, per policy."""

    settings: FleetSettings
    policies: tuple[str, ...]
    series: tuple[BrokerSeries, ...]
    per_second: Mapping[str, tuple[int, ...]]
    wall_s: float
    cpu_s: float
    """CPU seconds the clients' simulations took (in Spark: summed over the tasks, which
    says what the wall time would be on idle cores)."""


def open_at(intervals: Iterable[tuple[float, float]], t_ms: float) -> int:
    """Sockets open at instant ``t_ms``: dialled at or before it, not ended by it."""
    return sum(1 for start, end in intervals if start <= t_ms < end)


def gather(sockets: Iterable[ClientSockets]) -> dict[BrokerKey, Gathered]:
    """Clients' sockets grouped by (policy, broker)."""
    out: dict[BrokerKey, Gathered] = defaultdict(lambda: ([], [], []))
    for c in sockets:
        for broker, start, end in c.intervals:
            out[(c.policy, broker)][0].append((start, end))
        for broker, at in c.handshakes:
            out[(c.policy, broker)][1].append(at)
        for broker, at in c.refused:
            out[(c.policy, broker)][2].append(at)
    return dict(out)


def _merge(a: Gathered, b: Gathered) -> Gathered:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def broker_series(key: BrokerKey, got: Gathered, settings: FleetSettings) -> BrokerSeries:
    """One broker's buckets from its sockets (one pass, in time order)."""
    width, count = settings.bucket_ms, settings.buckets
    spans = sorted((s, e) for s, e in got[0] if e > s)
    # Time-average: buckets a socket covers whole through a difference array, the two
    # partial ends added directly; O(sockets + buckets), not O(sockets x buckets).
    whole = [0] * (count + 1)
    part = [0.0] * count
    for s, e in spans:
        first, last = int(s // width), min(int(e // width), count)
        if first == last:
            part[first] += e - s
            continue
        part[first] += (first + 1) * width - s
        whole[first + 1] += 1
        whole[last] -= 1
        if last < count:
            part[last] += e - last * width
    avg, covering = [], 0
    for k in range(count):
        covering += whole[k]
        avg.append(covering + part[k] / width)
    return BrokerSeries(
        key[0],
        key[1],
        tuple(avg),
        tuple(_peaks(spans, width, count)),
        tuple(_histogram(got[1], width, count)),
        len(got[2]),
    )


def _peaks(spans: Sequence[tuple[float, float]], width: int, count: int) -> list[int]:
    """The most sockets open at once in each bucket. At one instant ends go before starts
    (a socket is open on [dial, end))."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    peaks = [0] * count
    now = bucket = 0
    for t, step in events:
        at = min(int(t // width), count - 1)
        while bucket < at:
            bucket += 1
            peaks[bucket] = max(peaks[bucket], now)  # open since before the bucket began
        if t > at * width:
            peaks[at] = max(peaks[at], now)
        now += step
        peaks[at] = max(peaks[at], now)
    for k in range(bucket + 1, count):
        peaks[k] = now
    return peaks


def _histogram(times: Iterable[float], width: float, count: int) -> list[int]:
    out = [0] * count
    for t in times:
        out[min(int(t // width), count - 1)] += 1
    return out


def assemble(
    settings: FleetSettings,
    series: Iterable[BrokerSeries],
    seconds: Mapping[str, Counter[int]],
    wall_s: float,
    cpu_s: float,
    policies: Sequence[str] = FLEET_POLICIES,
) -> FleetView:
    """The view from the brokers' series: the brokers nothing reached filled in (all
    zeros), every policy's brokers in order."""
    have = {(s.policy, s.broker): s for s in series}
    zeros_f, zeros_i = (0.0,) * settings.buckets, (0,) * settings.buckets
    full = tuple(
        have.get((p, b)) or BrokerSeries(p, b, zeros_f, zeros_i, zeros_i, 0)
        for p in policies
        for b in range(1, settings.brokers + 1)
    )
    per_second = {
        p: tuple(seconds.get(p, Counter()).get(s, 0) for s in range(SECONDS)) for p in policies
    }
    return FleetView(settings, tuple(policies), full, per_second, wall_s, cpu_s)


def _seconds(sockets: Iterable[ClientSockets]) -> dict[str, Counter[int]]:
    out: dict[str, Counter[int]] = defaultdict(Counter)
    for c in sockets:
        out[c.policy].update(min(int(t // 1000), SECONDS - 1) for _, t in c.handshakes)
    return dict(out)


def fleet_local(settings: FleetSettings, policies: Sequence[str] = FLEET_POLICIES) -> FleetView:
    """The fleet computed in this process, without Spark (for tests and replay)."""
    started, cpu = time.perf_counter(), time.process_time()
    sockets = list(fleet_sockets(range(settings.clients), settings, policies))
    cpu = time.process_time() - cpu
    series = [broker_series(k, g, settings) for k, g in gather(sockets).items()]
    wall = time.perf_counter() - started
    return assemble(settings, series, _seconds(sockets), wall, cpu, policies)


# --------------------------------------------------------------------------- in Spark

_Partial = tuple[str, Any]
"""What a task emits: ("broker", ((policy, broker), Gathered)), then ("seconds", counters
per policy) and ("cpu", its simulations' CPU seconds)."""


def run_fleet(
    spark: Any,
    settings: FleetSettings,
    *,
    policies: Sequence[str] = FLEET_POLICIES,
    slices: int | None = None,
    progress: Progress | None = None,
) -> FleetView:
    """The fleet of ``settings`` in Spark: clients simulated in ``slices`` tasks (default as
    the sweep's: about 250 clients a task, two tasks a core at least), brokers' series
    computed after one shuffle, gathered on the driver. ``progress`` is called with (tasks
    done, tasks) about once a second. A failed Spark job is a
    :class:`~connmgr_evidence.bench.runtime.spark.SparkJobFailed`."""
    sc = spark.sparkContext
    slices = slices or default_slices(spark, settings.clients)
    chosen = tuple(policies)

    def simulate(indices: Iterable[int]) -> Iterator[_Partial]:
        cpu = time.process_time()
        sockets = list(fleet_sockets(indices, settings, chosen))
        yield ("cpu", time.process_time() - cpu)
        yield ("seconds", _seconds(sockets))
        for item in gather(sockets).items():
            yield ("broker", item)

    def per_broker(kv: tuple[BrokerKey, Gathered]) -> _Partial:
        return ("broker", broker_series(kv[0], kv[1], settings))

    partials = sc.range(settings.clients, numSlices=slices).mapPartitions(simulate).cache()
    brokers = (
        partials.filter(lambda p: p[0] == "broker")
        .map(lambda p: p[1])
        .reduceByKey(_merge, numPartitions=slices)
        .map(per_broker)
    )
    fleetwide = partials.filter(lambda p: p[0] != "broker")
    started = time.perf_counter()
    try:
        with spark_job(sc, f"connmgr fleet of {settings.clients} clients", progress):
            # One job: the fleet-wide partials ride along with the brokers' series (cached:
            # the clients are simulated once), each task's output packed into one blob.
            blobs = brokers.union(fleetwide).mapPartitions(_packed).collect()
    finally:
        partials.unpersist()
    series: list[BrokerSeries] = []
    totals: dict[str, Counter[int]] = defaultdict(Counter)
    cpu = 0.0
    for blob in blobs:
        for what, value in pickle.loads(zlib.decompress(blob)):
            if what == "broker":
                series.append(value)
            elif what == "cpu":
                cpu += value
            else:
                for policy, counts in value.items():
                    totals[policy].update(counts)
    wall = time.perf_counter() - started
    return assemble(settings, series, totals, wall, cpu, chosen)


def _packed(items: Iterable[_Partial]) -> Iterator[bytes]:
    yield zlib.compress(pickle.dumps(list(items), protocol=pickle.HIGHEST_PROTOCOL))
