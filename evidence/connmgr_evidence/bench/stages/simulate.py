"""Every policy through the simulator over the grid's simulated points
(``raw/results/sim.parquet``), in worker processes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connmgr.errors import ConfigError
from connmgr.policies import POLICIES
from connmgr.sim.run import prepare, run_spec
from connmgr.sim.scenarios import SCENARIOS
from connmgr_evidence.bench.gridfile import (
    COORDINATORS,
    GRID_SCENARIOS,
    IDLE,
    Grid,
    SimPoint,
    check_known,
)
from connmgr_evidence.bench.results.rows import RunMeta, sim_row
from connmgr_evidence.bench.results.schema import write_parquet
from connmgr_evidence.bench.runtime.pool import pooled
from connmgr_evidence.bench.stages import Phase, RowsOnly, Setting, Stage, StageContext

SETTINGS: Mapping[str, Setting] = {
    "scenarios": Setting(str, True),
    "policies": Setting(str, True),
    "brokers": Setting(int, True),
    "bootstrap_size": Setting(int, True),
    "leaders": Setting(int, True),
    "partitions": Setting(int, True),
    "topics": Setting(int, True),
    "coordinator": Setting(str, True),
    "idle": Setting(str, True),
    "duration_ms": Setting(int),
    "repeats": Setting(int),
    "seed": Setting(int),
    "named": Setting(str, True),
    "workers": Setting(int),
}
"""``[sim]``: the axes of the simulated points (the grid expands them), the named scenarios
run beside them, the policies, repeats and worker processes."""


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
    return pooled(_sim_one, jobs, "simulate", show, grid.get("sim", "workers"))


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


class SimulateStage(RowsOnly):
    name = "simulate"
    phase = Phase.CPU
    order = 1
    what = (
        "every policy (`proposed`, `java-described`, `java-today`, `aiokafka-today`) through "
        "`big-producer` / `big-consumer` over brokers (3 to 10,000), bootstrap list size, leader "
        "spread, partitions, topics, coordinator shared with a leader or separate, "
        "`connections.max.idle.ms` default or -1; plus the named scenarios (the seed articles' "
        "topologies, the Kubernetes restart, the shared proxy endpoint); `repeats` seeds each"
    )
    writes = "`kind = sim`"
    section = "sim"
    settings = SETTINGS

    def check(self, values: Mapping[str, Any]) -> None:
        check_known("sim.scenarios", values["scenarios"], GRID_SCENARIOS)
        check_known("sim.named", values["named"], sorted(SCENARIOS))
        check_known("sim.policies", values["policies"], list(POLICIES))
        check_known("sim.idle", values["idle"], list(IDLE))
        check_known("sim.coordinator", values["coordinator"], list(COORDINATORS))
        if "proposed" not in values["policies"]:
            raise ConfigError("sim.policies must include proposed (what is compared)")

    def run(self, ctx: StageContext) -> None:
        write_parquet(sim_rows(ctx.grid, ctx.meta, show=ctx.show), ctx.results / "sim.parquet")


STAGE: Stage[None] = SimulateStage()
