"""The long run's pure parts: a client's connection lives read from its log, the records
check, the figures from time series, the brokers' JMX lines, the clients each variant runs,
and the report written from a hand-built result (no cluster, no JVM)."""

from __future__ import annotations

import csv
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from connmgr.core.identity import Role
from connmgr.errors import ConfigError
from connmgr_evidence.bench.longrun.drive import ClientOutcome, LongRunResult, PhaseEvent
from connmgr_evidence.bench.longrun.figures import counter_increase, figures, windows_of
from connmgr_evidence.bench.longrun.lives import ConnLife, connection_lives, open_at
from connmgr_evidence.bench.longrun.plan import (
    CLIENT_NAMES,
    VARIANTS,
    LongRunSettings,
    client_specs,
)
from connmgr_evidence.bench.longrun.records import check_records
from connmgr_evidence.bench.longrun.report import write_report
from connmgr_evidence.bench.longrun.sampling import SocketRow
from connmgr_evidence.bench.longrun.summary import (
    Window,
    client_figures,
    kernel_socket_seconds,
    kernel_vs_jmx,
    totals_by_time,
)
from connmgr_evidence.java.errors import JavaProbeError
from connmgr_evidence.java.jmx import BrokerReading, parse_reading

ORIGIN = datetime(2026, 11, 27, 5, 50, 0)
WHO = "[Consumer clientId=c, groupId=g]"
NC = "(org.apache.kafka.clients.NetworkClient:1)"


def at(seconds: float) -> str:
    t = ORIGIN + timedelta(seconds=seconds)
    return f"[{t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d}]"


def dial(t: float, node: str, port: int) -> str:
    return (
        f"{at(t)} DEBUG {WHO} Initiating connection to node 127.0.0.1:{port} (id: {node} "
        f"rack: null isFenced: false) using address /127.0.0.1 {NC}"
    )


def connected(t: float, node: str) -> str:
    return f"{at(t)} DEBUG {WHO} Completed connection to node {node}. Fetching API versions. {NC}"


def ready(t: float, node: str) -> str:
    return f"{at(t)} DEBUG {WHO} Initiating API versions fetch from node {node}. {NC}"


def gone(t: float, node: str) -> str:
    return f"{at(t)} INFO {WHO} Node {node} disconnected. {NC}"


# The shape of a real patched consumer's log (lines as kafka-clients 4.3.1 prints them): two
# bootstrap dials, the patch closing them once metadata replaced them, a data connection, a
# coordinator connection, and a dial of a stopped broker that completes its TCP connect at
# the broker's forwarder and is closed before any handshake.
LOG = [
    dial(1.0, "-1", 9001),
    connected(1.2, "-1"),
    ready(1.5, "-1"),
    dial(2.0, "-3", 9003),
    connected(2.1, "-3"),
    f"{at(3.0)} INFO {WHO} Closing connection to bootstrap node -3: metadata has replaced the "
    f"bootstrap cluster {NC}",
    dial(4.0, "1", 9001),
    connected(4.2, "1"),
    f"{at(4.3)} INFO {WHO} Closing connection to bootstrap node -1: metadata has replaced the "
    f"bootstrap cluster {NC}",
    dial(4.4, "2147483645", 9002),
    connected(4.5, "2147483645"),
    ready(5.0, "1"),
    ready(5.5, "2147483645"),
    f"{at(6.0)} DEBUG {WHO} Sending FETCH request with header ... to node 1 {NC}",
    gone(8.0, "1"),
    dial(9.0, "1", 9001),
    connected(9.1, "1"),
    gone(9.2, "1"),
    gone(9.3, "7"),  # no open connection to node 7: ignored
]


def test_connection_lives_reads_dials_connects_handshakes_and_closes() -> None:
    lives = connection_lives(LOG, ORIGIN, closed_at=ORIGIN + timedelta(seconds=20))
    assert [(c.node, c.role, c.broker) for c in lives] == [
        ("-1", Role.BOOTSTRAP, None),
        ("-3", Role.BOOTSTRAP, None),
        ("1", Role.DATA, 1),
        ("2147483645", Role.COORDINATION, 2),
        ("1", Role.DATA, 1),
    ]
    first, second, data, coordinator, refused = lives
    assert (first.dialled_s, first.connected_s, first.ready_s, first.ended_s) == (1, 1.2, 1.5, 4.3)
    assert first.reason == "bootstrap replaced"
    assert (second.ready_s, second.ended_s) == (None, 3.0)  # closed before its handshake
    assert (data.ready_s, data.ended_s, data.reason) == (5.0, 8.0, "disconnected")
    assert (coordinator.ready_s, coordinator.ended_s) == (5.5, 20.0)
    assert coordinator.reason == "client close"
    # A TCP connect to a stopped broker's forwarder, closed at once: no handshake.
    assert (refused.connected_s, refused.ready_s, refused.ended_s) == (9.1, None, 9.2)
    assert refused.port == 9001
    assert open_at(lives, 4.35) == 1  # -1 closed at 4.3, the coordinator dialled at 4.4
    assert open_at(lives, 4.45) == 2
    assert open_at(lives, 3.5, Role.BOOTSTRAP) == 1


