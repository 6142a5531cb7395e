"""The arithmetic and the report of the poll-path benchmarks (:mod:`connmgr_evidence.java.jmh`),
apart
from building and running them: JMH's result files (``-rf json``) read into per-fork samples,
pooled per case into a mean with a 99.9 % confidence half-width (Student's t, as JMH states its
own errors), ratios to stock with both ends' errors, and ``index.md`` / ``results.json``.
Pure functions of their arguments, so a test checks them on a tiny fixture.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "BASE_VARIANTS",
    "CONFIDENCE",
    "GOALS",
    "METRICS",
    "Case",
    "Estimate",
    "Ratio",
    "Row",
    "Samples",
    "estimate",
    "goal_for",
    "parse_jmh_json",
    "ratio",
    "render_index",
    "results_document",
    "student_t_quantile",
    "summarize",
]

METRICS: Final[Mapping[str, str]] = {
    "time": "ns/op",
    "cpu": "cpu.time.norm",
    "alloc": "gc.alloc.rate.norm",
}
"""Measure name -> where JMH's JSON has it: ``time`` is the primary metric (its unit), the
others are secondary metrics by name."""

GOALS: Final[Mapping[str, float]] = {"off": 1.02, "on": 1.10}
"""The most a variant may cost per poll, as a ratio to stock."""

CONFIDENCE: Final = 0.999
"""Two-sided confidence of the stated half-widths (JMH's own)."""

BASE_VARIANTS: Final = ("stock", "off", "on")


# -- statistics --------------------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    # Continued fraction of the regularized incomplete beta function (modified Lentz).
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _reg_inc_beta(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _student_t_cdf(t: float, dof: int) -> float:
    x = dof / (dof + t * t)
    tail = 0.5 * _reg_inc_beta(dof / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


def student_t_quantile(p: float, dof: int) -> float:
    """The ``p`` quantile of Student's t with ``dof`` degrees of freedom (``0.5 < p < 1``,
    ``dof >= 1``), by bisection on its distribution function; accurate to about 1e-9."""
    if not 0.5 < p < 1.0 or dof < 1:
        raise ValueError(f"need 0.5 < p < 1 and dof >= 1, got p={p}, dof={dof}")
    lo, hi = 0.0, 1.0
    while _student_t_cdf(hi, dof) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if _student_t_cdf(mid, dof) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10:
            break
    return (lo + hi) / 2.0


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean over ``samples`` measured iterations from ``forks`` forks, and its half-width at
    :data:`CONFIDENCE` (``nan`` with fewer than two samples)."""

    mean: float
    error: float
    samples: int
    forks: int
    unit: str


@dataclass(frozen=True, slots=True)
class Ratio:
    """``a / b`` of two estimates and its half-width (relative errors added in quadrature)."""

    value: float
    error: float


def estimate(forks: Sequence[Sequence[float]], unit: str) -> Estimate:
    """Pools the iterations of every fork (JMH's ``rawData``) into one :class:`Estimate`.
    Raises ``ValueError`` if there is no sample."""
    samples = [v for fork in forks for v in fork]
    if not samples:
        raise ValueError("no samples to estimate from")
    n = len(samples)
    mean = sum(samples) / n
    if n < 2:
        return Estimate(mean, math.nan, n, len(forks), unit)
    var = sum((v - mean) ** 2 for v in samples) / (n - 1)
    half = student_t_quantile(1 - (1 - CONFIDENCE) / 2, n - 1) * math.sqrt(var / n)
    return Estimate(mean, half, n, len(forks), unit)


def ratio(a: Estimate, b: Estimate) -> Ratio:
    """``a / b`` with first-order error propagation (``sqrt((ea/b)^2 + (a*eb/b^2)^2)``); a
    zero denominator gives ``inf`` (``nan`` for 0/0), which the report prints as such."""
    if b.mean == 0:
        return Ratio(math.nan if a.mean == 0 else math.inf, math.nan)
    value = a.mean / b.mean
    error = math.hypot(a.error / b.mean, a.mean * b.error / (b.mean * b.mean))
    return Ratio(value, abs(error))


# -- JMH's JSON ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class Case:
    """One benchmark method at one ``cluster`` shape (``brokers/ready``) over one variant."""

    benchmark: str
    cluster: str
    variant: str


Samples = dict[tuple[Case, str], list[list[float]]]
"""(case, measure) -> forks -> iteration values."""


def parse_jmh_json(text: str, into: Samples | None = None) -> Samples:
    """Adds the per-fork iteration values of every case and measure in one JMH result file
    (``-rf json``) to ``into`` (a new mapping if None) and returns it. The benchmark is named
    by its method, the case by the ``cluster`` and ``variant`` parameters. Raises
    ``ValueError`` on a file that is not JMH's result list or lacks a measure of
    :data:`METRICS`."""
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("a JMH result file is a JSON list")
    out: Samples = {} if into is None else into
    for entry in data:
        params = entry.get("params") or {}
        case = Case(
            str(entry["benchmark"]).rsplit(".", 1)[-1],
            str(params.get("cluster", "")),
            str(params.get("variant", "")),
        )
        for measure, where in METRICS.items():
            if measure == "time":
                metric = entry["primaryMetric"]
                if metric["scoreUnit"] != where:
                    raise ValueError(
                        f"{case}: primary metric in {metric['scoreUnit']}, not {where}"
                    )
            else:
                metric = (entry.get("secondaryMetrics") or {}).get(where)
                if metric is None:
                    raise ValueError(f"{case}: no {where} (run with -prof gc and the CPU profiler)")
            forks = [[float(v) for v in fork] for fork in metric["rawData"]]
            out.setdefault((case, measure), []).extend(forks)
    return out


@dataclass(frozen=True, slots=True)
class Row:
    """One case's three measures and, for a variant other than stock, their ratios to stock."""

    case: Case
    measures: Mapping[str, Estimate]
    ratios: Mapping[str, Ratio] = field(default_factory=dict)


def summarize(samples: Samples) -> list[Row]:
    """One :class:`Row` per case, sorted by benchmark, cluster, then variant (stock, off, on,
    then any other in name order); ratios are to the stock case of the same benchmark and
    cluster, when there is one."""
    cases = sorted({case for case, _ in samples})
    rows: dict[Case, Row] = {}
    for case in cases:
        measures = {
            m: estimate(samples[(case, m)], _unit(m)) for m in METRICS if (case, m) in samples
        }
        rows[case] = Row(case, measures)
    out = []
    for case, row in rows.items():
        stock = rows.get(Case(case.benchmark, case.cluster, "stock"))
        if stock is not None and case.variant != "stock":
            row = Row(
                case,
                row.measures,
                {
                    m: ratio(row.measures[m], stock.measures[m])
                    for m in row.measures
                    if m in stock.measures
                },
            )
        out.append(row)
    return sorted(out, key=lambda r: (r.case.benchmark, _cluster_key(r.case.cluster), _order(r)))


def _unit(measure: str) -> str:
    return {"time": "ns/op", "cpu": "ns/op", "alloc": "B/op"}[measure]


def _cluster_key(cluster: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in cluster.split("/"))
    except ValueError:
        return (sys.maxsize,)


def _order(row: Row) -> tuple[int, str]:
    v = row.case.variant
    return (BASE_VARIANTS.index(v), v) if v in BASE_VARIANTS else (len(BASE_VARIANTS), v)


def goal_for(variant: str) -> float | None:
    """The ratio :data:`GOALS` sets for a variant (``off-0013`` is judged as ``off``), if any."""
    return GOALS.get(variant.split("-", 1)[0])


# -- the report ---------------------------------------------------------------------------------


def _fmt(e: Estimate) -> str:
    if e.unit == "B/op":
        return f"{e.mean:,.0f} ± {e.error:,.0f}" if math.isfinite(e.error) else f"{e.mean:,.0f}"
    return f"{e.mean:,.1f} ± {e.error:,.1f}" if math.isfinite(e.error) else f"{e.mean:,.1f}"


def _fmt_ratio(r: Ratio | None) -> str:
    if r is None:
        return ""
    if not math.isfinite(r.value):
        return str(r.value)
    return f"{r.value:.3f} ± {r.error:.3f}" if math.isfinite(r.error) else f"{r.value:.3f}"


def results_document(rows: Sequence[Row], meta: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON written beside the report: ``meta`` (JVM, date, load, settings) and one entry
    per row, with each measure's mean, half-width, samples, forks and unit, and each ratio."""
    return {
        "meta": dict(meta),
        "confidence": CONFIDENCE,
        "goals": dict(GOALS),
        "results": [
            {
                "benchmark": r.case.benchmark,
                "cluster": r.case.cluster,
                "variant": r.case.variant,
                "measures": {
                    m: {
                        "mean": e.mean,
                        "error": e.error,
                        "samples": e.samples,
                        "forks": e.forks,
                        "unit": e.unit,
                    }
                    for m, e in r.measures.items()
                },
                "ratios_to_stock": {
                    m: {"value": q.value, "error": q.error} for m, q in r.ratios.items()
                },
            }
            for r in rows
        ],
    }


def render_index(rows: Sequence[Row], meta: Mapping[str, Any]) -> str:
    """``index.md``: how the run was made, then one table per benchmark (every measure, and
    the ratios to stock with the goal each variant is held to)."""
    lines = [
        "# The poll path measured (JMH)",
        "",
        f"Generated by `python -m connmgr_evidence.java.jmh` on {meta.get('date', '?')}; "
        "the figures are "
        "this machine's, at its load then (below). Each cell: mean ± half-width of the "
        f"{CONFIDENCE:.1%} confidence interval over every measured iteration of every fork.",
        "",
        "- benchmark: `benchmarks/kafka-clients-jmh` (`NetworkClientPollBenchmark`): "
        "`NetworkClient.poll(0, now)` over `MockSelector`/`MockTime` with nothing to send or "
        "receive (`poll`), and the same after `ready()` on each READY node, as a producer's "
        "Sender asks (`readyThenPoll`); cluster = nodes in the metadata / READY connections",
        "- variants: " + "; ".join(f"`{k}` = {v}" for k, v in (meta.get("variants") or {}).items()),
        f"- JVM: {meta.get('jvm', '?')}; flags `{' '.join(meta.get('jvm_args', []))}`; "
        f"{meta.get('rounds', '?')} rounds, the variants interleaved, one fork per round: "
        f"{meta.get('warmup_iterations', '?')} warm-up and {meta.get('iterations', '?')} "
        f"measured iterations of {meta.get('iteration_s', '?')} s each",
        f"- machine: {meta.get('machine', '?')}; load average (1 min) from "
        f"{meta.get('load_min', '?')} to {meta.get('load_max', '?')} during the run. "
        "The wall clock counts time spent waiting for a core; `cpu ns/op` (the worker "
        "thread's CPU time) does not, and is the steadier of the two on a loaded machine",
        "",
    ]
    for bench in sorted({r.case.benchmark for r in rows}):
        lines += [
            f"## `{bench}`",
            "",
            "| cluster | variant | ns/op (wall) | cpu ns/op | B/op | wall / stock | "
            "cpu / stock | B/op / stock | goal |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in (r for r in rows if r.case.benchmark == bench):
            m = r.measures
            goal = goal_for(r.case.variant)
            lines.append(
                f"| {r.case.cluster} | {r.case.variant} | "
                + " | ".join(_fmt(m[k]) if k in m else "" for k in ("time", "cpu", "alloc"))
                + " | "
                + " | ".join(_fmt_ratio(r.ratios.get(k)) for k in ("time", "cpu", "alloc"))
                + f" | {'≤ ' + format(goal, '.2f') if goal is not None else ''} |"
            )
        lines.append("")
    lines += [
        "Raw results: `results.json` (every estimate and ratio, and the settings above).",
        "",
    ]
    return "\n".join(lines)
