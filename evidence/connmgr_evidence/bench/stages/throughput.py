"""The A/B throughput turns: the proposed and the stock producer take turns on one cluster per
``[throughput]`` RTT (``raw/results/throughput.parquet``, one row per turn)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from connmgr_evidence.bench.gridfile import Grid
from connmgr_evidence.bench.results.rows import RunMeta, life_columns, point_text
from connmgr_evidence.bench.results.schema import Kind, check_row, write_parquet
from connmgr_evidence.bench.runtime.pool import bar
from connmgr_evidence.bench.stages import Phase, RowsOnly, Setting, Stage, StageContext


def throughput_rows(grid: Grid, meta: RunMeta, *, show: bool = True) -> list[dict[str, Any]]:
    """The A/B throughput turns, one row per turn (``repeat`` = round)."""
    from connmgr_evidence.realrun import throughput_ab

    brokers = grid.get("throughput", "brokers")
    records = grid.get("throughput", "records")
    rounds = grid.get("throughput", "rounds")
    linger = grid.get("throughput", "linger_ms")
    rows = []
    for rtt in bar(
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


SETTINGS: Mapping[str, Setting] = {
    "brokers": Setting(int),
    "records": Setting(int),
    "rounds": Setting(int),
    "rtt_ms": Setting(float, True),
    "linger_ms": Setting(int),
}
"""``[throughput]``: the cluster, the records a turn, the rounds of A B / B A turns per RTT,
and the producers' linger."""


class ThroughputStage(RowsOnly):
    name = "throughput"
    phase = Phase.TIMED
    order = 2
    what = (
        "the proposed and the stock producer take turns in one cluster, A B, B A, ..., so the "
        "machine's mood falls on both; records/s from first send to last ack"
    )
    writes = "`kind = real`, `scenario = throughput-ab`"
    section = "throughput"
    settings = SETTINGS

    def run(self, ctx: StageContext) -> None:
        rows = throughput_rows(ctx.grid, ctx.meta, show=ctx.show)
        write_parquet(rows, ctx.results / "throughput.parquet")


STAGE: Stage[None] = ThroughputStage()
