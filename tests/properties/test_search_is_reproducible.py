"""A derandomized search explores the same examples in any process.

Hypothesis draws some values from constants it mines out of the modules loaded at the time,
so without :mod:`connmgr.testing.constants` a search in this pytest process (which has
loaded much of the package) and one in a fresh interpreter (which loads only what the
search imports) explored different examples: different costs, and a mutant found in one
and missed in the other.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from connmgr.testing.constants import load_whole_package

# Hypothesis searches over many examples: the README's fast core leaves them out.
pytestmark = pytest.mark.search

FINGERPRINT = """
import hashlib
from hypothesis.stateful import run_state_machine_as_test
from connmgr.testing.evidence import search_settings
from connmgr.testing.machines import pair_machine

seen = []

class Recorded(pair_machine("java-today")):
    def teardown(self):
        seen.append(f"{self.world} {[str(s) for s in self.steps]}")
        super().teardown()

run_state_machine_as_test(Recorded, settings=search_settings(100, 10, derandomize=True))
print(len(seen), hashlib.sha256("\\n".join(seen).encode()).hexdigest())
"""


def test_the_same_examples_here_and_in_a_fresh_interpreter() -> None:
    # This process has loaded the whole package, as `connmgr bench` and a whole `pytest`
    # run do; the fresh interpreter loads only what the search imports.
    load_whole_package()
    here: dict[str, object] = {}
    exec(FINGERPRINT.replace("print(", "result = ("), here)
    fresh = subprocess.run(
        [sys.executable, "-c", FINGERPRINT], capture_output=True, text=True, check=True
    ).stdout.split()
    count, digest = here["result"]  # type: ignore[misc]
    assert isinstance(count, int) and count >= 100
    assert fresh == [str(count), digest]
