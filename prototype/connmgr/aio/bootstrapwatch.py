"""Why a bootstrap got no metadata, and failing its first need at once when no server can be
dialled.

Stock aiokafka's ``start()`` dials each bootstrap server once and raises
``KafkaConnectionError`` at once when none connects. The drop-in dials nothing in ``start()``
(without ``warm_up``: the proposal defers connects), so the first request to need a
connection before any metadata came -- the first ``send()``, a consumer's topics in
``start()``, ``start()`` itself with ``warm_up`` -- takes that role: once every bootstrap
server's dial has failed since the request was made (refused, a name that does not resolve,
a failed handshake), the request fails with stock's ``KafkaConnectionError``, naming each
failure, instead of waiting out ``request_timeout_ms`` while the policy dials again.

:class:`BootstrapWatch` keeps the state of one client: a :class:`DialWatch` per request
waiting before any metadata, told of every failed dial by the driver, and the waits for a
topic's metadata (aiokafka's ``_wait_on_metadata``, which retries until
``request_timeout_ms``) that end when a Metadata request fails that way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import aiokafka.errors as kafka_errors

from connmgr.core.endpoint import Endpoint
from connmgr.core.events import Event
from connmgr.ledger import ConnectionLedger, ConnEvent


@dataclass(frozen=True, slots=True)
class MetadataFailure:
    """Why the last Metadata request the policy placed brought no usable metadata."""

    why: str
    """What happened, as a clause for the error message (names the server asked)."""
    answered: bool = False
    """A server answered, but named no broker. Stock aiokafka's bootstrap accepts such an
    answer and its sends then end with ``UnknownTopicOrPartitionError``, not a connection
    error; ours does the same."""
    every_dial_failed: bool = False
    """Every bootstrap server's dial failed (stock ``bootstrap()``'s failure): the request
    waiting on this metadata fails at once."""


def dial_failures(ledger: ConnectionLedger) -> str:
    """The failed dials in ``ledger``, the latest per server, for saying why nothing could be
    connected."""
    failed = [e for e in ledger.entries if e.kind is ConnEvent.FAILED]
    if not failed:
        return "no dial completed"
    last = {f"{e.host}:{e.port}": e.reason for e in failed}
    return "; ".join(f"{where}: {why or 'failed'}" for where, why in last.items())


class EveryDialFailed(kafka_errors.KafkaConnectionError):  # type: ignore[misc]
    """Every bootstrap server's dial failed while a request waited for its first connection
    (the message names each failure)."""


@dataclass(slots=True, eq=False)  # kept in a set by identity
class DialWatch:
    """The bootstrap servers whose dials failed while one request, made before any metadata
    came, waited for a connection."""

    servers: frozenset[Endpoint]
    request_id: int | None = None
    """The driver's id of the request, once its event is made."""
    failures: dict[Endpoint, str] = field(default_factory=dict)

    def event_of(self, make_event: Callable[[int], Event]) -> Callable[[int], Event]:
        """``make_event``, noting the request id the driver gives it."""

        def event(request_id: int) -> Event:
            self.request_id = request_id
            return make_event(request_id)

        return event

    def every_dial_failed(self, endpoint: Endpoint, exc: BaseException) -> bool:
        """Note that a dial to ``endpoint`` failed with ``exc``; whether every server's has
        now (true once only)."""
        if endpoint not in self.servers or self.failures.keys() >= self.servers:
            return False
        self.failures[endpoint] = f"{type(exc).__name__}: {exc}"
        return self.failures.keys() >= self.servers

    def error(self) -> EveryDialFailed:
        each = "; ".join(f"{where}: {why}" for where, why in self.failures.items())
        return EveryDialFailed(f"every dial failed ({each})")


class BootstrapWatch:
    """One client's watches of its bootstrap servers' dials (see the module docstring)."""

    def __init__(self, servers: frozenset[Endpoint]) -> None:
        self.servers = servers
        self._watches: set[DialWatch] = set()
        self._waits: set[asyncio.Future[None]] = set()

    def watch(self) -> DialWatch:
        """A :class:`DialWatch` for one request, told of failed dials until :meth:`unwatch`."""
        watch = DialWatch(self.servers)
        self._watches.add(watch)
        return watch

    def unwatch(self, watch: DialWatch) -> None:
        self._watches.discard(watch)

    def dial_failed(
        self, endpoint: Endpoint, exc: BaseException, give_up: Callable[[int, Exception], None]
    ) -> None:
        """A dial to ``endpoint`` failed with ``exc``: ``give_up(request_id, error)`` for each
        request every bootstrap server's dial has now failed for since it was made (the
        driver's :meth:`~connmgr.aio.driver.PolicyDriver.give_up`)."""
        for watch in list(self._watches):
            if watch.every_dial_failed(endpoint, exc) and watch.request_id is not None:
                give_up(watch.request_id, watch.error())

    def metadata_failed(self, error: EveryDialFailed) -> MetadataFailure:
        """A Metadata request failed with ``error`` (every bootstrap server's dial failed):
        end the waits of :meth:`unless_every_dial_fails`; why, for the client's message."""
        for wait in self._waits:
            if not wait.done():
                wait.set_result(None)
        why = f"no bootstrap server could be connected: {error.args[0]}"
        return MetadataFailure(why, every_dial_failed=True)

    async def unless_every_dial_fails(
        self, waiting: Coroutine[Any, Any, Any], error: Callable[[], BaseException]
    ) -> Any:
        """The result of ``waiting`` (aiokafka's wait for a topic's metadata), unless a
        Metadata request fails first because every bootstrap server's dial failed
        (:meth:`metadata_failed`): then ``error()`` at once."""
        loop = asyncio.get_running_loop()
        every_dial_failed: asyncio.Future[None] = loop.create_future()
        self._waits.add(every_dial_failed)
        task = loop.create_task(waiting)
        try:
            either: set[asyncio.Future[Any]] = {task, every_dial_failed}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._waits.discard(every_dial_failed)
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if task.done() and not task.cancelled():
            return task.result()
        raise error()
