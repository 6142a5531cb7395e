"""The comparison job against hand-built result sets whose comparisons are known.

Expected values are recomputed here, independently, from the rows the tests write (plain
Python medians and ratios), never copied from the job's output.
"""

from __future__ import annotations

import math
import random
import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from connmgr.docblocks import block
from connmgr_evidence.bench.report.compare import (
    Comparison,
    load_micro,
    load_results,
    pair_summary,
    run_comparison,
)
from connmgr_evidence.bench.report.summaries import regressions_of
from connmgr_evidence.bench.report.table import MISSING
from connmgr_evidence.bench.results import schema
from connmgr_evidence.bench.results.schema import ResultsError, columns_markdown

DOCS = Path(__file__).parents[2] / "docs" / "results-schema.md"
METRICS = ("opened", "peak", "steady", "handshakes", "ttfa_ms", "ttfc_ms", "throughput_rps")
TOLERANCE = 0.25

RowFactory = Callable[..., dict[str, Any]]


# --------------------------------------------------------------------------- by hand


def ratio(p: float | None, b: float | None) -> float | None:
    if p is None or b is None:
        return None
    if b == 0:
        return 1.0 if p == 0 else math.inf
    return p / b


TIMED = ("ttfa_ms", "ttfc_ms", "throughput_rps")


