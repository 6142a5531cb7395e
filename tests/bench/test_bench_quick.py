"""`connmgr bench --quick` end to end: every stage runs, the report exists, and its tables
match the raw results they were computed from.

This is the main job at its smallest shipped size (a few minutes on 2 cores): simulated
grid, real clients (stock aiokafka, proposed, the real Java client 2.1.0, 4.4.0 and 4.3.1,
the project's patched 4.3.1, librdkafka) on the embedded cluster, A/B throughput, TLS and
SASL on a real KRaft cluster, pytest-benchmark suites, the linger stage, the property stage
(every mutant, each search ending at its first story a reader can follow;
tests/properties/test_mutants_caught.py searches every one with the same code), the Spark
sweep, the fleet view and the
comparison. It shares the session's SparkSession.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from connmgr.testing.evidence import MAX_STEPS
from connmgr_evidence.bench.grid import DEFAULT_GRID, Grid, load_grid
from connmgr_evidence.bench.job import BenchOutcome, run_bench
from connmgr_evidence.bench.report.plots import colour
from connmgr_evidence.bench.report.table import MISSING
from connmgr_evidence.bench.results.schema import read_parquet
from plotcheck import (
    check_png,
    crowded_bars,
    figures_drawn,
    flattened,
    labelled,
    legends_over_data,
    overlapping_texts,
    repeated_labels,
    visible_axes,
)

# The TLS stage starts a real KRaft cluster; the Spark stages mark it `spark` (conftest.py).
pytestmark = [pytest.mark.embedded, pytest.mark.java, pytest.mark.real_kafka]


@pytest.fixture(scope="module")
def quick_grid() -> Grid:
    """The shipped ``--quick`` grid, as ``connmgr bench --quick`` runs it."""
    return load_grid(DEFAULT_GRID, quick=True)


@pytest.fixture(scope="module")
def drawn() -> dict[str, Any]:
    """The figures the run's plots were saved from, by plot name (filled by ``quick``)."""
    return {}


