"""The sweep: the simulator inside Spark tasks, over a large random grid of points.

Each point is drawn from ``(index, seed)`` alone (:func:`draw_point`), so a task derives its
points from the indices ``sc.range`` hands it: nothing but integers is shipped, any index
can be replayed locally, and the sweep of size ``n`` is the first ``n`` points of every
larger sweep with the same seed. A point is ``big-producer`` or ``big-consumer`` of
``connmgr scenarios`` with its parameters (``--set`` strings) drawn as follows:

* ``brokers`` log-uniform in 3..10,000; ``leaders`` 1..min(brokers, 12);
  ``partitions`` leaders..3*leaders; ``topics`` 1..3; ``bootstrap_size`` 1..3;
* ``coordinator`` (consumers only: producers have no group) auto, shared or, when some
  broker leads nothing, separate; ``client_idle_disabled`` 0 or 1;
* ``duration_ms`` :data:`DURATION_MS` (one hour); ``seed`` drawn too (the run's
  randomness). The clients run at the cadence :data:`SWEEP_TIMINGS`.

Each point runs :data:`SWEEP_POLICIES`: the proposed policy and the models of today's
clients, ``java-today`` and ``aiokafka-today``. ``java-described`` (the 2018-2019 client)
is left out: its producer connects to every broker, so one run at 10,000 brokers dials
10,003 sockets and takes about 0.5 s, twenty times an average point of the other three
(which would make the sweep's cost that of its biggest clusters); the simulated grid
(``connmgr_evidence.bench.grid``) covers it.

Two draws can give the same parameters (small clusters have few combinations); the second
is then a *repeat* of the first: its ``repeat`` column counts the earlier draws of the same
point (by index) and its seed differs, exactly as the simulated grid's repeats differ only
in seed. That keeps ``(kind, point, repeat)``, the key rows pair on, unique.

The rows (results schema, ``kind = sweep``) are written by Spark as a Parquet dataset: the
directory ``out`` (name it ``RUN_DIR/results/sweep.parquet``) holding ``part-*.parquet``
files and Spark's ``_SUCCESS`` marker.
"""

from __future__ import annotations

import dataclasses
import math
import pickle
import random
import shutil
import time
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connmgr.sim.clients import ClientTimings
from connmgr.sim.run import prepare, run_spec
from connmgr_evidence.bench.results import schema
from connmgr_evidence.bench.results.rows import RunMeta, point_text, sim_row
from connmgr_evidence.bench.results.schema import Kind
from connmgr_evidence.bench.runtime.pool import bar
from connmgr_evidence.bench.runtime.sparkjob import Progress, spark_job
from connmgr_evidence.bench.stages import Phase, RowsOnly, Setting, Stage, StageContext

SWEEP_SCENARIOS = ("big-producer", "big-consumer")
SWEEP_POLICIES = ("proposed", "java-today", "aiokafka-today")
"""The policies every point runs (see the module docstring for why not java-described)."""

DURATION_MS = 3_600_000
"""Simulated time per run: one client-hour, through metadata refreshes (every 5 minutes)
and idle expiry (9 minutes), like the simulated grid."""

SWEEP_TIMINGS = ClientTimings(
    send_interval_ms=120_000,
    fetch_max_wait_ms=120_000,
    auto_commit_interval_ms=120_000,
    heartbeat_interval_ms=30_000,
)
"""The sweep's client cadence: a produce round, an empty fetch's long poll and an offset
commit every 2 minutes and a heartbeat every 30 s, instead of every 1 s, 0.5 s, 5 s and
3 s (metadata age and backoff as the real clients'). A connection's fate never depends on
how often a request it already carries comes: each interval is well below the idle expiry
(9 minutes) and the connections they use stay needed, so the counts and the client-hour's
socket-seconds and handshakes are those of the default cadence -- measured on the first
300 points of the sweep (seed 0), every policy: 0 differences, 8.6 s of CPU against 418 s
(an hour at the default cadence is 20k-50k events a run, at this one a few hundred);
``tests/bench/test_sweep.py`` checks a sample. A point (three runs) then costs about 22 ms
of CPU, mostly the O(brokers) set-up of big clusters (cluster model, metadata indexes)."""

