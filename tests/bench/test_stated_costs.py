"""`connmgr bench`'s exit status over a run directory, through the command the user runs
(`connmgr bench --report-only RUN_DIR`, which reruns only the comparison): 0 when every
flagged difference is a stated cost of the proposal within its stated excess, 1 on any
other regression — one more than a stated excess, a baseline, a metric or a scenario the
list does not name.

The run holds the simulated named points of the stated costs as the grid runs them (the
scenario at its defaults, two repeats, every policy), with the medians of the committed
report (``ip-change[]``'s proposal: the simulator's since its stated cost went, issue 36):
``rebalance[]`` and ``ip-change[]``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from connmgr_evidence.bench.results.schema import write_parquet
from connmgr_evidence.cli import main

from .conftest import build_row

HOUR_MS = 3_600_000.0
POLICIES = ("proposed", "java-described", "java-today", "aiokafka-today")
MEASURED = {
    # point: policy -> (opened, failed, peak); the committed report's medians.
    "rebalance[]": {
        "proposed": (13, 0, 7),
        "java-described": (13, 0, 9),
        "java-today": (12, 0, 8),
        "aiokafka-today": (14, 0, 7),
    },
    "ip-change[]": {
        "proposed": (16, 0, 8),
        "java-described": (17, 0, 10),
        "java-today": (16, 0, 9),
        "aiokafka-today": (16, 0, 8),
    },
    "seed-consumer[]": {
        "proposed": (5, 0, 4),
        "java-described": (5, 0, 5),
        "java-today": (5, 0, 5),
        "aiokafka-today": (5, 0, 4),
    },
}

Change = Callable[[dict[str, Any]], None]
"""Alters one row's values before :func:`build_row` completes it (handshakes = opened -
failed, per hour over the one-hour run)."""


def _rows(change: Change) -> list[dict[str, Any]]:
    rows = []
    for point, policies in MEASURED.items():
        for repeat in range(2):
            for policy in POLICIES:
                opened, failed, peak = policies[policy]
                values: dict[str, Any] = {
                    "point": point,
                    "scenario": point[:-2],
                    "policy": policy,
                    "client": "consumer",
                    "repeat": repeat,
                    "seed": repeat,
                    "duration_ms": HOUR_MS,
                    "opened": opened,
                    "failed": failed,
                    "peak": peak,
                    "steady": 3,
                }
                change(values)
                row = build_row(**values)
                rows.append(row)
    return rows


def _run_dir(root: Path, change: Change) -> Path:
    run = root / "20990101T000000Z-test"
    raw = run / "raw"
    write_parquet(_rows(change), raw / "results" / "sim.parquet")
    job = {"grid": "stated-costs test", "skipped": [], "stage_seconds": {}, "sweep": []}
    (raw / "job.json").write_text(json.dumps(job))
    return run


def _unchanged(_: dict[str, Any]) -> None:
    pass


def _at(point: str, policy: str, **values: Any) -> Change:
    def change(row: dict[str, Any]) -> None:
        if (row["point"], row["policy"]) == (point, policy):
            row.update(values)  # before the row is built: its handshakes follow

    return change


def _bench(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(["bench", "--report-only", str(run), "--no-rfc", "--master", "local[2]"])
    return status, capsys.readouterr().err


def test_stated_costs_only_exit_0_and_are_reported_apart(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_dir(tmp_path, _unchanged)
    status, err = _bench(run, capsys)
    assert status == 0, err
    regressions = pq.read_table(run / "tables" / "regressions.parquet").to_pylist()
    assert regressions == []
    costs = pq.read_table(run / "tables" / "stated-costs.parquet").to_pylist()
    assert {(c["scenario"], c["baseline"], c["metric"], c["status"]) for c in costs} == {
        ("rebalance", "java-today", "opened", "as stated"),
        ("rebalance", "java-today", "handshakes_per_h", "as stated"),
    }
    index = (run / "index.md").read_text()
    section = index.split("## Stated costs", 1)[1].split("\n## ", 1)[0]
    assert "1 flagged difference(s) are stated costs" in section
    assert "the linger's trade" in section
    assert index.split("## Regressions", 1)[1].split("\n## ", 1)[0].strip().startswith("None.")


INJECTED = {
    # One more than the stated excess (rebalance against java-today: +1 stated), and
    # nothing else: java-today opens 11 to the proposal's 13.
    "beyond-the-stated-excess": _at("rebalance[]", "java-today", opened=11),
    # A baseline the list does not name for rebalance: java-described opens 12.
    "an-unnamed-baseline": _at("rebalance[]", "java-described", opened=12),
    # A metric no cost is stated on: the proposal's peak above java-today's.
    "an-unnamed-metric": _at("ip-change[]", "proposed", peak=10),
    # A scenario with no stated cost: one socket more than java-today.
    "an-unnamed-scenario": _at("seed-consumer[]", "proposed", opened=6),
}


@pytest.mark.parametrize("change", INJECTED.values(), ids=INJECTED.keys())
def test_any_other_regression_exits_1(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Change
) -> None:
    run = _run_dir(tmp_path, change)
    status, err = _bench(run, capsys)
    assert status == 1
    assert "beyond its stated costs" in err
    regressions = pq.read_table(run / "tables" / "regressions.parquet").to_pylist()
    assert regressions, "exit 1 without a listed regression"
    assert "## Stated costs" in (run / "index.md").read_text()