def test_client_figures_count_by_role_window_and_instant() -> None:
    lives = connection_lives(LOG, ORIGIN, closed_at=ORIGIN + timedelta(seconds=20))
    figs = client_figures(
        "patched",
        "classic-1",
        lives,
        until_s=20.0,
        windows=[Window("early", 0.0, 4.0), Window("late", 8.5, 10.0)],
        bootstrap_at_s=4.1,  # -1 (bootstrap) and broker 1 open
        move_begin_s=8.5,
    )
    assert (figs.dials, figs.tcp, figs.handshakes, figs.peak) == (5, 5, 3, 2)
    assert figs.by_role["bootstrap"] == {
        "dials": 2,
        "tcp": 2,
        "handshakes": 1,
        "closes": 2,
        "socket_seconds": pytest.approx(3.3 + 1.0),
    }
    assert figs.by_role["coordination"]["closes"] == 0  # ended only at the client's close
    assert figs.socket_seconds == pytest.approx(3.3 + 1.0 + 4.0 + 15.6 + 0.2)
    assert figs.windows == {
        "early": {"dials": 2, "tcp": 2, "handshakes": 1},
        "late": {"dials": 1, "tcp": 1, "handshakes": 0},
    }
    assert figs.bootstrap_open == 1
    assert figs.unready == {"bootstrap: bootstrap replaced": 1, "data: disconnected": 1}
    assert figs.bootstrap_gone_s == 4.3
    assert figs.ports_dialled_after_move == {9001: 1}


def test_check_records_finds_lost_duplicated_and_unexpected() -> None:
    values = [b"record-0", b"record-2", b"record-2", b"record-3", b"record-9", b"junk"]
    check = check_records("t", values, sent=5, not_acked={3})
    assert (check.sent, check.acked, check.read) == (5, 4, 6)
    assert check.lost == (1, 4)
    assert check.duplicated == (2,)
    assert check.unexpected == 3  # record-3 was not acked, record-9 never sent, junk
    assert not check.exactly_once
    clean = check_records("t", [b"record-1", b"record-0"], sent=3, not_acked=[2])
    assert clean.exactly_once and clean.as_json()["lost"] == 0


def rows(*points: tuple[float, str, str, int, int]) -> list[SocketRow]:
    return [SocketRow(t, v, c, b, 9000 + b, n) for t, v, c, b, n in points]


def test_time_series_sum_integrate_and_compare_with_the_brokers() -> None:
    sampled = rows(
        (0.0, "stock", "p", 1, 2),
        (0.0, "stock", "c", 1, 1),
        (0.0, "patched", "p", 1, 1),
        (5.0, "stock", "p", 1, 1),
        (5.0, "patched", "p", 1, 1),
        (10.0, "stock", "p", 1, 0),
    )
    assert totals_by_time(sampled, variant="stock") == [(0.0, 3), (5.0, 1), (10.0, 0)]
    assert totals_by_time(sampled, broker=1) == [(0.0, 4), (5.0, 2), (10.0, 0)]
    assert kernel_socket_seconds([(0.0, 3), (5.0, 1), (10.0, 0)]) == 20.0
    readings = [
        BrokerReading(int((100.0 + t) * 1000), 1, True, {"SASL_SSL": {"connection-count": n}})
        for t, n in ((0.2, 4.0), (5.3, 3.0), (9.9, 0.0))
    ]
    compared = kernel_vs_jmx(sampled, readings, origin=100.0, within_s=0.5)
    assert compared == {1: {"pairs": 3, "equal": 2, "median_diff": 0.0, "max_diff": 1.0}}


def test_counter_increase_counts_a_reset_as_a_new_start() -> None:
    assert counter_increase([3.0, 5.0, None, 9.0, 2.0, 4.0]) == 2 + 4 + 2 + 2
    assert counter_increase([None, None]) == 0.0


