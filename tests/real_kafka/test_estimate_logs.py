"""``estimate logs`` read from real kafka-clients logs equals, client by client, what the
forwarders and the kernel counted (a small version of ``python -m
connmgr_evidence.estimate.validate``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connmgr_evidence.estimate.validate import mismatches, run

pytestmark = [pytest.mark.real_kafka, pytest.mark.java]


def test_estimate_logs_equals_the_forwarders_and_the_kernel(tmp_path: Path) -> None:
    clients = (
        ("4.3.1", "producer", None),  # runs first: the records the consumers read
        ("4.4.0", "consumer", "consumer"),  # 4.4 prints its coordinator as +B
        ("4.3.1", "consumer", "classic"),  # 4.3.1: 2147483647 - B
        ("4.4.0", "admin", None),
    )
    rows = run(tmp_path, clients)
    assert mismatches(rows) == []
    assert [r.name for r in rows] == [
        "4.3.1-producer",
        "4.4.0-consumer-consumer",
        "4.3.1-consumer-classic",
        "4.4.0-admin",
    ]
    assert [r.estimate_opened["coordinator"] for r in rows] == [0, 1, 1, 0]
    # The short connections.max.idle.ms closed something while each client settled.
    assert all(r.estimate_held_at_sample < sum(r.estimate_opened.values()) for r in rows)
