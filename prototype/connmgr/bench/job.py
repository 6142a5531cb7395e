"""``connmgr bench``: the main job, from the grid to the report.

1. the timed stages, on an otherwise idle machine: the real clients on the embedded cluster
   (``results/real.parquet``), the A/B throughput turns (``results/throughput.parquet``),
   TLS and SASL on a real KRaft cluster (``raw/tls.json``, :mod:`connmgr.bench.stages.tls`) and
   the pytest-benchmark suites of ``benchmarks/micro`` (``micro/micro.json``);
2. the real clients over a scaled life (``raw/life.json``, :mod:`connmgr.bench.stages.life`), in
   the background beside 3 and 4 (nothing in a life is timed);
3. every policy through the simulator over the grid's points (``results/sim.parquet``) and
   the linger stage (``raw/linger.json``);
4. the property suite as a measurement (``raw/properties.json``,
   :mod:`connmgr.bench.stages.properties`);
5. on Spark: the simulator inside Spark tasks over the sweep's grid sizes (the largest is
   kept as ``results/sweep.parquet``), the fleet view (``raw/fleet.json`` and
   ``raw/fleet.parquet``, :mod:`connmgr.bench.stages.fleetview`) on the same session, then the
   comparison job, which writes the report.

Everything lands in ``OUT/<run-id>/``: the raw results under ``raw/`` and the report
(``index.md``, ``tables/``, ``plots/``) beside it. Raw results are written as each stage
ends, so a failed stage leaves the earlier ones for inspection.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from connmgr.bench.grid import Grid, RealPoint, SimPoint, java_version, real_jobs
from connmgr.bench.results.rows import (
    RunMeta,
    counting_columns,
    git_commit,
    life_columns,
    new_meta,
    point_text,
    sim_row,
    spec_columns,
)
from connmgr.bench.results.schema import Kind, check_row, write_parquet
from connmgr.bench.runtime.pool import pooled_map
from connmgr.bench.runtime.spark import job_failure
from connmgr.bench.stages.linger import (
    linger_points,
    linger_table,
    read_linger,
    run_one,
    write_linger,
)
from connmgr.bench.stages.linger import plan as linger_plan
from connmgr.bench.stages.properties import (
    check_properties,
    property_results,
    property_tables,
    read_properties,
    write_properties,
)
from connmgr.bench.stages.tls import read_tls, run_tls, tls_tables
from connmgr.errors import ConnMgrError
from connmgr.sim.run import prepare, run_spec

MICRO_DIR = Path(__file__).resolve().parents[3] / "benchmarks" / "micro"
T = TypeVar("T")


class BenchError(ConnMgrError):
    """A stage of the main job failed; the message names the stage and the run."""


@dataclass
class BenchOutcome:
    run_id: str
    run_dir: Path
    report: Path
    regressions: list[Any] = field(default_factory=list)  # beyond the stated costs: exit 1
    stated: list[Any] = field(default_factory=list)  # the differences stated costs cover
    problems: list[str] = field(default_factory=list)
    """What the property stage found wrong (a failing machine, a mutant not caught)."""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    sweep: list[tuple[int, float, int]] = field(default_factory=list)
    """(points, wall s, simulations) per sweep size."""


def new_run_id(now: datetime.datetime | None = None) -> str:
    stamp = (now or datetime.datetime.now(datetime.UTC)).strftime("%Y%m%dT%H%M%SZ")
    commit = git_commit()
    return f"{stamp}-{commit[:7] if commit != 'unknown' else 'nogit'}"


def _bar(items: Iterable[T], total: int, desc: str, show: bool) -> Iterator[T]:
    from tqdm import tqdm

    yield from tqdm(items, total=total, desc=desc, unit="run", disable=not show, leave=True)


def _pooled(
    work: Callable[[Any], T], jobs: Sequence[Any], desc: str, show: bool, workers: int
) -> list[T]:
    """:func:`~connmgr.bench.runtime.pool.pooled_map` with a progress bar named ``desc``."""
    return pooled_map(work, jobs, workers, lambda it, total: _bar(it, total, desc, show))


# --- 1. the simulator ---------------------------------------------------------------------


def sim_rows(grid: Grid, meta: RunMeta, *, show: bool = True) -> list[dict[str, Any]]:
    """Every policy of the grid through every simulated point, ``repeats`` times, on the
    grid's ``[sim] workers`` processes (rows in point, repeat, policy order)."""
    repeats = grid.get("sim", "repeats")
    base_seed = grid.get("sim", "seed")
    jobs = [
        (point, policy, r, base_seed + r, meta)
        for point in grid.sim_points
        for r in range(repeats)
        for policy in grid.policies
    ]
    return _pooled(_sim_one, jobs, "simulate", show, grid.get("sim", "workers"))


