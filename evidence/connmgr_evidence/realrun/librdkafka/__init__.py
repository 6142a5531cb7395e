"""librdkafka (confluent-kafka's ``Producer`` and ``Consumer``) as a real client of real runs:
its connections replayed from its ``debug=broker`` log (:mod:`.log`, :mod:`.account`) and
reconciled with its statistics and the kernel (:mod:`.crosscheck`) by the workloads
(:mod:`.workload`)."""

from connmgr_evidence.realrun.librdkafka.account import HandleTally, LogAccount
from connmgr_evidence.realrun.librdkafka.crosscheck import (
    LibrdkafkaMismatch,
    stats_problems,
    verify_with_kernel,
)
from connmgr_evidence.realrun.librdkafka.workload import STATS_INTERVAL_MS, run_librdkafka

__all__ = [
    "STATS_INTERVAL_MS",
    "HandleTally",
    "LibrdkafkaMismatch",
    "LogAccount",
    "run_librdkafka",
    "stats_problems",
    "verify_with_kernel",
]
