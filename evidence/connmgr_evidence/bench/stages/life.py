"""Real clients over a scaled life: the ``[life]`` stage of ``connmgr bench``.

Each of the section's ``clients`` lives through each of its ``scenarios`` (``name`` or
``name key=value ...``: scenario parameters and run options such as ``rolling_restart=1``)
for ``life_s`` seconds of wall time standing for ``life_s x time_scale`` seconds
(:mod:`connmgr_evidence.realrun.life`), on a fresh embedded cluster, ``repeats`` times. The runs are
idle most of the time and no timing is taken from them, so ``concurrency`` of them run at
once, each in its own process.

Every run's socket-seconds and handshakes per represented client-hour are its ledger's life
(:meth:`connmgr_evidence.realrun.RealRun.represented`) through the columns every simulated row goes
through (:func:`connmgr_evidence.bench.results.rows.life_columns`). The results are written as
``raw/life.json`` and become the ``real-life`` table, the headline's ``real-life`` rows
(ratios proposed / client per represented client-hour) and ``life-costs`` rows where the
proposal spends more.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from connmgr.errors import ConfigError, UnknownName
from connmgr.ledger import HOUR_S
from connmgr.sim.scenarios import get_scenario
from connmgr_evidence.bench.attempts import attempt
from connmgr_evidence.bench.gridfile import is_real_client, java_version, parse_entry
from connmgr_evidence.bench.report.metrics import LIFE_METRICS, PROPOSED
from connmgr_evidence.bench.report.summaries import BaselineHeadline
from connmgr_evidence.bench.report.table import Table, make_table
from connmgr_evidence.bench.results.record import Count, Keyed, MaybeReal, Record, Text
from connmgr_evidence.bench.results.rows import RunMeta, life_columns
from connmgr_evidence.bench.results.schema import DOUBLE, LIFE_COLUMNS
from connmgr_evidence.bench.results.stagefile import read_stage, write_stage
from connmgr_evidence.bench.stages import Phase, Setting, Stage, StageContext, StageReport

LIFE_FILE = "life.json"
"""Under ``raw/``: the life stage's runs."""
KIND = "real-life"
"""The ``kind`` of the life stage's headline and life-costs rows."""
RUN_TIMEOUT_S = 240.0
"""A life taking this much longer than ``life_s`` has hung; it is tried again."""
ATTEMPTS = 3
"""How many times a life is tried before it is recorded as failed (a busy machine can fail
a rolling restart's life twice in a row)."""
_PER_HOUR = tuple(c for c in LIFE_COLUMNS if c != "horizon_s")


@dataclass(frozen=True)
class LifeRun:
    """One life: ``client`` through ``scenario`` (the grid's entry text) for ``life_s``."""

    entry: str
    client: str
    settings: Mapping[str, str]
    repeat: int


def plan(values: Mapping[str, Any]) -> list[LifeRun]:
    """Every run of the ``[life]`` section ``values``, in the order they are started."""
    runs: list[LifeRun] = []
    for entry in values["scenarios"]:
        _, params = parse_entry(entry)
        for repeat in range(values["repeats"]):
            settings = {
                **params,
                "life_s": str(values["life_s"]),
                "time_scale": str(values["time_scale"]),
                "records": str(values["records"]),
                "seed": str(values["seed"] + repeat),
            }
            runs.extend(LifeRun(entry, c, settings, repeat) for c in values["clients"])
    return runs


def _live(run: LifeRun, timeout_s: float) -> Any:
    """One life of ``run`` on a fresh embedded cluster: its
    :class:`connmgr_evidence.realrun.RealRun`."""
    from connmgr_evidence.realrun import run_real

    name, _ = parse_entry(run.entry)
    version = java_version(run.client)
    client = "java" if version else run.client
    return asyncio.run(
        asyncio.wait_for(run_real(name, client, run.settings, kafka_clients=version), timeout_s)
    )