def _sim_one(job: tuple[SimPoint, str, int, int, RunMeta]) -> dict[str, Any]:
    point, policy, repeat, seed, meta = job
    spec, policy_settings, _ = prepare(point.scenario, {**point.params, "seed": str(seed)})
    result = run_spec(spec, policy, policy_settings, seed)
    result.scenario = point.scenario
    return sim_row(
        result,
        spec,
        meta=meta,
        point=point.point,
        repeat=repeat,
        idle_disabled=point.idle_disabled,
    )


# --- 2. real clients ----------------------------------------------------------------------


def real_row(
    run: Any, point: RealPoint, client: str, repeat: int, meta: RunMeta, records: int
) -> dict[str, Any]:
    """One row for a real run (a :class:`connmgr.realrun.RealRun`)."""
    summary = run.steady_summary
    row: dict[str, Any] = {
        **meta.columns(),
        "kind": Kind.REAL.value,
        "point": point.point,
        "scenario": point.scenario,
        "policy": client,
        **spec_columns(run.spec),
        "rtt_ms": point.rtt_ms,
        "idle_disabled": False,
        "duration_ms": float(run.wall_s * 1000.0),
        "repeat": repeat,
        "seed": int(run.seed),
        **counting_columns(summary),
        "misrouted": None,
        "records": records,
        "ttfa_ms": run.ttfa_ms,
        "ttfc_ms": run.ttfc_ms,
        "throughput_rps": None,
        "events": None,
        "wall_s": float(run.wall_s),
    }
    check_row(row, f"real {point.point} {client} repeat {repeat}")
    return row


REAL_RUN_TIMEOUT_S = 300.0
"""A real run taking longer than this has hung; it is retried (and the retry reported)."""


def real_rows(
    grid: Grid, meta: RunMeta, *, show: bool = True, retried: list[str] | None = None
) -> list[dict[str, Any]]:
    """Every real client through every real point, ``repeats`` times (in
    :func:`real_jobs`' order), each run on a fresh embedded cluster. A failed or hung run is
    retried once and listed in ``retried``; a second failure stops the job."""
    if retried is None:
        retried = []
    from connmgr.realrun import run_real

    records = grid.get("real", "records")
    base_seed = grid.get("real", "seed")
    jobs = real_jobs(grid)
    rows = []
    for point, client, repeat in _bar(jobs, len(jobs), "real runs", show):
        version = java_version(client)
        settings = {**point.params, "records": str(records), "seed": str(base_seed + repeat)}
        for attempt in (1, 2):
            try:
                run = asyncio.run(
                    asyncio.wait_for(
                        run_real(
                            point.scenario,
                            "java" if version else client,
                            settings,
                            kafka_clients=version,
                        ),
                        REAL_RUN_TIMEOUT_S,
                    )
                )
                break
            except (ConnMgrError, TimeoutError) as e:
                why = str(e) or f"no result within {REAL_RUN_TIMEOUT_S:.0f} s"
                if attempt == 2:
                    raise BenchError(f"real run {point.point} {client} failed twice: {why}") from e
                retried.append(f"{point.point} {client} repeat {repeat}: {why}")
        rows.append(real_row(run, point, client, repeat, meta, records))
    return rows