MIN_BROKERS, MAX_BROKERS = 3, 10_000
MAX_LEADERS = 12

_DOUBLES = frozenset(c.name for c in schema.COLUMNS if c.type is schema.ColumnType.DOUBLE)


@dataclass(frozen=True)
class SweepPoint:
    """One point of the sweep: a scenario, its parameters as ``--set`` strings (seed
    included), and its repeat number among the draws of the same parameters."""

    index: int
    scenario: str
    params: Mapping[str, str]
    repeat: int = 0

    @property
    def point(self) -> str:
        return point_text(self.scenario, self.params)

    @property
    def idle_disabled(self) -> bool:
        return self.params["client_idle_disabled"] == "1"


@dataclass(frozen=True)
class SweepOutcome:
    """What one sweep did: ``points`` grid points, ``simulations`` runs (one per point and
    policy) in ``wall_s`` seconds, its rows in the Parquet dataset ``path``."""

    points: int
    simulations: int
    wall_s: float
    sims_per_s: float
    path: Path

    @property
    def points_per_s(self) -> float:
        return self.points / self.wall_s if self.wall_s > 0 else math.inf


# --------------------------------------------------------------------------- the points


def draw_point(index: int, seed: int) -> SweepPoint:
    """Point ``index`` of the sweep with ``seed``, its repeat number left at 0.

    Depends on nothing but ``(index, seed)`` (``random.Random`` seeded with a string is the
    same in every process, whatever ``PYTHONHASHSEED``)."""
    if index < 0:
        raise ValueError(f"sweep point index {index} must be >= 0")
    rng = random.Random(f"connmgr-sweep:{seed}:{index}")
    scenario = SWEEP_SCENARIOS[rng.randrange(len(SWEEP_SCENARIOS))]
    log_lo, log_hi = math.log(MIN_BROKERS), math.log(MAX_BROKERS + 1)
    brokers = min(MAX_BROKERS, int(math.exp(rng.uniform(log_lo, log_hi))))
    leaders = rng.randint(1, min(brokers, MAX_LEADERS))
    partitions = rng.randint(leaders, 3 * leaders)
    topics = rng.randint(1, 3)
    bootstrap_size = rng.randint(1, 3)
    # spread_leaders() puts `leaders` distinct leaders on a bigger cluster, so a broker
    # leading nothing (for a separate coordinator) exists exactly when brokers > leaders.
    placements = ("auto", "shared", "separate") if brokers > leaders else ("auto", "shared")
    coordinator = placements[rng.randrange(len(placements))]
    idle_disabled = rng.randrange(2)
    run_seed = rng.randrange(2**31)
    params = {
        "brokers": str(brokers),
        "leaders": str(leaders),
        "partitions": str(partitions),
        "topics": str(topics),
        "bootstrap_size": str(bootstrap_size),
        "client_idle_disabled": str(idle_disabled),
        "duration_ms": str(DURATION_MS),
        "seed": str(run_seed),
    }
    if scenario == "big-consumer":
        params["coordinator"] = coordinator
    return SweepPoint(index, scenario, params)


def with_repeats(points: Iterable[SweepPoint]) -> list[SweepPoint]:
    """``points`` with each repeat number set: how many points of lower index have the same
    scenario and parameters (seed aside)."""
    ordered = sorted(points, key=lambda p: p.index)
    seen: Counter[str] = Counter()
    out: list[SweepPoint] = []
    for p in ordered:
        out.append(SweepPoint(p.index, p.scenario, p.params, seen[p.point]))
        seen[p.point] += 1
    return out


def sweep_points(n: int, seed: int) -> list[SweepPoint]:
    """The first ``n`` points of the sweep with ``seed``, repeats numbered, by index."""
    return with_repeats(draw_point(i, seed) for i in range(n))


# --------------------------------------------------------------------------- running a point


def run_point(point: SweepPoint, meta: RunMeta) -> list[dict[str, Any]]:
    """The rows of ``point``: one per policy of :data:`SWEEP_POLICIES`, checked against the
    results schema."""
    spec, policy_settings, seed = prepare(point.scenario, point.params)
    spec = dataclasses.replace(spec, timings=SWEEP_TIMINGS)
    rows = []
    for policy in SWEEP_POLICIES:
        result = run_spec(spec, policy, policy_settings, seed)
        result.scenario = point.scenario
        result.settings = dict(point.params)
        rows.append(
            sim_row(
                result,
                spec,
                meta=meta,
                point=point.point,
                repeat=point.repeat,
                kind=Kind.SWEEP,
                idle_disabled=point.idle_disabled,
            )
        )
    return rows


