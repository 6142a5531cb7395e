"""Real runs: real clients through scenarios on an embedded or a real Kafka cluster, and their
comparison with the simulator; and a producer throughput A/B on the embedded cluster."""

from connmgr_evidence.realrun.ab import ABTurn, throughput_ab
from connmgr_evidence.realrun.record import RealRun
from connmgr_evidence.realrun.run import CLIENTS, place_scenario, run_real, sequence_differences
from connmgr_evidence.realrun.workloads import RealRunError

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