def run_one(run: LifeRun, live: Callable[[LifeRun, float], Any] = _live) -> dict[str, Any]:
    """One life on a fresh embedded cluster (kernel checked at its end), tried up to
    :data:`ATTEMPTS` times while it fails or hangs
    (:func:`connmgr_evidence.bench.attempts.attempt`):
    its key, the represented life per client-hour (total and by role), what happened to its
    connections, and ``attempts`` and ``retried`` (the first failed attempt's reason, "" if
    none). A life failing every attempt is that run's failure, not the stage's: its row has
    ``failed`` (the last reason) and no measurements. Runs in a worker process; ``live``
    runs one attempt (a test passes a fake)."""
    timeout = RUN_TIMEOUT_S + float(run.settings["life_s"])
    label = f"life {run.entry} {run.client} repeat {run.repeat}"
    tried = attempt(
        lambda: live(run, timeout),
        ATTEMPTS,
        label=label,
        log=lambda line: print(line, file=sys.stderr, flush=True),
        timeout_s=timeout,
    )
    key = {"scenario": run.entry, "client": run.client, "repeat": run.repeat}
    retried = tried.failures[0] if tried.failures else ""
    if not tried.ok:
        return {
            **key,
            "seed": int(run.settings["seed"]),
            "failed": tried.reason,
            "attempts": tried.attempts,
            "retried": retried,
        }
    real = tried.get()
    represented = real.represented
    assert represented is not None  # life_s >= 1 in every planned run
    return {
        **key,
        "seed": real.seed,
        "wall_s": real.wall_s,
        "represented": represented.as_json(),
        **{k: v for k, v in life_columns(represented.as_json()).items() if k != "horizon_s"},
        "represented_s": represented.horizon_s,
        "opened": int(real.steady_summary["opened"]),
        "steady": int(real.steady_summary["steady"]),
        "client_config": real.client_config,
        "restarts": [e.as_json() for e in real.restarts],
        "commit_failures": real.commit_failures,
        "records_sent": real.records_sent,
        "records_consumed": real.records_consumed,
        "attempts": tried.attempts,
        "retried": retried,
    }


