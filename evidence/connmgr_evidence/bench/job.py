"""``connmgr bench``: the main job, from the grid to the report.

The job runs the stages of :mod:`connmgr_evidence.bench.stages` in the order
:func:`~connmgr_evidence.bench.stages.stages` gives (the table in ``docs/benchmarks.md`` is
generated
from it), phase by phase (:class:`~connmgr_evidence.bench.stages.Phase`): the timed stages one at a
time on an otherwise idle machine; then the stages that run in the background beside the
CPU-bound simulated stages; then Spark starts and the Spark stages run on its session; last,
the comparison (:mod:`connmgr_evidence.bench.report.compare`) writes the report, with what each
stage
adds to it (:meth:`~connmgr_evidence.bench.stages.Stage.report`).

Everything lands in ``OUT/<run-id>/``: the raw results under ``raw/`` and the report
(``index.md``, ``tables/``, ``plots/``) beside it. Raw results are written as each stage
ends, so a failed stage leaves the earlier ones for inspection; ``--report-only``
(:func:`regenerate_report`) rebuilds the report from them alone.
"""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from connmgr_evidence.bench.grid import Grid
from connmgr_evidence.bench.results.rows import git_commit, new_meta
from connmgr_evidence.bench.runtime.spark import job_failure
from connmgr_evidence.bench.stages import BenchError, Phase, Stage, StageContext, shown, stages

T = TypeVar("T")


@dataclass
class BenchOutcome:
    run_id: str
    run_dir: Path
    report: Path
    regressions: list[Any] = field(default_factory=list)  # beyond the stated costs: exit 1
    stated: list[Any] = field(default_factory=list)  # the differences stated costs cover
    problems: list[str] = field(default_factory=list)
    """What the stages found wrong (a failing machine, a mutant not caught)."""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    sweep: list[tuple[int, float, int]] = field(default_factory=list)
    """(points, wall s, simulations) per sweep size."""
    partial: bool = False
    """Only some stages ran (``run_bench(only=...)``): raw results, no comparison or report."""


def new_run_id(now: datetime.datetime | None = None) -> str:
    stamp = (now or datetime.datetime.now(datetime.UTC)).strftime("%Y%m%dT%H%M%SZ")
    commit = git_commit()
    return f"{stamp}-{commit[:7] if commit != 'unknown' else 'nogit'}"


def run_bench(
    grid: Grid,
    out: Path,
    *,
    master: str | None = None,
    show: bool = True,
    say: Callable[[str], None] = print,
    run_id: str | None = None,
    only: Collection[str] | None = None,
) -> BenchOutcome:
    """Run every stage over ``grid`` and write the report into ``out/<run-id>/``; with
    ``only`` (stage names), just those stages, their raw results and ``raw/job.json``, without
    the comparison or a report (``outcome.partial``)."""
    from connmgr_evidence.bench.runtime.spark import spark_session

    rid = run_id or new_run_id()
    run_dir = out / rid
    ctx = StageContext(grid, new_meta(rid), run_dir / "raw", show=show, say=say)
    outcome = BenchOutcome(rid, run_dir, run_dir / "index.md")
    say(grid.describe())
    every = stages() if only is None else tuple(s for s in stages() if s.name in only)

    def timed(name: str, work: Callable[[], T]) -> T:
        started = time.perf_counter()
        value = work()
        outcome.stage_seconds[name] = time.perf_counter() - started
        return value

    def announce(stage: Stage[Any]) -> None:
        if stage.says:
            say(stage.says)

    def run(stage: Stage[Any]) -> None:
        if stage.timed:
            timed(stage.name, lambda: stage.run(ctx))
        else:
            stage.run(ctx)

    def phase(which: Phase) -> list[Stage[Any]]:
        return [s for s in every if s.phase is which]

    for stage in phase(Phase.TIMED):
        announce(stage)
        run(stage)
    # A stage beside the CPU-bound ones waits most of its time and times nothing; their pools
    # run at a lower priority (runtime.pool.NICE) so that it gets the CPU when it needs it.
    with ThreadPoolExecutor(max_workers=1) as background:
        beside = []
        for stage in phase(Phase.BESIDE):
            announce(stage)
            beside.append(background.submit(run, stage))
        for stage in phase(Phase.CPU):
            announce(stage)
            run(stage)
        for running in beside:
            running.result()
    if only is not None and not phase(Phase.SPARK):
        return _partial(ctx, outcome, [s.name for s in every], None)
    say("starting Spark ...")
    ctx.spark = timed("spark start", lambda: spark_session(master))
    for stage in phase(Phase.SPARK):
        announce(stage)
        run(stage)
    if only is not None:
        return _partial(ctx, outcome, [s.name for s in every], ctx.spark.sparkContext.master)
    outcome.sweep = ctx.sweep
    job = {
        "grid": grid.describe(),
        "skipped": list(grid.skipped),
        "stage_seconds": outcome.stage_seconds,
        "sweep": [list(s) for s in ctx.sweep],
        "retried": ctx.retried,
        "failed": ctx.failed,
        "master": ctx.spark.sparkContext.master,
    }
    (ctx.raw / JOB_FILE).write_text(json.dumps(job, indent=1))
    say("comparing on Spark and writing the report ...")
    started = time.perf_counter()
    comparison, problems = _compare(ctx.spark, run_dir, job)
    outcome.stage_seconds["compare"] = time.perf_counter() - started
    outcome.regressions = list(comparison.regressions)
    outcome.stated = list(comparison.stated)
    outcome.problems = problems
    return outcome