def throughput_rows(grid: Grid, meta: RunMeta, *, show: bool = True) -> list[dict[str, Any]]:
    """The A/B throughput turns, one row per turn (``repeat`` = round)."""
    from connmgr.realrun import throughput_ab

    brokers = grid.get("throughput", "brokers")
    records = grid.get("throughput", "records")
    rounds = grid.get("throughput", "rounds")
    linger = grid.get("throughput", "linger_ms")
    rows = []
    for rtt in _bar(
        grid.get("throughput", "rtt_ms"),
        len(grid.get("throughput", "rtt_ms")),
        "throughput A/B",
        show,
    ):
        params = {"brokers": brokers, "records": records, "rtt_ms": float(rtt), "linger_ms": linger}
        point = point_text("throughput-ab", params)
        started = time.perf_counter()
        turns = asyncio.run(
            throughput_ab(brokers, records, rounds, float(rtt), 0, batch_linger_ms=linger)
        )
        wall = time.perf_counter() - started
        for turn in turns:
            row: dict[str, Any] = {
                **meta.columns(),
                "kind": Kind.REAL.value,
                "point": point,
                "scenario": "throughput-ab",
                "policy": turn.client,
                "client": "producer",
                "brokers": brokers,
                "bootstrap_size": brokers,
                "leaders": brokers,
                "coordinator_shared": False,
                "idle_disabled": False,
                "rtt_ms": float(rtt),
                "duration_ms": turn.seconds * 1000.0,
                "repeat": turn.round,
                "seed": 0,
                "opened": turn.opened,
                "failed": 0,
                "peak": turn.peak,
                "steady": turn.steady,
                **{
                    f"{w}_{r}": None
                    for w in ("opened", "steady")
                    for r in ("bootstrap", "data", "coordination")
                },
                "handshakes": turn.opened,
                "handshakes_avoided": 0,
                **life_columns(None),
                "misrouted": None,
                "records": turn.records,
                "ttfa_ms": None,
                "ttfc_ms": None,
                "throughput_rps": turn.records_per_s,
                "events": None,
                "wall_s": wall,
            }
            check_row(row, f"throughput {point} {turn.client} round {turn.round}")
            rows.append(row)
    return rows


# --- 3. micro-benchmarks ------------------------------------------------------------------