def test_windows_follow_the_phases() -> None:
    events = [
        PhaseEvent(30.0, "restart-begin"),
        PhaseEvent(60.0, "restart-end"),
        PhaseEvent(70.0, "move-begin", 3),
        PhaseEvent(80.0, "move-end", 3),
    ]
    assert windows_of(events) == (
        Window("before-restart", 0.0, 30.0),
        Window("restart", 30.0, 70.0),
        Window("move", 70.0, 90.0),
    )
    assert windows_of(events[:1]) == ()


def test_parse_reading_reads_both_shapes_and_refuses_others() -> None:
    up = parse_reading(
        '{"t_ms":1700000000000,"broker":2,"up":true,"listeners":{"SASL_SSL":'
        '{"connection-count":3.0,"successful-authentication-total":7.0}}}'
    )
    assert up == BrokerReading(
        1_700_000_000_000,
        2,
        True,
        {"SASL_SSL": {"connection-count": 3.0, "successful-authentication-total": 7.0}},
    )
    assert up.value("SASL_SSL", "connection-count") == 3.0
    assert up.value("PLAINTEXT", "connection-count") is None
    down = parse_reading('{"t_ms":1,"broker":3,"up":false,"error":"java.rmi.ConnectException"}')
    assert down is not None and not down.up and down.error.startswith("java.rmi")
    assert parse_reading('{"phase":"closed"}') is None
    for bad in ("not json", '{"broker":1,"up":true}', '{"t_ms":1,"broker":1,"up":"yes"}'):
        with pytest.raises(JavaProbeError):
            parse_reading(bad)
    with pytest.raises(JavaProbeError):
        parse_reading('{"t_ms":1,"broker":1,"up":true,"listeners":{"X":{"connection-count":"a"}}}')


def test_each_variant_runs_seven_clients_of_its_own() -> None:
    settings = LongRunSettings(minutes=3)
    security = {"security.protocol": "SASL_SSL"}
    specs = {
        v.slug: client_specs(
            v,
            settings,
            security,
            {"producer": {}, "consumer": {"group.protocol": "classic"}, "admin": {"x": "1"}},
        )
        for v in VARIANTS
    }
    for slug, mine in specs.items():
        assert tuple(s.name for s in mine) == CLIENT_NAMES
        by = {s.name: s for s in mine}
        assert by["kip848-1"].extra["group.protocol"] == "consumer"
        assert by["classic-2"].extra["group.protocol"] == "classic"
        assert by["kip848-1"].group == by["kip848-2"].group == f"longrun-{slug}-kip848"
        assert by["txn"].transactional_id == f"longrun-{slug}-txn"
        assert by["txn"].topic != by["producer"].topic == f"longrun-{slug}"
        assert by["producer"].extra["enable.idempotence"] == "true"
        assert by["admin"].extra["x"] == "1"
        assert all(s.extra["security.protocol"] == "SASL_SSL" for s in mine)
    stock, patched = ({(s.topic, s.group, s.transactional_id) for s in specs[v]} for v in specs)
    assert not stock & patched  # nothing shared but the brokers
    # Every life ends start_s + minutes after the launch; the phases divide what is left.
    assert settings.end_s == pytest.approx(settings.start_s + 180.0)
    up = settings.start_s - 60.0
    schedule = settings.schedule(up)
    assert schedule.end_s == settings.end_s
    assert schedule.restart_s == pytest.approx(up + 240.0 * settings.restart_at)
    assert schedule.move_s == pytest.approx(up + 240.0 * settings.move_at)
    late = settings.schedule(settings.end_s + 5.0)  # up after the lives ended: at once
    assert late.restart_s == late.move_s == settings.end_s + 5.0
    for bad in ({"minutes": 0}, {"restart_at": 0.7}, {"move": 4}, {"sample_s": 0}, {"start_s": 0}):
        with pytest.raises(ConfigError):
            LongRunSettings(**bad)  # type: ignore[arg-type]