@pytest.fixture(scope="module")
def quick(
    spark: Any, quick_grid: Grid, drawn: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> BenchOutcome:
    out = tmp_path_factory.mktemp("reports")
    with figures_drawn() as figures:
        outcome = run_bench(quick_grid, out, show=False, say=lambda _: None)
    drawn.update(figures)
    return outcome


def raw(outcome: BenchOutcome, name: str) -> list[dict[str, Any]]:
    return read_parquet(outcome.run_dir / "raw" / "results" / f"{name}.parquet")


def table(outcome: BenchOutcome, name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(
        outcome.run_dir / "tables" / f"{name}.parquet"
    ).to_pylist()
    return rows


def section(index: str, title: str, level: int = 2) -> str:
    """The body of ``index.md``'s section ``## title`` (``level`` hashes), up to the next
    heading of that level or above."""
    hashes = "#" * level
    ends = rf"^#{{1,{level}}} "
    match = re.search(rf"^{hashes} {re.escape(title)}\n(.*?)(?={ends}|\Z)", index, re.S | re.M)
    assert match is not None, f"index.md has no section {title!r}"
    return match.group(1)


def markdown_rows(text: str) -> tuple[list[str], list[list[str]]]:
    """The first Markdown table in ``text``: its header and its rows' cells."""
    lines = re.findall(r"^\|.*\|$", text, re.M)
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]
    return cells[0], cells[2:]


def shows(cell: str, value: Any) -> bool:
    """Whether a Markdown cell shows ``value`` (floats to their four significant digits)."""
    if value is None:
        return cell == MISSING
    if isinstance(value, bool):
        return cell == str(value).lower()
    if isinstance(value, int):
        return cell == str(value)
    if isinstance(value, float):
        x = float(cell.replace(",", ""))
        return x == value if math.isinf(value) else math.isclose(x, value, rel_tol=1e-3)
    return cell == str(value)


def check_embedded(index: str, title: str, rows: list[dict[str, Any]], level: int = 2) -> None:
    """The table in section ``title`` of ``index.md`` holds ``rows``, value by value."""
    header, cells = markdown_rows(section(index, title, level))
    assert len(cells) == len(rows), title
    for shown, row in zip(cells, rows, strict=True):
        assert header == list(row), title
        for name, cell in zip(header, shown, strict=True):
            assert shows(cell, row[name]), (title, name, cell, row[name])


def check_plots(run_dir: Path, index: str, drawn: dict[str, Any], want: dict[str, Any]) -> None:
    """Each plot in ``want`` (name -> the colours it must show) is linked from ``index.md``
    and its PNG is the figure drawn, with those colours."""
    assert set(drawn) == set(want)
    for name, colours in want.items():
        assert f"](plots/{name}.png)" in section(index, "Plots"), name
        check_png(run_dir / "plots" / f"{name}.png", drawn[name], colours)


def test_every_stage_wrote_its_results_and_the_report_shows_them(
    quick: BenchOutcome, quick_grid: Grid, drawn: dict[str, Any]
) -> None:
    index = quick.report.read_text()
    check_embedded(index, "Headline", table(quick, "headline"))
    life = "Real clients over a scaled life: socket-seconds and handshakes per client-hour"
    check_embedded(index, life, table(quick, "real-life"), level=3)
    sweep = {r["baseline"] for r in table(quick, "sweep-savings")}
    assert sweep == {"java-today", "aiokafka-today"}
    roles = ("tab:gray", "tab:blue")  # bootstrap and data: every panel opens both
    mine = [colour("proposed")]
    want = {
        "sockets-vs-brokers": mine,
        "sockets-by-role": roles,
        "latency": mine,
        "throughput": [colour("proposed"), colour("aiokafka")],
        "sweep-savings": [colour(b) for b in sorted(sweep)],
        "linger": mine,
        "fleet": mine,
    }
    check_plots(quick.run_dir, index, drawn, want)
    # Every micro-benchmark is one row of the three micro tables.
    files = sorted((quick.run_dir / "raw" / "micro").glob("*.json"))
    assert [f.name for f in files] == ["micro.json"]
    benchmarks = json.loads(files[0].read_text())["benchmarks"]
    shown = ("decision-cost", "simulator-speed", "micro-other")
    assert len(benchmarks) == sum(len(table(quick, t)) for t in shown)
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
        "java-patched",
        "proposed-4.4",
    ]
    assert len(table(quick, "fleet-restarts")) == 5 * grid.get("fleet", "restarts")
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
        mine = [r[metric] for r in at if r["policy"] == row["subject"]]
        base = [r[metric] for r in at if r["policy"] == row["baseline"]]
        assert row["proposed_ms"] == pytest.approx(statistics.median(mine))
        assert row["baseline_ms"] == pytest.approx(statistics.median(base))
    # The patched kafka-clients against its release, at every real point and timing: the
    # one repeat's ratio (the quick grid runs each client once).
    pair = [r for r in latency if r["subject"] == "java-4.3.1-patched"]
    assert {(r["point"], r["baseline"]) for r in pair} == {(r["point"], "java-4.3.1") for r in real}
    for row in pair:
        at = {r["policy"]: r[row["metric"]] for r in real if r["point"] == row["point"]}
        ratio = at["java-4.3.1-patched"] / at["java-4.3.1"]
        assert row["ratio"] == row["ratio_min"] == row["ratio_max"] == pytest.approx(ratio)


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
    shown = section(quick.report.read_text(), "Regressions")
    if listed:
        assert shown.startswith(f"\n**{len(listed)} regression(s).**")
        check_embedded(quick.report.read_text(), "Regressions", listed)
    else:
        # The section is "None." then the rules and the table's links.
        assert shown.strip().split("\n", 1)[0] == "None."


