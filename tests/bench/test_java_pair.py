"""The patched kafka-clients against its release in the main job's comparison, through the
command the user runs (`connmgr bench --report-only RUN_DIR`).

A run of real rows as the real stage writes them: the proposal, stock aiokafka,
``java-4.3.1`` and ``java-4.3.1-patched`` at a producer and a consumer point, three repeats.
The Java clients' socket counts carry the telemetry dial that makes a Java producer or
consumer open 5 or 6 at the same point in runs of either client; the patched client's times
are within a few per cent of the release's.

- the comparison pairs ``java-4.3.1-patched`` with ``java-4.3.1`` repeat by repeat: its
  ``comparison`` and ``latency`` rows hold the medians and the median, min and max of the
  per-repeat ratios, recomputed here from the rows written;
- the gate (exit status) does not fire on the telemetry dial nor on two slow JVM starts in
  three repeats, and does on a real regression of the pair: the patched client slower to its
  first ack beyond the tolerance in every repeat.

Expected values are computed here from the rows, never copied from the job's output.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from connmgr_evidence.bench.results.schema import write_parquet
from connmgr_evidence.cli import main

from .conftest import build_row

STOCK, PATCHED = "java-4.3.1", "java-4.3.1-patched"
# Every (subject, baseline) the comparison pairs: the proposal against every other client, the
# patched client against its release only.
PAIRED = (("proposed", "aiokafka"), ("proposed", STOCK), ("proposed", PATCHED), (PATCHED, STOCK))
POINTS = {
    # point: (scenario, client, timing metric)
    "big-producer[brokers=1000,coordinator=auto,rtt_ms=20.0]": (
        "big-producer",
        "producer",
        "ttfa_ms",
    ),
    "big-consumer[brokers=1000,coordinator=auto,rtt_ms=20.0]": (
        "big-consumer",
        "consumer",
        "ttfc_ms",
    ),
}
# Per client, per repeat: (opened, peak, steady, time to first ack / consume in ms). The
# Java clients' opened and peak are 5 or 6 by the telemetry dial, in runs of both: the
# patched client's median opened (6) is above the release's (5) with nothing regressed.
RUNS: dict[str, list[tuple[int, int, int, float]]] = {
    "proposed": [(4, 3, 3, 150.0), (4, 3, 3, 161.0), (4, 3, 3, 149.0)],
    "aiokafka": [(5, 5, 5, 240.0), (5, 5, 5, 236.0), (5, 5, 5, 251.0)],
    STOCK: [(5, 5, 5, 681.0), (5, 5, 5, 702.0), (6, 6, 6, 655.0)],
    PATCHED: [(6, 5, 4, 700.0), (6, 4, 3, 661.0), (5, 5, 4, 719.0)],
}
TIMED = {"ttfa_ms", "ttfc_ms"}

Change = Callable[[dict[str, Any]], None]


def _rows(change: Change) -> list[dict[str, Any]]:
    rows = []
    for point, (scenario, client, metric) in POINTS.items():
        for repeat in range(3):
            for policy, runs in RUNS.items():
                opened, peak, steady, first_ms = runs[repeat]
                values: dict[str, Any] = {
                    "kind": "real",
                    "point": point,
                    "scenario": scenario,
                    "policy": policy,
                    "client": client,
                    "brokers": 1000,
                    "bootstrap_size": 1,
                    "leaders": 3,
                    "rtt_ms": 20.0,
                    "repeat": repeat,
                    "seed": repeat,
                    "duration_ms": 3000.0,
                    "opened": opened,
                    "peak": peak,
                    "steady": steady,
                    metric: first_ms + (100.0 if client == "consumer" else 0.0),
                }
                change(values)
                rows.append(build_row(**values))
    return rows


def _run_dir(root: Path, change: Change) -> tuple[Path, list[dict[str, Any]]]:
    run = root / "20990101T000000Z-test"
    raw = run / "raw"
    rows = _rows(change)
    write_parquet(rows, raw / "results" / "real.parquet")
    job = {"grid": "java pair test", "skipped": [], "stage_seconds": {}, "sweep": []}
    (raw / "job.json").write_text(json.dumps(job))
    return run, rows


def _unchanged(_: dict[str, Any]) -> None:
    pass


def _bench(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(["bench", "--report-only", str(run), "--no-rfc", "--master", "local[2]"])
    return status, capsys.readouterr().err


def _table(run: Path, name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(run / "tables" / f"{name}.parquet").to_pylist()
    return rows


def _by_hand(
    rows: list[dict[str, Any]], point: str, subject: str, baseline: str, metric: str
) -> dict[str, float | None]:
    """The medians of both sides over the repeats both ran, and the median, min and max of
    the per-repeat ratios subject / baseline (``ratio`` None if the pair is not timed the
    same way)."""
    side = {
        (r["policy"], r["repeat"]): r[metric]
        for r in rows
        if r["point"] == point and r["policy"] in (subject, baseline)
    }
    repeats = sorted({rep for _, rep in side})
    mine = [side[(subject, rep)] for rep in repeats]
    theirs = [side[(baseline, rep)] for rep in repeats]
    ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
    timed = metric not in TIMED or (subject, baseline) in {
        ("proposed", "aiokafka"),
        (PATCHED, STOCK),
    }
    return {
        "proposed": statistics.median(mine),
        "baseline": statistics.median(theirs),
        "ratio": statistics.median(ratios) if timed else None,
        "ratio_min": min(ratios) if timed else None,
        "ratio_max": max(ratios) if timed else None,
    }


def test_the_pair_is_compared_run_by_run_with_its_medians_and_ratios_and_the_dial_passes(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, rows = _run_dir(tmp_path, _unchanged)
    status, err = _bench(run, capsys)
    assert status == 0, err
    assert _table(run, "regressions") == []

    comparison = _table(run, "comparison")
    assert {(r["point"], r["subject"], r["baseline"]) for r in comparison} == {
        (point, subject, baseline) for point in POINTS for subject, baseline in PAIRED
    }
    for r in comparison:
        assert r["repeats"] == 3
        for metric in ("opened", "peak", "steady", POINTS[r["point"]][2]):
            want = _by_hand(rows, r["point"], r["subject"], r["baseline"], metric)
            for what, value in want.items():
                got = r[f"{metric}_{what}"]
                assert got == pytest.approx(value), (r["point"], r["subject"], metric, what)
    pair = [r for r in comparison if r["subject"] == PATCHED]
    # The telemetry dial: the patched client's median opened is above the release's, and no
    # flag is set for it.
    assert all(r["opened_proposed"] > r["opened_baseline"] for r in pair)
    assert not any(r["worse_opened"] or r["regressed"] for r in pair)

    latency = _table(run, "latency")
    assert {(r["metric"], r["subject"], r["baseline"]) for r in latency} == {
        (metric, subject, baseline)
        for _, _, metric in POINTS.values()
        for subject, baseline in PAIRED
    }
    for r in latency:
        want = _by_hand(rows, r["point"], r["subject"], r["baseline"], r["metric"])
        assert r["proposed_ms"] == pytest.approx(want["proposed"])
        assert r["baseline_ms"] == pytest.approx(want["baseline"])
        for what in ("ratio", "ratio_min", "ratio_max"):
            assert r[what] == pytest.approx(want[what]), (r["subject"], r["baseline"], what)
    # The two same-runtime pairs have ratios; the proposal against a Java client has none.
    timed = {(r["subject"], r["baseline"]) for r in latency if r["ratio"] is not None}
    assert timed == {("proposed", "aiokafka"), (PATCHED, STOCK)}

    index = (run / "index.md").read_text()
    caption = index.split("Time to first ack / first consume", 1)[1].split("\n|", 1)[0]
    assert f"`{PATCHED}` against `{STOCK}`" in caption and "same-runtime" in caption
    # The headline and the sockets table stay the proposal's.
    assert {r["baseline"] for r in _table(run, "headline")} == {"aiokafka", STOCK, PATCHED}
    sockets = [(r["point"], r["baseline"]) for r in _table(run, "sockets")]
    assert sorted(sockets) == sorted((p, b) for p in POINTS for b in ("aiokafka", STOCK, PATCHED))


def _patched_slower(*factors: float) -> Change:
    """The patched client ``factors[repeat]`` times the release's time at the same repeat
    (one factor: every repeat)."""

    def change(row: dict[str, Any]) -> None:
        if row["policy"] == PATCHED:
            metric = "ttfa_ms" if row["client"] == "producer" else "ttfc_ms"
            stock = RUNS[STOCK][row["repeat"]][3] + (100.0 if row["client"] == "consumer" else 0)
            row[metric] = stock * factors[row["repeat"] % len(factors)]

    return change


INJECTED: Mapping[str, Change] = {
    # Every repeat 30 % slower than the release's: above the 25 % tolerance.
    "patched-30-percent-slower": _patched_slower(1.3),
}


@pytest.mark.parametrize("change", INJECTED.values(), ids=INJECTED.keys())
def test_a_real_regression_of_the_pair_exits_1(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Change
) -> None:
    run, _ = _run_dir(tmp_path, change)
    status, err = _bench(run, capsys)
    assert status == 1
    assert "beyond its stated costs" in err
    listed = _table(run, "regressions")
    assert {(r["subject"], r["baseline"], r["metric"]) for r in listed} == {
        (PATCHED, STOCK, "ttfa_ms"),
        (PATCHED, STOCK, "ttfc_ms"),
    }
    for r in listed:
        assert r["ratio"] == pytest.approx(1.3)
        assert r["rule"].startswith("every pair's ratio above 1.25")
    # No stated cost covers another subject's regression, and the headline is the
    # proposal's alone (no point of it regressed).
    assert all(r["regressed_points"] == 0 for r in _table(run, "headline"))


NOT_REGRESSED: Mapping[str, Change] = {
    # Every repeat slower, but within the tolerance.
    "patched-20-percent-slower": _patched_slower(1.2),
    # A cold JVM's hiccups: two of three repeats slower beyond the tolerance (the median
    # ratio 1.3), one faster. A regression of the patch would slow every repeat.
    "two-slow-jvm-starts": _patched_slower(2.4, 1.3, 0.9),
}


@pytest.mark.parametrize("change", NOT_REGRESSED.values(), ids=NOT_REGRESSED.keys())
def test_within_the_tolerance_or_on_jvm_hiccups_the_pair_does_not_regress(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Change
) -> None:
    run, _ = _run_dir(tmp_path, change)
    status, err = _bench(run, capsys)
    assert status == 0, err
    assert _table(run, "regressions") == []
