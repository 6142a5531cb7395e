"""The discrete-event simulator: clusters, client workloads, scenarios and runs."""

from connmgr.sim.result import RunResult
from connmgr.sim.run import simulate
from connmgr.sim.scenarios import SCENARIOS, get_scenario

__all__ = ["SCENARIOS", "RunResult", "get_scenario", "simulate"]
