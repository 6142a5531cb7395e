"""The examples in ``examples/`` run, and what they print is what their ledgers hold."""

from __future__ import annotations

import importlib.util
import re
import time
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.embedded
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
COUNTS_LINE = re.compile(
    r"^(?P<name>\w+): (?P<opened>\d+) sockets opened \((?P<roles>[^)]*)\), (?P<failed>\d+) "
    r"failed, at most (?P<peak>\d+) open at once, (?P<steady>\d+) open after stop\(\)$"
)


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quickstart_prints_its_ledgers_socket_counts(capsys: pytest.CaptureFixture[str]) -> None:
    quickstart = load("quickstart")
    started = time.monotonic()
    ledgers = quickstart.main()
    assert time.monotonic() - started < 30  # the quick start's promise
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"sent {quickstart.RECORDS} records, read {quickstart.RECORDS} back"
    printed = {m["name"]: m for m in map(COUNTS_LINE.match, lines[1:]) if m is not None}
    assert sorted(printed) == sorted(ledgers) == ["consumer", "producer"]
    for name, ledger in ledgers.items():
        counts = ledger.counts()
        shown = printed[name]
        assert (int(shown["opened"]), int(shown["failed"])) == (counts.opened, counts.failed)
        assert (int(shown["peak"]), int(shown["steady"])) == (counts.peak, counts.steady)
        roles = dict(part.rsplit(" ", 1) for part in shown["roles"].split(", "))
        assert {r: int(n) for r, n in roles.items()} == {
            r: c["opened"] for r, c in counts.by_role.items()
        }
        assert counts.opened > 0 and counts.steady == 0  # it dialled, and stop() closed all
