"""A policy's connection records: one :class:`Connection` per socket (or wanted socket), the
:class:`ConnectionTable` that finds them, and the :class:`ConnectionView` drivers see."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from connmgr.core.actions import CloseReason
from connmgr.core.identity import ConnectionKey, NodeIdentity, Purpose
from connmgr.core.request import Request
from connmgr.core.state import ConnState, Trigger, next_state
from connmgr.errors import PolicyMisuse


class Connection:
    """A policy's record of one socket (or of one wanted socket, while DEFERRED).

    Mutable and private to the policy; drivers see :class:`ConnectionView` values. What a
    policy's decisions may derive from -- its state (:meth:`move`) and the identity check in
    flight (:attr:`checking`) -- changes only through writers that call ``on_change``, so a
    change cannot leave a stale derivation behind (:mod:`connmgr.core.derived`). Its load
    (``in_flight``, ``waiting``, ``last_used_ms``) is no such change: nothing derived reads it.
    """

    __slots__ = (
        "_checking",
        "_on_change",
        "address",
        "checks_identity",
        "conn_id",
        "drain_reason",
        "failures",
        "in_flight",
        "key",
        "last_used_ms",
        "opened_ms",
        "retry_at_ms",
        "role",
        "state",
        "unneeded_since_ms",
        "waiting",
    )

    def __init__(
        self, conn_id: int, key: ConnectionKey, now_ms: float, on_change: Callable[[], None]
    ) -> None:
        self._on_change = on_change
        self.conn_id = conn_id
        self.key = key
        self.role = key.role
        self.state = ConnState.DEFERRED
        self.opened_ms = now_ms
        self.last_used_ms = now_ms
        self.in_flight: dict[int, Request] = {}
        self.waiting: list[Request] = []
        self.unneeded_since_ms: float | None = None
        self.checks_identity = False
        """The broker answers KIP-1242's identity check on this connection."""
        self._checking: int | None = None
        self.address: str | None = None
        """The resolved address the socket reached, if the driver said (see
        :class:`~connmgr.core.events.AddressesResolved`)."""
        self.failures = 0
        self.retry_at_ms = 0.0
        self.drain_reason = CloseReason.UNNEEDED

    @property
    def busy(self) -> bool:
        return bool(self.in_flight or self.waiting)

    @property
    def checking(self) -> int | None:
        """The broker id an identity check in flight on this connection asks about."""
        return self._checking

    @checking.setter
    def checking(self, broker_id: int | None) -> None:
        self._checking = broker_id
        self._on_change()

    def move(self, trigger: Trigger) -> None:
        """Take ``trigger`` (:func:`~connmgr.core.state.next_state`); a change of state."""
        self.state = next_state(self.state, trigger)
        self._on_change()

    def __repr__(self) -> str:
        return f"<conn {self.conn_id} {self.key} {self.state.value} inflight={len(self.in_flight)}>"


@dataclass(frozen=True, slots=True)
class ConnectionView:
    """A read-only snapshot of one connection, for drivers, tests and reports."""

    conn_id: int
    key: ConnectionKey
    state: ConnState
    in_flight: int
    last_used_ms: float


