"""The proposed policy against each baseline, over every event sequence Hypothesis draws.

The machines live in :mod:`connmgr.testing.machines` (invariants and all); these are the
thin test classes. Profiles: ``ci`` by default, ``deep`` with
``CONNMGR_HYPOTHESIS_PROFILE=deep`` (see tests/conftest.py and the README).
"""

from __future__ import annotations

import pytest

from connmgr.testing.machines import pair_machine

# Hypothesis searches over many examples: the README's fast core leaves them out.
pytestmark = pytest.mark.search

TestProposedVsJavaDescribed = pair_machine("java-described").TestCase
TestProposedVsJavaToday = pair_machine("java-today").TestCase
TestProposedVsAiokafkaToday = pair_machine("aiokafka-today").TestCase
