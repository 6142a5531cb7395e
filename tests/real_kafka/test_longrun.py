"""A broker moved to new ports, and the long run's driver, on a real secure KRaft cluster.

The cluster is this module's own (``security=True``, ``jmx=True``): moving and restarting
brokers would disturb the tests sharing the session cluster. The driver runs every client of
both variants for a very short life, with a rolling restart of one broker and the move
(``python -m connmgr_evidence.bench.longrun`` restarts all three and lives an hour);
``pytest -s`` prints its phases.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaClient

from connmgr.core.identity import Role
from connmgr_evidence.bench.longrun.drive import LongRunResult, run_longrun
from connmgr_evidence.bench.longrun.figures import figures
from connmgr_evidence.bench.longrun.plan import LongRunSettings
from connmgr_evidence.bench.longrun.report import write_report
from connmgr_evidence.realkafka import KafkaCluster
from connmgr_evidence.realkafka.handshakes import await_sockets_closed
from connmgr_evidence.realkafka.protocol import metadata, run_sync

pytestmark = pytest.mark.real_kafka


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    with KafkaCluster(brokers=3, security=True, jmx=True) as cluster:
        yield cluster


async def _sasl_metadata_port(cluster: KafkaCluster, via: int, broker: int) -> int:
    """The port a SASL_SSL client bootstrapped from broker ``via`` alone learns for
    ``broker`` from Metadata."""
    access = cluster.access("SASL_SSL")
    host, port = dict(access.endpoints)[via]
    client = AIOKafkaClient(bootstrap_servers=f"{host}:{port}", **access.aiokafka_kwargs())
    await client.bootstrap()
    try:
        return int(client.cluster.broker_metadata(broker).port)
    finally:
        await client.close()
        # aiokafka does not wait for TLS's close: let the sockets go on this loop.
        await await_sockets_closed(access.addresses())


def test_a_moved_broker_is_listed_and_reached_at_its_new_ports(cluster: KafkaCluster) -> None:
    plain_before = cluster.endpoints()[2]
    sasl_before = dict(cluster.access("SASL_SSL").endpoints)[2]
    jmx_before = cluster.jmx_endpoints()

    move = cluster.move_broker(2)

    assert move.before == {
        "PLAINTEXT": plain_before,
        "SSL": move.before["SSL"],
        "SASL_SSL": sasl_before,
    }
    sasl_after = move.after["SASL_SSL"]
    assert all(move.after[p][1] != move.before[p][1] for p in move.before)
    assert cluster.endpoints()[2] == cluster.listeners()[2] == move.after["PLAINTEXT"]
    assert dict(cluster.access("SASL_SSL").endpoints)[2] == sasl_after
    assert f"{sasl_after[0]}:{sasl_after[1]}" in cluster.access("SASL_SSL").bootstrap_servers
    # Every broker's Metadata names the new PLAINTEXT port ...
    for broker, (_, port) in cluster.endpoints().items():
        answer = run_sync(lambda port=port: metadata(port, []))
        listed = {int(b["node_id"]): int(b["port"]) for b in answer["brokers"]}
        assert listed[2] == move.after["PLAINTEXT"][1], f"broker {broker}'s view"
    # ... and a SASL_SSL client bootstrapped from another broker learns the new forwarder.
    assert asyncio.run(_sasl_metadata_port(cluster, 1, 2)) == sasl_after[1]
    # The old addresses refuse; the node kept its id, data and JMX port.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(sasl_before, timeout=5).close()
    assert cluster.jmx_endpoints() == jmx_before
    assert cluster.leaders("__consumer_offsets")  # the data survived the move
    print(f"\nmoved broker 2 in {move.seconds:.1f}s: {move}")


@pytest.fixture(scope="module")
def longrun(cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> LongRunResult:
    settings = LongRunSettings(
        # Every life ends 90 s + 30 s after the launch: the fourteen JVMs have taken up to
        # 50 s to get past their bootstrap side by side in CI, and the phases need about
        # 45 s of the lives left. On a loaded machine the restart and the move can leave the
        # lives too little time to see both variants dial the moved broker's new port: the
        # lives then go on until they have (polled from their logs), 180 s at most.
        minutes=0.5,
        start_s=90.0,
        overtime_s=180.0,
        out=tmp_path_factory.mktemp("longrun"),
        sample_s=1.0,
        restart=(1,),
        restart_at=0.1,
        move_at=0.5,
        move=3,
        admin_every_ms=2000,
    )
    return run_longrun(settings, cluster=cluster, say=print)


def test_the_long_run_keeps_every_record_and_follows_the_move(longrun: LongRunResult) -> None:
    assert longrun.problems == []
    assert [c.error for c in longrun.clients] == [None] * 14
    assert [e.what for e in longrun.events] == [
        "clients-up",
        "restart-begin",
        "broker-stopped",
        "broker-started",
        "leaders-restored",
        "restart-end",
        "move-begin",
        "move-end",
    ]
    # Every acknowledged record is in its topic exactly once, for both variants.
    assert sorted(r.topic for r in longrun.records) == [
        "longrun-patched",
        "longrun-patched-txn",
        "longrun-stock",
        "longrun-stock-txn",
    ]
    for check in longrun.records:
        assert check.sent > 0 and check.acked == check.sent, check
        assert (check.lost, check.duplicated, check.unexpected) == ((), (), 0), check
    # The moved broker was reached at its new port by both variants: dials and sockets.
    assert longrun.move is not None
    old, new = longrun.move.before["SASL_SSL"], longrun.move.after["SASL_SSL"]
    assert longrun.sasl_after[3] == new != old == longrun.sasl_before[3]
    figs = figures(longrun)
    for variant in figs.variants:
        assert variant.dials_after_move["new"] > 0, variant.variant
    held_at_new = {r.variant for r in longrun.sockets if r.port == new[1] and r.sockets}
    assert held_at_new == {"stock", "patched"}
    # Every patched client closed its bootstrap connection once metadata had replaced it (a
    # late bootstrap dial is left to idle expiry, as in 4.3.1: "bootstrap replaced" need not
    # end them all); no stock client did, and each still held one when the restart began.
    stock, patched = figs.variants
    assert (stock.variant, patched.variant) == ("stock", "patched")
    for outcome in longrun.clients:
        replaced = [c for c in outcome.lives if c.reason == "bootstrap replaced"]
        if outcome.spec.variant.slug == "patched":
            assert replaced and all(c.role is Role.BOOTSTRAP for c in replaced), outcome.spec
        else:
            assert not replaced, outcome.spec
    assert stock.bootstrap_open >= 7 > patched.bootstrap_open
    assert (
        stock.by_role["bootstrap"]["socket_seconds"]
        > 2 * patched.by_role["bootstrap"]["socket_seconds"]
    )
    # The brokers were read over JMX throughout, the restarted one's new JVM after its
    # restart (its counters start again from zero).
    restarted = next(e.t_s for e in longrun.events if e.what == "broker-started")

    def created(broker: int, after: bool) -> list[float]:
        return [
            v
            for r in longrun.brokers
            if r.broker == broker
            and (r.t_ms / 1000 - longrun.origin > restarted) == after
            and (v := r.value("SASL_SSL", "connection-creation-total")) is not None
        ]

    assert {r.broker for r in longrun.brokers if r.up} == {1, 2, 3}
    assert created(1, after=True) and created(1, after=False)
    assert created(1, after=True)[0] < max(created(1, after=False))


def test_the_long_run_report_holds_its_figures(longrun: LongRunResult, tmp_path: Path) -> None:
    index = write_report(longrun, tmp_path)
    page = index.read_text()
    figs = figures(longrun)
    stock, patched = figs.variants
    assert f"| TLS+SASL handshakes | {stock.handshakes:,} | {patched.handshakes:,} |" in page
    for check in longrun.records:
        assert f"| {check.topic} | {check.sent:,} | {check.acked:,} |" in page
    assert (tmp_path / "plots" / "sockets-by-broker.png").is_file()
    print(f"\n{page}")
