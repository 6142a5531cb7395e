"""Shared test configuration: Hypothesis profiles and fixture paths."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import settings

FIXTURES = Path(__file__).parent / "fixtures"

# Hypothesis selects its built-in "ci" profile when CI is set; extend it rather than replace
# it. "deep" is for long runs: CONNMGR_HYPOTHESIS_PROFILE=deep pytest tests/properties
settings.register_profile("ci", settings.get_profile("ci"), max_examples=60, deadline=None)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile("deep", max_examples=2_000, stateful_step_count=100, deadline=None)
settings.load_profile(
    os.environ.get("CONNMGR_HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev")
)
