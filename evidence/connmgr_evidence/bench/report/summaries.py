"""The comparison's aggregates as typed values: what the Spark stage
(:mod:`connmgr_evidence.bench.report.aggregation`) hands to the tables, the plots and the page.

Each row type is a frozen dataclass and a :class:`~connmgr_evidence.bench.results.record.Record`:
its fields'
annotations declare its columns once, and from them come the report tables' columns and
types, the record built from one collected Spark row (``from_record``, which takes the
columns it names and ignores the rest) and the flat record (``record``) whose keys are the
report tables' column names. Values are as Spark returned them; the tables coerce them to
their declared column types.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from connmgr_evidence.bench.report.metrics import METRICS, PROPOSED, RULED_METRICS, regression_rules
from connmgr_evidence.bench.results.record import (
    TEXTS,
    Count,
    Flag,
    Flags,
    Keyed,
    MaybeReal,
    MaybeText,
    Real,
    Record,
    Text,
)
from connmgr_evidence.bench.results.schema import DOUBLE, LIFE_COLUMNS, ROLES


@dataclass(frozen=True, slots=True)
class KindSummary(Record):
    """What ran, for one kind of result rows (sim, real, sweep)."""

    kind: Text
    rows: Count
    points: Count
    policies: Text
    """The policies or clients, comma-separated, sorted."""
    repeats: Count
    wall_s: Real
    run_ids: Annotated[tuple[str, ...], TEXTS]
    git_commits: Annotated[tuple[str, ...], TEXTS]
    versions: Annotated[tuple[str, ...], TEXTS]
    """JSON text per distinct value."""
    machines: Annotated[tuple[str, ...], TEXTS]
    """JSON text per distinct value."""
    first: Text
    """The earliest ``created_at``."""
    last: Text
    """The latest ``created_at``."""


@dataclass(frozen=True, slots=True)
class MetricSummary(Record):
    """One metric of one (kind, point, baseline): medians over the pairs where both sides
    are set, and the median, min and max of the per-pair ratios proposed / baseline."""

    proposed: MaybeReal
    baseline: MaybeReal
    ratio: MaybeReal
    ratio_min: MaybeReal
    ratio_max: MaybeReal


@dataclass(frozen=True, slots=True)
class PairSummary(Record):
    """A subject against one baseline at one (kind, point), over the paired repeats: the
    proposal against each other policy, or a pair of
    :data:`~connmgr_evidence.bench.report.metrics.PAIRS` (the patched kafka-clients against its
    release). The metrics' ``proposed`` side is the subject's. Its columns are the
    ``comparison`` table's: the point's (its parameters are
    :data:`~connmgr_evidence.bench.results.schema.POINT_PARAMS`), ``<m>_proposed`` ...
    ``<m>_ratio_max`` per
    metric, ``worse_<m>`` per ruled metric and ``regressed``."""

    kind: Text
    scenario: Text
    point: Text
    subject: Text
    """``proposed``, or the subject of one of
    :data:`~connmgr_evidence.bench.report.metrics.PAIRS`."""
    baseline: Text
    client: Text
    brokers: Count
    bootstrap_size: Count
    leaders: Count
    coordinator_shared: Flag
    idle_disabled: Flag
    rtt_ms: Real
    repeats: Count
    metrics: Annotated[Mapping[str, MetricSummary], Keyed(METRICS, "{}_", MetricSummary)]
    """Every one of :data:`~connmgr_evidence.bench.report.metrics.METRICS`."""
    worse: Annotated[tuple[str, ...], Flags(RULED_METRICS, "worse_{}")]
    """The ruled metrics on which the subject regresses, in ``RULED_METRICS`` order."""
    regressed: Flag


@dataclass(frozen=True, slots=True)
class BaselineHeadline(Record):
    """The proposal against one baseline over every point of one kind: medians (and the
    worst, largest) of the points' median ratios, and how many points regressed."""

    kind: Text
    baseline: Text
    points: Count
    opened_ratio: MaybeReal
    peak_ratio: MaybeReal
    peak_ratio_worst: MaybeReal
    steady_ratio: MaybeReal
    steady_ratio_worst: MaybeReal
    ttfa_ms_ratio: MaybeReal
    ttfc_ms_ratio: MaybeReal
    throughput_rps_ratio: MaybeReal
    socket_s_per_h_ratio: MaybeReal
    handshakes_per_h_ratio: MaybeReal
    regressed_points: Count


@dataclass(frozen=True, slots=True)
class RoleSockets(Record):
    """One policy at one (kind, point): median sockets opened and open at the end, by the
    role the connection played (None: the run did not measure roles). Its columns are the
    ``sockets-by-role`` and ``life`` tables'."""

    kind: Text
    scenario: Text
    point: Text
    policy: Text
    brokers: Count
    repeats: Count
    opened: Annotated[Mapping[str, float | None], Keyed(ROLES, "opened_{}", DOUBLE)]
    """Role → median sockets opened, for every role of ``schema.ROLES``."""
    steady: Annotated[Mapping[str, float | None], Keyed(ROLES, "steady_{}", DOUBLE)]
    """Role → median sockets open at the end."""
    life: Annotated[Mapping[str, float | None], Keyed(LIFE_COLUMNS, "{}", DOUBLE)]
    """Every column of ``schema.LIFE_COLUMNS`` → its median (None: not measured)."""


@dataclass(frozen=True, slots=True)
class BrokerSockets(Record):
    """One policy at one broker count (binned for the sweep) of one (kind, scenario):
    medians over every point and repeat."""

    kind: Text
    scenario: Text
    policy: Text
    brokers: Count
    points: Count
    runs: Count
    opened: Real
    peak: Real
    steady: Real


