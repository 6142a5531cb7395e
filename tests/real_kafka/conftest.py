"""One real 3-node Kafka cluster for the whole session (``pytest -m real_kafka``).

Starting a cluster costs seconds of JVM start-up, so every test shares this one and keeps to
its own topics and group names. Without ``java`` or ``mvn`` the tier is skipped, saying what
to install, unless ``CONNMGR_REQUIRE_REAL_KAFKA=1`` makes that a failure (for CI that must
run it). Any other start failure is an error, with the failing node's log tail.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import psutil
import pytest
from connmgr.realkafka import KafkaCluster, MissingTool


def java_children() -> list[psutil.Process]:
    """Java processes descended from this test process (the brokers, while they run)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "java" in child.name():
                found.append(child)
        except psutil.NoSuchProcess:
            continue  # exited while we looked: not left behind
    return found


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(brokers=3)
    began = time.monotonic()
    try:
        cluster.start(timeout_s=180)
    except MissingTool as exc:
        if os.environ.get("CONNMGR_REQUIRE_REAL_KAFKA") == "1":
            raise
        pytest.skip(f"real Kafka tier needs java and mvn: {exc}")
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
