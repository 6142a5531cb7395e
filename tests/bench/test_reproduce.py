"""``connmgr_evidence.bench.reproduce``: two reports' shared socket counts, compared exactly."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from connmgr_evidence.bench.reproduce import COUNTS, compare, main


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


def with_runs(run: Path, runs: list[tuple[str, str, int, int]]) -> Path:
    """Keep raw simulated rows (point, policy, repeat, peak) in ``run``, as a committed
    report does."""
    path = run / "raw" / "results" / "sim.parquet"
    path.parent.mkdir(parents=True)
    rows = [
        {
            "point": pt,
            "policy": pol,
            "repeat": rep,
            "opened": 4,
            "failed": 0,
            "peak": peak,
            "steady": 3,
            "handshakes": 4,
        }
        for pt, pol, rep, peak in runs
    ]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return run


def test_simulated_runs_are_compared_run_by_run_where_both_keep_them(tmp_path: Path) -> None:
    # The tables' medians differ (three repeats against two), the shared runs agree.
    old = with_runs(
        report(tmp_path, "old", [row("a", "java-today", 3)]),
        [("a", "proposed", 0, 3), ("a", "proposed", 1, 3), ("a", "proposed", 2, 9)],
    )
    new = with_runs(
        report(tmp_path, "new", [row("a", "java-today", 5)]),
        [("a", "proposed", 0, 3), ("a", "proposed", 1, 3)],
    )
    result = compare(old, new)
    assert (result.shared, result.differing, result.only_old) == (2, (), 1)
    changed = with_runs(
        report(tmp_path, "changed", [row("a", "java-today", 3)]),
        [("a", "proposed", 0, 3), ("a", "proposed", 1, 4)],
    )
    assert compare(old, changed).differing == ("sim run a proposed repeat 1: peak 3 -> 4",)
    # One report without raw rows: the tables are compared, medians and all.
    assert compare(old, report(tmp_path, "bare", [row("a", "java-today", 5)])).differing
