"""The fleet's per-broker figures on Spark, for fleets too large to expand in one process.

The simulation is the same as in :mod:`.fleet_model` (a class's templates, simulated on the
driver: a few dozen per class and client model, whatever the fleet's size). What grows with
the fleet is its expansion -- every client's sockets, dials and handshakes, shifted to its
start -- and that is what runs on the executors: the templates and start shifts are
broadcast, and each task expands a range of clients with the stage's own
:func:`~connmgr_evidence.bench.workloads.compose.fleet_events` (numpy), then reduces them to

* dials per (broker, second of the hour) and handshakes per broker (arrays, summed);
* socket-seconds (summed);
* the sockets' opens (+1) and closes (-1) per (broker, minute of the hour), broker 0 for the
  cluster, shuffled so that one task sees a whole minute of one broker: it sorts them (a
  close before an open at one instant) and gives, per second, the net change and the highest
  running count reached within it;

and the driver folds the seconds in order into each broker's peak. The figures are exactly
:func:`.fleet_model.per_broker`'s and :func:`connmgr_evidence.bench.workloads.compose.load_of`'s but
for ``socket_seconds``, a float sum in another order (equal to about 1e-12 relative).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, Final

import numpy as np

from connmgr_evidence.bench.fleetplan import DURATION_MS
from connmgr_evidence.bench.workloads.compose import BrokerLoad

from .fleet_model import BrokerFigures, Groups

CLIENTS_PER_TASK: Final = 20_000
SECONDS: Final = DURATION_MS // 1000

BLOCK_MS: Final = 60_000
"""The sockets' events are shuffled by (broker, minute)."""


def _expand(task: tuple[int, int, int], templates: Any, shifts: Any) -> Iterator[Any]:
    """Clients ``lo..hi`` of group ``g``, reduced (see the module doc): ("try", array),
    ("shake", array), ("secs", float), and ((broker, minute), (times, steps)) per minute."""
    from connmgr_evidence.bench.workloads.compose import fleet_events

    g, lo, hi = task
    lives = templates.value[g]
    n = len(lives)
    # Client j is lives[j mod n]: start the cycle at lo's template.
    rotated = lives[lo % n :] + lives[: lo % n]
    ev = fleet_events([(rotated, shifts.value[g][lo:hi])])
    brokers = templates.value[-1]
    tries = np.zeros((brokers + 1, SECONDS), dtype=np.int64)
    np.add.at(tries, (ev.try_brokers, (ev.tries // 1000).astype(np.int64)), 1)
    yield ("try", tries)
    yield ("shake", np.bincount(ev.shake_brokers, minlength=brokers + 1).astype(np.int64))
    yield ("secs", float((ev.closes - ev.opens).sum()))
    times = np.concatenate([ev.opens, ev.closes])
    steps = np.concatenate([np.ones(ev.opens.size, np.int8), -np.ones(ev.closes.size, np.int8)])
    where = np.concatenate([ev.socket_brokers, ev.socket_brokers])
    blocks = (times // BLOCK_MS).astype(np.int64)
    if not times.size:
        return
    for key_brokers in (where, np.zeros_like(where)):
        order = np.lexsort((blocks, key_brokers))
        kb, bl = key_brokers[order], blocks[order]
        cuts = np.flatnonzero(np.r_[True, (kb[1:] != kb[:-1]) | (bl[1:] != bl[:-1]), True])
        for a, b in itertools.pairwise(cuts.tolist()):
            rows = order[a:b]
            yield ((int(kb[a]), int(bl[a])), (times[rows], steps[rows]))


def _concat(a: tuple[Any, Any], b: tuple[Any, Any]) -> tuple[Any, Any]:
    return (np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def _seconds(events: tuple[Any, Any]) -> list[tuple[int, int, int]]:
    """Per second of one (broker, minute): (second, net change, highest running count from 0
    within it), a close before an open at one instant."""
    times, steps = events
    order = np.lexsort((steps.astype(np.int64), times))
    t, st = times[order], steps[order].astype(np.int64)
    secs = (t // 1000).astype(np.int64)
    out = []
    cuts = np.flatnonzero(np.r_[True, secs[1:] != secs[:-1], True])
    for a, b in itertools.pairwise(cuts.tolist()):
        running = np.cumsum(st[a:b])
        out.append((int(secs[a]), int(running[-1]), int(max(0, running.max()))))
    return out


def spark_figures(
    spark: Any, groups: Groups, brokers: int
) -> tuple[list[BrokerFigures], BrokerLoad]:
    """:func:`.fleet_model.per_broker` and ``load_of`` of ``groups`` on ``spark``."""
    sc = spark.sparkContext
    templates = sc.broadcast([lives for lives, _ in groups] + [brokers])
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
        per_second = rdd.filter(lambda r: r[0] == "try").map(lambda r: r[1]).reduce(np.add)
        shake_counts = rdd.filter(lambda r: r[0] == "shake").map(lambda r: r[1]).reduce(np.add)
        held = rdd.filter(lambda r: r[0] == "secs").map(lambda r: r[1]).sum()
        seconds = (
            rdd.filter(lambda r: isinstance(r[0], tuple))
            .reduceByKey(_concat)
            .flatMap(lambda kv: [(kv[0][0], s) for s in _seconds(kv[1])])
        ).collect()
        rdd.unpersist()
    finally:
        templates.unpersist()
        shifts.unpersist()
    peaks = np.zeros(brokers + 1, dtype=np.int64)
    running = np.zeros(brokers + 1, dtype=np.int64)
    for b, (_sec, net, top) in sorted(seconds):
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