@dataclass(frozen=True, slots=True)
class ClientTimings(Record):
    """One result row that has a timing or a throughput (real clients), as measured."""

    kind: Text
    scenario: Text
    client: Text
    rtt_ms: Real
    point: Text
    policy: Text
    repeat: Count
    ttfa_ms: MaybeReal
    ttfc_ms: MaybeReal
    throughput_rps: MaybeReal

    def timing(self, metric: str) -> float | None:
        """``ttfa_ms`` or ``ttfc_ms`` by name."""
        if metric == "ttfa_ms":
            return self.ttfa_ms
        if metric == "ttfc_ms":
            return self.ttfc_ms
        raise ValueError(f"{metric!r}: not a timing metric (ttfa_ms or ttfc_ms)")


@dataclass(frozen=True, slots=True)
class SweepSaving(Record):
    """The sweep against one baseline, over the points in one broker-count bin."""

    baseline: Text
    brokers: Count
    """The bin's lower edge."""
    points: Count
    opened_saving: MaybeReal
    """1 - the median over points of the median ratio; negative means more sockets."""
    peak_saving: MaybeReal
    steady_saving: MaybeReal
    peak_proposed: MaybeReal
    peak_baseline: MaybeReal
    regressed_points: Count


@dataclass(frozen=True)
class Aggregates:
    """Everything the report is made of, collected to the driver (all small)."""

    meta: tuple[KindSummary, ...]
    comparison: tuple[PairSummary, ...]
    """Every (kind, point, baseline) but the sweep's."""
    regressed: tuple[PairSummary, ...]
    """Every (kind, point, baseline) that regressed, the sweep's too."""
    headline: tuple[BaselineHeadline, ...]
    roles: tuple[RoleSockets, ...]
    """Every kind but the sweep."""
    brokers: tuple[BrokerSockets, ...]
    timings: tuple[ClientTimings, ...]
    sweep: tuple[SweepSaving, ...]
    """Empty when the run has no sweep."""


@dataclass(frozen=True, slots=True)
class Regression(Record):
    """One metric of one (kind, point, subject, baseline) on which the subject (the proposal
    unless ``subject`` says otherwise) is worse."""

    kind: Text
    scenario: Text
    point: Text
    baseline: Text
    metric: Text
    proposed: Real
    """The proposal's median."""
    baseline_value: Real
    """The baseline's median."""
    ratio: MaybeReal
    """The median of the per-repeat ratios proposed / baseline."""
    rule: Text
    subject: Text = PROPOSED
    """Whose median ``proposed`` is: the proposal, or a subject of
    :data:`~connmgr_evidence.bench.report.metrics.PAIRS`."""

    def __str__(self) -> str:
        return (
            f"{self.kind} {self.point} {self.subject} vs {self.baseline}: {self.metric} "
            f"{self.proposed:g} vs {self.baseline_value:g} ({self.rule})"
        )


@dataclass(frozen=True, slots=True)
class LifeCost(Record):
    """One life metric of one (point, baseline) on which the proposal's median per
    client-hour is above the baseline's: a row of the ``life-costs`` table."""

    kind: Text
    scenario: Text
    point: Text
    baseline: Text
    metric: Text
    proposed: Real
    baseline_value: Real
    excess: Real
    """proposed - baseline_value."""
    where: Text
    """The roles whose figure is higher, with by how much (``no single role``: none)."""


@dataclass(frozen=True, slots=True)
class Latency(Record):
    """One timing metric of one (kind, point, subject, baseline): a row of the ``latency``
    table."""

    metric: Text
    kind: Text
    scenario: Text
    client: Text
    rtt_ms: Real
    point: Text
    subject: Text
    baseline: Text
    repeats: Count
    proposed_ms: MaybeReal
    baseline_ms: MaybeReal
    ratio: MaybeReal
    ratio_min: MaybeReal
    ratio_max: MaybeReal


@dataclass(frozen=True, slots=True)
class MicroTiming(Record):
    """One micro-benchmark's times in µs (per decision for the ``decision`` group): a row of
    the ``decision-cost`` and ``micro-other`` tables, which pick their columns from it."""

    benchmark: Text
    group: MaybeText
    policy: MaybeText
    rounds: Count
    decisions: Count
    mean_us: Real
    median_us: Real
    stddev_us: Real
    min_us: Real
    max_us: Real
    file: Text


@dataclass(frozen=True, slots=True)
class SimulatorSpeed(Record):
    """One ``simulator`` micro-benchmark as events per second: a row of the
    ``simulator-speed`` table."""

    benchmark: Text
    policy: MaybeText
    rounds: Count
    events: Count
    mean_s: Real
    median_s: Real
    events_per_s: Real
    events_per_s_median: Real
    file: Text


def regressions_of(
    rows: Iterable[PairSummary | Mapping[str, Any]], tolerance: float
) -> list[Regression]:
    """The regressions flagged on comparison rows (a :class:`PairSummary`, or a row of
    ``pair_summary`` as a mapping with its ``worse_<metric>`` flags), in row order and then
    :data:`~connmgr_evidence.bench.report.metrics.RULED_METRICS` order."""
    found = []
    for row in rows:
        r = row if isinstance(row, PairSummary) else PairSummary.from_record(row)
        for m, rule in regression_rules(tolerance, r.subject).items():
            if m not in r.worse:
                continue
            s = r.metrics[m]
            # A flag is set only where both medians are (a comparison with null is false).
            assert s.proposed is not None and s.baseline is not None, (r, m)
            found.append(
                Regression(
                    r.kind,
                    r.scenario,
                    r.point,
                    r.baseline,
                    m,
                    s.proposed,
                    s.baseline,
                    s.ratio,
                    rule,
                    r.subject,
                )
            )
    return found
