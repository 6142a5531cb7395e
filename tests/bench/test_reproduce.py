"""``connmgr.bench.reproduce``: two reports' shared socket counts, compared exactly."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from connmgr.bench.reproduce import COUNTS, compare, main


def report(tmp: Path, name: str, rows: list[dict[str, object]]) -> Path:
    run = tmp / name
    (run / "tables").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), run / "tables" / "sockets.parquet")
    return run


def row(point: str, baseline: str, peak: float) -> dict[str, object]:
    counts: dict[str, object] = dict.fromkeys(COUNTS, 3.0)
    counts["peak_proposed"] = peak
    return {"kind": "sim", "point": point, "baseline": baseline, **counts}


def test_shared_rows_that_agree_reproduce(tmp_path: Path) -> None:
    old = report(tmp_path, "old", [row("a", "java-today", 3), row("b", "java-today", 4)])
    new = report(tmp_path, "new", [row("a", "java-today", 3), row("c", "java-today", 9)])
    result = compare(old, new)
    assert (result.shared, result.differing, result.only_old, result.only_new) == (1, (), 1, 1)
    assert main([str(old), str(new)]) == 0


def test_a_changed_count_is_listed(tmp_path: Path) -> None:
    old = report(tmp_path, "old", [row("a", "java-today", 3)])
    new = report(tmp_path, "new", [row("a", "java-today", 4)])
    result = compare(old, new)
    assert result.differing == ("sim a vs java-today: peak_proposed 3 -> 4",)
    assert main([str(old), str(new)]) == 1


def test_no_shared_row_or_no_report_is_an_error(tmp_path: Path) -> None:
    old = report(tmp_path, "old", [row("a", "java-today", 3)])
    new = report(tmp_path, "new", [row("b", "java-today", 3)])
    assert main([str(old), str(new)]) == 2
    assert main([str(old), str(tmp_path / "missing")]) == 2
