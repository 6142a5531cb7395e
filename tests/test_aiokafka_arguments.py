"""aiokafka's arguments keep aiokafka's meaning in the drop-in clients.

A policy option named like an aiokafka constructor argument would shadow it: the drop-in
takes its own keywords out of the arguments before aiokafka sees them, so aiokafka would run
with its default. (``linger_ms`` once did: ``ProposedProducer(linger_ms=50)`` batched with
aiokafka's linger at 0.) These tests walk aiokafka's signatures and build stock and drop-in
clients side by side; nothing here connects anywhere.
"""

from __future__ import annotations

import asyncio
import inspect
import pydoc
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from connmgr.aio import ProposedConsumer, ProposedProducer
from connmgr.aio.options import DROP_IN_OPTIONS
from connmgr.core.config import PolicyConfig

AIOKAFKA_ARGUMENTS = {
    cls.__name__: frozenset(inspect.signature(cls.__init__).parameters) - {"self"}
    for cls in (AIOKafkaProducer, AIOKafkaConsumer)
}


def test_aiokafka_signatures_are_read() -> None:
    # The walk below means something only if it sees aiokafka's real arguments.
    assert {"linger_ms", "max_batch_size", "acks"} <= AIOKAFKA_ARGUMENTS["AIOKafkaProducer"]
    assert {"group_id", "fetch_max_wait_ms"} <= AIOKAFKA_ARGUMENTS["AIOKafkaConsumer"]


@pytest.mark.parametrize("client", sorted(AIOKAFKA_ARGUMENTS))
def test_no_drop_in_keyword_is_an_aiokafka_argument(client: str) -> None:
    ours = {spec.keyword for spec in DROP_IN_OPTIONS}
    shadowed = sorted(ours & AIOKAFKA_ARGUMENTS[client])
    assert not shadowed, f"drop-in keywords that shadow {client} arguments: {shadowed}"


@pytest.mark.parametrize(
    ("ours", "stock"),
    [(ProposedProducer, AIOKafkaProducer), (ProposedConsumer, AIOKafkaConsumer)],
    ids=["producer", "consumer"],
)
def test_the_drop_in_signature_is_aiokafka_s_then_the_drop_in_keywords(
    ours: type, stock: type
) -> None:
    """``inspect.signature`` of a drop-in class lists its aiokafka class's parameters as
    they are (names, kinds, defaults -- the very default objects -- in order), then the
    drop-in keywords, keyword-only with their defaults; ``help()`` shows it."""
    theirs = list(inspect.signature(stock).parameters.values())
    shown = list(inspect.signature(ours).parameters.values())
    assert len(theirs) > 20  # aiokafka's real signature, not an empty one
    assert shown[: len(theirs)] == theirs
    assert all(a.default is b.default for a, b in zip(shown, theirs, strict=False))
    assert [(p.name, p.kind, p.default) for p in shown[len(theirs) :]] == [
        (spec.keyword, inspect.Parameter.KEYWORD_ONLY, spec.default) for spec in DROP_IN_OPTIONS
    ]
    init = list(inspect.signature(ours.__init__).parameters)  # type: ignore[misc]
    assert init == ["self", *(p.name for p in shown)]
    text = pydoc.render_doc(ours, renderer=pydoc.plaintext)  # type: ignore[attr-defined]
    assert f"{ours.__name__}{inspect.signature(ours)}" in text


def _producer_settings(producer: Any) -> dict[str, Any]:
    """What aiokafka made of its batching and request arguments."""
    accumulator = producer._message_accumulator
    return {
        "linger_s": accumulator._linger_time,
        "batch_size": accumulator._batch_size,
        "request_timeout_ms": producer._request_timeout_ms,
    }


async def _built(cls: type, **kwargs: Any) -> tuple[dict[str, Any], Any]:
    producer = cls(bootstrap_servers="127.0.0.1:1", **kwargs)
    try:
        return _producer_settings(producer), producer
    finally:
        await producer.stop()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"linger_ms": 50},
        {"linger_ms": 50, "max_batch_size": 4096, "request_timeout_ms": 7_000},
        {},
    ],
)
def test_the_drop_in_producer_batches_like_aiokafka(kwargs: dict[str, Any]) -> None:
    stock, _ = asyncio.run(_built(AIOKafkaProducer, **kwargs))
    ours, producer = asyncio.run(_built(ProposedProducer, **kwargs))
    assert ours == stock
    assert ours["linger_s"] == kwargs.get("linger_ms", 0) / 1000
    # aiokafka's linger is not the connection linger: that one keeps its own default.
    default = next(s.default for s in DROP_IN_OPTIONS if s.name == "connection_linger_ms")
    assert producer.client.policy_config.connection_linger_ms == default == 3_000


def test_both_lingers_set_apart() -> None:
    ours, producer = asyncio.run(_built(ProposedProducer, linger_ms=50, connection_linger_ms=250))
    assert ours["linger_s"] == 0.05
    assert producer.client.policy_config.connection_linger_ms == 250


def test_the_drop_in_consumer_keeps_aiokafka_fetch_arguments() -> None:
    kwargs = {"fetch_max_wait_ms": 123, "max_poll_records": 7, "connections_max_idle_ms": 60_000}

    async def build(cls: type) -> tuple[Any, ...]:
        consumer = cls(bootstrap_servers="127.0.0.1:1", **kwargs)
        try:
            return (
                consumer._fetch_max_wait_ms,
                consumer._max_poll_records,
                consumer._client._connections_max_idle_ms,
            )
        finally:
            await consumer.stop()

    assert asyncio.run(build(ProposedConsumer)) == asyncio.run(build(AIOKafkaConsumer))
    assert asyncio.run(build(ProposedConsumer)) == (123, 7, 60_000)


def test_policy_config_defaults_come_from_one_place() -> None:
    assert PolicyConfig.__dataclass_fields__["connection_linger_ms"].default == 3_000


def test_a_transactional_init_producer_id_goes_to_the_transaction_coordinator() -> None:
    """aiokafka sends a transactional producer's InitProducerId to the node its coordinator
    lookup returned; an idempotent one to any node. The builder keeps the id as
    ``_transactional_id``: read as anything else, every InitProducerId was an any-node request
    and went to whichever connection was ready (found once a bootstrap socket adopted as
    another broker's was: NOT_COORDINATOR until the producer's start timed out)."""
    from aiokafka.client import ConnectionGroup
    from aiokafka.protocol.transaction import InitProducerIdRequest

    from connmgr.aio.dropin import ProposedProducer
    from connmgr.core.coordinator import CoordinatorKind
    from connmgr.core.events import AnyNodeRequestNeeded, Api, CoordinatorRequestNeeded

    async def events() -> tuple[object, object]:
        producer = ProposedProducer(bootstrap_servers="localhost:9092", transactional_id="t")
        client = producer.client
        default = ConnectionGroup.DEFAULT
        await producer.stop()  # never started: nothing to close, and no unclosed warning
        txn = client._event_for(3, Api.INIT_PRODUCER_ID, default, InitProducerIdRequest("t", 1))
        idem = client._event_for(3, Api.INIT_PRODUCER_ID, default, InitProducerIdRequest(None, 1))  # type: ignore[arg-type]
        return txn(7), idem(8)

    transactional, idempotent = asyncio.run(events())
    assert isinstance(transactional, CoordinatorRequestNeeded)
    assert (transactional.broker_id, transactional.coordinator.kind) == (
        3,
        CoordinatorKind.TRANSACTION,
    )
    assert idempotent == AnyNodeRequestNeeded(8, Api.INIT_PRODUCER_ID)
