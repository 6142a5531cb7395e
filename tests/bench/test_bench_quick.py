"""`connmgr bench --quick` end to end: every stage runs, the report exists, and its tables
match the raw results they were computed from.

This is the main job at its smallest shipped size (a few minutes on 2 cores): simulated
grid, real clients (stock aiokafka, proposed, the real Java client 2.1.0 and 4.4.0,
librdkafka) on the embedded cluster, A/B throughput, TLS and SASL on a real KRaft cluster,
pytest-benchmark suites, the linger stage, the property stage (the quick grid searches the
three quickest mutants; tests/properties/test_mutants_caught.py searches every one with the
same code), the Spark sweep, the fleet view and the comparison. It shares the session's
SparkSession.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from typing import Any

import pyarrow.parquet as pq
import pytest
from connmgr.bench.grid import DEFAULT_GRID, Grid, load_grid
from connmgr.bench.job import BenchOutcome, run_bench
from connmgr.bench.schema import read_parquet

# The TLS stage starts a real KRaft cluster; the Spark stages mark it `spark` (conftest.py).
pytestmark = [pytest.mark.embedded, pytest.mark.java, pytest.mark.real_kafka]


@pytest.fixture(scope="module")
def quick_grid() -> Grid:
    """The shipped ``--quick`` grid, as ``connmgr bench --quick`` runs it."""
    return load_grid(DEFAULT_GRID, quick=True)


@pytest.fixture(scope="module")
def quick(spark: Any, quick_grid: Grid, tmp_path_factory: pytest.TempPathFactory) -> BenchOutcome:
    out = tmp_path_factory.mktemp("reports")
    return run_bench(quick_grid, out, show=False, say=lambda _: None)


def raw(outcome: BenchOutcome, name: str) -> list[dict[str, Any]]:
    return read_parquet(outcome.run_dir / "raw" / "results" / f"{name}.parquet")


def table(outcome: BenchOutcome, name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(
        outcome.run_dir / "tables" / f"{name}.parquet"
    ).to_pylist()
    return rows


def test_every_stage_wrote_its_results_and_the_report_exists(
    quick: BenchOutcome, quick_grid: Grid
) -> None:
    index = quick.report.read_text()
    for heading in ("Regressions", "Sweep", "Plots"):
        assert heading in index
    pngs = ("sockets-vs-brokers", "sockets-by-role", "latency", "throughput", "sweep-savings")
    for png in (*pngs, "linger", "fleet"):
        path = quick.run_dir / "plots" / f"{png}.png"
        assert path.stat().st_size > 1_000, path
        assert f"plots/{png}.png" in index
    assert (quick.run_dir / "raw" / "micro" / "micro.json").stat().st_size > 0
    sims = raw(quick, "sim")
    grid = quick_grid
    assert len(sims) == len(grid.sim_points) * len(grid.policies) * grid.get("sim", "repeats")
    assert {r["policy"] for r in raw(quick, "real")} == set(grid.clients)
    assert [p for p, _, _ in quick.sweep] == list(grid.get("sweep", "sizes"))
    linger = grid.values["linger"]
    settings = len(linger["values_ms"]) + len(linger["baselines"])
    assert len(table(quick, "linger")) == len(linger["scenarios"]) * settings
    assert "linger" in quick.stage_seconds
    assert "fleet" in quick.stage_seconds
    assert [r["policy"] for r in table(quick, "fleet")] == [
        "proposed",
        "java-today",
        "aiokafka-today",
    ]
    assert len(table(quick, "fleet-restarts")) == 3 * grid.get("fleet", "restarts")
    # TLS: every protocol at every RTT, a cost per protocol, the drop-in's first-ack ratio
    # against stock aiokafka at each RTT (and no ratio for anyone else), and a price for
    # every simulated policy.
    tls = grid.values["tls"]
    shaken = {(r["protocol"], r["rtt_ms"]) for r in table(quick, "tls-handshakes")}
    protocols = ("PLAINTEXT", "SSL", "SASL_SSL")
    assert shaken == {(p, float(rtt)) for p in protocols for rtt in tls["rtt_ms"]}
    assert {r["protocol"] for r in table(quick, "tls-cost")} == set(protocols)
    acks = table(quick, "tls-first-ack")
    assert {r["client"] for r in acks if r["ratio"] is not None} == {"proposed"}
    assert {r["rtt_ms"] for r in acks if r["client"] == "proposed"} == {
        float(rtt) for rtt in tls["rtt_ms"]
    }
    priced = {(r["kind"], r["policy"]) for r in table(quick, "handshake-price")}
    assert {("sim", p) for p in grid.policies} <= priced
    assert "tls" in quick.stage_seconds


def test_sockets_table_matches_the_raw_simulated_rows(
    quick: BenchOutcome, quick_grid: Grid
) -> None:
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in raw(quick, "sim"):
        by[(row["point"], row["policy"])].append(row)
    checked = 0
    for row in table(quick, "sockets"):
        if row["kind"] != "sim":
            continue
        mine = by[(row["point"], "proposed")]
        theirs = by[(row["point"], row["baseline"])]
        for metric in ("opened", "peak", "steady"):
            assert row[f"{metric}_proposed"] == statistics.median(r[metric] for r in mine)
            assert row[f"{metric}_baseline"] == statistics.median(r[metric] for r in theirs)
        checked += 1
    assert checked == len({p for p, _ in by}) * (len(quick_grid.policies) - 1)


def test_real_runs_carry_timings_and_the_latency_table_matches(quick: BenchOutcome) -> None:
    real = [r for r in raw(quick, "real") if r["scenario"] != "throughput-ab"]
    for row in real:
        timing = row["ttfa_ms"] if row["client"] == "producer" else row["ttfc_ms"]
        assert timing is not None and 0 < timing <= row["wall_s"] * 1000.0
    latency = table(quick, "latency")
    assert latency, "no latency rows"
    for row in latency:
        assert row["rtt_ms"] in {0.0, 20.0}
        metric = row["metric"]
        at = [r for r in real if r["point"] == row["point"]]
        mine = [r[metric] for r in at if r["policy"] == "proposed"]
        base = [r[metric] for r in at if r["policy"] == row["baseline"]]
        assert row["proposed_ms"] == pytest.approx(statistics.median(mine))
        assert row["baseline_ms"] == pytest.approx(statistics.median(base))


def test_throughput_turns_interleave_and_the_table_matches(
    quick: BenchOutcome, quick_grid: Grid
) -> None:
    turns = raw(quick, "throughput")
    records = quick_grid.get("throughput", "records")
    assert {r["policy"] for r in turns} == {"proposed", "aiokafka"}
    assert all(r["throughput_rps"] > 0 and r["records"] == records for r in turns)
    rows = table(quick, "throughput")
    assert rows
    for row in rows:
        mine = [
            r["throughput_rps"]
            for r in turns
            if r["point"] == row["point"] and r["policy"] == "proposed"
        ]
        base = [
            r["throughput_rps"]
            for r in turns
            if r["point"] == row["point"] and r["policy"] == row["baseline"]
        ]
        assert row["throughput_rps_proposed"] == pytest.approx(statistics.median(mine))
        assert row["throughput_rps_baseline"] == pytest.approx(statistics.median(base))


def test_regressions_in_the_outcome_are_the_ones_in_the_report(quick: BenchOutcome) -> None:
    listed = table(quick, "regressions")
    assert len(listed) == len(quick.regressions)
    index = quick.report.read_text()
    if not quick.regressions:
        assert "None." in index


def test_report_only_rebuilds_the_same_tables_from_raw(quick: BenchOutcome) -> None:
    from connmgr.bench.job import regenerate_report

    before = {p.name: p.read_text() for p in (quick.run_dir / "tables").glob("*.md")}
    (quick.run_dir / "tables" / "sockets.md").unlink()
    comparison, problems = regenerate_report(quick.run_dir)
    after = {p.name: p.read_text() for p in (quick.run_dir / "tables").glob("*.md")}
    assert after == before
    assert len(comparison.regressions) == len(quick.regressions)
    assert problems == quick.problems
    assert "Sweep: how the run time scales with the grid" in comparison.index.read_text()


def test_the_property_stage_ran_every_machine_and_caught_every_mutant(
    quick: BenchOutcome, quick_grid: Grid
) -> None:
    settings = quick_grid.values["properties"]
    found = json.loads((quick.run_dir / "raw" / "properties.json").read_text())
    runs = table(quick, "property-runs")
    assert [r["baseline"] for r in runs] == settings["baselines"]
    for row, run in zip(runs, found["agreement"], strict=True):
        # Every example runs at least one step, and none more than the limit.
        assert row["examples"] == run["examples"] >= 1
        assert row["examples"] <= row["steps"] == run["steps"]
        assert row["steps"] <= row["examples"] * settings["steps"]
        # A failure here is a story the random search found: the message is its shrunk form.
        assert row["failures"] == 0 and row["result"] == "passed", run
    mutants = table(quick, "mutants")
    assert [m["mutant"] for m in mutants] == settings["mutants"]
    for m in mutants:
        assert m["invariant"] is not None, m
        assert any(e.startswith(m["invariant"]) for e in m["expected"].split(" or ")), m
        assert 0 <= m["steps"] <= 12, m  # determinism can fail before any step
    assert quick.problems == []
    assert "Property suite: problems" in quick.report.read_text()


def test_the_quick_report_regenerates_every_rfc_figure(
    quick: BenchOutcome, quick_grid: Grid
) -> None:
    # What the README's main command gives is enough to refresh the whole RFC.
    from connmgr.bench import rfc

    text = rfc.RFC.read_text()
    filled = rfc.render(text, quick.run_dir)
    assert rfc.cited_report(filled) == quick.run_id
    assert rfc.differences(filled, quick.run_dir) == []
    mutants = len(quick_grid.get("properties", "mutants"))
    assert f"<!--v:mutants.count-->{mutants}<!--/v-->" in filled


def test_the_life_stage_measured_every_client_and_the_headline_shows_them(
    quick: BenchOutcome, quick_grid: Grid
) -> None:
    life = quick_grid.values["life"]
    rows = table(quick, "real-life")
    assert {(r["scenario"], r["client"]) for r in rows} == {
        (s, c) for s in life["scenarios"] for c in life["clients"]
    }
    assert all(r["socket_s_per_h"] > 0 and r["handshakes_per_h"] > 0 for r in rows)
    headline = [r for r in table(quick, "headline") if r["kind"] == "real-life"]
    assert {r["baseline"] for r in headline} == set(life["clients"]) - {"proposed"}
    assert all(r["socket_s_per_h_ratio"] is not None for r in headline)
    assert "real-life" in quick.report.read_text()
    assert "life" in quick.stage_seconds