def test_report_only_rebuilds_the_same_tables_from_raw(quick: BenchOutcome) -> None:
    from connmgr_evidence.bench.job import regenerate_report

    before = {p.name: p.read_text() for p in (quick.run_dir / "tables").glob("*.md")}
    scaling = "Sweep: how the run time scales with the grid"
    _, timed = markdown_rows(section(quick.report.read_text(), scaling))
    (quick.run_dir / "tables" / "sockets.md").unlink()
    comparison, problems = regenerate_report(quick.run_dir)
    after = {p.name: p.read_text() for p in (quick.run_dir / "tables").glob("*.md")}
    assert after == before
    assert len(comparison.regressions) == len(quick.regressions)
    assert problems == quick.problems
    # The sweep's timing section is carried over: a row per size, the sizes the sweep ran.
    _, rebuilt = markdown_rows(section(comparison.index.read_text(), scaling))
    assert rebuilt == timed
    assert [row[:2] for row in rebuilt] == [[f"{p:,}", f"{n:,}"] for p, _, n in quick.sweep]


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
        # Each search ends at its first failing story this short (determinism can fail
        # before any step).
        assert 0 <= m["steps"] <= MAX_STEPS, m
    assert quick.problems == []
    listed = section(quick.report.read_text(), "Property suite: problems").strip()
    assert (
        listed
        == "none: every machine passed and every mutant was caught by the invariant it breaks"
    )


def test_the_quick_report_regenerates_every_rfc_figure(
    quick: BenchOutcome, quick_grid: Grid
) -> None:
    # What the README's main command gives is enough to refresh the whole RFC.
    from connmgr_evidence.bench import rfc

    filled = rfc.render(rfc.RFC.read_text(), quick.run_dir)
    assert rfc.cited_report(filled) == quick.run_id
    # The appendices carry the figures and numbers the RFC links instead of showing.
    filled += "".join(
        rfc.render(path.read_text(), quick.run_dir, path) for path in rfc.appendices()
    )
    assert set(re.findall(r"<!-- fig:([\w.-]+) -->", filled)) == set(rfc.FIGURES)
    # The numbers are the run's (tests/test_rfc_render.py checks each lookup on known ones).
    values = dict(re.findall(r"<!--v:([\w.-]+)-->(.*?)<!--/v-->", filled))
    assert set(values) == set(rfc.VALUES)
    runs = table(quick, "property-runs")
    assert values["mutants.count"] == str(len(quick_grid.get("properties", "mutants")))
    assert values["regressions.count"] == str(len(quick.regressions))
    assert values["deep.examples"] == str(sum(r["examples"] for r in runs))
    assert values["fleet.clients"] == str(quick_grid.get("fleet", "clients"))
    assert values["report.run_id"] == quick.run_id