def _partial(
    ctx: StageContext, outcome: BenchOutcome, names: list[str], master: str | None
) -> BenchOutcome:
    """End a run of some stages: their timings in ``raw/job.json``, no comparison."""
    job = {
        "grid": ctx.grid.describe(),
        "stages": names,
        "stage_seconds": outcome.stage_seconds,
        "retried": ctx.retried,
        "master": master,
    }
    ctx.raw.mkdir(parents=True, exist_ok=True)
    (ctx.raw / JOB_FILE).write_text(json.dumps(job, indent=1))
    outcome.partial = True
    outcome.sweep = ctx.sweep
    return outcome


JOB_FILE = "job.json"
"""Under ``raw/``: the grid, the stage timings and the sweep's scaling, as the job measured
them, so that ``--report-only`` can rebuild the report from the raw results alone."""
_REGENERATE = (
    "`connmgr bench [--quick]` runs everything again; `connmgr bench --report-only "
    "reports/<run-id>` rebuilds this report (tables, plots, index.md) from `raw/`."
)


def regenerate_report(run_dir: Path, *, master: str | None = None) -> tuple[Any, list[str]]:
    """Rebuild ``run_dir``'s report from its raw results (``raw/``) and ``raw/job.json``;
    the comparison and the problems the stages found."""
    from connmgr_evidence.bench.runtime.spark import spark_session

    raw = run_dir / "raw"
    path = raw / JOB_FILE
    try:
        job = json.loads(path.read_text())
    except FileNotFoundError:
        raise BenchError(f"{path}: not found; is {run_dir} a `connmgr bench` run?") from None
    except json.JSONDecodeError as e:
        raise BenchError(f"{path}: not valid JSON ({e})") from e
    spark = spark_session(master)
    job = {**job, "rebuilt_on": spark.sparkContext.master}
    return _compare(spark, run_dir, job)


def _compare(spark: Any, run_dir: Path, job: dict[str, Any]) -> tuple[Any, list[str]]:
    """The comparison over ``run_dir/raw``, with the job's sections and what each stage
    adds to the report; the comparison and the problems the stages found. A Spark job that
    fails on the cluster is a :class:`~connmgr_evidence.bench.runtime.spark.SparkJobFailed` (one
    line)."""
    try:
        return _compare_on(spark, run_dir, job)
    except Exception as e:  # py4j carries Spark's failures
        if type(e).__module__.startswith(("py4j", "pyspark")):
            raise job_failure(e) from e
        raise


def _compare_on(spark: Any, run_dir: Path, job: dict[str, Any]) -> tuple[Any, list[str]]:
    from connmgr_evidence.bench.report.compare import run_comparison

    raw = run_dir / "raw"
    reports = []
    for stage in shown(stages()):
        found = stage.read(raw)
        if found is not None:
            reports.append(stage.report(found, raw))
    comparison = run_comparison(
        spark,
        raw,
        run_dir,
        extra_sections=[s for r in reports for s in r.sections] + job_sections(job),
        extra_tables=[t for r in reports for t in r.tables],
        extra_plots=[p for r in reports for p in r.plots],
        extra_headline=[h for r in reports for h in r.headline],
        extra_life_costs=[c for r in reports for c in r.life_costs],
        regenerate=_REGENERATE,
    )
    return comparison, [p for r in reports for p in r.problems]


def job_sections(job: dict[str, Any]) -> list[tuple[str, str]]:
    """The report sections only the job knows: sweep scaling, the grid, stage timings."""
    lines = [
        "| grid points | simulations | wall time (s) | simulations/s |",
        "|---:|---:|---:|---:|",
    ]
    for points, wall, sims in job["sweep"]:
        lines.append(f"| {points:,} | {sims:,} | {wall:.1f} | {sims / wall:,.0f} |")
    stages = ["| stage | seconds |", "|---|---:|"]
    stages += [f"| {name} | {s:.1f} |" for name, s in job["stage_seconds"].items()]
    skipped = "\n".join(f"- {s}" for s in job["skipped"]) or "none"
    retried = "\n".join(f"- {r}" for r in job.get("retried", [])) or "none"
    master = f"The sweep and the comparison ran on Spark master `{job.get('master', 'local[*]')}`."
    if "rebuilt_on" in job:
        master += f" This report was rebuilt (`--report-only`) on `{job['rebuilt_on']}`."
    failed = [
        (
            "Real runs that failed every attempt (no row, so no pair in the comparison)",
            "\n".join(f"- {r}" for r in job.get("failed", [])),
        )
    ]
    return [
        ("Spark", master),
        ("Sweep: how the run time scales with the grid", "\n".join(lines)),
        ("Grid", f"{job['grid']}\n\nImpossible points left out:\n\n{skipped}"),
        ("Stage timings (s)", "\n".join(stages)),
        ("Real runs retried (failed or hung once, then measured again)", retried),
        *(failed if job.get("failed") else []),
    ]
