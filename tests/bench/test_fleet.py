"""The fleet view: thousands of clients' sockets added up per broker, in Spark.

A small fleet (50 clients over 20 brokers, five of them restarted) runs in Spark (the
session's shared SparkSession) and here; the two must agree exactly, each broker's sockets
at an instant must be the sum of what the clients' own ledgers count there, the buckets must
be what a brute-force count over the sockets gives, and the restarts must show: nothing at
a broker while it is down, handshakes there once it is back.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from connmgr.errors import ConfigError
from connmgr.ledger import ConnectionLedger, ConnEvent
from connmgr.sim.run import build_simulator
from connmgr_evidence.bench.fleetplan import (
    RESTART_INTERVAL_MS,
    FleetSettings,
    restart_schedule,
    restart_window,
)
from connmgr_evidence.bench.grid import DEFAULT_GRID, GridError, load_grid
from connmgr_evidence.bench.report.plots import colour
from connmgr_evidence.bench.results.rows import new_meta
from connmgr_evidence.bench.results.schema import ResultsError
from connmgr_evidence.bench.stages import fleet as fl
from connmgr_evidence.bench.stages.fleet import draw_client
from connmgr_evidence.bench.stages.fleetreport import (
    fleet_buckets,
    fleet_over_time,
    fleet_tables,
    read_fleet,
    write_fleet,
)
from connmgr_evidence.bench.stages.fleetview import (
    FleetView,
    broker_series,
    fleet_local,
    gather,
    open_at,
    run_fleet,
)
from plotcheck import check_png, figures_drawn, labelled, visible_axes

SMALL = FleetSettings(clients=50, brokers=20, restarts=5, down_ms=30_000, bucket_ms=10_000, seed=3)


@pytest.fixture(scope="module")
def local() -> FleetView:
    return fleet_local(SMALL)


@pytest.fixture(scope="module")
def in_spark(spark: Any) -> tuple[FleetView, list[tuple[int, int]]]:
    calls: list[tuple[int, int]] = []
    view = run_fleet(spark, SMALL, slices=3, progress=lambda d, t: calls.append((d, t)))
    return view, calls


# --------------------------------------------------------------------------- the fleet


def test_clients_depend_on_the_seed_and_their_index_alone() -> None:
    bigger = dataclasses.replace(SMALL, clients=5000)
    assert [draw_client(i, SMALL) for i in range(50)] == [draw_client(i, bigger) for i in range(50)]
    assert draw_client(7, SMALL) != draw_client(7, dataclasses.replace(SMALL, seed=4))
    clients = [draw_client(i, bigger) for i in range(5000)]
    kinds = Counter(c.kind for c in clients)
    assert 0.35 < kinds["producer"] / 5000 < 0.45 and 0.15 < kinds["short-lived"] / 5000 < 0.25
    for c in clients:
        assert 1 <= len(set(c.leaders)) <= fl.MAX_LEADERS and set(c.leaders) <= set(range(1, 21))
        assert len(c.leaders) == c.partitions and 1 <= c.bootstrap_size <= 3
        if c.kind == "short-lived":
            assert c.records >= 1 and c.start_ms < fl.SHORT_LIVED_BY_MS
        else:
            assert c.records == 0 and c.start_ms < fl.START_SPREAD_MS
    late = [c.start_ms for c in clients if c.kind == "short-lived"]
    assert max(late) > fl.SHORT_LIVED_BY_MS - 60_000, "short-lived clients all the hour long"
    # Loads differ: some broker leads for many more clients than another.
    led = Counter(b for c in clients for b in set(c.leaders))
    assert max(led.values()) > min(led.values())


def test_the_restarts_are_one_schedule_one_broker_at_a_time() -> None:
    schedule = restart_schedule(SMALL)
    assert schedule == restart_schedule(dataclasses.replace(SMALL, clients=1))
    assert len({r.broker for r in schedule}) == 5
    for r, after in itertools.pairwise(schedule):
        assert r.down_at_ms < r.up_at_ms < r.elected_at_ms < after.down_at_ms
    assert restart_window(SMALL) == (600_000, schedule[-1].elected_at_ms + 120_000)


def test_a_client_starting_mid_restart_finds_the_broker_down() -> None:
    r = restart_schedule(SMALL)[1]
    client = dataclasses.replace(draw_client(0, SMALL), start_ms=r.down_at_ms + 1_000.0)
    spec, early = fl.client_spec(client, SMALL)
    assert [at for at, _ in early] == [600_000, 630_000, 660_000, r.down_at_ms]
    sim = build_simulator(spec, "proposed", {}, client.seed)
    for _, change in early:
        change(sim)
    assert not sim.cluster.brokers[r.broker].up
    assert spec.changes[0][0] == pytest.approx(r.up_at_ms - client.start_ms)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"restarts": 26, "brokers": 100}, "at most 25 fit"),
        ({"down_ms": 100_000}, "one broker down at a time"),
        ({"bucket_ms": 7_000}, "dividing the hour"),
        ({"brokers": 1}, "brokers >= 2"),
    ],
)
def test_settings_that_cannot_run_are_refused(change: dict[str, int], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(SMALL, **change)


# --------------------------------------------------------------------------- the view


def test_spark_computes_what_this_process_computes(
    local: FleetView, in_spark: tuple[FleetView, list[tuple[int, int]]]
) -> None:
    view, calls = in_spark
    assert view.series == local.series
    assert view.per_second == local.per_second
    assert len(view.series) == len(fl.FLEET_POLICIES) * SMALL.brokers
    assert calls and calls[-1][0] == calls[-1][1] > 0
    assert view.cpu_s > 0


def test_a_broker_holds_the_sum_of_the_clients_own_counts() -> None:
    """At a few instants (before, during and after restarts), each broker's open sockets
    from the fleet's intervals are the sum over the clients of what each client's own
    ledger counts open at that broker then."""
    instants = [30_500.5, 615_000.5, 1_234_567.5, 3_000_000.5]
    expected: dict[tuple[str, int, float], int] = Counter()
    for i in range(SMALL.clients):
        client = draw_client(i, SMALL)
        for policy in fl.FLEET_POLICIES:
            ledger = fl.run_client(client, policy, SMALL).ledger
            for t in instants:
                if t < client.start_ms:
                    continue
                at = t - client.start_ms
                # The ledger as it stood then, counting where each socket went (as the
                # simulator's own ledger does; until() would count by key).
                then = ConnectionLedger(counts_reached=True)
                for e in ledger.entries:
                    if e.t_ms <= at:
                        then.record(e)
                for broker, n in then.counts(at).by_broker.items():
                    if broker != "None":  # a refused dial's 0.1 ms: no socket at a broker
                        expected[(policy, int(broker), t)] += n["open_at_end"]
    got = gather(fl.fleet_sockets(range(SMALL.clients), SMALL))
    checked = 0
    for (policy, broker), (intervals, _, _) in got.items():
        for t in instants:
            assert open_at(intervals, t) == expected.get((policy, broker, t), 0)
            checked += expected.get((policy, broker, t), 0)
    assert checked > 100
    assert {(p, b) for (p, b, _), n in expected.items() if n} <= set(got)


def test_the_buckets_are_what_counting_every_socket_gives(local: FleetView) -> None:
    got = gather(fl.fleet_sockets(range(SMALL.clients), SMALL))
    width = SMALL.bucket_ms
    for key in sorted(got)[::7]:
        intervals, handshakes, refused = got[key]
        series = broker_series(key, got[key], SMALL)
        assert series in local.series
        for k in range(0, SMALL.buckets, 11):
            lo, hi = k * width, (k + 1) * width
            covered = sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in intervals)
            assert series.sockets_avg[k] == pytest.approx(covered / width, abs=1e-9)
            instants = [lo] + [s for s, _ in intervals if lo <= s < hi]
            assert series.sockets_max[k] == max(open_at(intervals, t) for t in instants)
            assert series.handshakes[k] == sum(1 for t in handshakes if lo <= t < hi)
        assert series.refused == len(refused)
    for policy in local.policies:
        total = sum(sum(s.handshakes) for s in local.series if s.policy == policy)
        assert total == sum(local.per_second[policy]) > 0


def test_a_restarted_broker_is_empty_while_down_and_dialled_once_back(local: FleetView) -> None:
    width = SMALL.bucket_ms
    for r in restart_schedule(SMALL):
        down = range(r.down_at_ms // width + 1, r.up_at_ms // width)
        # Clients learn their leader is back at their next request (2-minute cadence).
        back = range(r.up_at_ms // width, (r.elected_at_ms + RESTART_INTERVAL_MS) // width)
        for policy in local.policies:
            (series,) = (s for s in local.series if (s.policy, s.broker) == (policy, r.broker))
            assert series.sockets_max[r.down_at_ms // width - 1] > 0
            assert all(series.sockets_max[k] == 0 for k in down)
            assert sum(series.handshakes[k] for k in back) > 0, (policy, r)


# --------------------------------------------------------------------------- the report


def test_the_raw_files_read_back_into_the_view(local: FleetView, tmp_path: Path) -> None:
    write_fleet(local, new_meta("test"), tmp_path)
    assert read_fleet(tmp_path) == local
    assert read_fleet(tmp_path / "none") is None
    (tmp_path / "fleet.parquet").write_text("not parquet")
    with pytest.raises(ResultsError, match=r"fleet\.parquet: not the fleet stage's buckets"):
        read_fleet(tmp_path)
    (tmp_path / "fleet.json").write_text('{"settings": {}}')
    with pytest.raises(ResultsError, match=r"fleet\.json: missing"):
        read_fleet(tmp_path)


def test_the_tables_summarise_the_view(local: FleetView) -> None:
    fleet, restarts = fleet_tables(local)
    rows = {r["policy"]: r for r in fleet.records()}
    assert list(rows) == list(local.policies)
    start, end = restart_window(SMALL)
    for policy, row in rows.items():
        mine = [s for s in local.series if s.policy == policy]
        seconds = local.per_second[policy]
        assert row["handshakes"] == sum(seconds)
        assert row["peak_per_s_restart"] == max(seconds[start // 1000 : end // 1000])
        assert row["sockets_max"] == max(max(s.sockets_max) for s in mine)
        assert row["sockets_p50"] <= row["sockets_p99"] <= row["sockets_max"]
        total = sum(sum(s.sockets_avg) for s in mine) / SMALL.buckets
        assert row["fleet_sockets_mean"] == pytest.approx(total)
    assert len(restarts.rows) == len(fl.FLEET_POLICIES) * SMALL.restarts
    assert all(r["handshakes_on_return"] > 0 for r in restarts.records())


def test_the_plot_draws_sockets_and_handshakes(local: FleetView, tmp_path: Path) -> None:
    buckets = fleet_buckets(local)
    assert len(buckets) == len(fl.FLEET_POLICIES) * SMALL.buckets
    with figures_drawn() as drawn:
        path = fleet_over_time(
            buckets, local.per_second, restart_schedule(SMALL), tmp_path / "fleet.png"
        )
    assert path is not None
    fig = drawn["fleet"]
    top, bottom = visible_axes(fig)
    policies = list(local.policies)
    assert list(labelled(top)) == policies
    # Below: one series per group of policies whose handshakes are equal second by second,
    # labelled "a = b", so that no series hides another; every policy in exactly one group.
    groups = [label.split(" (mean")[0].split(" = ") for label in labelled(bottom)]
    assert sorted(p for g in groups for p in g) == sorted(policies)
    for group in groups:
        assert all(local.per_second[p] == local.per_second[group[0]] for p in group)
    firsts = [g[0] for g in groups]
    assert all(local.per_second[a] != local.per_second[b] for a in firsts for b in firsts if a < b)
    styles = [
        line.get_linestyle() for line in bottom.get_lines() if line.get_label() in labelled(bottom)
    ]
    assert len(set(styles)) == min(len(groups), 4)
    for policy in policies:
        # Above: each bucket's max over the brokers, at its minute; below: each minute's
        # busiest second (a minute without a handshake drawn at 0.5/s).
        mine = [b for b in buckets if b.policy == policy]
        assert labelled(top)[policy] == ([b.t_s / 60 for b in mine], [b.max for b in mine])
        seconds = local.per_second[policy]
        busiest = [max(max(seconds[m : m + 60]), 0.5) for m in range(0, len(seconds), 60)]
        label = next(k for k in labelled(bottom) if policy in k.split(" (mean")[0].split(" = "))
        xs, ys = labelled(bottom)[label]
        assert ys == busiest and len({round(x - m, 9) for m, x in enumerate(xs)}) == 1
        mean = sum(seconds) / len(seconds)
        assert label.endswith(f"(mean {mean:.2f}/s)")
    check_png(path, fig, [colour(p) for p in policies])
    assert fleet_over_time([], {}, (), tmp_path / "none.png") is None


def test_the_grid_checks_its_fleet_section(tmp_path: Path) -> None:
    grid, quick = load_grid(), load_grid(quick=True)
    assert grid.get("fleet", "clients") == 10_000 and grid.get("fleet", "brokers") == 1_000
    assert quick.get("fleet", "clients") < grid.get("fleet", "clients")
    text = DEFAULT_GRID.read_text()
    bad = text.replace("restarts = 10\n", "restarts = 40\n")
    assert bad != text
    path = tmp_path / "grid.toml"
    path.write_text(bad)
    with pytest.raises(GridError, match=r"\[fleet\] restarts=40: at most 25"):
        load_grid(path)


def test_refused_dials_are_no_sockets() -> None:
    """A dial that reached nothing (its broker down) is counted as refused at the broker
    it was for, and is no socket there."""
    for i in range(SMALL.clients):
        client = draw_client(i, SMALL)
        for policy in fl.FLEET_POLICIES:
            ledger = fl.run_client(client, policy, SMALL).ledger
            refused = [e for e in ledger.entries if e.kind is ConnEvent.DIAL and e.reached is None]
            if not refused:
                continue
            sockets = fl.simulate_client(client, policy, SMALL)
            assert len(sockets.refused) == len(refused)
            opened = sum(1 for e in ledger.entries if e.kind is ConnEvent.DIAL)
            assert len(sockets.intervals) == opened - len(refused)
            return
    pytest.fail("no client dialled a broker while it was down")


def test_on_brokers_that_answer_the_check_a_client_that_needs_its_bootstrap_broker_adopts_it(
    local: FleetView,
) -> None:
    """``proposed-4.4``: every client whose bootstrap socket reached a broker it needs saves
    that broker's dial (one handshake each), and no broker holds more sockets for it."""
    fleet, _ = fleet_tables(local)
    rows = {r["policy"]: r for r in fleet.records()}
    plain, confirming = rows["proposed"], rows[fl.ON_KIP_1242]
    adopters = 0
    for index in range(SMALL.clients):
        client = fl.draw_client(index, SMALL)
        sim = fl.run_client(client, fl.ON_KIP_1242, SMALL)
        adopters += sim.ledger.count(ConnEvent.ADOPTED)
    assert adopters > 0
    assert plain["handshakes"] - confirming["handshakes"] == adopters
    assert confirming["sockets_max"] <= plain["sockets_max"]