def run_micro(grid: Grid, out: Path) -> Path:
    """The pytest-benchmark suites, in a subprocess, into ``out`` (JSON)."""
    if not MICRO_DIR.is_dir():
        raise BenchError(f"micro-benchmarks not found at {MICRO_DIR} (run from a source checkout)")
    out.parent.mkdir(parents=True, exist_ok=True)
    # Not the checkout's test options nor a calling test worker's variables: under
    # pytest-xdist (which both bring), pytest-benchmark times nothing.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["CONNMGR_MICRO_ROUNDS"] = str(grid.get("micro", "rounds"))
    cmd = [sys.executable, "-m", "pytest", str(MICRO_DIR), "-q", "-p", "no:cacheprovider"]
    cmd += ["-o", "addopts=", f"--benchmark-json={out}", "--rootdir", str(MICRO_DIR)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not out.exists():
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise BenchError(f"micro-benchmarks failed (exit {done.returncode}):\n{tail}")
    return out


# --- 4. the linger trade-off ---------------------------------------------------------------


def linger_stage(grid: Grid, meta: RunMeta, raw: Path, *, show: bool = True) -> Path:
    """The proposal at every ``[linger]`` value and the baselines, per scenario, each a
    simulated client-hour (:mod:`connmgr.bench.stages.linger`); written to ``raw/linger.json``."""
    values = grid.values["linger"]
    runs = linger_plan(values)
    rows = _pooled(run_one, runs, "linger", show, grid.get("sim", "workers"))
    return write_linger(values, meta, rows, raw)


# --- 5. real clients over a scaled life ----------------------------------------------------


def life_stage(grid: Grid, meta: RunMeta, raw: Path, *, show: bool = True) -> Path:
    """Every ``[life]`` client through every scenario over a scaled life, several at once
    in worker processes (:mod:`connmgr.bench.stages.life`); written to ``raw/life.json``."""
    from tqdm import tqdm

    from connmgr.bench.stages.life import plan as life_plan
    from connmgr.bench.stages.life import run_stage, write_life

    values = grid.values["life"]
    total = len(life_plan(values))
    with tqdm(total=total, desc="life", unit="run", disable=not show, leave=True) as bar:

        def progress(done: int, _total: int) -> None:
            bar.n = done
            bar.refresh()

        rows = run_stage(values, progress)
    return write_life(values, meta, rows, raw)


# --- 6. the fleet view (on Spark) -----------------------------------------------------------


def fleet_stage(spark: Any, grid: Grid, meta: RunMeta, raw: Path, *, show: bool = True) -> Path:
    """The ``[fleet]`` section's clients simulated in Spark tasks and added up per broker
    (:mod:`connmgr.bench.stages.fleetview`); written to ``raw/fleet.json`` and
    ``raw/fleet.parquet``. The bar counts the Spark job's tasks."""
    from tqdm import tqdm

    from connmgr.bench.stages.fleet import FleetSettings
    from connmgr.bench.stages.fleetreport import write_fleet
    from connmgr.bench.stages.fleetview import run_fleet

    settings = FleetSettings.from_values(grid.values["fleet"])
    with tqdm(desc="fleet", unit="task", disable=not show, leave=True) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        view = run_fleet(spark, settings, progress=progress)
    return write_fleet(view, meta, raw)


# --- the whole job ------------------------------------------------------------------------


def run_bench(
    grid: Grid,
    out: Path,
    *,
    master: str | None = None,
    show: bool = True,
    say: Callable[[str], None] = print,
    run_id: str | None = None,
) -> BenchOutcome:
    """Run the whole main job over ``grid`` and write the report into ``out/<run-id>/``."""
    from connmgr.bench.runtime.spark import spark_session
    from connmgr.bench.stages.sweep import run_sweep

    rid = run_id or new_run_id()
    run_dir = out / rid
    raw = run_dir / "raw"
    results = raw / "results"
    meta = new_meta(rid)
    outcome = BenchOutcome(rid, run_dir, run_dir / "index.md")
    say(grid.describe())

    def stage(name: str, work: Callable[[], T]) -> T:
        started = time.perf_counter()
        value = work()
        outcome.stage_seconds[name] = time.perf_counter() - started
        return value

    # The timed stages first, on an otherwise idle machine: real clients, the A/B turns, the
    # TLS handshakes and the micro-benchmarks.
    retried: list[str] = []
    write_parquet(
        stage("real", lambda: real_rows(grid, meta, show=show, retried=retried)),
        results / "real.parquet",
    )
    for line in retried:
        say(f"retried a real run: {line}")
    write_parquet(
        stage("throughput", lambda: throughput_rows(grid, meta, show=show)),
        results / "throughput.parquet",
    )
    say("TLS and SASL on a real KRaft cluster ...")
    stage("tls", lambda: run_tls(grid.values["tls"], meta, raw))
    say("micro-benchmarks (pytest-benchmark) ...")
    stage("micro", lambda: run_micro(grid, raw / "micro" / "micro.json"))
    # The scaled lives wait most of their minute and nothing in them is timed, so they run
    # beside the CPU-bound simulated stages, whose pools run at a lower priority (nice 10) so
    # that the lives' clients get the CPU when they need it.
    say("real clients over a scaled life, in the background ...")
    with ThreadPoolExecutor(max_workers=1) as background:
        lives = background.submit(stage, "life", lambda: life_stage(grid, meta, raw, show=False))
        write_parquet(
            stage("simulate", lambda: sim_rows(grid, meta, show=show)),
            results / "sim.parquet",
        )
        stage("linger", lambda: linger_stage(grid, meta, raw, show=show))
        say("property suite (examples, steps, mutants) ...")
        write_properties(
            stage(
                "properties",
                lambda: property_results(grid.values["properties"], meta, show=show),
            ),
            raw,
        )
        lives.result()
    say("starting Spark ...")
    spark = stage("spark start", lambda: spark_session(master))
    sizes = list(grid.get("sweep", "sizes"))
    for size in _bar(sizes, len(sizes), "sweep", show):
        last = size == sizes[-1]
        target = results / "sweep.parquet" if last else raw / "scratch" / f"sweep-{size}"
        sweep = run_sweep(spark, size, target, meta=meta, seed=grid.get("sweep", "seed"))
        outcome.sweep.append((sweep.points, sweep.wall_s, sweep.simulations))
    stage("fleet", lambda: fleet_stage(spark, grid, meta, raw, show=show))
    job = {
        "grid": grid.describe(),
        "skipped": list(grid.skipped),
        "stage_seconds": outcome.stage_seconds,
        "sweep": [list(s) for s in outcome.sweep],
        "retried": retried,
        "master": spark.sparkContext.master,
    }
    (raw / JOB_FILE).write_text(json.dumps(job, indent=1))
    say("comparing on Spark and writing the report ...")
    started = time.perf_counter()
    comparison, problems = _compare(spark, run_dir, job)
    outcome.stage_seconds["compare"] = time.perf_counter() - started
    outcome.regressions = list(comparison.regressions)
    outcome.stated = list(comparison.stated)
    outcome.problems = problems
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
    the comparison and the property stage's problems."""
    from connmgr.bench.runtime.spark import spark_session

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
    """The comparison over ``run_dir/raw``, with the job's sections and the property
    stage's tables; the comparison and the property stage's problems. A Spark job that
    fails on the cluster is a :class:`~connmgr.bench.runtime.spark.SparkJobFailed` (one line)."""
    try:
        return _compare_on(spark, run_dir, job)
    except Exception as e:  # py4j carries Spark's failures
        if type(e).__module__.startswith(("py4j", "pyspark")):
            raise job_failure(e) from e
        raise


def _compare_on(spark: Any, run_dir: Path, job: dict[str, Any]) -> tuple[Any, list[str]]:
    from connmgr.bench.report.compare import ExtraPlot, run_comparison
    from connmgr.bench.report.plots import fleet_over_time, linger_tradeoff
    from connmgr.bench.stages.fleet import restart_schedule
    from connmgr.bench.stages.fleetreport import fleet_buckets, fleet_tables, read_fleet
    from connmgr.bench.stages.life import life_costs, life_headlines, read_life, real_life_table

    raw = run_dir / "raw"
    found = read_properties(raw)
    tables = property_tables(found) if found is not None else []
    problems = check_properties(found) if found is not None else []
    lingered = read_linger(raw)
    plots: list[ExtraPlot] = []
    if lingered is not None:
        tables.append(linger_table(lingered))
        points = linger_points(lingered)
        plots.append(
            (
                "linger",
                "The linger trade-off",
                "Socket-seconds against handshakes per client-hour, per scenario: the "
                "proposal at each connection_linger_ms, each baseline as it is.",
                lambda path: linger_tradeoff(points, path),
            )
        )
    tls = read_tls(raw)
    if tls is not None:
        tables.extend(tls_tables(tls, raw / "results"))
    lived = read_life(raw)
    if lived is not None:
        tables.append(real_life_table(lived))
    fleet = read_fleet(raw)
    if fleet is not None:
        tables.extend(fleet_tables(fleet))
        buckets, per_second = fleet_buckets(fleet), fleet.per_second
        restarts = restart_schedule(fleet.settings)
        plots.append(
            (
                "fleet",
                "The fleet view",
                f"{fleet.settings.clients:,} clients over {fleet.settings.brokers:,} brokers "
                "for one simulated hour, through a rolling restart of "
                f"{fleet.settings.restarts} brokers: above, the brokers' sockets (each "
                "broker's most open at once per bucket: max, p99, p50 over the brokers); "
                "below, the fleet's handshakes per second (each minute's busiest second and "
                "mean). Shaded: a broker down; dotted: its election.",
                lambda path: fleet_over_time(buckets, per_second, restarts, path),
            )
        )
    sections = job_sections(job)
    if found is not None:
        listed = (
            "\n".join(f"- {p}" for p in problems)
            or "none: every machine passed and every mutant was caught by the invariant it breaks"
        )
        sections.insert(0, ("Property suite: problems", listed))
    comparison = run_comparison(
        spark,
        raw,
        run_dir,
        extra_sections=sections,
        extra_tables=tables,
        extra_plots=plots,
        extra_headline=life_headlines(lived) if lived is not None else (),
        extra_life_costs=life_costs(lived) if lived is not None else (),
        regenerate=_REGENERATE,
    )
    return comparison, problems


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
    return [
        ("Spark", master),
        ("Sweep: how the run time scales with the grid", "\n".join(lines)),
        ("Grid", f"{job['grid']}\n\nImpossible points left out:\n\n{skipped}"),
        ("Stage timings (s)", "\n".join(stages)),
        ("Real runs retried (failed or hung once, then measured again)", retried),
    ]