def by_hand(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(kind, point, baseline) → repeats and, per metric, medians of both sides, the
    median ratio and its min and max: the comparison, computed without Spark."""
    cells: dict[tuple[str, str, int], dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for r in rows:
        cells[(r["kind"], r["point"], r["repeat"])][r["policy"]] = r
    pairs: dict[tuple[str, str, str], list[tuple[Mapping[str, Any], Mapping[str, Any]]]] = (
        defaultdict(list)
    )
    for (kind, point, _), policies in cells.items():
        for name, row in policies.items():
            if name != "proposed":
                pairs[(kind, point, name)].append((policies["proposed"], row))
    out = {}
    for key, ps in pairs.items():
        s: dict[str, Any] = {"repeats": len(ps)}
        timed_apart = key[2] != "aiokafka"  # only stock aiokafka is timed like ours
        for m in METRICS:
            both = [(p[m], b[m]) for p, b in ps if p[m] is not None and b[m] is not None]
            rs = [] if timed_apart and m in TIMED else [ratio(p, b) for p, b in both]
            s[f"{m}_proposed"] = statistics.median(p for p, _ in both) if both else None
            s[f"{m}_baseline"] = statistics.median(b for _, b in both) if both else None
            s[f"{m}_ratio"] = statistics.median(rs) if rs else None
            s[f"{m}_ratio_min"] = min(rs) if rs else None  # type: ignore[type-var]
            s[f"{m}_ratio_max"] = max(rs) if rs else None  # type: ignore[type-var]
        out[key] = s
    return out


def flagged_by_hand(
    expected: Mapping[tuple[str, str, str], Mapping[str, Any]], tolerance: float
) -> set[tuple[str, str, str, str]]:
    found = set()
    for (kind, point, baseline), s in expected.items():
        for m in ("opened", "peak", "steady"):
            if s[f"{m}_proposed"] > s[f"{m}_baseline"]:
                found.add((kind, point, baseline, m))
        if s["repeats"] < 3:  # too few pairs to judge a time
            continue
        for m in ("ttfa_ms", "ttfc_ms"):
            slower = s[f"{m}_ratio"] is not None and s[f"{m}_ratio"] > 1 + tolerance
            if slower and s[f"{m}_proposed"] - s[f"{m}_baseline"] > 5.0:
                found.add((kind, point, baseline, m))
        r = s["throughput_rps_ratio"]
        if r is not None and r < 1 - tolerance:
            found.add((kind, point, baseline, "throughput_rps"))
    return found


def close(a: float | None, b: float | None, rel: float = 1e-9) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def read_rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


# --------------------------------------------------------------------------- the grid


@dataclass(frozen=True)
class Grid:
    rows: list[dict[str, Any]]
    comparison: Comparison
    run_dir: Path
    out: Path


def _sockets(rng: random.Random, peak: tuple[int, int], scale: int) -> dict[str, int]:
    p = rng.randint(*peak) * scale
    steady = rng.randint(1, p)
    opened = p + rng.randint(0, 2)
    return {
        "peak": p,
        "steady": steady,
        "opened": opened,
        "failed": rng.randint(0, 1),
        "opened_bootstrap": 1,
        "opened_data": opened - 1,
        "steady_data": steady,
    }


def grid_rows(make_row: RowFactory) -> list[dict[str, Any]]:
    """A run of every kind, seeded: sim points at two very different scales (so that mixing
    points would show), real producers and consumers at two RTTs, a throughput A/B, a sweep
    over three cluster sizes, and literal points whose outcome is known by heart."""
    rng = random.Random(6)
    rows = []
    for brokers, scale in ((10, 1), (1000, 100)):
        point = f"big-producer[brokers={brokers}]"
        for repeat in range(3):
            rows.append(
                make_row(
                    point=point, brokers=brokers, repeat=repeat, **_sockets(rng, (1, 4), scale)
                )
            )
            for b in ("java-described", "aiokafka-today"):
                rows.append(
                    make_row(
                        point=point,
                        brokers=brokers,
                        repeat=repeat,
                        policy=b,
                        **_sockets(rng, (6, 20), scale),
                    )
                )
    # Literal: peaks 3, 2, 4 against 6, 8, 4 → ratios 0.5, 0.25, 1.0.
    for repeat, (p, b) in enumerate(((3, 6), (2, 8), (4, 4))):
        for policy, peak in (("proposed", p), ("java-today", b)):
            rows.append(
                make_row(
                    point="literal[brokers=5]",
                    scenario="literal",
                    brokers=5,
                    repeat=repeat,
                    policy=policy,
                    peak=peak,
                    opened=8,
                    steady=1,
                )
            )
    # 0/0 and x/0 on steady: the second regresses.
    for point, proposed_steady in (("zero[a]", 0), ("zero[b]", 1)):
        for policy, steady in (("proposed", proposed_steady), ("java-today", 0)):
            rows.append(
                make_row(
                    point=point, scenario="zero", policy=policy, steady=steady, peak=2, opened=2
                )
            )
    for client, metric, scenario in (
        ("producer", "ttfa_ms", "seed-producer"),
        ("consumer", "ttfc_ms", "seed-consumer"),
    ):
        for rtt in (0.0, 50.0):
            point = f"{scenario}[rtt_ms={rtt:g}]"
            for repeat in range(3):
                for policy, peak in (
                    ("proposed", (1, 3)),
                    ("aiokafka", (4, 6)),
                    ("java-4.4.0", (4, 6)),
                ):
                    rows.append(
                        make_row(
                            kind="real",
                            point=point,
                            scenario=scenario,
                            client=client,
                            rtt_ms=rtt,
                            policy=policy,
                            repeat=repeat,
                            **{metric: rng.uniform(10, 20) + 4 * rtt},
                            **_sockets(rng, peak, 1),
                        )
                    )
    for repeat in range(3):
        for policy in ("proposed", "aiokafka"):
            rows.append(
                make_row(
                    kind="real",
                    point="throughput-ab[records=1000]",
                    scenario="throughput-ab",
                    policy=policy,
                    repeat=repeat,
                    throughput_rps=rng.uniform(700, 1300),
                    ttfa_ms=rng.uniform(5, 10),
                    # Roles not measured on this run.
                    **{f"{w}_{role}": None for w in ("opened", "steady") for role in schema.ROLES},
                )
            )
    for brokers in (10, 100, 1000):
        for leaders in (1, 3):
            for repeat in range(2):
                point = f"big-producer[brokers={brokers},leaders={leaders}]"
                for policy, peak in (("proposed", leaders + 1), ("java-described", brokers + 1)):
                    rows.append(
                        make_row(
                            kind="sweep",
                            point=point,
                            brokers=brokers,
                            leaders=leaders,
                            repeat=repeat,
                            seed=repeat,
                            policy=policy,
                            peak=peak + repeat,
                            opened=peak + repeat + 1,
                            steady=leaders,
                        )
                    )
    return rows


@pytest.fixture(scope="module")
def grid(
    spark: Any,
    make_row: RowFactory,
    results_writer: Callable[..., Path],
    micro_writer: Callable[..., Path],
    micro_entry: Callable[..., dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Grid:
    run_dir = tmp_path_factory.mktemp("run")
    rows = grid_rows(make_row)
    # Split over files by kind, as `connmgr bench` writes them: the sweep as a dataset
    # folder Spark wrote (part files, _SUCCESS, .crc files).
    for kind in ("sim", "real"):
        results_writer(run_dir, kind, [r for r in rows if r["kind"] == kind])
    sweep = [tuple(r[n] for n in schema.NAMES) for r in rows if r["kind"] == "sweep"]
    spark.createDataFrame(sweep, schema=schema.spark_ddl()).repartition(2).write.parquet(
        str(run_dir / "results" / "sweep.parquet")
    )
    micro_writer(
        run_dir,
        "micro",
        [
            micro_entry(
                "test_decision_cost[proposed]", "decision", 2e-6, params={"policy": "proposed"}
            ),
            micro_entry(
                "test_decision_cost[java-today]", "decision", 3e-6, params={"policy": "java-today"}
            ),
            micro_entry(
                "test_simulator_events_per_second[proposed]",
                "simulator",
                0.01,
                params={"policy": "proposed"},
                events=5000,
            ),
        ],
    )
    out = tmp_path_factory.mktemp("report")
    comparison = run_comparison(
        spark,
        run_dir,
        out,
        tolerance=TOLERANCE,
        extra_sections=[("Sweep timing", "The sweep took 3.5 s on 2 cores.")],
    )
    return Grid(rows, comparison, run_dir, out)


# --------------------------------------------------------------------------- comparisons


def test_every_comparison_matches_medians_and_ratios_computed_by_hand(grid: Grid) -> None:
    expected = by_hand(grid.rows)
    got = read_rows(grid.comparison.tables["comparison"].parquet)
    got += read_rows(grid.comparison.tables["sweep-points"].parquet)
    assert {(r["kind"], r["point"], r["baseline"]) for r in got} == set(expected)
    for r in got:
        want = expected[(r["kind"], r["point"], r["baseline"])]
        assert r["repeats"] == want["repeats"]
        for key, value in want.items():
            assert close(r[key], value), (r["kind"], r["point"], r["baseline"], key, r[key], value)


def test_a_literal_point_three_repeats(grid: Grid) -> None:
    (row,) = [
        r
        for r in read_rows(grid.comparison.tables["comparison"].parquet)
        if r["scenario"] == "literal"
    ]
    assert row["baseline"] == "java-today"
    assert row["repeats"] == 3
    assert (row["peak_proposed"], row["peak_baseline"]) == (3.0, 6.0)
    assert (row["peak_ratio"], row["peak_ratio_min"], row["peak_ratio_max"]) == (0.5, 0.25, 1.0)
    assert row["opened_ratio"] == 1.0
    assert not row["regressed"]


def test_points_do_not_mix(grid: Grid) -> None:
    small = [
        r["peak"]
        for r in grid.rows
        if r["point"] == "big-producer[brokers=10]" and r["policy"] == "java-described"
    ]
    got = {
        r["point"]: r
        for r in read_rows(grid.comparison.tables["comparison"].parquet)
        if r["baseline"] == "java-described" and r["kind"] == "sim"
    }
    assert got["big-producer[brokers=10]"]["peak_baseline"] == statistics.median(small)
    assert got["big-producer[brokers=1000]"]["peak_baseline"] >= 600


def test_zero_over_zero_is_one_and_x_over_zero_is_worse(grid: Grid) -> None:
    rows = {
        r["point"]: r
        for r in read_rows(grid.comparison.tables["comparison"].parquet)
        if r["scenario"] == "zero"
    }
    assert rows["zero[a]"]["steady_ratio"] == 1.0
    assert not rows["zero[a]"]["regressed"]
    assert rows["zero[b]"]["steady_ratio"] == math.inf
    assert rows["zero[b]"]["worse_steady"]


def test_regressions_are_the_rules_applied_by_hand(grid: Grid) -> None:
    expected = flagged_by_hand(by_hand(grid.rows), TOLERANCE)
    got = {(r.kind, r.point, r.baseline, r.metric) for r in grid.comparison.regressions}
    assert ("sim", "zero[b]", "java-today", "steady") in expected
    assert got == expected
    assert not grid.comparison.ok
    listed = read_rows(grid.comparison.tables["regressions"].parquet)
    assert {(r["kind"], r["point"], r["baseline"], r["metric"]) for r in listed} == expected


def test_regressions_are_listed_in_the_index(grid: Grid) -> None:
    text = grid.comparison.index.read_text()
    section = text.split("## Regressions", 1)[1].split("\n## ", 1)[0]
    assert f"{len(grid.comparison.regressions)} regression(s)" in section
    for r in grid.comparison.regressions:
        assert r.point in section and r.baseline in section and r.metric in section
    steady = next(r for r in grid.comparison.regressions if r.point == "zero[b]")
    assert (steady.proposed, steady.baseline_value) == (1.0, 0.0)


def test_sockets_by_role_are_medians_per_policy(grid: Grid) -> None:
    got = {
        (r["point"], r["policy"]): r
        for r in read_rows(grid.comparison.tables["sockets-by-role"].parquet)
    }
    for point in ("big-producer[brokers=1000]", "seed-consumer[rtt_ms=50]"):
        for policy in {r["policy"] for r in grid.rows if r["point"] == point}:
            mine = [r for r in grid.rows if r["point"] == point and r["policy"] == policy]
            row = got[(point, policy)]
            assert row["repeats"] == len(mine)
            for role in schema.ROLES:
                for what in ("opened", "steady"):
                    column = f"{what}_{role}"
                    assert row[column] == statistics.median(r[column] for r in mine)


def test_life_per_client_hour_is_the_median_per_policy(grid: Grid) -> None:
    got = {(r["point"], r["policy"]): r for r in read_rows(grid.comparison.tables["life"].parquet)}
    assert got
    for (point, policy), row in got.items():
        mine = [r for r in grid.rows if r["point"] == point and r["policy"] == policy]
        assert row["repeats"] == len(mine)
        for column in schema.LIFE_COLUMNS:
            values = [r[column] for r in mine if r[column] is not None]
            want = statistics.median(values) if values else None
            assert close(row[column], want), (point, policy, column)
    headline = read_rows(grid.comparison.tables["headline"].parquet)
    assert any(r["socket_s_per_h_ratio"] is not None for r in headline)


def test_latency_and_throughput_tables(grid: Grid) -> None:
    expected = by_hand(grid.rows)
    latency = read_rows(grid.comparison.tables["latency"].parquet)
    assert {(r["metric"], r["rtt_ms"]) for r in latency} >= {
        ("ttfa_ms", 0.0),
        ("ttfa_ms", 50.0),
        ("ttfc_ms", 0.0),
        ("ttfc_ms", 50.0),
    }
    for r in latency:
        want = expected[(r["kind"], r["point"], r["baseline"])]
        assert close(r["ratio"], want[f"{r['metric']}_ratio"])
        assert close(r["proposed_ms"], want[f"{r['metric']}_proposed"])
        assert close(r["baseline_ms"], want[f"{r['metric']}_baseline"])
    # The Java client's times are there, as measured, with no ratio (timed apart from ours).
    java = [r for r in latency if r["baseline"] == "java-4.4.0"]
    assert java and all(r["ratio"] is None and r["baseline_ms"] is not None for r in java)
    assert all(r["ratio"] is not None for r in latency if r["baseline"] == "aiokafka")
    (ab,) = read_rows(grid.comparison.tables["throughput"].parquet)
    want = expected[("real", "throughput-ab[records=1000]", "aiokafka")]
    assert close(ab["throughput_rps_ratio"], want["throughput_rps_ratio"])
    assert close(ab["throughput_rps_ratio_min"], want["throughput_rps_ratio_min"])


def test_sweep_savings_by_broker_count(grid: Grid) -> None:
    expected = by_hand(grid.rows)
    got = read_rows(grid.comparison.tables["sweep-savings"].parquet)
    assert {r["brokers"] for r in got} == {10, 100, 1000}
    for r in got:
        mine = [
            s
            for (k, point, b), s in expected.items()
            if k == "sweep" and b == r["baseline"] and f"brokers={r['brokers']}," in point
        ]
        assert r["points"] == len(mine) == 2
        assert close(r["peak_saving"], 1 - statistics.median(s["peak_ratio"] for s in mine))
        assert r["regressed_points"] == 0


def test_headline_per_kind_and_baseline(grid: Grid) -> None:
    expected = by_hand(grid.rows)
    got = {
        (r["kind"], r["baseline"]): r for r in read_rows(grid.comparison.tables["headline"].parquet)
    }
    assert set(got) == {(k, b) for k, _, b in expected}
    for (kind, baseline), r in got.items():
        mine = [s for (k, _, b), s in expected.items() if (k, b) == (kind, baseline)]
        assert r["points"] == len(mine)
        assert close(r["peak_ratio"], statistics.median(s["peak_ratio"] for s in mine))
        assert close(r["peak_ratio_worst"], max(s["peak_ratio"] for s in mine))


def test_run_metadata_counts_per_kind(grid: Grid) -> None:
    counts: dict[str, int] = defaultdict(int)
    for r in grid.rows:
        counts[r["kind"]] += 1
    assert dict(grid.comparison.rows) == counts
    runs = {r["kind"]: r for r in read_rows(grid.comparison.tables["runs"].parquet)}
    assert runs["sim"]["points"] == len({r["point"] for r in grid.rows if r["kind"] == "sim"})
    assert runs["real"]["policies"] == "aiokafka, java-4.4.0, proposed"


# --------------------------------------------------------------------------- micro


def test_micro_benchmarks_become_tables(grid: Grid) -> None:
    decisions = {r["policy"]: r for r in read_rows(grid.comparison.tables["decision-cost"].parquet)}
    assert set(decisions) == {"proposed", "java-today"}
    assert close(decisions["proposed"]["mean_us"], 2.0)
    assert close(decisions["java-today"]["median_us"], 3e-6 * 0.95 * 1e6)
    (sim,) = read_rows(grid.comparison.tables["simulator-speed"].parquet)
    assert sim["policy"] == "proposed" and sim["events"] == 5000
    assert close(sim["events_per_s"], 5000 / 0.01)


def test_micro_json_parsed(
    tmp_path: Path, micro_writer: Callable[..., Path], micro_entry: Callable[..., dict[str, Any]]
) -> None:
    micro_writer(
        tmp_path,
        "a",
        [
            micro_entry("test_decision_cost[java-described]", "decision", 4e-6, decisions=4),
            micro_entry("test_other", "misc", 1e-3, params={"policy": "proposed", "n": 3}),
        ],
    )
    (f,) = load_micro(tmp_path)
    first, second = f.benchmarks
    assert first.policy == "java-described"  # from the name: params is null
    assert first.extra_info["decisions"] == 4 and first.rounds == 20
    assert math.isclose(first.mean_s, 4e-6)
    assert second.policy == "proposed" and second.group == "misc"
    assert "Test CPU" in f.machine and f.commit == "0123abcd"
    assert load_micro(tmp_path / "nowhere") == ()


# --------------------------------------------------------------------------- tolerance


def _timing_rows(
    make_row: RowFactory, baseline: str = "aiokafka", repeats: int = 3
) -> list[dict[str, Any]]:
    """Real rows with constant ratios against ``baseline``, ``repeats`` pairs a point: ttfa
    1.2, 1.3, 0.5 and 1.5 (by 2 ms); throughput 0.8, 0.7, 1.5."""
    rows = []
    cases = {
        "t12": {"ttfa_ms": (120.0, 100.0)},
        "t13": {"ttfa_ms": (130.0, 100.0)},
        "t05": {"ttfc_ms": (50.0, 100.0)},
        # Half as slow again, but only 2 ms: loopback noise, not a regression.
        "tiny": {"ttfa_ms": (6.0, 4.0)},
        "r08": {"throughput_rps": (800.0, 1000.0), "ttfa_ms": (10.0, 10.0)},
        "r07": {"throughput_rps": (700.0, 1000.0), "ttfa_ms": (10.0, 10.0)},
        "r15": {"throughput_rps": (1500.0, 1000.0), "ttfa_ms": (10.0, 10.0)},
    }
    for point, metrics in cases.items():
        for repeat in range(repeats):
            for side, policy in enumerate(("proposed", baseline)):
                values = {m: v[side] for m, v in metrics.items()}
                rows.append(
                    make_row(kind="real", point=point, policy=policy, repeat=repeat, **values)
                )
    return rows


@pytest.mark.parametrize("baseline", ["java-2.1.0", "librdkafka"])
def test_a_client_timed_apart_is_never_a_timing_ratio_or_regression(
    spark: Any,
    make_row: RowFactory,
    results_writer: Callable[..., Path],
    tmp_path: Path,
    baseline: str,
) -> None:
    """The same times against the Java client or librdkafka: shown, never divided (the
    Java client's clock starts before a cold JVM builds its client; librdkafka is another
    runtime, its clock started before its constructor)."""
    results_writer(tmp_path, "real", _timing_rows(make_row, baseline))
    got = run_comparison(spark, tmp_path, tmp_path / "out", tolerance=0.25)
    assert got.regressions == ()
    rows = read_rows(got.tables["comparison"].parquet)
    assert rows and all(r["ttfa_ms_ratio"] is None for r in rows)
    assert {r["ttfa_ms_baseline"] for r in rows} >= {100.0, 4.0}


def test_timing_tolerance_works_both_sides(
    spark: Any, make_row: RowFactory, results_writer: Callable[..., Path], tmp_path: Path
) -> None:
    rows = _timing_rows(make_row)
    path = results_writer(tmp_path, "real", rows)
    got = run_comparison(spark, tmp_path, tmp_path / "out", tolerance=0.25)
    flagged = {("t13", "ttfa_ms"), ("r07", "throughput_rps")}
    assert {(r.point, r.metric) for r in got.regressions} == flagged
    assert flagged == {(p, m) for _, p, _, m in flagged_by_hand(by_hand(rows), 0.25)}
    # A tighter tolerance flags the 1.2 and the 0.8 too; faster or quicker never regresses.
    df = load_results(spark, [path])
    try:
        summary = [r.asDict() for r in pair_summary(df, 0.1).collect()]
    finally:
        df.unpersist()
    tighter = {(r.point, r.metric) for r in regressions_of(summary, 0.1)}
    assert tighter == flagged | {("t12", "ttfa_ms"), ("r08", "throughput_rps")}
    assert tighter == {(p, m) for _, p, _, m in flagged_by_hand(by_hand(rows), 0.1)}


def test_a_time_over_fewer_than_three_pairs_is_shown_not_judged(
    spark: Any, make_row: RowFactory, results_writer: Callable[..., Path], tmp_path: Path
) -> None:
    # The same slow times as above, measured twice: shown with their ratios, no regression;
    # a socket count is judged whatever the repeats.
    rows = _timing_rows(make_row, repeats=2)
    rows += [
        make_row(kind="real", point="s", policy=p, repeat=0, opened=k, peak=k, steady=1)
        for p, k in (("proposed", 3), ("aiokafka", 2))
    ]
    path = results_writer(tmp_path, "real", rows)
    got = run_comparison(spark, tmp_path, tmp_path / "out", tolerance=0.25)
    assert {(r.point, r.metric) for r in got.regressions} == {("s", "opened"), ("s", "peak")}
    assert {(p, m) for _, p, _, m in flagged_by_hand(by_hand(rows), 0.25)} == {
        ("s", "opened"),
        ("s", "peak"),
    }
    df = load_results(spark, [path])
    try:
        summary = {r["point"]: r.asDict() for r in pair_summary(df, 0.25).collect()}
    finally:
        df.unpersist()
    assert summary["t13"]["repeats"] == 2
    assert summary["t13"]["ttfa_ms_ratio"] == pytest.approx(1.3)
    assert summary["r07"]["throughput_rps_ratio"] == pytest.approx(0.7)
    assert not summary["t13"]["worse_ttfa_ms"] and not summary["r07"]["worse_throughput_rps"]


def test_a_clean_run_says_none(
    spark: Any, make_row: RowFactory, results_writer: Callable[..., Path], tmp_path: Path
) -> None:
    rows = [
        make_row(policy=p, peak=k, opened=k, steady=1)
        for p, k in (("proposed", 2), ("java-today", 3))
    ]
    results_writer(tmp_path, "sim", rows)
    got = run_comparison(
        spark, tmp_path, tmp_path / "out", regenerate="`connmgr bench --report RUN`"
    )
    assert got.ok and got.regressions == ()
    text = got.index.read_text()
    assert text.split("## Regressions", 1)[1].lstrip().startswith("None.")
    assert "`connmgr bench --report RUN`" in text
    assert "sweep-points" not in got.tables and "sweep-savings" not in got.plots


# --------------------------------------------------------------------------- the report


def parse_markdown_table(text: str) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    split = [
        [
            c.strip().replace("\\|", "|").replace("\\\\", "\\")
            for c in re.split(r"(?<!\\)\|", line)[1:-1]
        ]
        for line in lines
    ]
    return split[0], split[2:]


def cell_matches(cell: str, value: Any) -> bool:
    if value is None:
        return cell == MISSING
    if isinstance(value, bool):
        return cell == str(value).lower()
    if isinstance(value, int):
        return cell == str(value)
    if isinstance(value, float):
        x = float(cell.replace(",", ""))
        return x == value if math.isinf(value) else math.isclose(x, value, rel_tol=1e-3)
    return cell == value


def test_markdown_tables_match_parquet_tables(grid: Grid) -> None:
    checked = 0
    for name, files in grid.comparison.tables.items():
        if files.markdown is None:
            assert name == "sweep-points" and files.parquet.exists()
            continue
        table = pq.read_table(files.parquet)
        header, cells = parse_markdown_table(files.markdown.read_text())
        assert header == table.schema.names, name
        rows = table.to_pylist()
        assert len(cells) == len(rows), name
        for md_row, row in zip(cells, rows, strict=True):
            for col, cell in zip(header, md_row, strict=True):
                assert cell_matches(cell, row[col]), (name, col, cell, row[col])
        checked += len(rows)
    assert checked > 50


def test_index_reads_top_to_bottom(grid: Grid) -> None:
    text = grid.comparison.index.read_text()
    order = [
        "## What ran",
        "## Headline",
        "## Regressions",
        "## Tables",
        "## Plots",
        "## Sweep timing",
        "## How to regenerate",
    ]
    positions = [text.index(h) for h in order]
    assert positions == sorted(positions)
    assert "The sweep took 3.5 s on 2 cores." in text
    assert "`0123abcd`" in text and "Test CPU" in text
    for files in grid.comparison.tables.values():
        shown = files.markdown or files.parquet
        assert shown.relative_to(grid.out).as_posix() in text
    assert set(grid.comparison.plots) == {
        "sockets-vs-brokers",
        "sockets-by-role",
        "latency",
        "throughput",
        "sweep-savings",
    }
    for path in grid.comparison.plots.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({path.relative_to(grid.out).as_posix()})" in text
    assert "run_comparison(spark_session()" in text


# --------------------------------------------------------------------------- broken input


def _pair(make_row: RowFactory, **values: Any) -> list[dict[str, Any]]:
    return [make_row(policy="proposed", **values), make_row(policy="java-today", **values)]


def _raw_write(
    path: Path, rows: Sequence[Mapping[str, Any]], fields: Sequence[Any] | None = None
) -> Path:
    """Write rows without the schema's checks (all columns nullable), to break them."""
    base = schema.arrow_schema()
    arrow = pa.schema(fields or [pa.field(f.name, f.type) for f in base])
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([dict(r) for r in rows], schema=arrow), path)
    return path


