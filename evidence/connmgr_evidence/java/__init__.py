"""The real Java Kafka client (``org.apache.kafka:kafka-clients``), run and accounted for.

:mod:`connmgr.java.build` builds the Maven module in ``benchmarks/java-probe`` for a chosen
client version (artifacts in ``~/.m2``, build output in a per-user cache, never in the repo);
:mod:`connmgr.java.probe` runs it through one producer or consumer scenario with
``NetworkClient`` logging to a file; :mod:`connmgr.java.accounting` replays that log into a
ledger, and :mod:`connmgr.java.crosscheck` reconciles every connection in it with the client's
own metrics and with the kernel's socket table (:mod:`connmgr.kernel`). Quick start::

    from connmgr.java import build_probe, kernel_sampler, run_probe

    build = build_probe("2.1.0")
    run = run_probe(
        build, client="producer", bootstrap=cluster.bootstrap_servers, topic="t",
        partitions=3, records=30, sample=kernel_sampler(cluster.listeners()), verify=True,
    )
    run.dials()  # [("-1", "127.0.0.1:40001", Role.BOOTSTRAP), ("2", ..., Role.DATA), ...]
"""

from connmgr.java.accounting import LogAccount, build_ledger, role_of
from connmgr.java.build import ProbeBuild, build_probe, cache_dir
from connmgr.java.crosscheck import JavaAccountingMismatch, cross_check
from connmgr.java.errors import JavaBuildError, JavaProbeError, JavaToolError
from connmgr.java.probe import TransactionPlan, default_extra, kernel_sampler, run_probe
from connmgr.java.results import JavaRun, PhaseReport
from connmgr.java.tools import JavaTools, find_tools
from connmgr.kernel import KernelSample, kernel_sockets

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
