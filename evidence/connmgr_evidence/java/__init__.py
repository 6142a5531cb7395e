"""The real Java Kafka client (``org.apache.kafka:kafka-clients``), run and accounted for.

:mod:`connmgr_evidence.java.build` builds the Maven module in ``benchmarks/java-probe`` for a chosen
client version (artifacts in ``~/.m2``, build output in a per-user cache, never in the repo);
:mod:`connmgr_evidence.java.probe` runs it through one producer or consumer scenario with
``NetworkClient`` logging to a file; :mod:`connmgr_evidence.java.accounting` replays that log into a
ledger, and :mod:`connmgr_evidence.java.crosscheck` reconciles every connection in it with the
client's
own metrics and with the kernel's socket table (:mod:`connmgr.kernel`). Quick start::

    from connmgr_evidence.java import build_probe, kernel_sampler, run_probe

    build = build_probe("2.1.0")
    run = run_probe(
        build, client="producer", bootstrap=cluster.bootstrap_servers, topic="t",
        partitions=3, records=30, sample=kernel_sampler(cluster.listeners()), verify=True,
    )
    run.dials()  # [("-1", "127.0.0.1:40001", Role.BOOTSTRAP), ("2", ..., Role.DATA), ...]
"""

from connmgr.kernel import KernelSample, kernel_sockets
from connmgr_evidence.java.accounting import LogAccount, build_ledger, role_of
from connmgr_evidence.java.build import ProbeBuild, build_probe, cache_dir
from connmgr_evidence.java.crosscheck import JavaAccountingMismatch, cross_check
from connmgr_evidence.java.errors import JavaBuildError, JavaProbeError, JavaToolError
from connmgr_evidence.java.probe import TransactionPlan, default_extra, kernel_sampler, run_probe
from connmgr_evidence.java.results import JavaRun, PhaseReport
from connmgr_evidence.java.tools import JavaTools, find_tools

__all__ = [
    "JavaAccountingMismatch",
    "JavaBuildError",
    "JavaProbeError",
    "JavaRun",
    "JavaToolError",
    "JavaTools",
    "KernelSample",
    "LogAccount",
    "PhaseReport",
    "ProbeBuild",
    "TransactionPlan",
    "build_ledger",
    "build_probe",
    "cache_dir",
    "cross_check",
    "default_extra",
    "find_tools",
    "kernel_sampler",
    "kernel_sockets",
    "role_of",
    "run_probe",
]
