"""TLS and SASL on the real KRaft tier: a ``security=True`` cluster's SSL and SASL_SSL
(SCRAM-SHA-512) listeners under stock aiokafka and the drop-in clients, its delay forwarders,
and the handshake measurement.

One secure cluster for this file (module scope, so its teardown can check that it left no
JVM and no forwarder thread while the session's PLAINTEXT cluster may still run). Each test
keeps to its own topic and group names.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.conn import create_conn

from connmgr.aio import ProposedConsumer, ProposedProducer
from connmgr_evidence.handshake_cost import HandshakeCost
from connmgr_evidence.realkafka import KafkaCluster
from connmgr_evidence.realkafka.handshakes import await_sockets_closed, measure_tls
from connmgr_evidence.realkafka.security import ListenerAccess

pytestmark = pytest.mark.real_kafka

CLIENTS = {
    "aiokafka": (AIOKafkaProducer, AIOKafkaConsumer),
    "proposed": (ProposedProducer, ProposedConsumer),
}


@pytest.fixture(scope="module")
def secure_cluster() -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(brokers=3, security=True)
    began = time.monotonic()
    cluster.start(timeout_s=180)
    print(f"\n[real_kafka] secure {cluster!r} started in {time.monotonic() - began:.2f}s")
    pids = list(cluster.pids().values())
    thread = cluster.secure.network.thread
    try:
        yield cluster
    finally:
        cluster.stop()
        alive = [p for p in pids if psutil.pid_exists(p) and not _zombie(p)]
        assert alive == [], f"broker JVMs left running: {alive}"
        assert thread is not None and not thread.is_alive(), "the delay forwarders' thread"
        assert cluster.secure.network.open_relays == 0


def _zombie(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


async def _round_trip(
    producer_cls: Any, consumer_cls: Any, access: ListenerAccess, topic: str
) -> bytes:
    producer = producer_cls(
        bootstrap_servers=access.bootstrap_servers, acks="all", **access.aiokafka_kwargs()
    )
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"over " + access.protocol.encode())
    finally:
        await producer.stop()
    consumer = consumer_cls(
        topic,
        bootstrap_servers=access.bootstrap_servers,
        group_id=f"{topic}-group",
        auto_offset_reset="earliest",
        **access.aiokafka_kwargs(),
    )
    await consumer.start()
    try:
        async with asyncio.timeout(60):
            record = await consumer.getone()
        await consumer.commit()
    finally:
        await consumer.stop()
        assert await await_sockets_closed(access.addresses()) == 0
    value: bytes = record.value
    return value


@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_produce_and_consume_over_secure_listeners(
    secure_cluster: KafkaCluster, protocol: str, client: str
) -> None:
    topic = f"tls-{protocol.lower()}-{client}"
    secure_cluster.create_topic_with_leaders(topic, [2])
    access = secure_cluster.access(protocol)  # type: ignore[arg-type]
    producer_cls, consumer_cls = CLIENTS[client]
    got = asyncio.run(_round_trip(producer_cls, consumer_cls, access, topic))
    assert got == f"over {protocol}".encode()


def test_a_wrong_scram_password_fails_with_aiokafkas_error_for_both(
    secure_cluster: KafkaCluster,
) -> None:
    access = secure_cluster.access("SASL_SSL")

    async def start_and_send(producer_cls: Any) -> BaseException:
        """The error of start() or, if it passes, of the first send: stock aiokafka dials at
        start(), the drop-in (without warm_up) at its first metadata request."""
        producer = producer_cls(
            bootstrap_servers=access.bootstrap_servers,
            request_timeout_ms=3000,  # the drop-in retries the bootstrap until then
            **access.aiokafka_kwargs(password="not-the-password"),
        )
        try:
            await producer.start()
            await producer.send_and_wait("tls-never-written", b"x")
        except Exception as exc:
            return exc
        finally:
            await producer.stop()
            assert await await_sockets_closed(access.addresses()) == 0
        raise AssertionError(f"{producer_cls.__name__} sent with a wrong password")

    stock = asyncio.run(start_and_send(AIOKafkaProducer))
    ours = asyncio.run(start_and_send(ProposedProducer))
    print(f"\n[real_kafka] wrong password: stock {stock!r}, drop-in {ours!r}")
    assert type(stock).__module__.startswith("aiokafka"), repr(stock)
    assert isinstance(ours, type(stock)), (stock, ours)


def test_the_forwarders_inject_at_least_the_rtt(secure_cluster: KafkaCluster) -> None:
    # PLAINTEXT through the CLIENT listener's forwarder: create_conn's one exchange after the
    # TCP connect is ApiVersions, one round trip.
    host, port = secure_cluster.secure.access("PLAINTEXT").addresses()[0]

    async def dial() -> float:
        began = time.perf_counter()
        conn = await create_conn(host, port)
        elapsed = time.perf_counter() - began
        await conn.close()
        return elapsed * 1000.0

    secure_cluster.set_rtt(20)
    try:
        took = [asyncio.run(dial()) for _ in range(3)]
    finally:
        secure_cluster.set_rtt(0)
    assert min(took) >= 20.0, took


def test_the_measurement_is_complete_and_fits_more_round_trips_for_sasl(
    secure_cluster: KafkaCluster,
) -> None:
    report = measure_tls(secure_cluster, rtts_ms=(0.0, 5.0, 20.0), connections=4)
    print("\n[real_kafka] " + json.dumps(report.to_dict()["calibration"]))
    assert [(h.protocol, h.rtt_ms) for h in report.handshakes] == [
        (p, r) for p in ("PLAINTEXT", "SSL", "SASL_SSL") for r in (0.0, 5.0, 20.0)
    ]
    for h in report.handshakes:
        assert len(h.samples_ms) == 4 and h.median_ms <= h.p90_ms
        # Each exchange after the TCP connect waits for the injected RTT at least once.
        assert h.median_ms >= h.rtt_ms
    assert [c.protocol for c in report.cpu] == ["PLAINTEXT", "SSL", "SASL_SSL"]
    # SASL_SSL's TLS handshake, SaslHandshake and two SCRAM exchanges come on top of
    # PLAINTEXT's ApiVersions: a fact about the protocols (the slope), not a timing limit.
    assert report.cost("SASL_SSL").round_trips > report.cost("PLAINTEXT").round_trips + 2
    for cost in report.calibration:
        assert HandshakeCost.from_dict(json.loads(json.dumps(cost.to_dict()))) == cost
    by_client = {(a.client, a.rtt_ms): a for a in report.first_acks}
    assert set(by_client) == {(c, r) for c in ("aiokafka", "proposed") for r in (0.0, 5.0, 20.0)}
    for rtt in (0.0, 5.0, 20.0):
        stock, ours = by_client["aiokafka", rtt], by_client["proposed", rtt]
        assert stock.ttfa_ms is not None and ours.ttfa_ms is not None
        assert stock.ttfa_ms >= rtt and ours.ttfa_ms >= rtt
        # Over SASL_SSL as over PLAINTEXT: the drop-in holds no more sockets than stock.
        assert 1 <= ours.sockets <= stock.sockets, (ours, stock)
    assert secure_cluster.secure.network.rtt_ms == 0.0
