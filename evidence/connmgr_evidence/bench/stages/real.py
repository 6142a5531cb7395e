"""The real clients on the embedded cluster: every ``[real]`` client through every real point,
``repeats`` times, each run on a fresh embedded cluster (``raw/results/real.parquet``)."""

from __future__ import annotations

import asyncio
from typing import Any

from connmgr.errors import ConnMgrError
from connmgr_evidence.bench.grid import Grid, RealPoint, java_version, real_jobs
from connmgr_evidence.bench.results.rows import RunMeta, counting_columns, spec_columns
from connmgr_evidence.bench.results.schema import Kind, check_row, write_parquet
from connmgr_evidence.bench.runtime.pool import bar
from connmgr_evidence.bench.stages import BenchError, Phase, RowsOnly, Stage, StageContext

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


def real_rows(
    grid: Grid, meta: RunMeta, *, show: bool = True, retried: list[str] | None = None
) -> list[dict[str, Any]]:
    """Every real client through every real point, ``repeats`` times (in
    :func:`real_jobs`' order), each run on a fresh embedded cluster. A failed or hung run is
    retried once and listed in ``retried``; a second failure stops the job."""
    if retried is None:
        retried = []
    from connmgr_evidence.realrun import run_real

    records = grid.get("real", "records")
    base_seed = grid.get("real", "seed")
    jobs = real_jobs(grid)
    rows = []
    for point, client, repeat in bar(jobs, len(jobs), "real runs", show):
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

    def run(self, ctx: StageContext) -> None:
        rows = real_rows(ctx.grid, ctx.meta, show=ctx.show, retried=ctx.retried)
        write_parquet(rows, ctx.results / "real.parquet")
        for line in ctx.retried:
            ctx.say(f"retried a real run: {line}")


STAGE: Stage[None] = RealStage()