def run_local(n: int, meta: RunMeta, *, seed: int = 0) -> list[dict[str, Any]]:
    """The sweep's rows computed in this process, without Spark (for tests and replay)."""
    return [row for p in sweep_points(n, seed) for row in run_point(p, meta)]


def _row_tuples(points: Iterable[SweepPoint], meta: RunMeta) -> Iterator[tuple[Any, ...]]:
    for p in points:
        for row in run_point(p, meta):
            yield tuple(
                float(row[n]) if n in _DOUBLES and row[n] is not None else row[n]
                for n in schema.NAMES
            )


# --------------------------------------------------------------------------- in Spark


def default_slices(spark: Any, n: int) -> int:
    """Spark tasks for ``n`` points: about 250 points (some seconds) a task, and at least
    two tasks a core so that the cores stay busy to the end."""
    cores = int(spark.sparkContext.defaultParallelism)
    return max(1, min(n, max(2 * cores, math.ceil(n / 250))))


def sweep_rdd(spark: Any, n: int, *, meta: RunMeta, seed: int = 0, slices: int) -> Any:
    """An RDD of the sweep's rows (tuples in results-schema column order)."""
    sc = spark.sparkContext

    def keyed(i: int) -> tuple[str, int]:
        return draw_point(i, seed).point, i

    def numbered(group: tuple[str, Iterable[int]]) -> Iterator[tuple[int, int]]:
        for repeat, index in enumerate(sorted(group[1])):
            yield index, repeat

    def simulate(pairs: Iterable[tuple[int, int]]) -> Iterator[tuple[Any, ...]]:
        points = (
            SweepPoint(i, p.scenario, p.params, repeat)
            for i, repeat in pairs
            for p in (draw_point(i, seed),)
        )
        return _row_tuples(points, meta)

    # Repeat numbers need every draw of the same parameters together: one small shuffle of
    # (point text, index) pairs, whose hash partitioning also spreads the heavy points.
    return (
        sc.range(n, numSlices=slices)
        .map(keyed)
        .groupByKey(numPartitions=slices)
        .flatMap(numbered)
        .mapPartitions(simulate)
    )


def run_sweep(
    spark: Any,
    n: int,
    out: Path,
    *,
    meta: RunMeta,
    seed: int = 0,
    slices: int | None = None,
    progress: Progress | None = None,
) -> SweepOutcome:
    """Run the first ``n`` points of the sweep with ``seed`` in Spark and write their rows
    (``len(SWEEP_POLICIES)`` per point, ``kind = sweep``) as a Parquet dataset into the
    directory ``out``, replacing it. The executors compute; the driver gathers the rows a
    partition at a time and writes them, so ``out`` need not be visible to the executors (a
    cluster whose nodes share no storage). ``slices`` is the number of Spark tasks (default
    :func:`default_slices`); ``progress`` is called with (tasks done, tasks) about once a
    second while the job runs."""
    if n < 1:
        raise ValueError(f"a sweep needs at least one point, not {n}")
    slices = slices or default_slices(spark, n)
    sc = spark.sparkContext
    done = sc.accumulator(0)

    def counted(row: tuple[Any, ...]) -> tuple[Any, ...]:
        done.add(1)
        return row

    rdd = sweep_rdd(spark, n, meta=meta, seed=seed, slices=slices).map(counted)
    started = time.perf_counter()
    with spark_job(sc, f"connmgr sweep of {n} points", progress):
        # One job (the progress bar counts its tasks): each task sends its rows back as one
        # compressed blob, and the driver unpacks them one at a time while writing.
        blobs = rdd.mapPartitions(_packed).collect()
        write_gathered((row for blob in blobs for row in _unpacked(blob)), out)
    wall = time.perf_counter() - started
    sims = int(done.value)
    return SweepOutcome(n, sims, wall, sims / wall if wall > 0 else math.inf, out)


