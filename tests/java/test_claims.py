"""The 2.1.0 claim table: regenerated from real runs, every row cites an experiment."""

from __future__ import annotations

from pathlib import Path

import pytest

from connmgr_evidence.java.claims import EXPERIMENTS, main

pytestmark = pytest.mark.java
DOC = Path(__file__).parents[2] / "docs" / "java-2.1.0-claims.md"
CODES = [f"P{i}" for i in range(1, 7)] + [f"C{i}" for i in range(1, 7)]
VERDICTS = {"observed", "not observed", "partly", "not measured"}


def rows(text: str) -> dict[str, list[str]]:
    table = [line.split("|")[1:-1] for line in text.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells] for cells in table[1:]}


def test_regenerated_table_covers_every_claim_with_a_run(tmp_path: Path) -> None:
    out = tmp_path / "claims.md"
    assert main(["--out", str(out)]) == 0
    fresh = rows(out.read_text())
    assert list(fresh) == CODES
    names = [exp.name for exp in EXPERIMENTS]
    for code, (_, _, verdict, evidence) in fresh.items():
        assert verdict in VERDICTS, code
        assert verdict == "not measured" or any(name in evidence for name in names), code
    committed = rows(DOC.read_text())
    assert list(committed) == CODES
    # The rules the articles state and the client clearly follows or not do not flip.
    for code in ("P1", "P2", "P3", "P6", "C1", "C2", "C3", "C4"):
        assert committed[code][2] == fresh[code][2], code
