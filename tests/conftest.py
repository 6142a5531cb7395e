"""Shared test configuration: Hypothesis profiles and fixture paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

FIXTURES = Path(__file__).parent / "fixtures"

# "ci" is the default profile, sized so that the whole suite stays within CI's limits (it
# extends Hypothesis's own "ci" profile, which Hypothesis selects when CI is set). "deep" is
# for long runs: CONNMGR_HYPOTHESIS_PROFILE=deep pytest tests/properties/test_agreement.py
settings.register_profile(
    "ci", settings.get_profile("ci"), max_examples=200, stateful_step_count=30, deadline=None
)
settings.register_profile("deep", max_examples=1_000, stateful_step_count=50, deadline=None)
settings.load_profile(os.environ.get("CONNMGR_HYPOTHESIS_PROFILE", "ci"))


# tryfirst: pytest-xdist reads the xdist_group marks in its own hook of the same name, which
# otherwise ran first, saw no mark, and grouped nothing.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep together what shares state when the suite runs on several workers (pytest-xdist,
    ``--dist loadgroup``): each module stays on one worker (its module fixtures, such as the
    quick bench run, are built once), and every test that starts a real Kafka cluster runs
    on one worker, one cluster at a time (the tier's session cluster is built once)."""
    for item in items:
        real = item.get_closest_marker("real_kafka") is not None
        group = "real_kafka" if real else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))
