"""Producer throughput, A/B: two producer clients take turns on one embedded cluster.

Both clients run in the same process against the same brokers, so whatever the machine is
doing affects both alike; the turns interleave (A, B in round 0, B, A in round 1, ...) so
that neither always runs first, on a cold cluster, or last, on a warm one. A turn starts a
fresh producer, sends its records with ``acks="all"`` round-robin over the topic's partitions
(one per broker, each led by its own broker), and is timed from the first send to the last
acknowledgement. Start-up, one untimed warm-up record per partition (which brings metadata and
every leader's connection in place) and shutdown are left out: they are what the connection
counts and :attr:`RealRun.ttfa_ms` measure, and a client that defers connecting (the proposed
one) would otherwise pay its set-up inside the timed window of a short turn.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from connmgr.core.config import ClientKind, PolicyConfig
from connmgr.core.endpoint import Endpoint
from connmgr.embedded import MockCluster
from connmgr.errors import ConfigError
from connmgr_evidence.realrun.backends import MockBackend
from connmgr_evidence.realrun.workloads import AckClock, RealRunError, config_kwargs, new_producer

AB_CLIENTS = ("aiokafka", "proposed")
"""The producer clients a turn can run: stock aiokafka (observed) and the proposed one."""
AB_TOPIC = "ab"
RECORD_BYTES = 100


@dataclass(frozen=True, slots=True)
class ABTurn:
    """One client's turn: ``records`` acknowledged in ``seconds`` (first send to last ack),
    and its connections: dials made, most open at once, and open once every record was
    acknowledged (before stop)."""

    client: str
    round: int
    records: int
    seconds: float
    records_per_s: float
    opened: int
    peak: int
    steady: int


def _check(brokers: int, records: int, rounds: int, rtt_ms: float, clients: Any) -> None:
    if not isinstance(clients, tuple) or len(clients) != 2:
        raise ConfigError(f"clients must be a pair of client names, got {clients!r}")
    for name in clients:
        if name not in AB_CLIENTS:
            raise ConfigError(
                f"unknown client {name!r} for throughput A/B; choose from {', '.join(AB_CLIENTS)}"
            )
    for what, value in (("brokers", brokers), ("records", records), ("rounds", rounds)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{what} must be an integer >= 1, got {value!r}")
    if not rtt_ms >= 0:  # also refuses NaN
        raise ConfigError(f"rtt_ms must be >= 0, got {rtt_ms!r}")


def _value(i: int) -> bytes:
    head = f"r{i}:".encode()
    return head + b"." * (RECORD_BYTES - len(head))


async def _turn(
    client: str,
    number: int,
    config: PolicyConfig,
    partitions: int,
    records: int,
    seed: int,
    batch_linger_ms: int,
) -> ABTurn:
    kwargs = config_kwargs(client, config, seed)
    kwargs.update(
        bootstrap_servers=",".join(str(e) for e in config.bootstrap),
        acks="all",
        linger_ms=batch_linger_ms,  # aiokafka's batching linger, the same for A and B
    )
    producer = new_producer(client, kwargs)
    clock = AckClock()
    await producer.start()
    try:
        # One acknowledged record per partition first, untimed: metadata and every leader's
        # connection are then in place for both clients, so the timed window measures
        # sending, not set-up (which ttfa_ms and the connection counts measure).
        for p in range(partitions):
            await (await producer.send(AB_TOPIC, b"warm-up", partition=p))
        futures = []
        first_send = time.perf_counter()
        for i in range(records):
            sent = await producer.send(AB_TOPIC, _value(i), partition=i % partitions)
            futures.append(clock.watch(sent))
        results = await asyncio.gather(*futures, return_exceptions=True)
        summary = producer.ledger.summary()
    finally:
        await producer.stop()
    where = f"throughput A/B, {client} in round {number}"
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        raise RealRunError(
            f"{where}: {len(failures)} of {records} records not acknowledged "
            f"(first error: {failures[0]!r})"
        )
    if clock.last is None or clock.acked != records:
        raise RealRunError(f"{where}: {clock.acked} of {records} acknowledgements seen")
    left = producer.ledger.open_now()
    if left:
        raise RealRunError(
            f"{where}: {len(left)} connections still open after stop: "
            + ", ".join(f"{e.role.value}@{e.host}:{e.port}" for e in left)
        )
    seconds = clock.last - first_send
    return ABTurn(
        client=client,
        round=number,
        records=records,
        seconds=seconds,
        records_per_s=records / seconds,
        opened=int(summary["opened"]),
        peak=int(summary["peak"]),
        steady=int(summary["steady"]),
    )


async def throughput_ab(
    brokers: int = 3,
    records: int = 2000,
    rounds: int = 3,
    rtt_ms: float = 0.0,
    seed: int = 0,
    clients: tuple[str, str] = ("proposed", "aiokafka"),
    *,
    batch_linger_ms: int = 5,
) -> list[ABTurn]:
    """Producer throughput of ``clients`` (A, B) on one embedded cluster of ``brokers``
    brokers, ``rounds`` turns each, interleaved: round r runs A then B if r is even, B then A
    if odd. ``rtt_ms`` delays every broker's responses; ``seed`` seeds the proposed policy;
    ``batch_linger_ms`` is aiokafka's ``linger_ms`` (batching) for both producers.

    Returns the turns in the order they ran (2 * ``rounds``). Raises :class:`ConfigError`
    for bad arguments (``rounds``, ``records`` or ``brokers`` below 1, ``rtt_ms`` below 0, a
    client not in :data:`AB_CLIENTS`) and :class:`RealRunError` if a turn had a record not
    acknowledged or left a connection open after stop.
    """
    _check(brokers, records, rounds, rtt_ms, clients)
    turns: list[ABTurn] = []
    with MockCluster(brokers, group_initial_rebalance_delay_ms=0, track_requests=False) as mock:
        backend = MockBackend(mock)
        backend.create_topic_with_leaders(AB_TOPIC, mock.broker_ids)
        if rtt_ms > 0:
            backend.set_rtt(rtt_ms)
        endpoints = tuple(Endpoint(host, port) for host, port in backend.endpoints().values())
        config = PolicyConfig(bootstrap=endpoints, client=ClientKind.PRODUCER)
        for number in range(rounds):
            order = clients if number % 2 == 0 else clients[::-1]
            for client in order:
                turns.append(
                    await _turn(client, number, config, brokers, records, seed, batch_linger_ms)
                )
    return turns
