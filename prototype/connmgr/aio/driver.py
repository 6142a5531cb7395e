"""Carry out a sans-IO policy's actions with real aiokafka connections on an asyncio loop.

The driver is the only place where the policy meets I/O. It feeds events to the policy one at
a time (never re-entrantly: events raised while actions run are queued), and performs the
actions it gets back: ``Connect`` dials with aiokafka's ``create_conn`` in a task, ``Send``
hands the chosen connection to whoever is waiting for request ``request_id``, ``Close`` closes,
``Adopt`` only updates the ledger, ``WakeAt`` arms one ``loop.call_at`` timer.

A request's life on the driver: :meth:`PolicyDriver.acquire` feeds the request event and waits
for the policy's ``Send``; the caller writes the request on the connection it got and calls
:meth:`PolicyDriver.done` when the response (or an error) came back. A connection the peer
breaks first fails the requests leased on it, as aiokafka does, and withdraws them from the
policy, so the policy never re-sends a request the caller has already given up on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from connmgr.core.actions import (
    Action,
    Adopt,
    Close,
    CloseReason,
    Connect,
    RefreshMetadata,
    Reject,
    Send,
    WakeAt,
)
from connmgr.core.events import (
    ClientClosed,
    ConnectionClosedByPeer,
    ConnectionEstablished,
    ConnectionFailed,
    Event,
    MetadataReceived,
    ResponseReceived,
    TimePassed,
)
from connmgr.core.identity import ConnectionKey
from connmgr.core.metadata import ClusterMetadata
from connmgr.core.policy import Policy
from connmgr.errors import ConnMgrError
from connmgr.ledger import ConnectionLedger


class KafkaConnection(Protocol):
    """The part of ``aiokafka.conn.AIOKafkaConnection`` the driver uses."""

    def send(self, request: Any, expect_response: bool = True) -> Awaitable[Any]: ...

    def close(self, reason: Any = None, exc: BaseException | None = None) -> Any: ...

    def connected(self) -> bool: ...


Dialer = Callable[[ConnectionKey, Callable[[Any, Any], None]], Awaitable[KafkaConnection]]
"""``dial(key, on_close)``: open a connection to ``key.endpoint``; ``on_close(conn, reason)``
must be called if it closes later. Raises OSError, TimeoutError or a KafkaError on failure."""


class NoConnection(ConnMgrError):
    """The policy did not provide a connection for a request in time."""


class Rejected(NoConnection):
    """The policy handed the request back unsent: the broker it must reach is no longer in
    metadata. The caller re-targets it (aiokafka's retry path for NodeNotReadyError)."""


@dataclass(frozen=True, slots=True)
class Lease:
    """A request id and the connection the policy chose for it."""

    request_id: int
    conn_id: int
    conn: KafkaConnection


class PolicyDriver:
    def __init__(
        self,
        policy: Policy,
        dial: Dialer,
        *,
        ledger: ConnectionLedger,
        dial_errors: tuple[type[BaseException], ...],
        on_lost: Callable[[str], None] | None = None,
        on_refresh: Callable[[], None] | None = None,
    ) -> None:
        self.policy = policy
        self.ledger = ledger
        self._dial = dial
        self._dial_errors = dial_errors
        self._on_lost = on_lost
        self._on_refresh = on_refresh
        self._loop = asyncio.get_running_loop()
        self._t0 = self._loop.time()
        self._conns: dict[int, KafkaConnection] = {}
        self._dialing: dict[int, asyncio.Task[None]] = {}
        self._closed_by_us: set[int] = set()
        self._close_waits: list[Any] = []
        self._waiters: dict[int, asyncio.Future[Lease]] = {}
        self._leased: dict[int, int] = {}
        self._queue: deque[Event] = deque()
        self._feeding = False
        self._wake: asyncio.TimerHandle | None = None
        self._next_request = 1
        self.closed = False

    def __repr__(self) -> str:
        return (
            f"<PolicyDriver open={len(self._conns)} dialing={len(self._dialing)} "
            f"waiting={len(self._waiters)} {self.policy!r}>"
        )

    @property
    def now_ms(self) -> float:
        return (self._loop.time() - self._t0) * 1000.0

    # --- requests ------------------------------------------------------------------------

    async def acquire(self, make_event: Callable[[int], Event], timeout_s: float) -> Lease:
        """Feed the request event ``make_event(request_id)`` and wait for its connection."""
        if self.closed:
            raise NoConnection(f"the client is closed ({self!r})")
        request_id = self._next_request
        self._next_request += 1
        future: asyncio.Future[Lease] = self._loop.create_future()
        self._waiters[request_id] = future
        self.feed(make_event(request_id))
        if future.done():
            # A ready connection: the policy answered at once. Returning here saves the two
            # event-loop turns `wait_for` costs, and a turn waits behind whatever else is
            # ready to run (a producer's send loop): 0.8 ms a produce request at 0 ms RTT.
            return future.result()
        try:
            return await asyncio.wait_for(future, timeout_s)
        except (TimeoutError, asyncio.CancelledError) as exc:
            self._waiters.pop(request_id, None)
            if not self.closed:
                self.feed(ResponseReceived(request_id))  # withdraw it from the policy
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise NoConnection(
                f"no connection for request {request_id} within {timeout_s:.1f} s ({self!r})"
            ) from exc

    def done(self, lease: Lease, metadata: ClusterMetadata | None = None) -> None:
        """Request ``lease`` finished (response, error or timeout)."""
        if self._leased.pop(lease.request_id, None) is None or self.closed:
            return  # already withdrawn when its connection broke
        if metadata is not None:
            self.feed(MetadataReceived(lease.request_id, metadata))
        else:
            self.feed(ResponseReceived(lease.request_id))

    def connection_broken(self, lease: Lease) -> None:
        """The caller saw ``lease``'s connection misbehave (timeout): close it as broken."""
        conn = self._conns.get(lease.conn_id)
        if conn is not None:
            conn.close()  # our on_close hook reports it to the policy as a peer close

    # --- the policy ----------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        """Hand ``event`` to the policy and carry out the actions, in order."""
        self._queue.append(event)
        if self._feeding:
            return
        self._feeding = True
        try:
            while self._queue:
                actions = self.policy.handle(self._queue.popleft(), self.now_ms)
                for action in actions:
                    self._apply(action)
        finally:
            self._feeding = False

    def _apply(self, action: Action) -> None:
        now = self.now_ms
        if isinstance(action, Send):
            self._lease(action.conn_id, action.request_id)
        elif isinstance(action, Connect):
            key = action.key
            self.ledger.opened(
                now, action.conn_id, key.endpoint.host, key.endpoint.port, key.broker_id, key.role
            )
            self._dialing[action.conn_id] = self._loop.create_task(
                self._connect(action.conn_id, key)
            )
        elif isinstance(action, Close):
            self._close(action.conn_id, action.reason)
        elif isinstance(action, Adopt):
            broker = action.new_key.broker_id
            assert broker is not None
            self.ledger.adopted(now, action.conn_id, broker, action.new_key.role)
        elif isinstance(action, Reject):
            future = self._waiters.pop(action.request_id, None)
            if future is not None and not future.done():
                future.set_exception(
                    Rejected(
                        f"request {action.request_id} handed back unsent "
                        f"({action.reason.value}: metadata no longer lists its broker); "
                        f"retry with fresh metadata ({self!r})"
                    )
                )
        elif isinstance(action, RefreshMetadata):
            if self._on_refresh is not None:
                self._on_refresh()
        elif isinstance(action, WakeAt):
            if self._wake is not None:
                self._wake.cancel()
            self._wake = self._loop.call_at(
                self._t0 + action.at_ms / 1000.0, self.feed, TimePassed()
            )

    def _lease(self, conn_id: int, request_id: int) -> None:
        future = self._waiters.pop(request_id, None)
        conn = self._conns.get(conn_id)
        if future is None or future.done() or conn is None:
            # Nobody waits any more: tell the policy the request is over.
            self._loop.call_soon(self._withdraw, request_id)
            return
        self._leased[request_id] = conn_id
        future.set_result(Lease(request_id, conn_id, conn))

    def _withdraw(self, request_id: int) -> None:
        if not self.closed:
            self.feed(ResponseReceived(request_id))

    async def _connect(self, conn_id: int, key: ConnectionKey) -> None:
        try:
            conn = await self._dial(key, lambda c, reason: self._on_close(conn_id, reason))
        except asyncio.CancelledError:
            self._dialing.pop(conn_id, None)
            raise
        except self._dial_errors as exc:
            self._dialing.pop(conn_id, None)
            if conn_id not in self._closed_by_us:
                self.ledger.failed(self.now_ms, conn_id, type(exc).__name__)
                self.feed(ConnectionFailed(conn_id))
                if self._on_lost is not None:
                    self._on_lost("dial failed")
            return
        self._dialing.pop(conn_id, None)
        if conn_id in self._closed_by_us:
            self._close_waits.append(conn.close())
            return
        self._conns[conn_id] = conn
        self.ledger.established(self.now_ms, conn_id)
        self.feed(ConnectionEstablished(conn_id))

    def _close(self, conn_id: int, reason: CloseReason) -> None:
        self._closed_by_us.add(conn_id)
        self.ledger.closed(self.now_ms, conn_id, reason.value)
        conn = self._conns.pop(conn_id, None)
        if conn is not None:
            self._close_waits.append(conn.close())
        # A dial still under way is closed when it completes (see _connect).

    def _on_close(self, conn_id: int, reason: Any) -> None:
        if conn_id in self._closed_by_us or self.closed:
            return
        if conn_id not in self._conns:
            # Closed during its own dial (aiokafka closes a connection whose ApiVersions
            # handshake failed or timed out before returning it): the dial raises, and
            # _connect reports that as ConnectionFailed. The connection was never
            # established, so it cannot be "closed by the peer".
            return
        self._conns.pop(conn_id, None)
        self.ledger.closed(self.now_ms, conn_id, f"peer:{getattr(reason, 'name', reason)}")
        # Requests leased on it fail to their callers (aiokafka raises): withdraw them so the
        # policy does not re-send requests nobody waits for.
        for request_id, leased_on in list(self._leased.items()):
            if leased_on == conn_id:
                del self._leased[request_id]
                self.feed(ResponseReceived(request_id))
        self.feed(ConnectionClosedByPeer(conn_id))
        if self._on_lost is not None:
            self._on_lost("connection lost")

    # --- shutdown ------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close every connection (the policy's ClientClosed) and wait until they are gone."""
        if self.closed:
            return
        self.feed(ClientClosed())
        self.closed = True
        if self._wake is not None:
            self._wake.cancel()
        for future in self._waiters.values():
            if not future.done():
                future.set_exception(NoConnection("the client was closed"))
        self._waiters.clear()
        for task in list(self._dialing.values()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, *self._dial_errors):
                await task
        waits, self._close_waits = self._close_waits, []
        for wait in waits:
            if isinstance(wait, Awaitable):
                with contextlib.suppress(Exception):
                    await wait
