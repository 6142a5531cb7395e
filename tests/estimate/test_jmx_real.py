"""``estimate jmx`` on the real tier: a short run of ``connmgr_evidence.estimate.jmx_validate`` (a
3-node KRaft cluster with remote JMX, four kafka-clients, broker 2 restarted mid-run) reads
every broker's connection count at every sample exactly as the brokers' own JMX has it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connmgr_evidence.estimate import jmx_validate

pytestmark = [pytest.mark.real_kafka, pytest.mark.java]


def test_estimate_jmx_equals_the_brokers_own_counts(tmp_path: Path) -> None:
    code = jmx_validate.main(["--out", str(tmp_path), "--seconds", "12", "--stagger", "1"])
    result = json.loads((tmp_path / "validation.json").read_text())
    assert result["samples"] > 0
    assert result["equal"] == result["samples"], [c for c in result["compared"] if not c["equal"]]
    assert result["listener_equal"] == result["listener_samples"]
    assert code == 0
    # The restart of broker 2 is seen as one restart of broker 2.
    assert [r["broker"] for r in result["restarts"]] == [2]
