"""What the comparison report shows, and how: its records, its tables and its page.

A :class:`Table` is a small, already-aggregated result with typed columns. :func:`write_table`
writes it twice, as ``<name>.parquet`` for programs and ``<name>.md`` for people; both come
from the same rows, and the Markdown header names the Parquet columns, so one can be checked
against the other. Markdown cells print floats to four significant digits (whole numbers from
10,000 up), ``inf`` for an infinite ratio and ``—`` for a missing value.

The builders (``*_table``) turn rows collected from the Spark job (plain mappings) into the
report's tables; :func:`render_index` lays out ``index.md``, the page a person reads top to
bottom. Nothing here needs Spark.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connmgr.bench.schema import ROLES, ColumnType

PROPOSED = "proposed"
METRICS = ("opened", "peak", "steady", "handshakes", "ttfa_ms", "ttfc_ms", "throughput_rps")
"""The paired metrics: a ratio proposed / baseline is computed for each."""
SOCKET_METRICS = ("opened", "peak", "steady")
"""Regress when the proposal's median is above the baseline's: sockets are exact."""
TIMING_METRICS = ("ttfa_ms", "ttfc_ms")
"""Regress when the median ratio is above 1 + tolerance."""
THROUGHPUT_METRICS = ("throughput_rps",)
"""Regress when the median ratio is below 1 - tolerance."""
RULED_METRICS = SOCKET_METRICS + TIMING_METRICS + THROUGHPUT_METRICS

MISSING = "—"
"""How a Markdown cell shows a null."""
EMBED_MAX_ROWS = 100
"""A table longer than this is linked from ``index.md`` rather than shown in it."""

_S, _L, _D, _B = ColumnType.STRING, ColumnType.LONG, ColumnType.DOUBLE, ColumnType.BOOL


def regression_rules(tolerance: float) -> dict[str, str]:
    """Metric → the rule a regression of it breaks."""
    return {
        **{m: "proposed median above baseline median (sockets: exact)" for m in SOCKET_METRICS},
        **{m: f"median ratio above {1 + tolerance:g} and > 5 ms slower" for m in TIMING_METRICS},
        **{m: f"median ratio below {1 - tolerance:g}" for m in THROUGHPUT_METRICS},
    }


@dataclass(frozen=True)
class Regression:
    """One metric of one (kind, point, baseline) on which the proposal is worse."""

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

    def __str__(self) -> str:
        return (
            f"{self.kind} {self.point} vs {self.baseline}: {self.metric} proposed "
            f"{self.proposed:g} vs {self.baseline_value:g} ({self.rule})"
        )


def regressions_of(rows: Iterable[Mapping[str, Any]], tolerance: float) -> list[Regression]:
    """The regressions flagged (``worse_<metric>``) on comparison rows."""
    rules = regression_rules(tolerance)
    return [
        Regression(
            r["kind"],
            r["scenario"],
            r["point"],
            r["baseline"],
            m,
            r[f"{m}_proposed"],
            r[f"{m}_baseline"],
            r[f"{m}_ratio"],
            rule,
        )
        for r in rows
        for m, rule in rules.items()
        if r[f"worse_{m}"]
    ]


@dataclass(frozen=True)
class MicroBenchmark:
    """One benchmark of a pytest-benchmark JSON file; times in seconds per round."""

    file: Path
    name: str
    group: str | None
    policy: str | None
    rounds: int
    mean_s: float
    median_s: float
    stddev_s: float
    min_s: float
    max_s: float
    extra_info: Mapping[str, Any]


@dataclass(frozen=True)
class MicroFile:
    """One pytest-benchmark JSON file."""

    path: Path
    machine: str
    commit: str
    datetime: str
    benchmarks: tuple[MicroBenchmark, ...]


# --------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class Table:
    """One report table: typed columns and rows of plain Python values."""

    name: str
    """File stem under ``tables/`` (``sockets`` → ``sockets.parquet``, ``sockets.md``)."""
    title: str
    description: str
    columns: tuple[tuple[str, ColumnType], ...]
    rows: tuple[tuple[Any, ...], ...]
    embed: bool = True
    """Shown inline in ``index.md`` (if not too long); otherwise linked."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.columns)

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.names, r, strict=True)) for r in self.rows]


@dataclass(frozen=True)
class TableFiles:
    parquet: Path
    markdown: Path | None
    """None for a table written as Parquet only (``sweep-points``)."""


