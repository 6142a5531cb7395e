"""The real Java Kafka client (``org.apache.kafka:kafka-clients``), run and accounted for.

:mod:`connmgr.java.probe` builds the Maven module in ``benchmarks/java-probe`` for a chosen
client version (artifacts in ``~/.m2``, build output in a per-user cache, never in the repo),
runs it through one producer or consumer scenario with ``NetworkClient`` logging to a file, and
reconciles every connection in that log with the client's own metrics and with the kernel's
socket table. Quick start::

    from connmgr.java import build_probe, kernel_sampler, run_probe

    build = build_probe("2.1.0")
    run = run_probe(
        build, client="producer", bootstrap=cluster.bootstrap_servers, topic="t",
        partitions=3, records=30, sample=kernel_sampler(cluster.listeners()), verify=True,
    )
    run.dials()  # [("-1", "127.0.0.1:40001", Role.BOOTSTRAP), ("2", ..., Role.DATA), ...]
"""

from connmgr.java.probe import (
    JavaAccountingMismatch,
    JavaBuildError,
    JavaProbeError,
    JavaRun,
    JavaToolError,
    JavaTools,
    KernelSample,
    LogAccount,
    PhaseReport,
    ProbeBuild,
    TransactionPlan,
    build_ledger,
    build_probe,
    cache_dir,
    cross_check,
    default_extra,
    find_tools,
    kernel_sampler,
    kernel_sockets,
    role_of,
    run_probe,
)

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
