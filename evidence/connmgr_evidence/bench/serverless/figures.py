"""The serverless report's figures from a run's raw data: pure functions, no cluster.

* Attempts per start: connections the forwarders accepted within each start's span, per
  broker; summarised as median and max of the totals, and the mean per broker.
* Attempts per second at each broker: the forwarder's accept instants over the variant's span,
  as (a) the **peak 1-second window** -- the most accepts in any window ``[t, t + 1 s)``,
  wherever it starts -- and (b) the **p99 over the run's seconds** -- the accepts counted in
  consecutive 1-second bins from the variant's first start, the bins' 99th percentile by the
  nearest-rank method (the smallest count that at least 99 % of the bins do not exceed).
* Peak concurrent connections per broker: the most of the forwarder's connections open at
  one instant, each open over ``[accepted, closed)`` (a close at the instant of another's
  accept is counted first, so back-to-back connections are not concurrent).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from connmgr_evidence.realkafka.serverless import LABELS, ServerlessRun, VariantRun

__all__ = [
    "VariantFigures",
    "attributed",
    "figures",
    "peak_concurrent",
    "peak_window",
    "per_second",
    "percentile",
    "problems",
]


def per_second(instants: Sequence[float], began: float, ended: float) -> list[int]:
    """Counts of ``instants`` in consecutive 1-second bins ``[began + k, began + k + 1)`` that
    cover ``[began, ended]`` (at least one bin; the last may be partial). Instants outside
    ``[began, ended]`` raise :class:`ValueError`: the caller chose the span."""
    if ended < began:
        raise ValueError(f"span ends before it begins: {began} > {ended}")
    bins = [0] * max(1, math.ceil(ended - began))
    for t in instants:
        if not began <= t <= ended:
            raise ValueError(f"instant {t} outside the span [{began}, {ended}]")
        bins[min(int(t - began), len(bins) - 1)] += 1
    return bins


def peak_window(instants: Sequence[float], width_s: float = 1.0) -> int:
    """The most ``instants`` in any half-open window ``[t, t + width_s)`` (0 for none)."""
    if width_s <= 0:
        raise ValueError(f"width_s must be > 0, got {width_s}")
    times = sorted(instants)
    best = 0
    for i, t in enumerate(times):
        # A window holding the most can always start at one of the instants.
        best = max(best, bisect.bisect_left(times, t + width_s, lo=i) - i)
    return best


def percentile(values: Sequence[int], q: float) -> int:
    """The ``q``-th percentile (0 < q <= 100) of ``values`` by nearest rank: the
    ``ceil(q / 100 * n)``-th smallest. Raises :class:`ValueError` on no values."""
    if not values:
        raise ValueError("no values")
    if not 0 < q <= 100:
        raise ValueError(f"q must be in (0, 100], got {q}")
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


def peak_concurrent(intervals: Sequence[tuple[float, float | None]]) -> int:
    """The most ``intervals`` ``[opened, closed)`` open at one instant; a None close never
    closes."""
    events: list[tuple[float, int]] = []
    for opened, closed in intervals:
        if closed is not None and closed < opened:
            raise ValueError(f"closed before opened: {opened} > {closed}")
        events.append((opened, 1))
        if closed is not None:
            events.append((closed, -1))
    # At one instant -1 sorts before +1: a close and an accept at once are not concurrent.
    events.sort()
    open_now = best = 0
    for _, step in events:
        open_now += step
        best = max(best, open_now)
    return best


def attributed(
    accepts: Sequence[float], spans: Sequence[tuple[float, float]]
) -> tuple[list[int], int]:
    """How many of ``accepts`` fall in each span ``[began, ended]`` (spans do not overlap),
    and how many fall in none."""
    counts = [sum(1 for t in accepts if began <= t <= ended) for began, ended in spans]
    return counts, len(accepts) - sum(counts)


@dataclass(frozen=True, slots=True)
class VariantFigures:
    """One row of the report's table (per-broker tuples in the run's broker order)."""

    variant: str
    label: str
    client: str
    starts: int
    attempts_median: float
    attempts_max: int
    attempts_min: int
    per_broker_mean: tuple[float, ...]
    """Attempts per start at each broker: the mean over the starts."""
    peak_per_s: tuple[int, ...]
    p99_per_s: tuple[int, ...]
    peak_open: tuple[int, ...]
    seconds: float
    starts_per_s: float
    first_ms_median: float | None
    own_agrees: int | None
    """Starts whose client's own count equals the forwarders' (None: the client keeps none)."""
    kernel_agrees: int
    """Starts whose kernel socket count equals the forwarders' open relays after the acks."""
    held_median: float
    adopted: int | None
    sent: int
    acked: int
    read_back: int
    duplicated: int
    unexpected: int
    lost: int
    in_topic: int


