"""One real 3-node Kafka cluster for the whole session (``pytest -m real_kafka``).

Starting a cluster costs seconds of JVM start-up, so every test shares this one and keeps to
its own topics and group names. Without ``java`` (17+) or ``mvn`` the tier fails, saying what
to install. Any other start failure is an error, with the failing node's log tail.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import psutil
import pytest

from connmgr_evidence.realkafka import KafkaCluster


def java_children() -> list[psutil.Process]:
    """Kafka JVMs (nodes or storage formatting) descended from this test process.

    Other tiers' JVMs (the Java probe) are not counted, so the check holds in a full run.
    """
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE or "java" not in child.name():
                continue
            if {"kafka.Kafka", "kafka.tools.StorageTool"} & set(child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            continue  # exited while we looked: not left behind
    return found


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(brokers=3)
    began = time.monotonic()
    # Java 17 and Maven are part of this project's machines: without them the tier fails
    # (MissingTool says what to install) instead of passing quietly.
    cluster.start(timeout_s=180)
    phases = ", ".join(f"{name} {seconds:.2f}s" for name, seconds in cluster.timings.items())
    print(
        f"\n[real_kafka] {cluster!r}\n[real_kafka] start {time.monotonic() - began:.2f}s: {phases}"
    )
    try:
        yield cluster
    finally:
        t = time.monotonic()
        cluster.stop()
        print(f"\n[real_kafka] stopped in {time.monotonic() - t:.2f}s")
        # The brokers are gone, not merely signalled: none of our descendants is a JVM.
        assert java_children() == []