def _expect(spark: Any, run_dir: Path, *needles: str) -> str:
    with pytest.raises(ResultsError) as info:
        run_comparison(spark, run_dir, run_dir / "out")
    message = str(info.value)
    for needle in needles:
        assert needle in message, message
    assert not (run_dir / "out" / "index.md").exists()
    return message


def test_no_results_directory(spark: Any, tmp_path: Path) -> None:
    _expect(spark, tmp_path, str(tmp_path / "results"), "no results directory")


def test_no_parquet_files(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "notes.txt").write_text("nothing")
    _expect(spark, tmp_path, str(tmp_path / "results"), "empty grid")


def test_files_without_rows(
    spark: Any, tmp_path: Path, results_writer: Callable[..., Path]
) -> None:
    path = results_writer(tmp_path, "sim", [])
    _expect(spark, tmp_path, str(path), "no rows")


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_parquet(
    spark: Any,
    tmp_path: Path,
    make_row: RowFactory,
    results_writer: Callable[..., Path],
    damage: str,
) -> None:
    results_writer(tmp_path, "good", _pair(make_row))
    bad = results_writer(tmp_path, "bad", _pair(make_row, point="other"))
    data = bad.read_bytes()
    bad.write_bytes(b"not parquet at all" if damage == "garbage" else data[: len(data) // 2])
    message = _expect(spark, tmp_path, str(bad), "not a readable Parquet file")
    assert "good.parquet" not in message


def test_corrupt_data_pages(
    spark: Any, tmp_path: Path, make_row: RowFactory, results_writer: Callable[..., Path]
) -> None:
    """The footer reads, the data does not: Spark's failure becomes a ResultsError."""
    rows = [
        make_row(policy=p, point=f"p{i}", repeat=r)
        for p in ("proposed", "java-today")
        for i in range(20)
        for r in range(50)
    ]
    path = results_writer(tmp_path, "sim", rows)
    data = bytearray(path.read_bytes())
    for i in range(8, 400, 3):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    _expect(spark, tmp_path, str(path), "Spark could not read the results")


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ("missing", "missing columns ['peak']"),
        ("extra", "unexpected columns ['colour']"),
        ("retyped", "column brokers is int32"),
    ],
)
def test_schema_mismatch(
    spark: Any, tmp_path: Path, make_row: RowFactory, change: str, needle: str
) -> None:
    rows = _pair(make_row)
    fields = [pa.field(f.name, f.type) for f in schema.arrow_schema()]
    if change == "missing":
        fields = [f for f in fields if f.name != "peak"]
        rows = [{k: v for k, v in r.items() if k != "peak"} for r in rows]
    elif change == "extra":
        fields.append(pa.field("colour", pa.string()))
        rows = [{**r, "colour": "red"} for r in rows]
    else:
        fields = [pa.field(f.name, pa.int32()) if f.name == "brokers" else f for f in fields]
    path = _raw_write(tmp_path / "results" / "sim.parquet", rows, fields)
    _expect(spark, tmp_path, str(path), needle)