def _packed(rows: Iterable[tuple[Any, ...]]) -> Iterator[bytes]:
    yield zlib.compress(pickle.dumps(list(rows), protocol=pickle.HIGHEST_PROTOCOL))


def _unpacked(blob: bytes) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = pickle.loads(zlib.decompress(blob))
    return rows


def write_gathered(rows: Iterable[tuple[Any, ...]], out: Path, batch: int = 20_000) -> None:
    """Write result tuples (schema column order) into the directory ``out`` as Parquet,
    ``batch`` rows at a time, replacing it; written aside and renamed into place."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrow = schema.arrow_schema()
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with pq.ParquetWriter(tmp / "part-00000.parquet", arrow) as writer:
        chunk: list[tuple[Any, ...]] = []
        for row in rows:
            chunk.append(row)
            if len(chunk) == batch:
                writer.write_table(_table(chunk, arrow, pa))
                chunk = []
        if chunk:
            writer.write_table(_table(chunk, arrow, pa))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def _table(chunk: Sequence[tuple[Any, ...]], arrow: Any, pa: Any) -> Any:
    columns = list(zip(*chunk, strict=True))
    return pa.Table.from_arrays(
        [pa.array(col, type=field.type) for col, field in zip(columns, arrow, strict=True)],
        schema=arrow,
    )


def sweep_scaling(
    spark: Any,
    sizes: Sequence[int],
    out: Path,
    scratch: Path,
    *,
    meta: RunMeta,
    seed: int = 0,
    progress: Progress | None = None,
) -> tuple[SweepOutcome, ...]:
    """Run the sweep at each of ``sizes`` (ascending) to show how its run time grows with the
    grid. The largest writes its rows to ``out`` (the sweep the report compares); the others
    write under ``scratch``, which the caller keeps or removes (keep it out of
    ``RUN_DIR/results``: the comparison job reads every dataset there). Returns the outcomes
    in size order; each one's ``points`` and ``wall_s`` are a point of the scaling plot."""
    if not sizes:
        raise ValueError("sweep_scaling needs at least one size")
    ordered = sorted(sizes)
    outcomes = []
    for i, size in enumerate(ordered):
        target = out if i == len(ordered) - 1 else scratch / f"sweep-{size}.parquet"
        outcomes.append(run_sweep(spark, size, target, meta=meta, seed=seed, progress=progress))
    return tuple(outcomes)


SETTINGS: Mapping[str, Setting] = {"sizes": Setting(int, True), "seed": Setting(int)}
"""``[sweep]``: the grid sizes timed (the last one's rows are compared) and the seed they are
drawn from."""


class SweepStage(RowsOnly):
    name = "sweep"
    phase = Phase.SPARK
    order = 1
    timed = False
    """Each size is timed instead (the report's scaling section, ``job.json``'s ``sweep``)."""
    what = (
        "the simulator itself inside Spark tasks over a large grid drawn deterministically from a "
        "seed (10,000 points in the full run; 20,000 took 9 minutes of two shared cores, more than"
        " the 30-minute job can spare beside the fleet, life and TLS stages), `proposed` against "
        "`java-today` and `aiokafka-today`, each run one simulated hour at a coarser request "
        "cadence that counts the same sockets and client-hour "
        "(`connmgr_evidence.bench.stages.sweep.SWEEP_TIMINGS`: measured equal on 300 points), "
        "timed at "
        "several grid sizes"
    )
    writes = "`kind = sweep`"
    section = "sweep"
    settings = SETTINGS

    def run(self, ctx: StageContext) -> None:
        """Every ``[sweep] sizes`` in turn; the largest is kept as
        ``raw/results/sweep.parquet``, the others go to ``raw/scratch/``."""
        sizes = list(ctx.grid.get("sweep", "sizes"))
        for size in bar(sizes, len(sizes), "sweep", ctx.show):
            last = size == sizes[-1]
            target = (
                ctx.results / "sweep.parquet" if last else ctx.raw / "scratch" / f"sweep-{size}"
            )
            sweep = run_sweep(
                ctx.spark, size, target, meta=ctx.meta, seed=ctx.grid.get("sweep", "seed")
            )
            ctx.sweep.append((sweep.points, sweep.wall_s, sweep.simulations))


STAGE: Stage[None] = SweepStage()
