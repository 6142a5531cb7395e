"""The comparison job: a run directory's results in, a report and its regressions out.

Input (``RUN_DIR``):

- ``results/*.parquet``: rows of the results schema (:mod:`connmgr_evidence.bench.results.schema`),
  as files
  or as Spark-written dataset directories;
- ``micro/*.json`` (optional): pytest-benchmark ``--benchmark-json`` files.

The job runs its stages in order, each a module of its own, with typed values between them:

1. load and check (:mod:`connmgr_evidence.bench.report.load`,
   :mod:`connmgr_evidence.bench.report.micro`):
   everything is checked before anything is compared; broken input raises
   :class:`~connmgr_evidence.bench.results.schema.ResultsError` naming the file and the problem;
2. aggregate in Spark (:mod:`connmgr_evidence.bench.report.aggregation`): pairs, medians, ratios and
   the
   regression flags (rules in :mod:`connmgr_evidence.bench.report.metrics`), collected as the values
   of
   :mod:`connmgr_evidence.bench.report.summaries`;
3. the stated costs (:mod:`connmgr_evidence.bench.report.stated`): the flagged differences that a
   stated cost
   of the proposal (:data:`connmgr.costs.STATED_COSTS`) covers are set apart from the
   regressions;
4. the tables (:mod:`connmgr_evidence.bench.report.tables`, written by
   :mod:`connmgr_evidence.bench.report.table`), the plots
   (:mod:`connmgr_evidence.bench.report.plots`) and the
   page (:mod:`connmgr_evidence.bench.report.page`).

The names tests and callers import from here (``load_results``, ``pair_summary``, ...) are
re-exported from those modules.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connmgr.errors import ConfigError
from connmgr_evidence.bench.report import plots, stated, tables
from connmgr_evidence.bench.report.aggregation import (
    BROKER_BUCKETS,
    gather,
    pair_summary,
    write_sweep_points,
)
from connmgr_evidence.bench.report.load import NON_NEGATIVE, POSITIVE, load_results, result_files
from connmgr_evidence.bench.report.metrics import TIMING_SLACK_MS
from connmgr_evidence.bench.report.micro import MicroBenchmark, load_micro
from connmgr_evidence.bench.report.page import (
    Page,
    headline_markdown,
    regressions_markdown,
    render_index,
    what_ran_markdown,
)
from connmgr_evidence.bench.report.plots import ExtraPlot
from connmgr_evidence.bench.report.summaries import BaselineHeadline, Regression, regressions_of
from connmgr_evidence.bench.report.table import Table, TableFiles, write_table

__all__ = [
    "BROKER_BUCKETS",
    "NON_NEGATIVE",
    "POSITIVE",
    "TIMING_SLACK_MS",
    "Comparison",
    "load_micro",
    "load_results",
    "pair_summary",
    "result_files",
    "run_comparison",
]


@dataclass(frozen=True)
class Comparison:
    """What :func:`run_comparison` wrote and found."""

    run_dir: Path
    out: Path
    index: Path
    tolerance: float
    rows: Mapping[str, int]
    """Result rows per kind."""
    regressions: tuple[Regression, ...]
    """The flagged differences no stated cost covers: these fail ``connmgr bench``."""
    stated: tuple[Regression, ...]
    """The flagged differences that stated costs cover (``connmgr.costs.STATED_COSTS``)."""
    tables: Mapping[str, TableFiles]
    plots: Mapping[str, Path]
    micro: tuple[MicroBenchmark, ...]

    @property
    def ok(self) -> bool:
        """No regression beyond the stated costs."""
        return not self.regressions


_PLOTS = (
    (
        "sockets-vs-brokers",
        "Sockets against cluster size",
        "Median peak and steady sockets per policy as the cluster grows (log scale).",
    ),
    (
        "sockets-by-role",
        "Sockets by role",
        "Sockets opened per policy, split by the role the connection played.",
    ),
    (
        "latency",
        "Time to first ack / consume",
        "Per real client and injected RTT, over repeats.",
    ),
    (
        "throughput",
        "Throughput A/B",
        "Median records per second per client, with the min-max over repeats.",
    ),
    (
        "sweep-savings",
        "Sweep savings",
        "Share of sockets the proposal saves against each baseline, by broker count.",
    ),
)


def run_comparison(
    spark: Any,
    run_dir: Path,
    out: Path,
    *,
    tolerance: float = 0.25,
    extra_sections: Sequence[tuple[str, str]] = (),
    extra_tables: Sequence[Table] = (),
    extra_plots: Sequence[ExtraPlot] = (),
    extra_headline: Sequence[BaselineHeadline] = (),
    extra_life_costs: Sequence[Mapping[str, Any]] = (),
    regenerate: str | None = None,
) -> Comparison:
    """Compare the proposal with every baseline over ``run_dir``'s results and write the
    report into ``out``: ``out/tables/*.parquet`` and ``*.md``, ``out/plots/*.png`` and
    ``out/index.md`` (``tables/`` and ``plots/`` are emptied first; nothing else in ``out``
    is touched).

    ``tolerance`` bounds the timing and throughput ratios (sockets have none).
    ``extra_sections`` are (title, Markdown) sections that ``index.md`` shows before "How to
    regenerate"; ``extra_tables`` are written and shown with the others (the property,
    linger and fleet stages'); ``extra_plots`` are drawn after the others (the linger and
    fleet stages');
    ``extra_headline`` are headline rows and ``extra_life_costs`` ``life-costs`` rows from
    elsewhere (the real clients' scaled lives, :mod:`connmgr_evidence.bench.stages.life`);
    ``regenerate`` replaces that section's text. Raises :class:`ResultsError`
    on broken input, before writing anything; returns the :class:`Comparison`, whose
    ``regressions`` (the flagged differences no stated cost covers) decide the exit
    status."""
    if not 0 <= tolerance < 1:
        raise ConfigError(f"tolerance={tolerance!r}: must be in [0, 1)")
    files = result_files(run_dir)
    micro_files = load_micro(run_dir)
    micro = tuple(b for f in micro_files for b in f.benchmarks)
    df = load_results(spark, files)
    tables_dir, plots_dir = out / "tables", out / "plots"
    try:
        summary = pair_summary(df, tolerance).cache()
        try:
            got = gather(df, summary)
            for d in (tables_dir, plots_dir):
                if d.exists():
                    shutil.rmtree(d)
                d.mkdir(parents=True)
            sweep_points = None
            if got.sweep:
                sweep_points = tables_dir / "sweep-points.parquet"
                write_sweep_points(summary, sweep_points)
        finally:
            summary.unpersist()
    finally:
        df.unpersist()

    regressed = sorted(got.regressed, key=lambda r: (r.kind, r.scenario, r.point, r.baseline))
    flagged = regressions_of(regressed, tolerance)
    excused, regressions = stated.split(flagged)
    headline = tables.headline_table(
        (*stated.headline_without_stated(got.headline, flagged, regressions), *extra_headline)
    )
    runs = tables.runs_table(got.meta)
    regressions_t = tables.regressions_table(regressions)
    stated_t = stated.stated_costs_table(p.record() for p in got.comparison)
    decisions = tables.decision_table(micro)
    simulator = tables.simulator_table(micro)
    content = [
        tables.sockets_table(got.comparison),
        tables.roles_table(got.roles),
        tables.life_table(got.roles),
        tables.life_costs_table(got.comparison, got.roles, extra_life_costs),
        tables.brokers_table(got.brokers),
        tables.latency_table(got.comparison),
        tables.throughput_table(got.comparison),
        decisions,
        simulator,
    ]
    other = tables.other_micro_table(micro)
    if other.rows:
        content.append(other)
    if got.sweep:
        content.append(tables.sweep_savings_table(got.sweep))
    content.extend(extra_tables)
    content.append(tables.comparison_table(got.comparison))
    written = {
        t.name: write_table(t, tables_dir)
        for t in (headline, runs, regressions_t, stated_t, *content)
    }
    if sweep_points is not None:
        written["sweep-points"] = TableFiles(sweep_points, None)

    drawn: dict[str, Path] = {}
    draws: dict[str, Callable[[Path], Path | None]] = {
        "sockets-vs-brokers": lambda p: plots.sockets_vs_brokers(got.brokers, p),
        "sockets-by-role": lambda p: plots.sockets_by_role(got.roles, p),
        "latency": lambda p: plots.latency(got.timings, p),
        "throughput": lambda p: plots.throughput(got.timings, p),
        "sweep-savings": lambda p: plots.sweep_savings(got.sweep, p),
    }
    plot_entries: list[tuple[str, str, Path]] = []
    extra = [(name, title, caption) for name, title, caption, _ in extra_plots]
    draws.update({name: draw for name, _, _, draw in extra_plots})
    for name, title, caption in (*_PLOTS, *extra):
        path = draws[name](plots_dir / f"{name}.png")
        if path is not None:
            drawn[name] = path
            plot_entries.append((title, caption, path))

    counts = {str(m.kind): int(m.rows) for m in got.meta}
    run_ids = sorted({v for m in got.meta for v in m.run_ids})
    summary_text = (
        f"Compared from `{run_dir}`: {sum(counts.values())} result rows "
        f"({', '.join(f'{k} {n}' for k, n in sorted(counts.items()))}) and {len(micro)} "
        f"micro-benchmarks. "
        + (
            f"**{len(regressions)} regression(s)**: see below."
            if regressions
            else "**No regressions.**"
        )
        + (
            f" {len(excused)} flagged difference(s) covered by stated costs (see Stated costs)."
            if excused
            else ""
        )
        + f" Sockets are compared exactly; timings and throughput within ±{tolerance:g}."
    )
    if sweep_points is not None:
        summary_text += (
            " The sweep's per-point comparisons are in `tables/sweep-points.parquet` "
            "(Parquet only: too many rows to read)."
        )
    index_page = Page(
        title=f"Benchmark report: {', '.join(run_ids)}",
        summary=summary_text,
        what_ran=what_ran_markdown(got.meta, runs, micro_files) + _links(written["runs"], out),
        headline=headline_markdown(headline, decisions, simulator)
        + _links(written["headline"], out),
        regressions=regressions_markdown(regressions, tolerance, regressions_t)
        + _links(written["regressions"], out),
        stated=stated.stated_markdown(stated_t, excused) + _links(written["stated-costs"], out),
        tables=[(t, written[t.name]) for t in content],
        plots=plot_entries,
        extra_sections=tuple(extra_sections),
        regenerate=regenerate or _regenerate_text(run_dir, out, tolerance),
    )
    index = out / "index.md"
    index.write_text(render_index(index_page, out))
    return Comparison(
        run_dir=run_dir,
        out=out,
        index=index,
        tolerance=tolerance,
        rows=counts,
        regressions=regressions,
        stated=excused,
        tables=written,
        plots=drawn,
        micro=micro,
    )


def _links(files: TableFiles, out: Path) -> str:
    assert files.markdown is not None
    md, pq = (p.relative_to(out).as_posix() for p in (files.markdown, files.parquet))
    return f"\n\nThis table: [Markdown]({md}), [Parquet]({pq})."


def _regenerate_text(run_dir: Path, out: Path, tolerance: float) -> str:
    return (
        "The report is a function of the run directory alone (`results/*.parquet`, "
        "`micro/*.json`). To rebuild it:\n\n"
        "```python\n"
        "from pathlib import Path\n"
        "from connmgr_evidence.bench.report.compare import run_comparison\n"
        "from connmgr_evidence.bench.runtime.spark import spark_session\n\n"
        f'run_comparison(spark_session(), Path("{run_dir}"), Path("{out}"), '
        f"tolerance={tolerance!r})\n"
        "```"
    )