def _write_version(path: Path, rows: Sequence[Mapping[str, Any]], version: int) -> Path:
    """Rows as a file of schema ``version`` (v1: without the life columns)."""
    names = [c.name for c in schema.COLUMNS if c.since <= version]
    base = schema.arrow_schema()
    arrow = pa.schema(
        [base.field(n) for n in names], metadata={"connmgr.schema_version": str(version)}
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist([{n: r[n] for n in names} for r in rows], schema=arrow)
    pq.write_table(table, path)
    return path


def test_a_v1_file_is_read_with_its_life_columns_null(
    spark: Any, tmp_path: Path, make_row: RowFactory
) -> None:
    rows = [{**r, "schema_version": 1} for r in _pair(make_row, peak=3, opened=3)]
    _write_version(tmp_path / "results" / "sim.parquet", rows, 1)
    assert schema.read_parquet(tmp_path / "results" / "sim.parquet")[0]["socket_s_per_h"] is None
    done = run_comparison(spark, tmp_path, tmp_path / "out")
    (row,) = read_rows(done.tables["comparison"].parquet)
    assert row["peak_ratio"] == 1.0 and row["socket_s_per_h_ratio"] is None
    assert all(r["horizon_s"] is None for r in read_rows(done.tables["life"].parquet))


def test_a_file_of_an_unknown_schema_version_is_refused(
    spark: Any, tmp_path: Path, make_row: RowFactory
) -> None:
    path = _write_version(tmp_path / "results" / "sim.parquet", _pair(make_row), 2)
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({"connmgr.schema_version": "99"}), path)
    _expect(spark, tmp_path, str(path), "results schema v99")


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"opened": -1, "opened_data": -1}, "opened < 0"),
        ({"brokers": 0}, "brokers <= 0"),
        ({"kind": "real", "ttfa_ms": 0.0}, "ttfa_ms <= 0"),
        ({"peak": None}, "peak null"),
        ({"kind": "simulated"}, "kind not one of sim, real, sweep"),
        ({"schema_version": 9}, "schema_version other than 1 to 2"),
        ({"rtt_ms": math.nan}, "rtt_ms NaN"),
    ],
)
def test_impossible_values(
    spark: Any, tmp_path: Path, make_row: RowFactory, values: dict[str, Any], needle: str
) -> None:
    rows = _pair(make_row)
    rows[1].update(values)
    path = _raw_write(tmp_path / "results" / "sim.parquet", rows)
    _expect(spark, tmp_path, str(path), needle)


