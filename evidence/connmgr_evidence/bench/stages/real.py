"""The real clients on the embedded cluster: every ``[real]`` client through every real point,
``repeats`` times, each run on a fresh embedded cluster (``raw/results/real.parquet``)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from typing import Any

from connmgr.errors import ConfigError
from connmgr_evidence.bench.attempts import attempt
from connmgr_evidence.bench.gridfile import (
    COORDINATORS,
    GRID_SCENARIOS,
    Grid,
    RealPoint,
    check_known,
    is_real_client,
    java_version,
    real_jobs,
)
from connmgr_evidence.bench.report.metrics import PAIRS
from connmgr_evidence.bench.results.rows import RunMeta, counting_columns, spec_columns
from connmgr_evidence.bench.results.schema import Kind, check_row, write_parquet
from connmgr_evidence.bench.runtime.pool import bar
from connmgr_evidence.bench.stages import Phase, RowsOnly, Setting, Stage, StageContext
from connmgr_evidence.java.patched import KAFKA_VERSION, PATCHED_SUFFIX

REAL_RUN_TIMEOUT_S = 300.0
"""A real run taking longer than this has hung; it is retried (and the retry reported)."""


def real_row(
    run: Any, point: RealPoint, client: str, repeat: int, meta: RunMeta, records: int
) -> dict[str, Any]:
    """One row for a real run (a :class:`connmgr_evidence.realrun.RealRun`)."""
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


SETTINGS: Mapping[str, Setting] = {
    "scenarios": Setting(str, True),
    "clients": Setting(str, True),
    "brokers": Setting(int, True),
    "coordinator": Setting(str, True),
    "rtt_ms": Setting(float, True),
    "records": Setting(int),
    "repeats": Setting(int),
    "seed": Setting(int),
}
"""``[real]``: the axes of the real points (the grid expands them), the clients, records,
repeats and the first seed."""
ATTEMPTS = 2
"""How many times a real run is tried before it is recorded as failed."""


def _run_once(point: RealPoint, client: str, settings: dict[str, str]) -> Any:
    """One real run on a fresh embedded cluster: its :class:`connmgr_evidence.realrun.RealRun`."""
    from connmgr_evidence.realrun import run_real

    version = java_version(client)
    return asyncio.run(
        asyncio.wait_for(
            run_real(
                point.scenario, "java" if version else client, settings, kafka_clients=version
            ),
            REAL_RUN_TIMEOUT_S,
        )
    )


def real_rows(
    grid: Grid,
    meta: RunMeta,
    *,
    show: bool = True,
    retried: list[str] | None = None,
    failed: list[str] | None = None,
    run_once: Callable[[RealPoint, str, dict[str, str]], Any] = _run_once,
) -> list[dict[str, Any]]:
    """Every real client through every real point, ``repeats`` times (in
    :func:`real_jobs`' order), each run on a fresh embedded cluster. A failed or hung run is
    tried again, up to :data:`ATTEMPTS` times (:func:`connmgr_evidence.bench.attempts.attempt`),
    each
    failed attempt listed in ``retried``; a run failing every attempt has no row and is
    listed in ``failed`` with its reason (the comparison has no pair for it), and the stage
    goes on. ``run_once`` runs one attempt (a test passes a fake)."""
    if retried is None:
        retried = []
    if failed is None:
        failed = []
    records = grid.get("real", "records")
    base_seed = grid.get("real", "seed")
    jobs = real_jobs(grid)
    rows = []
    for point, client, repeat in bar(jobs, len(jobs), "real runs", show):
        settings = {**point.params, "records": str(records), "seed": str(base_seed + repeat)}
        label = f"{point.point} {client} repeat {repeat}"
        tried = attempt(
            functools.partial(run_once, point, client, settings),
            ATTEMPTS,
            label=f"real run {label}",
            timeout_s=REAL_RUN_TIMEOUT_S,
        )
        retried += [f"{label}: {why}" for why in tried.failures]
        if not tried.ok:
            failed.append(f"{label}: {tried.reason} ({tried.attempts} attempts)")
            continue
        rows.append(real_row(tried.get(), point, client, repeat, meta, records))
    return rows


class RealStage(RowsOnly):
    name = "real"
    phase = Phase.TIMED
    order = 1
    what = (
        "stock aiokafka, the proposed aiokafka client, the real Java client (kafka-clients 2.1.0, "
        "4.4.0 and 4.3.1, built by the Maven probe, and the project's patched 4.3.1, "
        "`java-4.3.1-patched`, its switches on: [kafka-clients-patch.md](kafka-clients-patch.md)) "
        "and librdkafka (confluent-kafka's `Producer` / `Consumer`; see "
        "[below](#how-librdkafka-is-counted)) through the same scenarios on a fresh embedded "
        "cluster (librdkafka's mock cluster, up to 1,000 brokers) with 0 / 5 / 20 ms RTT injected "
        "on every broker: sockets opened / peak / steady by role, handshakes, time from start to "
        "first acknowledged record (producer) or first consumed record (consumer)"
    )
    writes = "`kind = real`"
    section = "real"
    settings = SETTINGS

    def check(self, values: Mapping[str, Any]) -> None:
        check_known("real.scenarios", values["scenarios"], GRID_SCENARIOS)
        check_known("real.coordinator", values["coordinator"], list(COORDINATORS))
        clients = values["clients"]
        bad = [c for c in clients if not is_real_client(c)]
        if bad:
            raise ConfigError(
                f"real.clients has unknown {bad}; choose from proposed, aiokafka, "
                "librdkafka, java-<kafka-clients version> (e.g. java-4.4.0) or "
                f"java-{KAFKA_VERSION}{PATCHED_SUFFIX}"
            )
        if "proposed" not in clients:
            raise ConfigError("real.clients must include proposed (what is compared)")
        for subject, baseline in PAIRS:
            if subject in clients and baseline not in clients:
                raise ConfigError(
                    f"real.clients has {subject} without {baseline}, the client it is "
                    "compared with run by run"
                )

    def run(self, ctx: StageContext) -> None:
        rows = real_rows(ctx.grid, ctx.meta, show=ctx.show, retried=ctx.retried, failed=ctx.failed)
        write_parquet(rows, ctx.results / "real.parquet")
        for line in ctx.retried:
            ctx.say(f"retried a real run: {line}")
        for line in ctx.failed:
            ctx.say(f"a real run failed every attempt: {line}")


STAGE: Stage[None] = RealStage()