def figures(variant: VariantRun) -> VariantFigures:
    """The figures of one variant's run (see the module docstring)."""
    starts = variant.starts
    totals = [s.total for s in starts]
    brokers = len(variant.connections)
    accepts = [[at for at, _ in rows] for rows in variant.connections]
    seconds = variant.ended_s - variant.began_s
    firsts = [s.first_ms for s in starts if s.first_ms is not None]
    own = [s for s in starts if s.own is not None]
    return VariantFigures(
        variant=variant.variant,
        label=LABELS.get(variant.variant, variant.variant),
        client=variant.client,
        starts=len(starts),
        attempts_median=statistics.median(totals),
        attempts_max=max(totals),
        attempts_min=min(totals),
        per_broker_mean=tuple(
            statistics.fmean(s.attempts[b] for s in starts) for b in range(brokers)
        ),
        peak_per_s=tuple(peak_window(a) for a in accepts),
        p99_per_s=tuple(
            percentile(per_second(a, variant.began_s, variant.ended_s), 99) for a in accepts
        ),
        peak_open=tuple(peak_concurrent(rows) for rows in variant.connections),
        seconds=seconds,
        starts_per_s=len(starts) / seconds if seconds > 0 else math.inf,
        first_ms_median=statistics.median(firsts) if firsts else None,
        own_agrees=sum(1 for s in own if s.own == s.total) if own else None,
        kernel_agrees=sum(1 for s in starts if s.held == s.relayed),
        held_median=statistics.median(s.held for s in starts),
        adopted=sum(s.adopted or 0 for s in starts) if variant.variant == "proposed" else None,
        sent=variant.sent,
        acked=variant.acked,
        read_back=variant.read_back,
        duplicated=variant.duplicated,
        unexpected=variant.unexpected,
        lost=variant.lost,
        in_topic=variant.in_topic,
    )


def problems(run: ServerlessRun) -> list[str]:
    """What fails the run: a record not acknowledged, lost, duplicated or unexpected in the
    topic; the topic's offsets disagreeing with what was read; an accept of the forwarders'
    log that falls in no start, or a start whose log count disagrees with the forwarders'
    counters; a client whose own count of its connections disagrees with the forwarders'."""
    out: list[str] = []
    for v in run.variants:
        name = LABELS.get(v.variant, v.variant)
        if v.acked != v.sent:
            out.append(f"{name}: {v.sent - v.acked} of {v.sent} records not acknowledged")
        if v.lost:
            out.append(f"{name}: {v.lost} of {v.sent} records not read back")
        if v.duplicated:
            out.append(f"{name}: {v.duplicated} duplicated records read back")
        if v.unexpected:
            out.append(f"{name}: {v.unexpected} records read back that no start sent")
        if v.in_topic != v.read_back + v.duplicated + v.unexpected:
            out.append(
                f"{name}: the topic's offsets hold {v.in_topic} records, "
                f"{v.read_back + v.duplicated + v.unexpected} were read"
            )
        spans = [(s.began_s, s.ended_s) for s in v.starts]
        for b, rows in enumerate(v.connections):
            _, stray = attributed([at for at, _ in rows], spans)
            if stray:
                out.append(f"{name}: {stray} accepts at broker {run.brokers[b]} in no start")
        for s in v.starts:
            if s.counted != s.total:
                out.append(
                    f"{name} start {s.index}: forwarders' counters {s.counted}, log {s.total}"
                )
            if s.own is not None and s.own != s.total:
                out.append(f"{name} start {s.index}: client counted {s.own}, forwarders {s.total}")
    return out
