"""The comparison report's tables, built from the typed aggregates
(:mod:`connmgr_evidence.bench.report.summaries`) and the micro-benchmarks
(:mod:`connmgr_evidence.bench.report.micro`).

Each builder returns a :class:`~connmgr_evidence.bench.report.table.Table` whose rows are sorted so
that a
report is a function of its input alone (nulls last). Nothing here needs Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from connmgr_evidence.bench.report.metrics import (
    JAVA_PATCHED,
    JAVA_STOCK,
    LIFE_METRICS,
    PROPOSED,
    SOCKET_METRICS,
    TIMING_METRICS,
)
from connmgr_evidence.bench.report.micro import MicroBenchmark
from connmgr_evidence.bench.report.summaries import (
    BaselineHeadline,
    BrokerSockets,
    KindSummary,
    Latency,
    LifeCost,
    MicroTiming,
    PairSummary,
    Regression,
    RoleSockets,
    SimulatorSpeed,
    SweepSaving,
)
from connmgr_evidence.bench.report.table import Table, make_table
from connmgr_evidence.bench.results.schema import LIFE_COLUMNS, ROLES

COMPARISON_COLUMNS = PairSummary.columns()
"""One row per (kind, point, subject, baseline): medians over the paired repeats (the
``_proposed`` columns are the subject's side)."""

_ORDER = ("kind", "scenario", "brokers", "rtt_ms", "point", "subject", "baseline")
_ROLE_POINT = ("kind", "scenario", "brokers", "point", "policy", "repeats")
"""The leading columns of the tables of one policy at one point (by role, over a life)."""


def _proposal(rows: Iterable[PairSummary]) -> list[PairSummary]:
    """The proposal's pairs: the tables about the proposal leave the other subjects'
    (:data:`~connmgr_evidence.bench.report.metrics.PAIRS`) to the ``comparison`` and ``latency``
    tables."""
    return [r for r in rows if r.subject == PROPOSED]


def _sorted(rows: Iterable[Mapping[str, Any]], keys: Sequence[str]) -> list[Mapping[str, Any]]:
    # Nulls last; (0, value) and (1,) never compare a value with a placeholder.
    return sorted(rows, key=lambda r: tuple((1,) if r[k] is None else (0, r[k]) for k in keys))


def comparison_table(rows: Iterable[PairSummary]) -> Table:
    """Every (kind, point, baseline) with all its medians, ratios and flags (linked only)."""
    return make_table(
        "comparison",
        "Every comparison (sim and real)",
        "One row per (kind, point, subject, baseline): for each metric, the medians of both "
        "sides over the paired repeats (`_proposed`: the subject's, the proposal or "
        f"{JAVA_PATCHED} against {JAVA_STOCK}), the median ratio subject / baseline and its "
        "min and max, and the regression flags.",
        COMPARISON_COLUMNS,
        _sorted((r.record() for r in rows), _ORDER),
        embed=False,
    )


def sockets_table(rows: Iterable[PairSummary]) -> Table:
    """Socket medians of both sides per (kind, point, baseline), and the peak ratio."""
    cols = PairSummary.pick(
        "kind",
        "scenario",
        "brokers",
        "point",
        "baseline",
        "repeats",
        *(
            f"{m}_{side}"
            for m in (*SOCKET_METRICS, "handshakes")
            for side in ("proposed", "baseline")
        ),
        "peak_ratio",
        "peak_ratio_min",
        "peak_ratio_max",
    )
    return make_table(
        "sockets",
        "Sockets per scenario: proposed vs each baseline",
        "Medians over repeats of sockets opened, open at the peak and at the end (steady), and "
        "connection set-ups (handshakes), for the proposal and each baseline policy (sim) or "
        "real client (real); the peak ratio proposed / baseline with its spread over repeats.",
        cols,
        _sorted((r.record() for r in _proposal(rows)), _ORDER),
    )


def roles_table(rows: Iterable[RoleSockets]) -> Table:
    """Sockets opened and open at the end by role, per point and policy."""
    return make_table(
        "sockets-by-role",
        "Sockets by role",
        "Per point and policy: median sockets opened and open at the end, by the role the "
        "connection played (bootstrap, data, coordination).",
        RoleSockets.pick(
            *_ROLE_POINT, *(f"{w}_{role}" for w in ("opened", "steady") for role in ROLES)
        ),
        _sorted((r.record() for r in rows), ("kind", "scenario", "brokers", "point", "policy")),
    )


def life_table(rows: Iterable[RoleSockets]) -> Table:
    """Socket-seconds and handshakes per client-hour, by role, per point and policy."""
    return make_table(
        "life",
        "A client's life: socket-seconds and handshakes per client-hour",
        "Per point and policy, medians over repeats: the time-integral of open sockets "
        "(socket-seconds) and the connections established (handshakes), from the client's start "
        "over `horizon_s`, scaled to one client-hour, in total and by role. Simulated points run "
        "one simulated hour; a real run's horizon is its few seconds of wall time, so its "
        "per-hour figures are dominated by start-up.",
        RoleSockets.pick(*_ROLE_POINT, *LIFE_COLUMNS),
        _sorted((r.record() for r in rows), ("kind", "scenario", "brokers", "point", "policy")),
    )


LIFE_COST_MARGIN = {"socket_s_per_h": 1.0, "handshakes_per_h": 0.0}
"""How much above the baseline a life metric must be to be listed: socket-seconds differ by
fractions of a millisecond when two policies dial the same sockets a few events apart, which
is no cost; a handshake more is one."""

LIFE_COST_KINDS = ("sim",)
"""Kinds whose life figures are compared for costs: a simulated point runs an hour; a real
run's horizon is seconds of start-up, where its sockets are already compared exactly."""


def life_cost_rows(
    kind: str,
    scenario: str,
    point: str,
    baseline: str,
    mine: Mapping[str, Any],
    theirs: Mapping[str, Any],
    margins: Mapping[str, float] = LIFE_COST_MARGIN,
) -> list[dict[str, Any]]:
    """The ``life-costs`` rows of one (point, baseline): each life metric whose proposed
    median (``mine``, keyed by the life columns) is above the baseline's (``theirs``) by
    more than ``margins[metric]``, with the roles whose figure is higher."""
    rows = []
    for metric in LIFE_METRICS:
        a, b = mine.get(metric), theirs.get(metric)
        if a is None or b is None or a - b <= margins[metric]:
            continue
        where = []
        for role in ROLES:
            x, y = mine.get(f"{metric}_{role}"), theirs.get(f"{metric}_{role}")
            if x is not None and y is not None and x > y:
                where.append(f"{role} +{x - y:,.4g}")
        cost = LifeCost(
            kind,
            scenario,
            point,
            baseline,
            metric,
            a,
            b,
            a - b,
            ", ".join(where) or "no single role",
        )
        rows.append(cost.record())
    return rows


def life_costs_table(
    comparison: Iterable[PairSummary],
    roles: Iterable[RoleSockets],
    extra: Iterable[Mapping[str, Any]] = (),
) -> Table:
    """Every (point, baseline, life metric) where the proposal's median per client-hour is
    above the baseline's, with the roles that make the difference; ``extra`` are rows of
    :func:`life_cost_rows` from elsewhere (the real clients' scaled lives)."""
    by_role = {(r.kind, r.point, r.policy): r.life for r in roles}
    rows = list(extra)
    for pair in _proposal(comparison):
        if pair.kind not in LIFE_COST_KINDS:
            continue
        mine = dict(by_role.get((pair.kind, pair.point, PROPOSED), {}))
        theirs = dict(by_role.get((pair.kind, pair.point, pair.baseline), {}))
        for metric in LIFE_METRICS:
            # The pair's medians decide; the roles' medians say where.
            mine[metric] = pair.metrics[metric].proposed
            theirs[metric] = pair.metrics[metric].baseline
        rows += life_cost_rows(pair.kind, pair.scenario, pair.point, pair.baseline, mine, theirs)
    return make_table(
        "life-costs",
        "Where the proposal costs more over a client's life",
        "Every simulated point (one hour), every real client's scaled life (kind "
        "`real-life`: the `real-life` table's medians) and baseline where the proposal's "
        "median socket-seconds (by more than one) or handshakes per client-hour is above the "
        "baseline's: `excess` is "
        "the difference, `where` the roles whose figure is higher (proposed - baseline). "
        "Not a regression rule: these are the costs the RFC's Costs section explains (a "
        "re-dial after prompt close, a second coordinator connection); a stated one is in "
        "`stated-costs` with its reason.",
        LifeCost.columns(),
        _sorted(rows, ("kind", "scenario", "point", "baseline", "metric")),
    )


def brokers_table(rows: Iterable[BrokerSockets]) -> Table:
    """Socket medians per kind, scenario, policy and broker count."""
    return make_table(
        "sockets-by-brokers",
        "Sockets by cluster size",
        "Per kind, scenario, policy and broker count: medians over every point and repeat. "
        "The sweep's broker counts are binned (lower edges 1, 3, 5, 10, 20, 50, ...).",
        BrokerSockets.columns(),
        _sorted((r.record() for r in rows), ("kind", "scenario", "policy", "brokers")),
    )


def latency_table(rows: Iterable[PairSummary]) -> Table:
    """One row per (timing metric, kind, point, subject, baseline) that has the timing: the
    proposal against every real client, and the patched kafka-clients against its release
    (:data:`~connmgr_evidence.bench.report.metrics.PAIRS`); a ratio only for a same-runtime pair
    (:data:`~connmgr_evidence.bench.report.metrics.SAME_RUNTIME`)."""
    long = [
        Latency(
            m,
            r.kind,
            r.scenario,
            r.client,
            r.rtt_ms,
            r.point,
            r.subject,
            r.baseline,
            r.repeats,
            r.metrics[m].proposed,
            r.metrics[m].baseline,
            r.metrics[m].ratio,
            r.metrics[m].ratio_min,
            r.metrics[m].ratio_max,
        ).record()
        for r in rows
        for m in TIMING_METRICS
        if r.metrics[m].baseline is not None
    ]
    return make_table(
        "latency",
        "Time to first ack / first consume, by RTT",
        "Real clients: median time from start to the first acknowledged record (ttfa_ms, "
        "producers) or the first consumed record (ttfc_ms, consumers) of the subject "
        "(`proposed_ms`) and the baseline (`baseline_ms`), and the median of the per-repeat "
        "ratios subject / baseline with its spread (min, max) over repeats -- only for the "
        "same-runtime pairs, each pair's two clients run by run at the same repeat and timed "
        f"from the same point: `{PROPOSED}` against stock `aiokafka` (one Python runtime, the "
        f"clock started just before `start()`) and `{JAVA_PATCHED}` against `{JAVA_STOCK}` "
        "(one probe JVM, the clock started just before it builds its client, a cold JVM on "
        "both sides). The proposal against a Java client (whose clock starts before a cold "
        "JVM builds its client) or librdkafka (another runtime; its clock starts before its "
        "constructor) is shown as measured, with no ratio.",
        Latency.columns(),
        _sorted(long, ("metric", "kind", "scenario", "rtt_ms", "point", "subject", "baseline")),
    )


def throughput_table(rows: Iterable[PairSummary]) -> Table:
    """The (kind, point, baseline)s that measured throughput: medians and ratio."""
    ab = [r.record() for r in _proposal(rows) if r.metrics["throughput_rps"].ratio is not None]
    return make_table(
        "throughput",
        "Throughput A/B",
        "Records acknowledged per second, the proposal and a baseline client taking turns on "
        "the same cluster: medians over repeats and the median ratio with its spread.",
        PairSummary.pick(
            "kind",
            "scenario",
            "point",
            "baseline",
            "repeats",
            *(
                f"throughput_rps_{what}"
                for what in ("proposed", "baseline", "ratio", "ratio_min", "ratio_max")
            ),
        ),
        _sorted(ab, _ORDER),
    )


def sweep_savings_table(rows: Iterable[SweepSaving]) -> Table:
    """The sweep's savings per baseline and broker-count bin."""
    return make_table(
        "sweep-savings",
        "Sweep: savings by broker count",
        "Over the sweep's points whose broker count falls in each bin (brokers = the bin's "
        "lower edge, bins in 1-2-5 steps): the share of sockets the proposal "
        "saves against each baseline (1 - median over points of the median ratio; negative "
        "means more), the median peak on both sides, and the points that regressed.",
        SweepSaving.columns(),
        _sorted((r.record() for r in rows), ("baseline", "brokers")),
    )


def headline_table(rows: Iterable[BaselineHeadline]) -> Table:
    """Per kind and baseline: median and worst ratios, and the points that regressed."""
    return make_table(
        "headline",
        "Headline: the proposal against each baseline",
        "Per kind and baseline, over every point: the median and the worst (largest) of the "
        "points' median ratios proposed / baseline, and the points that regressed.",
        BaselineHeadline.columns(),
        _sorted((r.record() for r in rows), ("kind", "baseline")),
    )


def runs_table(rows: Iterable[KindSummary]) -> Table:
    """Result rows, points, policies, repeats and wall time per kind."""
    return make_table(
        "runs",
        "What ran",
        "Result rows per kind: grid points, policies or clients, repeats, and the summed wall "
        "time of the runs.",
        KindSummary.pick("kind", "rows", "points", "policies", "repeats", "wall_s"),
        _sorted((r.record() for r in rows), ("kind",)),
    )


def regressions_table(regressions: Sequence[Regression]) -> Table:
    """One row per regression, in the order given."""
    return make_table(
        "regressions",
        "Regressions",
        "Every (kind, point, baseline, metric) on which the proposal (or, where `subject` "
        f"says so, {JAVA_PATCHED} against {JAVA_STOCK}) is worse than the rule allows and "
        "that no stated cost covers (those are in `stated-costs`).",
        Regression.columns(),
        (r.record() for r in regressions),
    )


def _micro_timing(b: MicroBenchmark, per: int = 1) -> dict[str, Any]:
    us = {k: getattr(b, f"{k}_s") * 1e6 / per for k in ("mean", "median", "stddev", "min", "max")}
    return MicroTiming(
        benchmark=b.name,
        group=b.group,
        policy=b.policy,
        rounds=b.rounds,
        decisions=per,
        mean_us=us["mean"],
        median_us=us["median"],
        stddev_us=us["stddev"],
        min_us=us["min"],
        max_us=us["max"],
        file=b.file.name,
    ).record()


def decision_table(benchmarks: Sequence[MicroBenchmark]) -> Table:
    """The ``decision`` group: µs per policy decision."""
    recs = [
        _micro_timing(b, int(b.extra_info.get("decisions", 1)))
        for b in benchmarks
        if b.group == "decision"
    ]
    return make_table(
        "decision-cost",
        "Decision cost",
        "pytest-benchmark, group `decision`: time per policy decision in µs (a round's time "
        "divided by `extra_info.decisions`, 1 if absent).",
        MicroTiming.pick(
            "benchmark",
            "policy",
            "rounds",
            "decisions",
            "mean_us",
            "median_us",
            "stddev_us",
            "min_us",
            "max_us",
            "file",
        ),
        sorted(recs, key=lambda r: (str(r["policy"]), r["benchmark"])),
    )


def simulator_table(benchmarks: Sequence[MicroBenchmark]) -> Table:
    """The ``simulator`` group: events per second."""
    recs = [
        SimulatorSpeed(
            benchmark=b.name,
            policy=b.policy,
            rounds=b.rounds,
            events=int(b.extra_info["events"]),
            mean_s=b.mean_s,
            median_s=b.median_s,
            events_per_s=b.extra_info["events"] / b.mean_s,
            events_per_s_median=b.extra_info["events"] / b.median_s,
            file=b.file.name,
        ).record()
        for b in benchmarks
        if b.group == "simulator"
    ]
    return make_table(
        "simulator-speed",
        "Simulator speed",
        "pytest-benchmark, group `simulator`: events per second (`extra_info.events` per "
        "round over the round's mean, and over its median).",
        SimulatorSpeed.columns(),
        sorted(recs, key=lambda r: (str(r["policy"]), r["benchmark"])),
    )


def other_micro_table(benchmarks: Sequence[MicroBenchmark]) -> Table:
    """Every other micro-benchmark: µs per round."""
    recs = [_micro_timing(b) for b in benchmarks if b.group not in ("decision", "simulator")]
    return make_table(
        "micro-other",
        "Other micro-benchmarks",
        "pytest-benchmark results outside the decision and simulator groups: µs per round.",
        MicroTiming.pick(
            "benchmark", "group", "policy", "rounds", "mean_us", "median_us", "stddev_us", "file"
        ),
        sorted(recs, key=lambda r: (str(r["group"]), r["benchmark"])),
    )