class ConnectionTable:
    """A policy's connection records, found by id, by key and by (node, purpose), and the
    failed ones that hold a key's reconnect backoff. Bookkeeping only: it emits no action
    and takes no decision; the policy does both and tells the table what became of a record.

    Iteration is in insertion order, and a record re-inserted (after an adoption, a failed
    dial) moves to the end: what a policy's "first ready" and shutdown order see.

    ``on_change`` is handed to every record it creates (:class:`Connection`) and called by
    every writing method, itself or through another writer (``rekey`` and ``failed``
    through :meth:`forget`, ``retire`` through the record's move): the one way the policy's
    derivations learn of a change.
    """

    __slots__ = ("_by_id", "_by_key", "_by_node", "_failed", "_next_id", "_on_change")

    def __init__(self, on_change: Callable[[], None]) -> None:
        self._on_change = on_change
        self._by_id: dict[int, Connection] = {}
        self._by_key: dict[ConnectionKey, Connection] = {}
        self._by_node: dict[tuple[NodeIdentity, Purpose], Connection] = {}
        self._failed: dict[ConnectionKey, Connection] = {}
        self._next_id = 1

    # --- reading -------------------------------------------------------------------------

    def get(self, conn_id: int) -> Connection | None:
        """The record ``conn_id`` (live or failed), or None once closed."""
        return self._by_id.get(conn_id)

    def issued(self, conn_id: int) -> bool:
        """Whether ``conn_id`` was ever handed out (a later id is a driver's mistake)."""
        return conn_id < self._next_id

    def live(self, key: ConnectionKey) -> Connection | None:
        """The live (DEFERRED, CONNECTING, READY or DRAINING) connection for ``key``."""
        return self._by_key.get(key)

    def live_for_node(self, node: NodeIdentity, purpose: Purpose) -> Connection | None:
        """The live connection for a node id and purpose, whatever its endpoint: how clients
        that key connections by node id alone find them."""
        return self._by_node.get((node, purpose))

    def records(self) -> list[Connection]:
        """Live records (not FAILED), in table order."""
        return [c for c in self._by_id.values() if c.state is not ConnState.FAILED]

    def all(self) -> list[Connection]:
        """Every record, failed ones included, in table order."""
        return list(self._by_id.values())

    def in_backoff(self, key: ConnectionKey, now_ms: float) -> bool:
        failed = self._failed.get(key)
        return failed is not None and failed.retry_at_ms > now_ms

    def retry_times(self, now_ms: float) -> list[float]:
        """When the backoffs still running end."""
        return [c.retry_at_ms for c in self._failed.values() if c.retry_at_ms > now_ms]

    # --- writing -------------------------------------------------------------------------

    def create(self, key: ConnectionKey, now_ms: float) -> Connection:
        """A new DEFERRED record for ``key``, which must have no live one; it inherits the
        failure count of a failed record for the key, which is retired."""
        if key in self._by_key:
            raise PolicyMisuse(f"a live connection for {key} already exists")
        conn = Connection(self._next_id, key, now_ms, self._on_change)
        self._next_id += 1
        previous = self._failed.pop(key, None)
        if previous is not None:
            conn.failures = previous.failures
            self.retire(previous)
        self._insert(conn)
        self._on_change()
        return conn

    def rekey(self, conn: Connection, new_key: ConnectionKey) -> None:
        """``conn`` takes ``new_key`` (an adoption), which must have no live record."""
        if new_key in self._by_key:
            raise PolicyMisuse(f"cannot adopt {conn.key} as {new_key}: already live")
        self.forget(conn)
        conn.key = new_key
        conn.role = new_key.role
        self._insert(conn)

    def failed(self, conn: Connection) -> None:
        """``conn`` (now FAILED) leaves the live maps and holds its key's backoff."""
        self.forget(conn)
        self._by_id[conn.conn_id] = conn
        self._failed[conn.key] = conn

    def forget(self, conn: Connection) -> None:
        """``conn`` is no longer live (closed, or about to be re-inserted)."""
        self._by_id.pop(conn.conn_id, None)
        if self._by_key.get(conn.key) is conn:
            del self._by_key[conn.key]
        node_key = (conn.key.node, conn.key.purpose)
        if self._by_node.get(node_key) is conn:
            del self._by_node[node_key]
        self._on_change()

    def retire(self, failed: Connection) -> None:
        """A failed record whose backoff no longer matters goes (CLOSED)."""
        failed.move(Trigger.CLOSE)
        self._by_id.pop(failed.conn_id, None)

    def clear_failed(self) -> None:
        self._failed.clear()
        self._on_change()

    def _insert(self, conn: Connection) -> None:
        self._by_id[conn.conn_id] = conn
        self._by_key[conn.key] = conn
        self._by_node[(conn.key.node, conn.key.purpose)] = conn


def first_ready(conns: Sequence[Connection]) -> Connection | None:
    """The READY connection with the fewest requests in flight (earliest dialled on ties)."""
    best: Connection | None = None
    for conn in conns:
        if conn.state is ConnState.READY and (
            best is None or len(conn.in_flight) < len(best.in_flight)
        ):
            best = conn
    return best


class IdleTimers:
    """When each READY connection may have idled out: the rule of the Java client and
    aiokafka alike -- quiet for ``idle_ms`` and not awaiting a response. A min-heap of
    (due time, connection id), checked lazily: an entry found early is pushed back."""

    __slots__ = ("_heap", "first", "idle_ms")

    def __init__(self, idle_ms: float | None) -> None:
        self.idle_ms = idle_ms
        self._heap: list[tuple[float, int]] = []
        self.first: float | None = None
        """The earliest due time, None with nothing timed: read after every event, so a
        plain attribute, set wherever the heap changes."""

    def start(self, conn_id: int, now_ms: float) -> None:
        """``conn_id`` became READY at ``now_ms`` (nothing is timed with idle expiry off)."""
        if self.idle_ms is not None:
            heapq.heappush(self._heap, (now_ms + self.idle_ms, conn_id))
            self.first = self._heap[0][0]

    def expired(self, table: ConnectionTable, now_ms: float) -> Iterator[Connection]:
        """The READY connections of ``table`` idle since ``now_ms - idle_ms`` (to close)."""
        heap, idle = self._heap, self.idle_ms
        while idle is not None and heap and heap[0][0] <= now_ms:
            _, conn_id = heapq.heappop(heap)
            conn = table.get(conn_id)
            if conn is None or conn.state is not ConnState.READY:
                continue
            if conn.in_flight:
                heapq.heappush(heap, (now_ms + idle, conn_id))
            elif conn.last_used_ms + idle > now_ms:
                heapq.heappush(heap, (conn.last_used_ms + idle, conn_id))
            else:
                self.first = heap[0][0] if heap else None
                yield conn
        self.first = heap[0][0] if heap else None
