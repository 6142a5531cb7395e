"""Where each request of a policy is: pending (not yet on a connection) or placed on one.

Bookkeeping only, like :class:`~connmgr.core.connections.ConnectionTable`: the book takes no
decision and emits no action. Its rule is that no request is ever lost: a request leaves the
book only when it is over (answered, failed, withdrawn), handed back to the caller, or the
client closes; whatever a connection held when it went goes back to pending, in front.
"""

from __future__ import annotations

from connmgr.core.connections import Connection, ConnectionTable
from connmgr.core.metadata import ClusterMetadata
from connmgr.core.request import Request


class RequestBook:
    """The pending requests, in order, and the connection each placed request is on."""

    __slots__ = ("pending", "placed")

    def __init__(self) -> None:
        self.pending: list[Request] = []
        self.placed: dict[int, Connection] = {}

    def knows(self, request_id: int) -> bool:
        """Whether ``request_id`` is in the book (pending or placed)."""
        return request_id in self.placed or any(r.request_id == request_id for r in self.pending)

    def send(self, conn: Connection, request: Request, now_ms: float) -> None:
        """``request`` goes out on READY ``conn`` now."""
        conn.in_flight[request.request_id] = request
        conn.last_used_ms = now_ms
        self.placed[request.request_id] = conn

    def queue(self, conn: Connection, request: Request) -> None:
        """``request`` waits on ``conn`` (CONNECTING or DEFERRED) until it is READY."""
        conn.waiting.append(request)
        self.placed[request.request_id] = conn

    def complete(self, request_id: int, now_ms: float) -> Connection | None:
        """Request ``request_id`` is over: the connection it was placed on (last used now),
        or None if it was still pending."""
        conn = self.placed.pop(request_id, None)
        if conn is None:
            # Still pending: withdrawn before any connection took it, or over for a driver
            # that learnt first that its connection broke (the policy had put it back to
            # pending). Drop it.
            self.pending = [r for r in self.pending if r.request_id != request_id]
            return None
        if conn.in_flight.pop(request_id, None) is None:
            # Queued on a connection still dialling, and withdrawn: unqueue it.
            conn.waiting = [r for r in conn.waiting if r.request_id != request_id]
        conn.last_used_ms = now_ms
        return conn

    def requeue(self, conn: Connection, *, keep: bool) -> None:
        """What ``conn`` held leaves it: back to pending, in front (``keep``), or dropped
        (the client is closed)."""
        held = list(conn.in_flight.values()) + conn.waiting
        conn.in_flight = {}
        conn.waiting = []
        for request in held:
            self.placed.pop(request.request_id, None)
        if keep:
            self.pending[:0] = held

    def unqueue_gone_brokers(self, table: ConnectionTable, md: ClusterMetadata) -> None:
        """Requests queued on a connection (not yet sent) to a broker ``md`` no longer lists
        go back to pending, where they are re-placed or rejected: a dial to a broker that
        left the cluster must not hold them until ``request_timeout_ms``."""
        for conn in table.all():
            broker_id = conn.key.broker_id
            if conn.waiting and broker_id is not None and broker_id not in md.by_id:
                waiting, conn.waiting = conn.waiting, []
                for request in waiting:
                    self.placed.pop(request.request_id, None)
                self.pending[:0] = waiting

    def clear(self) -> None:
        self.pending = []
        self.placed.clear()
