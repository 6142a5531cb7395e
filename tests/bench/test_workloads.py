"""The workload classes: today's clients and the proposal against provider limits.

The composition's arithmetic is checked on hand-made lives against brute-force counts; the
headroom against hand-worked figures; the client models new for the classes (``java-4.4``,
``java-b0``, ``java-linger``) against what they stand for; the committed report and the RFC's
summary block against each other; and the limits page against the declared limits.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from connmgr.core.metadata import TopicPartition
from connmgr.sim.run import build_simulator
from connmgr.sim.scenarios import get_scenario
from connmgr_evidence.bench.stages.fleet import ClientSockets
from connmgr_evidence.bench.workloads import rfcblock
from connmgr_evidence.bench.workloads.__main__ import main
from connmgr_evidence.bench.workloads.classes import CLASSES, range_of, workload_class
from connmgr_evidence.bench.workloads.compose import (
    MODEL_NAMED,
    BrokerLoad,
    measure,
    replica_starts,
    simulate,
)
from connmgr_evidence.bench.workloads.limits import LIMITS, MSK, Scope
from connmgr_evidence.bench.workloads.report import (
    JSON_FILE,
    KIP_ALONE,
    headroom,
    kip_gains,
    kip_rows,
    over_today,
    read_cells,
    render_index,
)
from connmgr_evidence.bench.workloads.run import Cell, run_cell

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "reports" / "workloads"


def life(
    intervals: list[tuple[int, float, float]], refused: list[tuple[int, float]] = ()
) -> ClientSockets:  # type: ignore[assignment]
    shakes = tuple((b, s + 1.0) for b, s, _ in intervals)
    return ClientSockets(0, "x", tuple(intervals), shakes, tuple(refused))


def brute(lives: list[ClientSockets], shifts: np.ndarray, brokers: int) -> dict[str, float]:
    """The same figures, counted the slow way: every socket at every millisecond edge."""
    socks, tries = [], []
    for j, shift in enumerate(shifts):
        lv = lives[j % len(lives)]
        for b, s, e in lv.intervals:
            s, e = s + shift, min(e + shift, 3_600_000.0)
            if s < 3_600_000:
                socks.append((b, max(s, 0.0), e))
                tries.append((b, s + 0.0))
        tries += [(b, t + shift) for b, t in lv.refused if 0 <= t + shift < 3_600_000]
    peak = 0
    for b in range(1, brokers + 1):
        mine = [(s, e) for bb, s, e in socks if bb == b]
        for s, _ in mine:
            peak = max(peak, sum(1 for s2, e2 in mine if s2 <= s < e2))
    per = {}
    for b, t in tries:
        per[(b, int(t // 1000))] = per.get((b, int(t // 1000)), 0) + 1
    return {
        "peak_connections": peak,
        "peak_attempts": max(per.values(), default=0),
        "attempts": len(tries),
        "socket_seconds": sum(e - s for _, s, e in socks) / 1000.0,
    }


def test_the_composition_counts_what_a_brute_force_count_does() -> None:
    lives = [
        life([(1, 0.0, 5_000.0), (2, 10.0, 400.0)], refused=[(3, 20.0)]),
        life([(1, 0.0, 2_500_000.0)]),
        life([(2, 100.0, 100.0 + 3_000_000.0), (1, 50.0, 700.0)]),
    ]
    shifts = np.array([0.0, 900.0, 1_500.0, 3_599_500.0, 200.0, 10.0, 2_000_000.0])
    load = measure(lives, shifts, brokers=3)
    want = brute(lives, shifts, 3)
    assert load.peak_connections == want["peak_connections"]
    assert load.peak_attempts == want["peak_attempts"]
    assert load.attempts == want["attempts"]
    assert load.socket_seconds == pytest.approx(want["socket_seconds"])
    # Handshakes one ms after each dial: the one at 3,599,500 + 0 + 1 is inside the hour.
    assert load.handshakes == sum(
        1 for j, s in enumerate(shifts) for b, t in lives[j % 3].handshakes if t + s < 3_600_000
    )


def test_peaks_are_per_broker_and_a_close_goes_before_an_open() -> None:
    # Broker 1: back-to-back sockets, never two at once; broker 2: one socket.
    lives = [life([(1, 0.0, 1_000.0), (1, 1_000.0, 2_000.0), (2, 0.0, 10.0)])]
    load = measure(lives, np.array([0.0]), brokers=2)
    assert load.peak_connections == 1
    assert load.cluster_peak_connections == 2  # at 0: broker 1's first and broker 2's
    # Second 0: one dial at each broker (broker 1's second comes at 1,000 ms).
    assert load.peak_attempts == 1
    assert load.cluster_peak_attempts == 2
    two = [life([(2, 0.0, 10.0), (2, 5.0, 9.0)])]
    assert measure(two, np.array([0.0]), brokers=2).peak_connections == 2


def test_p99_is_over_the_hours_seconds_at_the_busiest_broker() -> None:
    # 100 attempts in one second at broker 1, one in each of 60 seconds at broker 2.
    burst = [(1, 10.0 + i, 20.0 + i) for i in range(100)]
    steady = [(2, 1_000.0 * k, 1_000.0 * k + 1) for k in range(60)]
    load = measure([life(burst + steady)], np.array([0.0]), brokers=2)
    assert load.peak_attempts == 100
    per_second_b1 = np.zeros(3600)
    per_second_b1[0] = 100
    assert load.p99_attempts == pytest.approx(max(np.percentile(per_second_b1, 99), 1.0))


def test_headroom_scales_the_fleet_to_the_first_cap_reached() -> None:
    load = BrokerLoad(
        peak_connections=1_500,
        peak_attempts=20,
        p99_attempts=5.0,
        handshakes=0,
        broker_handshakes=0,
        attempts=0,
        socket_seconds=0.0,
        cluster_peak_connections=4_000,
        cluster_peak_attempts=400,
    )
    cell = Cell("steady", 6, "java-today", 10_000, load, 0.0)
    room = headroom(cell, MSK)  # 3,000 / 1,500 = 2x by connections; 100 / 20 = 5x by attempts
    assert (room.fleet, room.binding) == (20_000, "connections")
    per_ecku = next(lim for lim in LIMITS if lim.name == "Confluent Standard")
    room = headroom(cell, per_ecku)  # 1,000 / 4,000 = 0.25x; 50 / 400 = 0.125x
    assert (room.fleet, room.binding) == (1_250, "attempts/s")
    none = dataclasses.replace(
        cell, load=dataclasses.replace(load, peak_connections=0, peak_attempts=0)
    )
    assert headroom(none, MSK).fleet == -1


def test_aligned_copies_stay_within_the_jitter_and_others_within_the_window() -> None:
    restart, steady = workload_class("restart"), workload_class("steady")
    assert restart.aligned and not steady.aligned
    drawn = [restart.draw(i, 6, 0) for i in range(3)]
    shifts = replica_starts(restart, drawn, 1_000, 0)
    assert shifts.size == 1_000 and abs(shifts).max() <= 500.0
    shifts = replica_starts(steady, drawn, 1_000, 0)
    assert shifts.min() >= 0 and shifts.max() < steady.window_ms and shifts.max() > 500.0
    assert np.array_equal(shifts, replica_starts(steady, drawn, 1_000, 0))


def test_every_class_draws_the_same_client_twice() -> None:
    for cls in CLASSES:
        a, b = cls.draw(3, 6, 7), cls.draw(3, 6, 7)
        assert a.start_ms == b.start_ms
        assert a.spec.cluster.topics == b.spec.cluster.topics
        assert [t for t, _ in a.spec.changes] == [t for t, _ in b.spec.changes]


def test_the_range_assignor_shares_every_partition_once() -> None:
    parts = [TopicPartition("t", i) for i in range(10)]
    for members in (1, 3, 4, 12):
        shares = [range_of(parts, members, m) for m in range(members)]
        assert sorted(tp for s in shares for tp in s) == parts
        assert max(map(len, shares)) - min(map(len, shares)) <= 1


def opened_by_role(policy: str, scenario: str, **params: str) -> tuple[int, int]:
    spec = get_scenario(scenario).spec({"brokers": "6", **params})
    sim = build_simulator(spec, policy, {}, 0)
    result = sim.run()
    return result.by_role["bootstrap"]["opened"], result.opened


@pytest.mark.parametrize(("scenario", "total"), [("short-lived", 5), ("big-consumer", 6)])
def test_java_44_opens_two_bootstrap_connections_per_start(scenario: str, total: int) -> None:
    # As measured with kafka-clients 4.4.0 on the real tier: 5 per producer, 6 per consumer.
    assert opened_by_role("java-4.4", scenario) == (2, total)
    assert opened_by_role("java-today", scenario) == (1, total - 1)


def test_java_44_dials_no_second_bootstrap_server_it_was_not_given() -> None:
    assert opened_by_role("java-4.4", "short-lived", brokers="1")[0] == 1


def test_each_switch_of_the_patch_alone() -> None:
    """java-b0 closes the bootstrap connection and nothing else; java-linger closes unneeded
    connections and leaves the bootstrap one to idle expiry; java-patched does both."""
    spec = lambda: get_scenario("rebalance").spec({})  # noqa: E731
    closes = {}
    for policy in ("java-today", "java-b0", "java-linger", "java-patched"):
        sim = build_simulator(spec(), policy, {}, 0)
        sim.run()
        reasons = [e.reason for e in sim.ledger.entries if e.kind.name == "CLOSED"]
        closes[policy] = (reasons.count("bootstrap_done"), reasons.count("unneeded"))
    assert closes["java-today"] == (0, 0)
    assert closes["java-b0"][0] == 1 and closes["java-b0"][1] == 0
    assert closes["java-linger"][0] == 0 and closes["java-linger"][1] > 0
    # Both on: (b0) closes the bootstrap connection that rule 6 alone closes as unneeded.
    assert closes["java-patched"][0] == closes["java-b0"][0]
    assert sum(closes["java-patched"]) == closes["java-linger"][1]


def test_a_member_that_leaves_sends_nothing_after() -> None:
    cls = workload_class("autoscaling")
    drawn = cls.draw(0, 6, 0)
    leave_at = drawn.spec.changes[-1][0]
    sockets = simulate(drawn, MODEL_NAMED["java-today"])
    assert sockets.intervals and max(e for _, _, e in sockets.intervals) <= leave_at + 1.0
    assert all(t <= leave_at for _, t in sockets.handshakes)


def test_a_cell_runs_end_to_end() -> None:
    cell = run_cell("serverless", 3, "proposed", 4, 0)
    assert cell.fleet == 100_000
    assert cell.load.attempts > 0 and cell.load.handshakes <= cell.load.attempts


def test_the_committed_report_and_the_proposals_blocks_agree() -> None:
    cells, settings = read_cells(REPORT / JSON_FILE)
    assert (REPORT / "index.md").read_text() == render_index(cells, settings)
    for block in rfcblock.BLOCKS:
        assert rfcblock.current(block, ROOT / "proposal") == rfcblock.rendered(block, REPORT)


def test_a_kips_rows_name_where_it_pays_and_costs() -> None:
    cells, _ = read_cells(REPORT / JSON_FILE)
    by = {(c.workload, c.brokers, c.client): c.load for c in cells}
    text = kip_rows(cells, "java-linger", "java-today")
    costs = text.split("Costs (")[1]
    for cls in CLASSES:
        mine, base = by[(cls.name, 6, "java-linger")], by[(cls.name, 6, "java-today")]
        worse = mine.handshakes > base.handshakes or mine.peak_attempts > base.peak_attempts
        assert (f" {cls.name} (" in costs or f": {cls.name} (" in costs) == worse, cls.name


def test_the_rfcs_gain_lines_name_the_classes_of_each_kips_table() -> None:
    # The Summary's sentence per KIP and the KIP's own table agree on where it pays and costs.
    cells, _ = read_cells(REPORT / JSON_FILE)
    for _, client, base in KIP_ALONE:
        rows = kip_rows(cells, client, base)
        pays_rows = rows.split("Pays (a ratio at or below 0.95) in: ")[1].split(". Costs")[0]
        costs_rows = rows.split("per second) in: ")[1].rstrip(".\n")
        line = kip_gains(cells, client, base)
        pays_line, costs_line = line.split(": pays in ")[1].split(". Costs in ")
        named = re.findall(r"(?:^|; )([\w-]+) \(", pays_line)
        assert (", ".join(named) or "no class") == pays_rows, (client, named, pays_rows)
        assert costs_line.rstrip(".\n") == costs_rows, client


def test_the_rfc_opens_its_summary_with_the_workload_table() -> None:
    text = (ROOT / "proposal" / "rfc.md").read_text()
    summary = text[text.index("## Summary") :]
    assert summary.index(rfcblock.START) < summary.index("A Kafka client should hold")


def test_over_today_lists_each_excess_with_both_figures() -> None:
    cells, _ = read_cells(REPORT / JSON_FILE)
    lines = over_today(cells)
    by = {(c.workload, c.brokers, c.client): c.load for c in cells}
    fields = ("handshakes", "attempts", "peak_attempts")
    excess = {
        (w, b)
        for (w, b, client), load in by.items()
        if client == "proposed"
        and any(getattr(load, f) > getattr(by[(w, b, "java-today")], f) for f in fields)
    }
    named = {(ln.split(",")[0], int(ln.split(", ")[1].split()[0])) for ln in lines}
    assert named == excess
    for line in lines:
        w, b = line.split(",")[0], int(line.split(", ")[1].split()[0])
        mine, base = by[(w, b, "proposed")], by[(w, b, "java-today")]
        assert f"{mine.socket_seconds / base.socket_seconds:.2f}x" in line.split("for ")[-1]


def test_the_limits_page_states_the_declared_limits() -> None:
    page = (ROOT / "docs" / "operator-limits.md").read_text()
    for lim in LIMITS:
        row = next(line for line in page.splitlines() if line.startswith(f"| {lim.name} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == lim.scope.value
        assert int(cells[2].replace(",", "")) == lim.connections
        assert int(cells[3].replace(",", "")) == lim.attempts_per_s
    assert {lim.scope for lim in LIMITS} == set(Scope)
    assert re.search(r"\*\*100 KB\*\*", page)


def test_the_command_refuses_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for argv in (["--brokers", "1"], ["--classes", "nope"], ["--templates", "0"]):
        with pytest.raises(SystemExit) as exit_:
            main([*argv, "--out", str(tmp_path)])
        assert exit_.value.code == 2
    with pytest.raises(SystemExit):
        main(["--report-only", "--out", str(tmp_path)])
    assert "no workload report there" in capsys.readouterr().err


def test_the_command_writes_a_report(tmp_path: Path) -> None:
    argv = ["--out", str(tmp_path), "--classes", "serverless", "--brokers", "6"]
    argv += ["--clients", "java-today,proposed", "--templates", "2", "--processes", "1"]
    assert main(argv) == 0
    cells, settings = read_cells(tmp_path / JSON_FILE)
    assert [(c.workload, c.brokers, c.client) for c in cells] == [
        ("serverless", 6, "java-today"),
        ("serverless", 6, "proposed"),
    ]
    assert settings["templates"] == 2
    assert (
        "| serverless (100,000 starts an hour) | java-today |"
        in (tmp_path / "index.md").read_text()
    )
