"""``estimate logs`` read from real kafka-clients logs equals, client by client, what the
forwarders and the kernel counted (a small version of ``python -m connmgr.estimate.validate``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from connmgr.estimate.validate import mismatches, run

pytestmark = [pytest.mark.real_kafka, pytest.mark.java]


def test_estimate_logs_equals_the_forwarders_and_the_kernel(tmp_path: Path) -> None:
    clients = (
        ("4.4.0", "consumer", "consumer"),  # 4.4 prints its coordinator as +B
        ("4.3.1", "consumer", "classic"),  # 4.3.1: 2147483647 - B
        ("4.4.0", "admin", None),
    )
    rows = run(tmp_path, clients)
    assert mismatches(rows) == []
    assert [r.estimate_opened["coordinator"] for r in rows] == [1, 1, 0]
    # The short connections.max.idle.ms closed something while each consumer settled.
    assert all(r.estimate_held_at_sample < sum(r.estimate_opened.values()) for r in rows[:2])
