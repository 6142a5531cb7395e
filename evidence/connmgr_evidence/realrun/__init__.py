"""Real runs: real clients through scenarios on an embedded or a real Kafka cluster, and their
comparison with the simulator; and a producer throughput A/B on the embedded cluster."""

from connmgr.realrun.ab import ABTurn, throughput_ab
from connmgr.realrun.record import RealRun
from connmgr.realrun.run import CLIENTS, place_scenario, run_real, sequence_differences
from connmgr.realrun.workloads import RealRunError

__all__ = [
    "CLIENTS",
    "ABTurn",
    "RealRun",
    "RealRunError",
    "place_scenario",
    "run_real",
    "sequence_differences",
    "throughput_ab",
]
