"""The comparison's aggregates as typed values: what the Spark stage
(:mod:`connmgr.bench.aggregation`) hands to the tables, the plots and the page.

Each row type is a frozen dataclass built from one collected Spark row (``from_record``,
which takes the columns it names and ignores the rest) and turned back into a flat record
(``record``) whose keys are the report tables' column names. Values are as Spark returned
them; the tables coerce them to their declared column types.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Self

from connmgr.bench.metrics import METRICS, PROPOSED, RULED_METRICS, regression_rules
from connmgr.bench.schema import LIFE_COLUMNS, ROLES


def _pick(cls: type[Any], record: Mapping[str, Any]) -> dict[str, Any]:
    return {f.name: record[f.name] for f in fields(cls)}


@dataclass(frozen=True, slots=True)
class KindSummary:
    """What ran, for one kind of result rows (sim, real, sweep)."""

    kind: str
    rows: int
    points: int
    policies: str
    """The policies or clients, comma-separated, sorted."""
    repeats: int
    wall_s: float
    run_ids: tuple[str, ...]
    git_commits: tuple[str, ...]
    versions: tuple[str, ...]
    """JSON text per distinct value."""
    machines: tuple[str, ...]
    """JSON text per distinct value."""
    first: str
    """The earliest ``created_at``."""
    last: str
    """The latest ``created_at``."""

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Self:
        picked = _pick(cls, record)
        for key in ("run_ids", "git_commits", "versions", "machines"):
            picked[key] = tuple(picked[key])
        return cls(**picked)

    def record(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """One metric of one (kind, point, baseline): medians over the pairs where both sides
    are set, and the median, min and max of the per-pair ratios proposed / baseline."""

    proposed: float | None
    baseline: float | None
    ratio: float | None
    ratio_min: float | None
    ratio_max: float | None


@dataclass(frozen=True)
class PairSummary:
    """A subject against one baseline at one (kind, point), over the paired repeats: the
    proposal against each other policy, or a pair of
    :data:`~connmgr.bench.metrics.PAIRS` (the patched kafka-clients against its
    release). The metrics' ``proposed`` side is the subject's."""

    kind: str
    scenario: str
    point: str
    subject: str
    """``proposed``, or the subject of one of :data:`~connmgr.bench.metrics.PAIRS`."""
    baseline: str
    client: str
    brokers: int
    bootstrap_size: int
    leaders: int
    coordinator_shared: bool
    idle_disabled: bool
    rtt_ms: float
    repeats: int
    metrics: Mapping[str, MetricSummary]
    """Every one of :data:`~connmgr.bench.metrics.METRICS`."""
    worse: tuple[str, ...]
    """The ruled metrics on which the subject regresses, in ``RULED_METRICS`` order."""
    regressed: bool

    _POINT = (
        "kind",
        "scenario",
        "point",
        "subject",
        "baseline",
        "client",
        "brokers",
        "bootstrap_size",
        "leaders",
        "coordinator_shared",
        "idle_disabled",
        "rtt_ms",
        "repeats",
    )

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Self:
        """From a row of ``pair_summary``: ``<m>_proposed`` ... ``<m>_ratio_max`` per
        metric, ``worse_<m>`` per ruled metric and ``regressed``."""
        metrics = {
            m: MetricSummary(
                record[f"{m}_proposed"],
                record[f"{m}_baseline"],
                record[f"{m}_ratio"],
                record[f"{m}_ratio_min"],
                record[f"{m}_ratio_max"],
            )
            for m in METRICS
        }
        worse = tuple(m for m in RULED_METRICS if record[f"worse_{m}"])
        return cls(
            **{k: record[k] for k in cls._POINT},
            metrics=metrics,
            worse=worse,
            regressed=record["regressed"],
        )

    def record(self) -> dict[str, Any]:
        """The flat record, with the columns of the ``comparison`` table."""
        flat: dict[str, Any] = {k: getattr(self, k) for k in self._POINT}
        for m in METRICS:
            s = self.metrics[m]
            flat |= {
                f"{m}_proposed": s.proposed,
                f"{m}_baseline": s.baseline,
                f"{m}_ratio": s.ratio,
                f"{m}_ratio_min": s.ratio_min,
                f"{m}_ratio_max": s.ratio_max,
            }
        flat |= {f"worse_{m}": m in self.worse for m in RULED_METRICS}
        flat["regressed"] = self.regressed
        return flat


@dataclass(frozen=True, slots=True)
class BaselineHeadline:
    """The proposal against one baseline over every point of one kind: medians (and the
    worst, largest) of the points' median ratios, and how many points regressed."""

    kind: str
    baseline: str
    points: int
    opened_ratio: float | None
    peak_ratio: float | None
    peak_ratio_worst: float | None
    steady_ratio: float | None
    steady_ratio_worst: float | None
    ttfa_ms_ratio: float | None
    ttfc_ms_ratio: float | None
    throughput_rps_ratio: float | None
    socket_s_per_h_ratio: float | None
    handshakes_per_h_ratio: float | None
    regressed_points: int

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Self:
        return cls(**_pick(cls, record))

    def record(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RoleSockets:
    """One policy at one (kind, point): median sockets opened and open at the end, by the
    role the connection played (None: the run did not measure roles)."""

    kind: str
    scenario: str
    point: str
    policy: str
    brokers: int
    repeats: int
    opened: Mapping[str, float | None]
    """Role → median sockets opened, for every role of ``schema.ROLES``."""
    steady: Mapping[str, float | None]
    """Role → median sockets open at the end."""
    life: Mapping[str, float | None]
    """Every column of ``rows.LIFE_COLUMNS`` → its median (None: not measured)."""

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Self:
        """From a row with ``opened_<role>``, ``steady_<role>`` and the life columns."""
        return cls(
            **{k: record[k] for k in ("kind", "scenario", "point", "policy", "brokers", "repeats")},
            opened={role: record[f"opened_{role}"] for role in ROLES},
            steady={role: record[f"steady_{role}"] for role in ROLES},
            life={c: record[c] for c in LIFE_COLUMNS},
        )

    def record(self) -> dict[str, Any]:
        """The flat record, with the columns of the ``sockets-by-role`` table."""
        flat: dict[str, Any] = {
            "kind": self.kind,
            "scenario": self.scenario,
            "point": self.point,
            "policy": self.policy,
            "brokers": self.brokers,
            "repeats": self.repeats,
        }
        for role in ROLES:
            flat[f"opened_{role}"] = self.opened[role]
            flat[f"steady_{role}"] = self.steady[role]
        flat.update(self.life)  # the columns of the ``life`` table
        return flat


@dataclass(frozen=True, slots=True)
class BrokerSockets:
    """One policy at one broker count (binned for the sweep) of one (kind, scenario):
    medians over every point and repeat."""

    kind: str
    scenario: str
    policy: str
    brokers: int
    points: int
    runs: int
    opened: float
    peak: float
    steady: float

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Self:
        return cls(**_pick(cls, record))

    def record(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ClientTimings:
    """One result row that has a timing or a throughput (real clients), as measured."""

    kind: str
    scenario: str
    client: str
    rtt_ms: float
    point: str
    policy: str
    repeat: int
    ttfa_ms: float | None
    ttfc_ms: float | None
    throughput_rps: float | None

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Self:
        return cls(**_pick(cls, record))

    def timing(self, metric: str) -> float | None:
        """``ttfa_ms`` or ``ttfc_ms`` by name."""
        if metric == "ttfa_ms":
            return self.ttfa_ms
        if metric == "ttfc_ms":
            return self.ttfc_ms
        raise ValueError(f"{metric!r}: not a timing metric (ttfa_ms or ttfc_ms)")


@dataclass(frozen=True, slots=True)
class SweepSaving:
    """The sweep against one baseline, over the points in one broker-count bin."""

    baseline: str
    brokers: int
    """The bin's lower edge."""
    points: int
    opened_saving: float | None
    """1 - the median over points of the median ratio; negative means more sockets."""
    peak_saving: float | None
    steady_saving: float | None
    peak_proposed: float | None
    peak_baseline: float | None
    regressed_points: int

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Self:
        return cls(**_pick(cls, record))

    def record(self) -> dict[str, Any]:
        return asdict(self)


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


@dataclass(frozen=True)
class Regression:
    """One metric of one (kind, point, subject, baseline) on which the subject (the proposal
    unless ``subject`` says otherwise) is worse."""

    kind: str
    scenario: str
    point: str
    baseline: str
    metric: str
    proposed: float
    """The proposal's median."""
    baseline_value: float
    """The baseline's median."""
    ratio: float | None
    """The median of the per-repeat ratios proposed / baseline."""
    rule: str
    subject: str = PROPOSED
    """Whose median ``proposed`` is: the proposal, or a subject of
    :data:`~connmgr.bench.metrics.PAIRS`."""

    def __str__(self) -> str:
        return (
            f"{self.kind} {self.point} {self.subject} vs {self.baseline}: {self.metric} "
            f"{self.proposed:g} vs {self.baseline_value:g} ({self.rule})"
        )


def regressions_of(
    rows: Iterable[PairSummary | Mapping[str, Any]], tolerance: float
) -> list[Regression]:
    """The regressions flagged on comparison rows (a :class:`PairSummary`, or a row of
    ``pair_summary`` as a mapping with its ``worse_<metric>`` flags), in row order and then
    :data:`~connmgr.bench.metrics.RULED_METRICS` order."""
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
