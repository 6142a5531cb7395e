"""The discrete-event simulator: clusters, client workloads, scenarios and runs."""

from connmgr.sim import churn  # imported for its side effect: it registers its scenarios
from connmgr.sim.result import RunResult
from connmgr.sim.run import simulate
from connmgr.sim.scenarios import SCENARIOS, get_scenario

__all__ = ["SCENARIOS", "RunResult", "churn", "get_scenario", "simulate"]