def test_the_report_is_written_from_a_result(tmp_path: Path) -> None:
    settings = LongRunSettings(minutes=1, sample_s=5)
    specs = client_specs(VARIANTS[1], settings, {}, {"producer": {}, "consumer": {}, "admin": {}})
    lives = connection_lives(LOG, ORIGIN, closed_at=ORIGIN + timedelta(seconds=20))
    clients = [ClientOutcome(specs[1], None, "boom", tuple(lives))]
    result = LongRunResult(
        settings=LongRunSettings(minutes=1, sample_s=5, variants=(VARIANTS[1],)),
        started_at=ORIGIN,
        finished_at=ORIGIN + timedelta(seconds=20),
        origin=ORIGIN.timestamp(),
        cluster_start_s=9.0,
        builds={},
        sasl_before={1: ("127.0.0.1", 9001)},
        sasl_after={1: ("127.0.0.1", 9001)},
        events=[PhaseEvent(2.0, "restart-begin"), PhaseEvent(4.0, "restart-end")],
        move=None,
        clients=clients,
        sockets=rows((0.0, "patched", "classic-1", 1, 1), (5.0, "patched", "classic-1", 1, 2)),
        brokers=[BrokerReading(int(ORIGIN.timestamp() * 1000), 1, False, {}, "down")],
        records=[check_records("longrun-patched", [b"record-0"], 1, ())],
        problems=["patched/classic-1: boom"],
    )
    index = write_report(result, tmp_path)
    page = index.read_text()
    assert "| TLS+SASL handshakes | 3 |" in page
    assert "| bootstrap sockets open just before the restart | 1 |" in page
    assert "| longrun-patched | 1 | 1 | 1 | 0 | 0 | 0 |" in page
    assert "| bootstrap: bootstrap replaced | 1 |" in page
    assert "## Problems" in page and "boom" in page
    with open(tmp_path / "sockets.csv") as f:
        assert [r["sockets"] for r in csv.DictReader(f)] == ["1", "2"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["variants"][0]["handshakes"] == 3
    assert summary["variants"][0]["failed_clients"] == 1
    for name in ("sockets-by-broker", "sockets-by-client", "handshakes"):
        assert (tmp_path / "plots" / f"{name}.png").stat().st_size > 1000
    assert figures(result).variants[0].peak == 2
    assert [c.dials for c in figures(result).clients] == [5]
    assert isinstance(lives[0], ConnLife)


def _stamp(origin: float, t: float) -> str:
    when = datetime.fromtimestamp(origin + t)
    return f"[{when:%Y-%m-%d %H:%M:%S},{when.microsecond // 1000:03d}]"


def _end_lives_in(tmp_path: Path, overtime_s: float, dial_new_after_s: float | None) -> float:
    """Run the driver's end of the lives over two variants' logs, the moved broker's new
    port 9999: the stock log dials it at once, the patched log after ``dial_new_after_s``
    (None: never). Returns the seconds it took to end the lives (create the end file)."""
    import threading
    import time

    from connmgr_evidence.bench.longrun import drive
    from connmgr_evidence.realkafka import BrokerMove

    settings = LongRunSettings(minutes=0.01, start_s=0.01, overtime_s=overtime_s)
    origin = time.time() - settings.end_s  # the nominal life is over
    logs = [tmp_path / "stock-producer.log", tmp_path / "patched-producer.log"]
    line = f"{_stamp(origin, settings.end_s)} DEBUG {WHO} Initiating connection to node "
    line += f"127.0.0.1:9999 (id: 3 rack: null) using address /127.0.0.1 {NC}\n"
    logs[0].write_text(line)
    logs[1].write_text("")
    move = BrokerMove(
        3,
        {"SASL_SSL": ("127.0.0.1", 9000)},
        {"SASL_SSL": ("127.0.0.1", 9999)},
        0.0,
        0.0,
        0.0,
        0.0,
        0,
    )
    events = [PhaseEvent(0.0, "move-begin", 3)]
    if dial_new_after_s is not None:
        late = threading.Timer(
            dial_new_after_s,
            lambda: logs[1].write_text(
                line.replace(_stamp(origin, settings.end_s), _stamp(origin, time.time() - origin))
            ),
        )
        late.start()
    began = time.monotonic()
    said: list[str] = []
    drive._end_lives(settings, origin, move, events, logs, said.append)
    took = time.monotonic() - began
    assert drive._end_file(tmp_path).exists()
    return took


def test_the_lives_end_once_every_variant_dialled_the_new_port(tmp_path: Path) -> None:
    took = _end_lives_in(tmp_path, overtime_s=60.0, dial_new_after_s=1.5)
    assert 1.5 <= took < 10.0


def test_the_lives_end_at_the_deadline_without_the_dials(tmp_path: Path) -> None:
    took = _end_lives_in(tmp_path, overtime_s=2.0, dial_new_after_s=None)
    assert 1.0 <= took < 5.0


def test_overtime_must_not_be_negative() -> None:
    with pytest.raises(ConfigError, match="overtime_s"):
        LongRunSettings(overtime_s=-1.0)
    assert LongRunSettings(minutes=1, start_s=10, overtime_s=5).deadline_s == 75.0