def make_table(
    name: str,
    title: str,
    description: str,
    columns: Sequence[tuple[str, ColumnType]],
    records: Iterable[Mapping[str, Any]],
    *,
    embed: bool = True,
) -> Table:
    """A :class:`Table` whose rows are ``records`` picked by column name (extra keys are
    ignored; a missing key is an error)."""
    cols = tuple(columns)
    rows = tuple(tuple(_coerce(r[n], t) for n, t in cols) for r in records)
    return Table(name, title, description, cols, rows, embed)


def format_cell(value: Any, type_: ColumnType) -> str:
    """The Markdown text of one cell."""
    if value is None:
        return MISSING
    if type_ is ColumnType.BOOL:
        return "true" if value else "false"
    if type_ is ColumnType.LONG:
        return str(int(value))
    if type_ is ColumnType.DOUBLE:
        return _number(float(value))
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _number(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if abs(x) >= 1e4:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def markdown_table(table: Table) -> str:
    """The table as GitHub-flavoured Markdown (header = the Parquet column names)."""
    numeric = (ColumnType.LONG, ColumnType.DOUBLE)
    aligns = ["---:" if t in numeric else "---" for _, t in table.columns]
    lines = ["| " + " | ".join(table.names) + " |", "|" + "|".join(aligns) + "|"]
    for row in table.rows:
        cells = (format_cell(v, t) for v, (_, t) in zip(row, table.columns, strict=True))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def arrow_table(table: Table) -> Any:
    """The table as a ``pyarrow.Table`` with the declared column types."""
    import pyarrow as pa

    return pa.Table.from_pylist(table.records(), schema=arrow_schema(table.columns))


def arrow_schema(columns: Sequence[tuple[str, ColumnType]]) -> Any:
    import pyarrow as pa

    types = {
        ColumnType.STRING: pa.string(),
        ColumnType.LONG: pa.int64(),
        ColumnType.DOUBLE: pa.float64(),
        ColumnType.BOOL: pa.bool_(),
    }
    return pa.schema([pa.field(n, types[t]) for n, t in columns])


def write_table(table: Table, directory: Path) -> TableFiles:
    """Write ``<name>.parquet`` and ``<name>.md`` (title, description, table)."""
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    parquet = directory / f"{table.name}.parquet"
    pq.write_table(arrow_table(table), parquet)
    markdown = directory / f"{table.name}.md"
    body = markdown_table(table) if table.rows else "(no rows)"
    markdown.write_text(f"# {table.title}\n\n{table.description}\n\n{body}\n")
    return TableFiles(parquet, markdown)


def _coerce(value: Any, type_: ColumnType) -> Any:
    if value is None:
        return None
    if type_ is ColumnType.DOUBLE:
        return float(value)
    if type_ is ColumnType.LONG:
        return int(value)
    if type_ is ColumnType.BOOL:
        return bool(value)
    return str(value)


# --------------------------------------------------------------------------- the tables

POINT_COLUMNS = (
    ("kind", _S),
    ("scenario", _S),
    ("point", _S),
    ("baseline", _S),
    ("client", _S),
    ("brokers", _L),
    ("bootstrap_size", _L),
    ("leaders", _L),
    ("coordinator_shared", _B),
    ("idle_disabled", _B),
    ("rtt_ms", _D),
    ("repeats", _L),
)
COMPARISON_COLUMNS = (
    *POINT_COLUMNS,
    *(
        (f"{m}_{what}", _D)
        for m in METRICS
        for what in ("proposed", "baseline", "ratio", "ratio_min", "ratio_max")
    ),
    *((f"worse_{m}", _B) for m in RULED_METRICS),
    ("regressed", _B),
)
"""One row per (kind, point, baseline): medians over the paired repeats."""

_ORDER = ("kind", "scenario", "brokers", "rtt_ms", "point", "baseline")


def _sorted(rows: Iterable[Mapping[str, Any]], keys: Sequence[str]) -> list[Mapping[str, Any]]:
    # Nulls last; (0, value) and (1,) never compare a value with a placeholder.
    return sorted(rows, key=lambda r: tuple((1,) if r[k] is None else (0, r[k]) for k in keys))


def comparison_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    return make_table(
        "comparison",
        "Every comparison (sim and real)",
        "One row per (kind, point, baseline): for each metric, the medians of both sides over "
        "the paired repeats, the median ratio proposed / baseline and its min and max, and the "
        "regression flags.",
        COMPARISON_COLUMNS,
        _sorted(rows, _ORDER),
        embed=False,
    )


def sockets_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    cols = (
        ("kind", _S),
        ("scenario", _S),
        ("brokers", _L),
        ("point", _S),
        ("baseline", _S),
        ("repeats", _L),
        *(
            (f"{m}_{side}", _D)
            for m in (*SOCKET_METRICS, "handshakes")
            for side in ("proposed", "baseline")
        ),
        ("peak_ratio", _D),
        ("peak_ratio_min", _D),
        ("peak_ratio_max", _D),
    )
    return make_table(
        "sockets",
        "Sockets per scenario: proposed vs each baseline",
        "Medians over repeats of sockets opened, open at the peak and at the end (steady), and "
        "connection set-ups (handshakes), for the proposal and each baseline policy (sim) or "
        "real client (real); the peak ratio proposed / baseline with its spread over repeats.",
        cols,
        _sorted(rows, _ORDER),
    )


def roles_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    return make_table(
        "sockets-by-role",
        "Sockets by role",
        "Per point and policy: median sockets opened and open at the end, by the role the "
        "connection played (bootstrap, data, coordination).",
        (
            ("kind", _S),
            ("scenario", _S),
            ("brokers", _L),
            ("point", _S),
            ("policy", _S),
            ("repeats", _L),
            *((f"{w}_{role}", _D) for w in ("opened", "steady") for role in ROLES),
        ),
        _sorted(rows, ("kind", "scenario", "brokers", "point", "policy")),
    )


def brokers_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    return make_table(
        "sockets-by-brokers",
        "Sockets by cluster size",
        "Per kind, scenario, policy and broker count: medians over every point and repeat. "
        "The sweep's broker counts are binned (lower edges 1, 3, 5, 10, 20, 50, ...).",
        (
            ("kind", _S),
            ("scenario", _S),
            ("policy", _S),
            ("brokers", _L),
            ("points", _L),
            ("runs", _L),
            ("opened", _D),
            ("peak", _D),
            ("steady", _D),
        ),
        _sorted(rows, ("kind", "scenario", "policy", "brokers")),
    )


def latency_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    long = [
        {
            **r,
            "metric": m,
            "proposed_ms": r[f"{m}_proposed"],
            "baseline_ms": r[f"{m}_baseline"],
            "ratio": r[f"{m}_ratio"],
            "ratio_min": r[f"{m}_ratio_min"],
            "ratio_max": r[f"{m}_ratio_max"],
        }
        for r in rows
        for m in TIMING_METRICS
        if r[f"{m}_ratio"] is not None
    ]
    return make_table(
        "latency",
        "Time to first ack / first consume, by RTT",
        "Real clients: median time from start to the first acknowledged record (ttfa_ms, "
        "producers) or the first consumed record (ttfc_ms, consumers), and the median ratio "
        "proposed / baseline with its spread over repeats.",
        (
            ("metric", _S),
            ("kind", _S),
            ("scenario", _S),
            ("client", _S),
            ("rtt_ms", _D),
            ("point", _S),
            ("baseline", _S),
            ("repeats", _L),
            ("proposed_ms", _D),
            ("baseline_ms", _D),
            ("ratio", _D),
            ("ratio_min", _D),
            ("ratio_max", _D),
        ),
        _sorted(long, ("metric", "kind", "scenario", "rtt_ms", "point", "baseline")),
    )


def throughput_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    ab = [r for r in rows if r["throughput_rps_ratio"] is not None]
    return make_table(
        "throughput",
        "Throughput A/B",
        "Records acknowledged per second, the proposal and a baseline client taking turns on "
        "the same cluster: medians over repeats and the median ratio with its spread.",
        (
            ("kind", _S),
            ("scenario", _S),
            ("point", _S),
            ("baseline", _S),
            ("repeats", _L),
            ("throughput_rps_proposed", _D),
            ("throughput_rps_baseline", _D),
            ("throughput_rps_ratio", _D),
            ("throughput_rps_ratio_min", _D),
            ("throughput_rps_ratio_max", _D),
        ),
        _sorted(ab, _ORDER),
    )


def sweep_savings_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    return make_table(
        "sweep-savings",
        "Sweep: savings by broker count",
        "Over the sweep's points whose broker count falls in each bin (brokers = the bin's "
        "lower edge, bins in 1-2-5 steps): the share of sockets the proposal "
        "saves against each baseline (1 - median over points of the median ratio; negative "
        "means more), the median peak on both sides, and the points that regressed.",
        (
            ("baseline", _S),
            ("brokers", _L),
            ("points", _L),
            ("opened_saving", _D),
            ("peak_saving", _D),
            ("steady_saving", _D),
            ("peak_proposed", _D),
            ("peak_baseline", _D),
            ("regressed_points", _L),
        ),
        _sorted(rows, ("baseline", "brokers")),
    )


def headline_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    return make_table(
        "headline",
        "Headline: the proposal against each baseline",
        "Per kind and baseline, over every point: the median and the worst (largest) of the "
        "points' median ratios proposed / baseline, and the points that regressed.",
        (
            ("kind", _S),
            ("baseline", _S),
            ("points", _L),
            ("opened_ratio", _D),
            ("peak_ratio", _D),
            ("peak_ratio_worst", _D),
            ("steady_ratio", _D),
            ("steady_ratio_worst", _D),
            ("ttfa_ms_ratio", _D),
            ("ttfc_ms_ratio", _D),
            ("throughput_rps_ratio", _D),
            ("regressed_points", _L),
        ),
        _sorted(rows, ("kind", "baseline")),
    )


def runs_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    return make_table(
        "runs",
        "What ran",
        "Result rows per kind: grid points, policies or clients, repeats, and the summed wall "
        "time of the runs.",
        (
            ("kind", _S),
            ("rows", _L),
            ("points", _L),
            ("policies", _S),
            ("repeats", _L),
            ("wall_s", _D),
        ),
        _sorted(rows, ("kind",)),
    )


def regressions_table(regressions: Sequence[Regression]) -> Table:
    return make_table(
        "regressions",
        "Regressions",
        "Every (kind, point, baseline, metric) on which the proposal is worse than the rule "
        "allows.",
        (
            ("kind", _S),
            ("scenario", _S),
            ("point", _S),
            ("baseline", _S),
            ("metric", _S),
            ("proposed", _D),
            ("baseline_value", _D),
            ("ratio", _D),
            ("rule", _S),
        ),
        (r.__dict__ for r in regressions),
    )


def _micro_record(b: MicroBenchmark, per: int = 1) -> dict[str, Any]:
    return {
        "benchmark": b.name,
        "group": b.group,
        "policy": b.policy,
        "rounds": b.rounds,
        "file": b.file.name,
        **{
            f"{k}_us": getattr(b, f"{k}_s") * 1e6 / per
            for k in ("mean", "median", "stddev", "min", "max")
        },
    }


def decision_table(benchmarks: Sequence[MicroBenchmark]) -> Table:
    recs = [
        {
            **_micro_record(b, int(b.extra_info.get("decisions", 1))),
            "decisions": int(b.extra_info.get("decisions", 1)),
        }
        for b in benchmarks
        if b.group == "decision"
    ]
    return make_table(
        "decision-cost",
        "Decision cost",
        "pytest-benchmark, group `decision`: time per policy decision in µs (a round's time "
        "divided by `extra_info.decisions`, 1 if absent).",
        (
            ("benchmark", _S),
            ("policy", _S),
            ("rounds", _L),
            ("decisions", _L),
            ("mean_us", _D),
            ("median_us", _D),
            ("stddev_us", _D),
            ("min_us", _D),
            ("max_us", _D),
            ("file", _S),
        ),
        sorted(recs, key=lambda r: (str(r["policy"]), r["benchmark"])),
    )


def simulator_table(benchmarks: Sequence[MicroBenchmark]) -> Table:
    recs = [
        {
            "benchmark": b.name,
            "policy": b.policy,
            "rounds": b.rounds,
            "events": int(b.extra_info["events"]),
            "mean_s": b.mean_s,
            "median_s": b.median_s,
            "events_per_s": b.extra_info["events"] / b.mean_s,
            "events_per_s_median": b.extra_info["events"] / b.median_s,
            "file": b.file.name,
        }
        for b in benchmarks
        if b.group == "simulator"
    ]
    return make_table(
        "simulator-speed",
        "Simulator speed",
        "pytest-benchmark, group `simulator`: events per second (`extra_info.events` per "
        "round over the round's mean, and over its median).",
        (
            ("benchmark", _S),
            ("policy", _S),
            ("rounds", _L),
            ("events", _L),
            ("mean_s", _D),
            ("median_s", _D),
            ("events_per_s", _D),
            ("events_per_s_median", _D),
            ("file", _S),
        ),
        sorted(recs, key=lambda r: (str(r["policy"]), r["benchmark"])),
    )


def other_micro_table(benchmarks: Sequence[MicroBenchmark]) -> Table:
    recs = [_micro_record(b) for b in benchmarks if b.group not in ("decision", "simulator")]
    return make_table(
        "micro-other",
        "Other micro-benchmarks",
        "pytest-benchmark results outside the decision and simulator groups: µs per round.",
        (
            ("benchmark", _S),
            ("group", _S),
            ("policy", _S),
            ("rounds", _L),
            ("mean_us", _D),
            ("median_us", _D),
            ("stddev_us", _D),
            ("file", _S),
        ),
        sorted(recs, key=lambda r: (str(r["group"]), r["benchmark"])),
    )


# --------------------------------------------------------------------------- the page


@dataclass(frozen=True)
class Page:
    """Everything :func:`render_index` lays out; each Markdown field is ready to print."""

    title: str
    summary: str
    what_ran: str
    headline: str
    regressions: str
    tables: Sequence[tuple[Table, TableFiles]]
    plots: Sequence[tuple[str, str, Path]]
    """(title, caption, path) of each plot."""
    extra_sections: Sequence[tuple[str, str]] = field(default_factory=tuple)
    regenerate: str = ""


def render_index(page: Page, out: Path) -> str:
    """The text of ``index.md``: what ran, headline, regressions, tables, plots, the caller's
    extra sections, and how to regenerate. Links are relative to ``out``."""
    parts = [f"# {page.title}", page.summary]
    parts += ["## What ran", page.what_ran]
    parts += ["## Headline", page.headline]
    parts += ["## Regressions", page.regressions]
    parts += [
        "## Tables",
        "Each table is also in `tables/`, as Parquet (for programs) and as Markdown, with the "
        "same columns and rows.",
    ]
    for table, files in page.tables:
        assert files.markdown is not None
        md = files.markdown.relative_to(out).as_posix()
        pq = files.parquet.relative_to(out).as_posix()
        parts += [f"### {table.title}", f"{table.description} ([Markdown]({md}), [Parquet]({pq}))"]
        if not table.rows:
            parts.append("(no rows)")
        elif table.embed and len(table.rows) <= EMBED_MAX_ROWS:
            parts.append(markdown_table(table))
        else:
            parts.append(f"{len(table.rows)} rows, {len(table.columns)} columns: see [{md}]({md}).")
    parts.append("## Plots")
    if not page.plots:
        parts.append("No plots: the run has no data to draw.")
    for title, caption, path in page.plots:
        parts += [f"### {title}", caption, f"![{title}]({path.relative_to(out).as_posix()})"]
    for title, body in page.extra_sections:
        parts += [f"## {title}", body]
    parts += ["## How to regenerate", page.regenerate]
    return "\n\n".join(p.rstrip() for p in parts if p) + "\n"


def what_ran_markdown(
    meta: Sequence[Mapping[str, Any]], runs: Table, micro: Sequence[MicroFile]
) -> str:
    """The "What ran" section: rows per kind, and the provenance of rows and micro files."""

    def values(key: str) -> list[str]:
        return sorted({v for m in meta for v in m[key]})

    lines = [markdown_table(runs), ""]
    lines.append(f"- run id: {', '.join(f'`{v}`' for v in values('run_ids'))}")
    lines.append(f"- git commit: {', '.join(f'`{v}`' for v in values('git_commits'))}")
    first = min(m["first"] for m in meta)
    last = max(m["last"] for m in meta)
    lines.append(f"- rows written: {first} to {last}")
    for key, label in (("versions", "versions"), ("machines", "machine")):
        for v in values(key):
            lines.append(f"- {label}: {_json_inline(v)}")
    if micro:
        count = sum(len(f.benchmarks) for f in micro)
        lines.append(f"- micro-benchmarks: {count} in {len(micro)} file(s)")
        for f in micro:
            lines.append(
                f"  - `{f.path.name}`: {f.machine or 'machine unknown'}; commit `{f.commit}`; "
                f"{f.datetime or 'time unknown'}"
            )
    else:
        lines.append("- micro-benchmarks: none in this run")
    return "\n".join(lines)


def _json_inline(text: str) -> str:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return f"`{text}`"
    if isinstance(value, dict):
        return ", ".join(f"{k} `{v}`" for k, v in sorted(value.items()))
    return f"`{text}`"


def headline_markdown(headline: Table, decisions: Table, simulator: Table) -> str:
    """One sentence per (kind, baseline), the micro figures, then the headline table."""
    lines = []
    for r in headline.records():
        said = (
            f"- **{r['kind']}, against {r['baseline']}** ({r['points']} points), median "
            f"ratios proposed / baseline: peak sockets {_number(r['peak_ratio'])} (worst point "
            f"{_number(r['peak_ratio_worst'])}), steady {_number(r['steady_ratio'])}, opened "
            f"{_number(r['opened_ratio'])}"
        )
        for m, label in (
            ("ttfa_ms", "time to first ack"),
            ("ttfc_ms", "time to first consume"),
            ("throughput_rps", "throughput"),
        ):
            if r[f"{m}_ratio"] is not None:
                said += f", {label} {_number(r[f'{m}_ratio'])}"
        said += f"; {r['regressed_points'] or 'no'} regressed point(s)."
        lines.append(said)
    by_policy: dict[str, list[float]] = {}
    for r in decisions.records():
        by_policy.setdefault(str(r["policy"]), []).append(r["mean_us"])
    if by_policy:
        costs = ", ".join(
            f"{p} {_number(statistics.median(v))} µs" for p, v in sorted(by_policy.items())
        )
        lines.append(f"- **Decision cost** (mean per decision): {costs}.")
    speeds: dict[str, list[float]] = {}
    for r in simulator.records():
        speeds.setdefault(str(r["policy"]), []).append(r["events_per_s"])
    if speeds:
        text = ", ".join(f"{p} {_number(statistics.median(v))}" for p, v in sorted(speeds.items()))
        lines.append(f"- **Simulator speed** (events/s): {text}.")
    if headline.rows:
        lines += ["", markdown_table(headline)]
    return "\n".join(lines) if lines else "No comparisons."


def regressions_markdown(regressions: Sequence[Regression], tolerance: float, table: Table) -> str:
    rules = (
        f"Rules: sockets (opened, peak, steady) regress when the proposal's median is above the "
        f"baseline's; time to first ack/consume when the median ratio is above "
        f"{1 + tolerance:g} and the medians differ by more than 5 ms; throughput when it is "
        f"below {1 - tolerance:g}."
    )
    if not regressions:
        return f"None.\n\n{rules}"
    head = f"**{len(regressions)} regression(s).** {rules}"
    if len(regressions) <= EMBED_MAX_ROWS:
        return f"{head}\n\n{markdown_table(table)}"
    link = "[tables/regressions.md](tables/regressions.md)"
    return f"{head}\n\nToo many to show here: all are in {link}."


def columns_markdown() -> str:
    """The results schema as a Markdown table, for ``docs/results-schema.md`` (a test keeps
    the doc's copy equal to this)."""
    from connmgr.bench.schema import COLUMNS

    lines = ["| column | type | nullable | meaning |", "|---|---|---|---|"]
    for c in COLUMNS:
        doc = c.doc.replace("|", "\\|")
        lines.append(f"| `{c.name}` | {c.type.value} | {'yes' if c.nullable else 'no'} | {doc} |")
    return "\n".join(lines)


COLUMNS_BEGIN = "<!-- BEGIN columns -->\n"
COLUMNS_END = "\n<!-- END columns -->"


def update_columns_doc(path: Path) -> bool:
    """Rewrite the block between the ``columns`` markers of ``path`` with
    :func:`columns_markdown`; True if it changed."""
    text = path.read_text()
    head, rest = text.split(COLUMNS_BEGIN, 1)
    _, tail = rest.split(COLUMNS_END, 1)
    new = head + COLUMNS_BEGIN + columns_markdown() + COLUMNS_END + tail
    path.write_text(new)
    return new != text


if __name__ == "__main__":  # python -m connmgr.bench.report docs/results-schema.md
    import sys

    for name in sys.argv[1:]:
        print(f"{name}: {'updated' if update_columns_doc(Path(name)) else 'up to date'}")