def check_series(drawn: dict[str, Any], tables: dict[str, list[dict[str, Any]]]) -> None:
    """The line plots draw their tables' points: sockets against brokers (each panel's
    policies, a peak per broker count), the sweep's savings per baseline (in %), and the
    linger trade-off (the proposal's curve by linger value, each baseline a horizontal line,
    for socket-seconds and for handshakes)."""
    by_brokers = tables["sockets-by-brokers"]
    for ax in visible_axes(drawn["sockets-vs-brokers"]):
        match = re.fullmatch(r"(.+) \(([\w-]+)\)", ax.get_title())
        assert match is not None, ax.get_title()
        scenario, kind = match.groups()
        mine = [r for r in by_brokers if (r["kind"], r["scenario"]) == (kind, scenario)]
        lines = labelled(ax)
        assert sorted(lines) == sorted({r["policy"] for r in mine}), ax.get_title()
        for policy, drawn_line in lines.items():
            points = sorted((r["brokers"], r["peak"]) for r in mine if r["policy"] == policy)
            assert drawn_line == ([b for b, _ in points], [p for _, p in points]), policy
    savings = tables["sweep-savings"]
    (ax,) = visible_axes(drawn["sweep-savings"])
    lines = labelled(ax)
    assert sorted(lines) == sorted({f"vs {r['baseline']}" for r in savings})
    for label, (xs, ys) in lines.items():
        points = sorted(
            (r["brokers"], r["peak_saving"]) for r in savings if label[3:] == r["baseline"]
        )
        assert xs == [b for b, _ in points], label
        percent = [math.nan if s is None or math.isinf(s) else 100.0 * s for _, s in points]
        assert ys == pytest.approx(percent, nan_ok=True), label
    linger = tables["linger"]
    scenarios = list(dict.fromkeys(r["scenario"] for r in linger))
    axes = visible_axes(drawn["linger"])
    # A pair of panels per scenario: socket-seconds (titled) above handshakes.
    tops = [ax for ax in axes if ax.get_title()]
    bottoms = [ax for ax in axes if not ax.get_title()]
    assert len(tops) == len(bottoms) == min(len(scenarios), 9)
    for top, bottom, scenario in zip(tops, bottoms, scenarios, strict=False):
        mine = [r for r in linger if r["scenario"] == scenario]
        curve = sorted(
            (r for r in mine if r["linger_ms"] is not None), key=lambda r: r["linger_ms"]
        )
        for ax, metric in ((top, "socket_s_per_h"), (bottom, "handshakes_per_h")):
            assert ax.get_xscale() == "symlog"
            lines = labelled(ax)
            assert lines.pop("proposed") == (
                [float(r["linger_ms"]) for r in curve],
                [r[metric] for r in curve],
            )
            assert lines == {
                r["setting"]: ([0.0, 1.0], [r[metric], r[metric]])
                for r in mine
                if r["linger_ms"] is None
            }


def test_the_plots_draw_the_tables_points(quick: BenchOutcome, drawn: dict[str, Any]) -> None:
    names = ("sockets-by-brokers", "sweep-savings", "linger")
    check_series(drawn, {name: table(quick, name) for name in names})


def check_legible(drawn: dict[str, Any]) -> None:
    """Every plot but the fleet's: no text over another, legends beside the data, no
    repeated label; the socket plots flatten no panel and give their bars headroom."""
    for name, fig in drawn.items():
        if name == "fleet":
            continue
        assert overlapping_texts(fig) == [], name
        assert legends_over_data(fig) == [], name
        assert repeated_labels(fig) == [], name
    for name in ("sockets-vs-brokers", "sockets-by-role", "throughput"):
        for ax in visible_axes(drawn[name]):
            assert flattened(ax) == [], (name, ax.get_title())
            assert crowded_bars(ax) == [], (name, ax.get_title())


def test_the_plots_are_legible(drawn: dict[str, Any], quick: BenchOutcome) -> None:
    check_legible(drawn)


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


def test_the_quick_run_exits_0_and_a_regression_injected_into_its_results_exits_1(
    quick: BenchOutcome, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # The stated costs' acceptance: `connmgr bench --quick` exits 0 on this code (what it
    # flags, rebalance's one dial more than java-today, is a stated cost), and 1 once the
    # proposal opens one more there than the stated excess allows (a copy of its results,
    # compared again as `--report-only` does).
    import shutil

    from connmgr_evidence.bench.job import regenerate_report
    from connmgr_evidence.bench.results.schema import write_parquet
    from connmgr_evidence.cli import bench_status as _bench_status

    assert _bench_status(quick.regressions, quick.problems) == 0
    assert ("rebalance[]", "java-today", "opened") in {
        (r.point, r.baseline, r.metric) for r in quick.stated
    }
    run = tmp_path_factory.mktemp("injected") / quick.run_id
    shutil.copytree(quick.run_dir / "raw", run / "raw")
    sims = raw(quick, "sim")
    for row in sims:
        if (row["point"], row["policy"]) == ("rebalance[]", "proposed"):
            row["opened"] += 1
    write_parquet(sims, run / "raw" / "results" / "sim.parquet")
    comparison, problems = regenerate_report(run)
    flagged = {(r.point, r.baseline, r.metric) for r in comparison.regressions}
    assert ("rebalance[]", "java-today", "opened") in flagged
    assert _bench_status(comparison.regressions, problems) == 1