def test_proposed_without_a_baseline(
    spark: Any, tmp_path: Path, make_row: RowFactory, results_writer: Callable[..., Path]
) -> None:
    results_writer(tmp_path, "a", _pair(make_row, point="p1"))
    lonely = results_writer(tmp_path, "b", [make_row(point="p2"), make_row(point="p1", repeat=1)])
    message = _expect(spark, tmp_path, str(lonely), "no baseline to pair with", "'p2'")
    assert "a.parquet" not in message


def test_baseline_without_proposed(
    spark: Any, tmp_path: Path, make_row: RowFactory, results_writer: Callable[..., Path]
) -> None:
    results_writer(tmp_path, "a", _pair(make_row, point="p1"))
    orphan = results_writer(tmp_path, "b", [make_row(point="p2", policy="java-today")])
    message = _expect(spark, tmp_path, str(orphan), "no proposed row", "'p2'")
    assert "a.parquet" not in message


def test_duplicate_rows(
    spark: Any, tmp_path: Path, make_row: RowFactory, results_writer: Callable[..., Path]
) -> None:
    first = results_writer(tmp_path, "a", _pair(make_row))
    second = results_writer(tmp_path, "b", [make_row(policy="java-today")])
    _expect(spark, tmp_path, str(first), str(second), "2 rows of policy java-today")


