"""Shared settings of the micro-benchmarks (pytest-benchmark), run apart from the test suite:

    pytest benchmarks/micro --benchmark-json=micro.json -p no:cacheprovider

Every benchmark uses ``benchmark.pedantic`` with a fixed number of rounds, so the JSON (which
stores every round's time) stays small. ``CONNMGR_MICRO_ROUNDS`` sets the rounds: 30 by
default (``[micro] rounds`` of ``benchmarks/grid.toml``), 5 for ``connmgr bench --quick``,
1 for a smoke test.
"""

from __future__ import annotations

import os

import pytest

DEFAULT_ROUNDS = 30
ROUNDS_VARIABLE = "CONNMGR_MICRO_ROUNDS"


def micro_rounds() -> int:
    """The rounds per benchmark: ``$CONNMGR_MICRO_ROUNDS`` or :data:`DEFAULT_ROUNDS`."""
    text = os.environ.get(ROUNDS_VARIABLE, str(DEFAULT_ROUNDS))
    try:
        rounds = int(text)
    except ValueError:
        rounds = 0
    if rounds < 1:
        raise pytest.UsageError(f"{ROUNDS_VARIABLE}={text!r}: expected a positive number of rounds")
    return rounds


def pytest_configure(config: pytest.Config) -> None:
    micro_rounds()  # a bad value stops the run before anything is measured


@pytest.fixture(scope="session")
def rounds() -> int:
    return micro_rounds()
