"""The fleet's per-broker figures on Spark, for fleets too large to expand in one process.

The simulation is the same as in :mod:`.fleet_model` (a class's templates, simulated on the
driver: a few dozen per class and client model, whatever the fleet's size). What grows with
the fleet is its expansion -- every client's sockets, dials and handshakes, shifted to its
start -- and that is what runs on the executors: the templates and start shifts are
broadcast, each task expands a range of clients and reduces them to

* dials per (broker, second of the hour);
* handshakes per broker;
* per (broker, second): the net change of open sockets and the highest running count
  reached within the second (events sorted by time, a close before an open at one instant);

and the driver folds the seconds in order into each broker's peak (broker 0: the cluster).
The figures are exactly :func:`.fleet_model.per_broker`'s and
:func:`connmgr.bench.workloads.compose.load_of`'s but for ``socket_seconds``, a float sum in
another order (equal to about 1e-12 relative).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import numpy as np

from connmgr.bench.fleetplan import DURATION_MS
from connmgr.bench.workloads.compose import BrokerLoad

from .fleet_model import BrokerFigures, Groups

CLIENTS_PER_TASK: Final = 20_000
END: Final = float(DURATION_MS)
SECONDS: Final = DURATION_MS // 1000

Template = tuple[
    tuple[tuple[int, float, float], ...],
    tuple[tuple[int, float], ...],
    tuple[tuple[int, float], ...],
]


def _expand(
    task: tuple[int, int, int], templates: Any, shifts: Any
) -> Iterator[tuple[str, Any, Any]]:
    """Client ``lo..hi`` of group ``g``: ("try", (broker, second), 1), ("shake", broker, 1),
    ("sock", (broker, second), (t, step)) for broker and cluster (0), ("secs", 0, held)."""
    g, lo, hi = task
    lives: list[Template] = templates.value[g]
    starts = shifts.value[g]
    n = len(lives)
    held = 0.0
    for j in range(lo, hi):
        intervals, dials, shakes = lives[j % n]
        shift = float(starts[j])
        for b, s in dials:
            t = shift + s
            if 0.0 <= t < END:
                yield ("try", (b, int(t // 1000)), 1)
        for b, s in shakes:
            t = shift + s
            if 0.0 <= t < END:
                yield ("shake", b, 1)
        for b, s, e in intervals:
            o, c = shift + s, shift + e
            if not (o < END and c > 0.0):
                continue
            o, c = min(max(o, 0.0), END), min(max(c, 0.0), END)
            held += c - o
            for key in (b, 0):
                yield ("sock", (key, int(o // 1000)), (o, 1))
                yield ("sock", (key, int(c // 1000)), (c, -1))
    yield ("secs", 0, held)


def _within_second(events: Any) -> tuple[int, int]:
    """(net change, highest running count from 0) of one second's (t, step) events."""
    running = top = 0
    for _t, step in sorted(events):
        running += step
        top = max(top, running)
    return running, top


def spark_figures(
    spark: Any, groups: Groups, brokers: int
) -> tuple[list[BrokerFigures], BrokerLoad]:
    """:func:`.fleet_model.per_broker` and ``load_of`` of ``groups`` on ``spark``."""
    sc = spark.sparkContext
    templates = sc.broadcast(
        [
            [
                (
                    tuple((b, s, e) for b, s, e in life.intervals),
                    tuple((b, s) for b, s, _ in life.intervals) + tuple(life.refused),
                    tuple(life.handshakes),
                )
                for life in lives
            ]
            for lives, _ in groups
        ]
    )
    shifts = sc.broadcast([np.asarray(s, dtype=np.float64) for _, s in groups])
    tasks = [
        (g, lo, min(lo + CLIENTS_PER_TASK, len(s)))
        for g, (_, s) in enumerate(groups)
        for lo in range(0, len(s), CLIENTS_PER_TASK)
    ]
    try:
        rdd = sc.parallelize(tasks, max(1, len(tasks))).flatMap(
            lambda task: _expand(task, templates, shifts)
        )
        rdd.cache()
        tries = (
            rdd.filter(lambda r: r[0] == "try").map(lambda r: (r[1], r[2])).reduceByKey(_add)
        ).collect()
        shakes = (
            rdd.filter(lambda r: r[0] == "shake").map(lambda r: (r[1], r[2])).reduceByKey(_add)
        ).collect()
        seconds = (
            rdd.filter(lambda r: r[0] == "sock")
            .map(lambda r: (r[1], r[2]))
            .groupByKey()
            .mapValues(_within_second)
        ).collect()
        held = rdd.filter(lambda r: r[0] == "secs").map(lambda r: r[2]).sum()
        rdd.unpersist()
    finally:
        templates.unpersist()
        shifts.unpersist()
    per_second = np.zeros((brokers + 1, SECONDS), dtype=np.int64)
    for (b, sec), n in tries:
        per_second[b, sec] += n
    shake_counts = np.zeros(brokers + 1, dtype=np.int64)
    for b, n in shakes:
        shake_counts[b] += n
    peaks = np.zeros(brokers + 1, dtype=np.int64)
    running = np.zeros(brokers + 1, dtype=np.int64)
    for (b, _sec), (net, top) in sorted(seconds):
        peaks[b] = max(peaks[b], running[b] + top)
        running[b] += net
    figures = [
        BrokerFigures(b, int(peaks[b]), int(per_second[b].max(initial=0)), int(shake_counts[b]))
        for b in range(1, brokers + 1)
    ]
    load = BrokerLoad(
        peak_connections=int(peaks[1:].max(initial=0)),
        peak_attempts=int(per_second.max(initial=0)),
        p99_attempts=float(np.percentile(per_second[1:], 99, axis=1).max(initial=0.0)),
        handshakes=int(shake_counts.sum()),
        broker_handshakes=int(shake_counts.max(initial=0)),
        attempts=int(per_second.sum()),
        socket_seconds=float(held) / 1000.0,
        cluster_peak_connections=int(peaks[0]),
        cluster_peak_attempts=int(per_second.sum(axis=0).max(initial=0)),
    )
    return figures, load


def _add(a: int, b: int) -> int:
    return a + b
