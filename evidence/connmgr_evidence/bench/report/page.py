"""The report page, ``index.md``: what a person reads top to bottom.

:func:`render_index` lays out a :class:`Page` (what ran, headline, regressions, stated
costs, tables, plots, the caller's extra sections, how to regenerate); the ``*_markdown``
functions write the sections that are more than a table. Nothing here needs Spark.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from connmgr_evidence.bench.report.metrics import (
    HISTORY_BASELINES,
    JAVA_PATCHED,
    JAVA_STOCK,
    MIN_TIMED_PAIRS,
)
from connmgr_evidence.bench.report.micro import MicroFile
from connmgr_evidence.bench.report.summaries import KindSummary, Regression
from connmgr_evidence.bench.report.table import Table, TableFiles, format_number, markdown_table

EMBED_MAX_ROWS = 100
"""A table longer than this is linked from ``index.md`` rather than shown in it."""


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
    stated: str = ""
    """The "Stated costs" section (:mod:`connmgr_evidence.bench.report.stated`); left out when
    empty."""


def render_index(page: Page, out: Path) -> str:
    """The text of ``index.md``: what ran, headline, regressions, stated costs, tables,
    plots, the caller's extra sections, and how to regenerate. Links are relative to
    ``out``."""
    parts = [f"# {page.title}", page.summary]
    parts += ["## What ran", page.what_ran]
    parts += ["## Headline", page.headline]
    parts += ["## Regressions", page.regressions]
    if page.stated:
        parts += ["## Stated costs", page.stated]
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


def what_ran_markdown(meta: Sequence[KindSummary], runs: Table, micro: Sequence[MicroFile]) -> str:
    """The "What ran" section: rows per kind, and the provenance of rows and micro files."""

    def values(of: Callable[[KindSummary], tuple[str, ...]]) -> list[str]:
        return sorted({v for m in meta for v in of(m)})

    lines = [markdown_table(runs), ""]
    lines.append(f"- run id: {', '.join(f'`{v}`' for v in values(lambda m: m.run_ids))}")
    lines.append(f"- git commit: {', '.join(f'`{v}`' for v in values(lambda m: m.git_commits))}")
    first = min(m.first for m in meta)
    last = max(m.last for m in meta)
    lines.append(f"- rows written: {first} to {last}")
    provenance: tuple[tuple[Callable[[KindSummary], tuple[str, ...]], str], ...] = (
        (lambda m: m.versions, "versions"),
        (lambda m: m.machines, "machine"),
    )
    for of, label in provenance:
        for v in values(of):
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
    records = headline.records()
    # Today's clients first; the articles' model last, as history.
    records.sort(key=lambda r: r["baseline"] in HISTORY_BASELINES)
    for r in records:
        history = r["baseline"] in HISTORY_BASELINES
        said = f"- **{r['kind']}, against {r['baseline']}**"
        said += " (history: the 2018-2019 articles' model)" if history else ""
        said += f" ({r['points']} points), median ratios proposed / baseline: "
        # Per client-hour first (where measured): what a platform team pays for.
        life = [
            f"{label} {format_number(r[f'{m}_ratio'])}"
            for m, label in (
                ("socket_s_per_h", "socket-seconds per client-hour"),
                ("handshakes_per_h", "handshakes per client-hour"),
            )
            if r[f"{m}_ratio"] is not None
        ]
        # Socket counts where the kind has them (a real client's scaled life has only its
        # per-hour figures: its sockets at one instant say nothing about an hour).
        sockets = (
            [
                f"peak sockets {format_number(r['peak_ratio'])} "
                f"(worst point {format_number(r['peak_ratio_worst'])})",
                f"steady {format_number(r['steady_ratio'])}",
                f"opened {format_number(r['opened_ratio'])}",
            ]
            if r["peak_ratio"] is not None
            else []
        )
        said += ", ".join([*life, *sockets])
        for m, label in (
            ("ttfa_ms", "time to first ack"),
            ("ttfc_ms", "time to first consume"),
            ("throughput_rps", "throughput"),
        ):
            if r[f"{m}_ratio"] is not None:
                said += f", {label} {format_number(r[f'{m}_ratio'])}"
        said += f"; {r['regressed_points'] or 'no'} regressed point(s)."
        lines.append(said)
    by_policy: dict[str, list[float]] = {}
    for r in decisions.records():
        by_policy.setdefault(str(r["policy"]), []).append(r["mean_us"])
    if by_policy:
        costs = ", ".join(
            f"{p} {format_number(statistics.median(v))} µs" for p, v in sorted(by_policy.items())
        )
        lines.append(f"- **Decision cost** (mean per decision): {costs}.")
    speeds: dict[str, list[float]] = {}
    for r in simulator.records():
        speeds.setdefault(str(r["policy"]), []).append(r["events_per_s"])
    if speeds:
        text = ", ".join(
            f"{p} {format_number(statistics.median(v))}" for p, v in sorted(speeds.items())
        )
        lines.append(f"- **Simulator speed** (events/s): {text}.")
    if headline.rows:
        lines += ["", markdown_table(headline)]
    return "\n".join(lines) if lines else "No comparisons."


def regressions_markdown(regressions: Sequence[Regression], tolerance: float, table: Table) -> str:
    """The "Regressions" section: the rules, then the regressions (or a link to them): the
    flagged differences that no stated cost covers (those it covers are under "Stated
    costs")."""
    rules = (
        f"Rules: sockets (opened, peak, steady) regress when the proposal's median is above the "
        f"baseline's; time to first ack/consume when the median ratio is above "
        f"{1 + tolerance:g} and the medians differ by more than 5 ms; throughput when it is "
        f"below {1 - tolerance:g}; a timing or throughput ratio only over at least "
        f"{MIN_TIMED_PAIRS} pairs (fewer are shown, not judged). The patched kafka-clients "
        f"against its release (subject {JAVA_PATCHED}, baseline {JAVA_STOCK}) is judged on "
        f"its times, when every pair's ratio (not the median) is above {1 + tolerance:g} (a "
        f"cold JVM's start swings from run to run), and not on its sockets (a telemetry dial "
        f"makes either client's counts differ by one from run to run). A flagged difference "
        f"that a "
        f"stated cost of the proposal "
        f"covers (within its stated excess) is listed under Stated costs instead."
    )
    if not regressions:
        return f"None.\n\n{rules}"
    head = f"**{len(regressions)} regression(s).** {rules}"
    if len(regressions) <= EMBED_MAX_ROWS:
        return f"{head}\n\n{markdown_table(table)}"
    link = "[tables/regressions.md](tables/regressions.md)"
    return f"{head}\n\nToo many to show here: all are in {link}."
