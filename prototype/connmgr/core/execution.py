"""Doing what a policy decided: the one place that changes a connection and tells the driver.

:class:`Executor` carries out a policy's decisions (:mod:`connmgr.core.decisions`) and the
driver's reports about connections (established, failed, closed by the peer) on the policy's
connection records, its request book and its metrics, and writes the actions that tell the
driver (``Connect``, ``Lease``, ``Close``, ``Adopt``, ``CheckIdentity``). It calls no
invalidation itself: the table and the records it writes through tell the policy's
derivations of every change (:mod:`connmgr.core.derived`). It decides nothing: which
record dials, and whether, comes from the policy's
:meth:`~connmgr.core.policy.Policy.before_dial`, handed to it at construction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from connmgr.core.actions import Action, Adopt, CheckIdentity, Close, CloseReason, Connect, Lease
from connmgr.core.book import RequestBook
from connmgr.core.config import PolicyConfig
from connmgr.core.connections import Connection, ConnectionTable, IdleTimers
from connmgr.core.decisions import (
    AdoptAs,
    AskIdentity,
    CloseNow,
    Decision,
    Dial,
    DialDecision,
    Drain,
    Open,
    OpenFor,
    OpenThenPlace,
    Placement,
    SendOn,
    StartDial,
    Wait,
)
from connmgr.core.derived import Derived
from connmgr.core.identity import ConnectionKey
from connmgr.core.metrics import Metrics
from connmgr.core.request import Request
from connmgr.core.state import SOCKET_STATES, ConnState, Trigger
from connmgr.errors import PolicyMisuse


class Executor:
    """Carries out decisions on one policy's records; see the module docstring.

    ``now_ms`` and ``out`` are the current event's time and action list (the policy sets
    them for each event); ``closed`` is set once the client closes, after which what a
    closed connection held is dropped instead of going back to pending."""

    def __init__(
        self,
        config: PolicyConfig,
        before_dial: Callable[[Connection], DialDecision],
        describe: Callable[[], str],
        derived: Derived,
    ) -> None:
        self.config = config
        self.derived = derived
        self.table = ConnectionTable(derived.changed)
        self.book = RequestBook()
        self.metrics = Metrics()
        self.idle = IdleTimers(config.idle_expiry_ms)
        self.now_ms = 0.0
        self.out: list[Action] = []
        self.closed = False
        self._before_dial = before_dial
        self._describe = describe

    def carry_out(self, decisions: Iterable[Decision]) -> None:
        """Perform each decision, in order, before the next is taken (a generator hook
        resumes after its decision is done)."""
        for decision in decisions:
            match decision:
                case StartDial(conn):
                    conn.move(Trigger.DIAL)
                    conn.opened_ms = conn.last_used_ms = self.now_ms
                    self.metrics.on_dial(conn.role)
                    self.out.append(Connect(conn.conn_id, conn.key))
                case CloseNow(conn, reason):
                    self.close(conn, reason)
                case Drain(conn, reason):
                    if conn.state is ConnState.READY and conn.in_flight:
                        conn.move(Trigger.DRAIN)
                        conn.drain_reason = reason
                    else:
                        self.close(conn, reason)
                case AdoptAs(conn, new_key):
                    old_key = conn.key
                    if self.table.live(new_key) is not None:
                        raise PolicyMisuse(
                            f"cannot adopt {old_key} as {new_key}: already live "
                            f"({self._describe()})"
                        )
                    self.table.rekey(conn, new_key)
                    self.metrics.on_role_change(old_key.role, new_key.role)
                    self.out.append(Adopt(conn.conn_id, old_key, new_key))
                case AskIdentity(conn, broker_id, cluster_id):
                    conn.checking = broker_id
                    self.out.append(CheckIdentity(conn.conn_id, broker_id, cluster_id))
                case Open(key):
                    self.get_or_dial(key)

    def take(self, placement: Placement) -> Connection | None:
        """Carry out ``placement``'s dials: the connection the request goes on, or None if
        it stays pending (:class:`OpenThenPlace` is the caller's to repeat)."""
        match placement:
            case SendOn(conn):
                return conn
            case OpenFor(key):
                return self.get_or_dial(key)
            case Wait(opening) | OpenThenPlace(opening):
                for key in opening:
                    self.get_or_dial(key)
                return None

    def get_or_dial(self, key: ConnectionKey) -> Connection | None:
        """The usable connection for ``key``, or a new record if there is none (dialled now,
        or left DEFERRED, as the policy's ``before_dial`` decides). None while the key is
        draining (wait for it to close) or backing off after a failed dial."""
        conn = self.table.live(key)
        if conn is not None:
            return None if conn.state is ConnState.DRAINING else conn
        if self.table.in_backoff(key, self.now_ms):
            return None
        conn = self.table.create(key, self.now_ms)
        decision = self._before_dial(conn)
        self.carry_out(decision.closing)
        if isinstance(decision, Dial):
            self.carry_out((StartDial(conn),))
        return conn

    def close(self, conn: Connection, reason: CloseReason) -> None:
        """Close ``conn`` now; anything it still held goes back to pending."""
        had_socket = conn.state in SOCKET_STATES
        conn.move(Trigger.CLOSE)
        self._forget(conn)
        if had_socket:
            self.metrics.on_gone(conn.role, failed=False)
            self.out.append(Close(conn.conn_id, reason))
        self.book.requeue(conn, keep=not self.closed)

    def send(self, conn: Connection, request: Request) -> None:
        """``request`` goes out on READY ``conn``."""
        self.book.send(conn, request, self.now_ms)
        self.out.append(Lease(conn.conn_id, request.request_id))

    def expire_idle(self) -> None:
        """Close READY connections quiet for ``connections_max_idle_ms`` and not awaiting a
        response (the rule of the Java client and aiokafka alike)."""
        first = self.idle.first
        if first is None or first > self.now_ms:
            return  # nothing due: most events, the hot path's included
        for conn in list(self.idle.expired(self.table, self.now_ms)):
            self.close(conn, CloseReason.IDLE)

    def complete(self, request_id: int) -> None:
        """Request ``request_id`` is over: answered, failed or withdrawn. A draining
        connection it leaves with nothing in flight closes."""
        conn = self.book.complete(request_id, self.now_ms)
        if conn is not None and conn.state is ConnState.DRAINING and not conn.in_flight:
            self.close(conn, conn.drain_reason)

    # --- what the driver reports about connections ---------------------------------------

    def known(self, conn_id: int) -> Connection | None:
        """The record ``conn_id`` names, or None if it was closed already (the driver's
        report crossed our Close); :class:`PolicyMisuse` for an id never handed out."""
        conn = self.table.get(conn_id)
        if conn is None and not self.table.issued(conn_id):
            raise PolicyMisuse(f"event for connection {conn_id}, which was never dialled")
        return conn

    def established(self, conn_id: int, address: str | None, checks: bool) -> None:
        """The dial of ``conn_id`` succeeded: what waited on it goes out."""
        conn = self.known(conn_id)
        if conn is None:
            return
        conn.address, conn.checks_identity = address, checks
        conn.move(Trigger.ESTABLISHED)
        conn.failures = 0
        conn.last_used_ms = self.now_ms
        self.idle.start(conn_id, self.now_ms)
        waiting, conn.waiting = conn.waiting, []
        for request in waiting:
            self.send(conn, request)

    def failed(self, conn_id: int) -> None:
        """The dial of ``conn_id`` failed: its key backs off, what it held goes back."""
        conn = self.known(conn_id)
        if conn is None:
            return
        conn.move(Trigger.FAIL)
        conn.failures += 1
        conn.retry_at_ms = self.now_ms + self.backoff_ms(conn.failures)
        self.table.failed(conn)
        self.metrics.on_gone(conn.role, failed=True)
        self.book.requeue(conn, keep=not self.closed)

    def peer_closed(self, conn_id: int) -> None:
        """The peer closed ``conn_id``: what it held goes back."""
        conn = self.known(conn_id)
        if conn is None:
            return
        conn.move(Trigger.PEER_CLOSED)
        self._forget(conn)
        self.metrics.on_gone(conn.role, failed=False)
        self.book.requeue(conn, keep=not self.closed)

    def shutdown(self) -> None:
        """The client closed: every connection closes, every request is dropped."""
        self.closed = True
        self.book.pending = []
        for conn in self.table.all():
            if conn.state is ConnState.FAILED:
                self.table.retire(conn)
            else:
                self.close(conn, CloseReason.SHUTDOWN)
        self.table.clear_failed()
        self.book.placed.clear()

    def retry_deadline(self) -> float | None:
        """When the earliest reconnect backoff ends, if requests are waiting for one."""
        if not self.book.pending:
            return None
        times = self.table.retry_times(self.now_ms)
        return min(times) if times else None

    def backoff_ms(self, failures: int) -> float:
        """Exponential reconnect backoff, no jitter (jitter would make runs differ by policy)."""
        base = self.config.reconnect_backoff_ms
        return float(min(self.config.reconnect_backoff_max_ms, base * 2 ** max(0, failures - 1)))

    def _forget(self, conn: Connection) -> None:
        self.table.forget(conn)
