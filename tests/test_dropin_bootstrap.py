"""An unreachable bootstrap surfaces from the drop-in clients at once, with stock's error.

Stock aiokafka's ``start()`` dials each bootstrap server once and raises
``KafkaConnectionError`` when none connects. The drop-in dials nothing in ``start()`` (without
``warm_up``), so its first need -- the first ``send()``, a consumer's topics in ``start()`` --
takes that role: it fails with the same type as soon as every bootstrap server's dial failed,
not after ``request_timeout_ms``. Each test runs stock and drop-in clients side by side against
a refused port on 127.0.0.1 and a name that cannot resolve (``.invalid``, RFC 6761), and checks
which path raised (the dial failures, named in the message, and one dial per server), not the
wall clock. Nothing here needs a broker.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError

from connmgr.aio import ProposedConsumer, ProposedProducer

TIMEOUT_MS = 5_000
"""``request_timeout_ms`` of every client: the path a test must not take."""


def refused_server() -> str:
    """``127.0.0.1:port`` of a port nothing listens on (bound once, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


BOOTSTRAPS: dict[str, Callable[[], str]] = {
    "refused": refused_server,
    "two-refused": lambda: f"{refused_server()},{refused_server()}",
    "unresolvable": lambda: "no-such-broker.invalid:9092",
}


async def raised_by(call: Awaitable[Any]) -> BaseException:
    try:
        await call
    except Exception as exc:
        return exc
    raise AssertionError("expected an error")


def assert_failed_on_the_dials(error: BaseException, bootstrap: str, ledger: Any) -> None:
    """``error`` came from the failed dials of every bootstrap server, not from waiting out
    ``request_timeout_ms``: its message names them, and ``ledger`` (the client's) holds one
    dial per server, as stock's one pass -- the policy's redials after its backoff, which
    waiting would have let happen, were not waited for."""
    text = str(error)
    assert "Unable to bootstrap from" in text
    assert "every dial failed" in text, text
    assert "request_timeout_ms" not in text, text
    for server in bootstrap.split(","):
        assert server in text
    dialled = sorted(host for _, _, host in ledger.dials())
    assert dialled == sorted(bootstrap.split(","))


@pytest.mark.parametrize("kind", list(BOOTSTRAPS))
def test_the_first_send_fails_as_stock_start_does(kind: str) -> None:
    bootstrap = BOOTSTRAPS[kind]()

    async def main() -> None:
        stock = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
        try:
            stock_error = await raised_by(stock.start())
        finally:
            await stock.stop()
        ours = ProposedProducer(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
        await ours.start()
        try:
            assert ours.ledger.entries == []  # no socket before the first need
            our_error = await raised_by(ours.send_and_wait("t", b"x"))
        finally:
            await ours.stop()
        assert type(stock_error) is KafkaConnectionError
        assert type(our_error) is type(stock_error)
        assert_failed_on_the_dials(our_error, bootstrap, ours.ledger)

    asyncio.run(main())


@pytest.mark.parametrize("kind", list(BOOTSTRAPS))
def test_warm_up_start_fails_as_stock_start_does(kind: str) -> None:
    bootstrap = BOOTSTRAPS[kind]()

    async def main() -> None:
        ours = ProposedProducer(
            bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS, warm_up=True
        )
        error = await raised_by(ours.start())
        assert type(error) is KafkaConnectionError
        assert_failed_on_the_dials(error, bootstrap, ours.ledger)
        assert ours.ledger.open_now() == []

    asyncio.run(main())


@pytest.mark.parametrize("kind", ["refused", "unresolvable"])
def test_a_consumer_of_topics_fails_in_start_as_stock_does(kind: str) -> None:
    bootstrap = BOOTSTRAPS[kind]()

    async def main() -> None:
        errors = []
        consumer: Any = None
        for cls in (AIOKafkaConsumer, ProposedConsumer):
            consumer = cls(
                "t", bootstrap_servers=bootstrap, group_id="g", request_timeout_ms=TIMEOUT_MS
            )
            try:
                errors.append(await raised_by(consumer.start()))
            finally:
                await consumer.stop()
        stock_error, our_error = errors
        assert type(stock_error) is type(our_error) is KafkaConnectionError
        assert_failed_on_the_dials(our_error, bootstrap, consumer.ledger)

    asyncio.run(main())
