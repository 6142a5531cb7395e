"""Real runs: real clients through scenarios on an embedded or a real Kafka cluster, and their
comparison with the simulator."""

from connmgr.realrun.run import CLIENTS, RealRun, place_scenario, run_real, sequence_differences
from connmgr.realrun.workloads import RealRunError

__all__ = [
    "CLIENTS",
    "RealRun",
    "RealRunError",
    "place_scenario",
    "run_real",
    "sequence_differences",
]
