"""Rule (g) of the proposed policy: prompt close of what nothing needs."""

from __future__ import annotations

from collections.abc import Iterator

from connmgr.core.actions import CloseReason
from connmgr.core.connections import Connection
from connmgr.core.decisions import CloseNow, Decision
from connmgr.core.identity import Purpose, Role
from connmgr.core.policy import Policy
from connmgr.core.state import ConnState
from connmgr.policies.proposed.adoption import Adoption
from connmgr.policies.proposed.coordinators import coordinators_by_purpose, leaders_in_use


class PromptClose:
    """g. Prompt close: a connection nothing needs (not a leader in use, not the coordinator,
    not the last connection left for any-node requests, nothing in flight) closes after
    ``connection_linger_ms``, whatever ``connections.max.idle.ms`` says.

    A review is needed only when something changed or a linger ran out (:meth:`due`):
    requests and responses alone cannot make a connection unneeded (a busy connection is
    kept, and the linger counts from its last use).
    """

    def __init__(self, policy: Policy, adoption: Adoption) -> None:
        self._policy = policy
        self._adoption = adoption
        self.lingering: list[Connection] = []
        """The READY connections no role needs, waiting out their linger (or busy)."""

    def needs(self) -> tuple[frozenset[int], frozenset[int]]:
        """(kept for their role, busy): the READY connections a role keeps (with the
        any-node anchor), and those only a request in flight or queued keeps."""
        policy = self._policy
        leaders = leaders_in_use(policy)
        ready = [c for c in policy.table.records() if c.state is ConnState.READY]
        kept = {c.conn_id for c in ready if self._needed(c, leaders)}
        busy = {c.conn_id for c in ready if c.busy and c.conn_id not in kept}
        general = [c for c in ready if c.role is not Role.COORDINATION]
        if general and not any(c.conn_id in kept or c.conn_id in busy for c in general):
            # The last connection left for any-node requests: a broker's before the
            # stand-in, then the last used.
            anchor = max(
                general, key=lambda c: (c.role is not Role.BOOTSTRAP, c.last_used_ms, c.conn_id)
            )
            kept.add(anchor.conn_id)
        return frozenset(kept), frozenset(busy)

    def _needed(self, conn: Connection, leaders: frozenset[int]) -> bool:
        """Whether the connection's role keeps it open (busy connections are never closed
        either, but a busy connection whose role is over still lingers)."""
        if conn.role is Role.BOOTSTRAP:
            return self._adoption.keeps(conn)
        broker_id = conn.key.broker_id
        assert broker_id is not None
        wanted = coordinators_by_purpose(self._policy)
        return broker_id in wanted[conn.key.purpose] or (
            conn.key.purpose is Purpose.DATA and broker_id in leaders
        )

    def deadline(self, conn: Connection) -> float:
        """When an unneeded ``conn`` may close: the linger after it became unneeded or was
        last used, whichever is later."""
        assert conn.unneeded_since_ms is not None
        return max(conn.unneeded_since_ms, conn.last_used_ms) + (
            self._policy.config.connection_linger_ms
        )

    def due(self) -> bool:
        """Whether a lingering connection's linger has run out."""
        now = self._policy.now_ms
        return bool(self.lingering) and any(self.deadline(c) <= now for c in self.lingering)

    def review(self) -> Iterator[Decision]:
        """Close what no role needs once its linger is over; keep the rest lingering."""
        policy = self._policy
        now = policy.now_ms
        kept, _ = self.needs()
        self.lingering = []
        for conn in policy.table.records():
            if conn.state is not ConnState.READY or conn.conn_id in kept:
                conn.unneeded_since_ms = None
                continue
            # Unneeded by its role. A busy one is not closed, but it lingers from now: its
            # last response is not a change that would bring a review, so it must already
            # be on the lingering list when that response comes (found by the deep profile:
            # a coordinator lost while two of its requests were in flight).
            if conn.unneeded_since_ms is None:
                conn.unneeded_since_ms = now
            stand_in_done = self._adoption.close_unneeded(conn)
            if stand_in_done is not None:
                yield stand_in_done
            elif not conn.busy and self.deadline(conn) <= now:
                yield CloseNow(conn, CloseReason.UNNEEDED)
            else:
                self.lingering.append(conn)

    def next_deadline(self) -> float | None:
        """The earliest linger to run out, if any."""
        if not self.lingering:
            return None
        return min(self.deadline(c) for c in self.lingering)