def test_a_point_with_two_parameter_sets(
    spark: Any, tmp_path: Path, make_row: RowFactory, results_writer: Callable[..., Path]
) -> None:
    path = results_writer(
        tmp_path,
        "a",
        [make_row(policy="proposed", brokers=3), make_row(policy="java-today", brokers=4)],
    )
    _expect(spark, tmp_path, str(path), "disagree on the point's parameters")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "not a readable JSON file"),
        ('{"benchmarks": {}}', "not pytest-benchmark JSON"),
        ('{"benchmarks": [{"name": "x", "group": "decision"}]}', "benchmark 'x': no 'stats'"),
        ("MEAN0", "stats.mean=0 is not positive"),
        ("NOEVENTS", "needs extra_info.events"),
    ],
)
def test_broken_micro_json(
    spark: Any,
    tmp_path: Path,
    make_row: RowFactory,
    results_writer: Callable[..., Path],
    micro_entry: Callable[..., dict[str, Any]],
    micro_writer: Callable[..., Path],
    text: str,
    needle: str,
) -> None:
    results_writer(tmp_path, "sim", _pair(make_row))
    if text == "MEAN0":
        path = micro_writer(tmp_path, "m", [micro_entry("test_decision_cost[p]", "decision", 0)])
    elif text == "NOEVENTS":
        path = micro_writer(tmp_path, "m", [micro_entry("test_sim[p]", "simulator", 0.1)])
    else:
        path = tmp_path / "micro" / "m.json"
        path.parent.mkdir()
        path.write_text(text)
    _expect(spark, tmp_path, str(path), needle)


def test_tolerance_must_be_a_fraction(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tolerance"):
        run_comparison(spark, tmp_path, tmp_path / "out", tolerance=1.5)


# --------------------------------------------------------------------------- docs


def test_docs_describe_every_column() -> None:
    text = DOCS.read_text()
    for column in schema.COLUMNS:
        assert f"`{column.name}`" in text, column.name
    assert block(text, "columns") == columns_markdown(), (
        "run: python -m connmgr_evidence.bench.docs docs/results-schema.md"
    )


def test_docs_name_every_table_and_plot(grid: Grid) -> None:
    text = DOCS.read_text()
    for name in (*grid.comparison.tables, *grid.comparison.plots):
        assert f"`{name}" in text, name
    for name in ("index.md", "extra_info", "ResultsError", "extra_sections"):
        assert name in text