def failed_runs(found: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The runs of ``raw/life.json`` that failed every attempt (each with its ``failed``
    reason); the medians leave them out."""
    return [r for r in found["runs"] if r.get("failed")]


def failures_section(found: Mapping[str, Any]) -> tuple[str, str] | None:
    """The report's section listing the lives that failed every attempt, or None if none did."""
    failed = failed_runs(found)
    if not failed:
        return None
    lines = [
        f"- {r['scenario']}, {r['client']}, repeat {r['repeat']}: {r['failed']} "
        f"({r.get('attempts', 1)} attempts)"
        for r in failed
    ]
    return (
        "Real lives that failed",
        f"{len(failed)} of {len(found['runs'])} lives failed every attempt and are left out of "
        "the `real-life` medians (its `repeats` column counts the lives measured):\n\n"
        + "\n".join(lines),
    )


def run_stage(
    values: Mapping[str, Any], progress: Callable[[int, int], None] | None = None
) -> list[dict[str, Any]]:
    """Every run of the section, ``concurrency`` at a time in worker processes (spawned: a
    fresh interpreter each, no event loop or cluster inherited), in :func:`plan` order."""
    runs = plan(values)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(values["concurrency"], mp_context=context) as pool:
        futures = [pool.submit(run_one, r) for r in runs]
        rows = []
        for done, future in enumerate(futures, 1):
            rows.append(future.result())
            if progress is not None:
                progress(done, len(futures))
    return rows


def write_life(values: Mapping[str, Any], meta: RunMeta, rows: Sequence[Any], raw: Path) -> Path:
    """``raw/life.json``: the section's settings, the run's meta and every run's result."""
    return write_stage(
        raw, LIFE_FILE, {"meta": meta.columns(), "settings": dict(values), "runs": list(rows)}
    )


def read_life(raw: Path) -> dict[str, Any] | None:
    """``raw/life.json``, or None if the run had no life stage (a :class:`ResultsError`
    naming the file if it is there but broken)."""
    return read_stage(raw, LIFE_FILE, ("runs", "settings"), "life-stage")


def medians(found: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(scenario, client) -> the medians over repeats of every per-hour column (and
    ``opened``, ``steady``, ``repeats``), in the grid's scenario and client order."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for run in found["runs"]:
        if not run.get("failed"):
            groups[(run["scenario"], run["client"])].append(run)
    s = found["settings"]
    order = {
        (e, c): (i, j) for i, e in enumerate(s["scenarios"]) for j, c in enumerate(s["clients"])
    }
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for key in sorted(groups, key=lambda k: order.get(k, (len(order), 0))):
        runs = groups[key]
        cols = ("opened", "steady", "commit_failures", *_PER_HOUR)
        out[key] = {c: statistics.median(r[c] for r in runs) for c in cols}
        out[key]["repeats"] = len(runs)
    return out


@dataclass(frozen=True, slots=True)
class RealLife(Record):
    """A row of the ``real-life`` table: one client through one scenario, medians per
    represented client-hour (total and by role) and the proposal's ratio to it."""

    scenario: Text
    client: Text
    repeats: Count
    per_hour: Annotated[Mapping[str, float | None], Keyed(_PER_HOUR, "{}", DOUBLE)]
    ratio: Annotated[Mapping[str, float | None], Keyed(LIFE_METRICS, "{}_ratio", DOUBLE)]
    opened: MaybeReal
    steady: MaybeReal
    commit_failures: MaybeReal


def real_life_table(found: Mapping[str, Any]) -> Table:
    """The ``real-life`` report table: per scenario and client, medians per represented
    client-hour, total and by role, and the ratio of the proposal's to each."""
    s = found["settings"]
    points = medians(found)
    rows = []
    for (scenario, client), m in points.items():
        mine = points.get((scenario, PROPOSED))
        ratios = {f"{metric}_ratio": _ratio(mine, m, metric) for metric in LIFE_METRICS}
        rows.append({"scenario": scenario, "client": client, **m, **ratios})
    return make_table(
        "real-life",
        "Real clients over a scaled life: socket-seconds and handshakes per client-hour",
        f"Each real client lives {s['life_s']} s of wall time on a fresh embedded cluster, "
        f"standing for {s['life_s'] * s['time_scale'] / 60:g} minutes of its life (scale "
        f"{s['time_scale']}): metadata refresh (300 s), idle expiry (540 s; librdkafka keeps "
        "its default, never) and the proposal's linger (3 s) divided by the scale, a record "
        "(producer) or a commit (consumer) every 120 s of life likewise; session, heartbeat "
        "and request timeouts real. Medians over "
        f"{s['repeats']} run(s), from the client's start to the end of its life, per "
        "represented client-hour, total and by role; `*_ratio`: proposed / this client. "
        "`rolling_restart=1`: each broker down in turn, leadership moved away and back.",
        RealLife.columns(),
        rows,
    )


def _ratio(mine: Mapping[str, Any] | None, theirs: Mapping[str, Any], metric: str) -> float | None:
    if mine is None or not theirs[metric]:
        return None
    return float(mine[metric]) / float(theirs[metric])


def life_headlines(found: Mapping[str, Any]) -> list[BaselineHeadline]:
    """The headline's ``real-life`` rows: per client other than the proposal, the median
    over scenarios of the ratio proposed / client per represented client-hour."""
    points = medians(found)
    by_client: dict[str, list[dict[str, float | None]]] = defaultdict(list)
    for (scenario, client), m in points.items():
        mine = points.get((scenario, PROPOSED))
        if client != PROPOSED and mine is not None:
            by_client[client].append({k: _ratio(mine, m, k) for k in LIFE_METRICS})
    rows = []
    for client, ratios in by_client.items():
        life = {}
        for metric in LIFE_METRICS:
            known = [v for r in ratios if (v := r[metric]) is not None]
            life[f"{metric}_ratio"] = statistics.median(known) if known else None
        rows.append(
            BaselineHeadline(
                KIND,
                client,
                len(ratios),
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                life["socket_s_per_h_ratio"],
                life["handshakes_per_h_ratio"],
                0,
            )
        )
    return rows


def life_costs(found: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``life-costs`` rows of the real lives: per scenario and client, where the
    proposal's medians per represented client-hour are above the client's."""
    from connmgr_evidence.bench.report.tables import life_cost_rows

    points = medians(found)
    s = found["settings"]
    # Two real lives differ by wall-clock jitter the scale multiplies: a few ms of a socket,
    # a horizon a few hundred ms longer (the same handshakes spread over more hours). A cost
    # is more than 1 % of the baseline's socket-seconds, or half a handshake per life.
    handshake = HOUR_S / (s["life_s"] * s["time_scale"]) / 2
    rows = []
    for (scenario, client), m in points.items():
        mine = points.get((scenario, PROPOSED))
        if client != PROPOSED and mine is not None:
            margins = {"socket_s_per_h": 0.01 * m["socket_s_per_h"], "handshakes_per_h": handshake}
            rows += life_cost_rows(KIND, scenario, scenario, client, mine, m, margins)
    return rows


SETTINGS: Mapping[str, Setting] = {
    "scenarios": Setting(str, True),
    "clients": Setting(str, True),
    "life_s": Setting(int),
    "time_scale": Setting(int),
    "records": Setting(int),
    "repeats": Setting(int),
    "concurrency": Setting(int),
    "seed": Setting(int),
}
"""``[life]``: the scenario entries (with run options), the clients, each life's wall time and
scale, the records, repeats, lives at once and the first seed."""


class LifeStage:
    name = "life"
    phase = Phase.BESIDE
    order = 1
    shown = 4
    timed = True
    says = "real clients over a scaled life, in the background ..."
    what = (
        "real clients over a scaled life (see [below](#real-clients-over-a-scaled-life)): each "
        "`[life] clients` client (`proposed`, `aiokafka`, `java-4.4.0`, `librdkafka`) through each"
        " `[life] scenarios` entry (scenario parameters and run options, e.g. `rolling_restart=1`)"
        " lives `life_s` seconds standing for `life_s` x `time_scale` seconds, `concurrency` lives"
        " at once in worker processes: socket-seconds and handshakes per represented client-hour, "
        "by role"
    )
    writes = "`raw/life.json`; table `real-life`, the headline's `real-life` rows, `life-costs`"
    section = "life"
    settings = SETTINGS

    def check(self, values: Mapping[str, Any]) -> None:
        """The clients exist and include the proposal, and each scenario entry is a scenario
        with parameters and run options it can be run with (a rolling restart that fits the
        life)."""
        from connmgr_evidence.realrun.run import RUN_OPTIONS, check_life_settings

        bad = [c for c in values["clients"] if not is_real_client(c)]
        if bad or "proposed" not in values["clients"]:
            raise ConfigError(
                "life.clients must include proposed and name only proposed, aiokafka, "
                f"librdkafka or java-<kafka-clients version> (unknown: {bad})"
            )
        for entry in values["scenarios"]:
            try:
                name, params = parse_entry(entry)
                rest = {k: v for k, v in params.items() if k not in RUN_OPTIONS}
                get_scenario(name).spec(rest)
                check_life_settings(
                    name,
                    {
                        **params,
                        "life_s": str(values["life_s"]),
                        "time_scale": str(values["time_scale"]),
                    },
                )
            except (ConfigError, UnknownName) as e:
                raise ConfigError(f"life.scenarios {entry!r}: {e}") from e

    def run(self, ctx: StageContext) -> None:
        """Several lives at once in worker processes; no progress bar (it runs beside
        stages that show theirs)."""
        values = ctx.grid.values["life"]
        rows = run_stage(values, lambda _done, _total: None)
        write_life(values, ctx.meta, rows, ctx.raw)
        for row in rows:
            if row.get("failed"):
                ctx.say(f"a life failed: {row['scenario']} {row['client']}: {row['failed']}")

    def read(self, raw: Path) -> dict[str, Any] | None:
        return read_life(raw)

    def report(self, found: dict[str, Any], raw: Path) -> StageReport:
        failures = failures_section(found)
        return StageReport(
            tables=[real_life_table(found)],
            sections=[failures] if failures else [],
            headline=life_headlines(found),
            life_costs=life_costs(found),
        )


STAGE: Stage[dict[str, Any]] = LifeStage()
