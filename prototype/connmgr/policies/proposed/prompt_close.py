"""Rule (g) of the proposed policy: prompt close of what nothing needs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from connmgr.core.actions import CloseReason
from connmgr.core.connections import Connection
from connmgr.core.decisions import CloseNow, Decision
from connmgr.core.identity import Purpose, Role
from connmgr.core.policy import Policy
from connmgr.core.state import ConnState
from connmgr.policies.proposed.adoption import Adoption
from connmgr.policies.proposed.coordinators import coordinators_by_purpose, leaders_in_use

RETURN_WAIT_MS = 540_000
"""How long a lost role is waited for when idle expiry is off (``connections_max_idle_ms =
-1``): the Java client's default ``connections.max.idle.ms``, so the wait stays bounded."""


@dataclass(slots=True)
class _Lost:
    """A broker's role (leader in use, coordinator) whose connection was lost: since when,
    and whether the client has since seen the role go elsewhere."""

    at_ms: float
    away: bool = False


class PromptClose:
    """g. Prompt close: a connection nothing needs (not a leader in use, not the coordinator,
    not the last connection left for any-node requests, nothing in flight) closes after
    ``connection_linger_ms``, whatever ``connections.max.idle.ms`` says -- except while its
    broker's role is away after a restart: when a connection to a leader in use or to a
    coordinator is lost (reset by the broker, or closed for a stale address, rule h2), a
    connection of that purpose to that broker waits for the role to come back (a restarted
    broker leads nothing until a preferred-leader election gives its partitions back) and
    closes by ``connections.max.idle.ms``, as today's clients keep it, for at most that long
    after the loss.

    Why the exception: a restart moves a broker's partitions and coordinators away for a
    while, not for good. The client's next request to the restarted broker (its metadata
    still names it) dials the new process, which answers NOT_LEADER; closing that socket 3 s
    later and dialling it again when the election brings the role back costs a handshake
    today's clients do not pay (they keep idle sockets 9 minutes). Nothing else is held
    longer: a role the client let go (an assignment that shrank, a topic it stopped using)
    or one moved for good by a reassignment, with no connection lost, closes after the
    linger; the wait ends when the role is back (the connection is needed again), when the
    broker leaves the metadata, or ``connections.max.idle.ms`` after the loss (the Java
    client's default when idle expiry is off).

    A review is needed only when something changed or a linger or a wait ran out
    (:meth:`due`): requests and responses alone cannot make a connection unneeded (a busy
    connection is kept, and the linger counts from its last use).
    """

    def __init__(self, policy: Policy, adoption: Adoption) -> None:
        self._policy = policy
        self._adoption = adoption
        self.lingering: list[Connection] = []
        """The READY connections no role needs, waiting out their linger (or busy)."""
        self._lost: dict[tuple[int, Purpose], _Lost] = {}
        """(broker, purpose) whose connection was lost while a role needed it."""

    # --- lost roles ----------------------------------------------------------------------

    def lost(self, conn: Connection) -> None:
        """``conn`` was lost (reset by its peer, or closed for a stale address): if a role
        needed it, a connection of its purpose to its broker waits for that role."""
        broker_id = conn.key.broker_id
        if conn.role is Role.BOOTSTRAP or broker_id is None:
            return
        if self._role_needs(broker_id, conn.key.purpose, leaders_in_use(self._policy)):
            self._lost[(broker_id, conn.key.purpose)] = _Lost(self._policy.now_ms)

    def _wait_ms(self) -> int:
        idle = self._policy.config.idle_expiry_ms
        return RETURN_WAIT_MS if idle is None else idle

    def _awaited(self, broker_id: int, purpose: Purpose) -> bool:
        """Whether a connection of ``purpose`` to ``broker_id`` waits for its lost role."""
        lost = self._lost.get((broker_id, purpose))
        return lost is not None and self._policy.now_ms < lost.at_ms + self._wait_ms()

    def _settle_lost(self, leaders: frozenset[int]) -> None:
        """Forget the lost roles that are back, whose wait ran out, or whose broker left the
        metadata; note those the client has seen go elsewhere."""
        md = self._policy.metadata
        now = self._policy.now_ms
        for (broker_id, purpose), lost in list(self._lost.items()):
            gone = md is not None and broker_id not in md.by_id
            needed = self._role_needs(broker_id, purpose, leaders)
            if gone or now >= lost.at_ms + self._wait_ms() or (needed and lost.away):
                del self._lost[(broker_id, purpose)]
            elif not needed:
                lost.away = True

    # --- need ----------------------------------------------------------------------------

    def needs(self) -> tuple[frozenset[int], frozenset[int]]:
        """(kept for their role, busy): the READY connections a role keeps (with the
        any-node anchor, and those waiting for a lost role), and those only a request in
        flight or queued keeps."""
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
        """Whether the connection's role keeps it open, or the wait for a lost role does
        (busy connections are never closed either, but a busy connection whose role is over
        still lingers)."""
        if conn.role is Role.BOOTSTRAP:
            return self._adoption.keeps(conn)
        broker_id = conn.key.broker_id
        assert broker_id is not None
        purpose = conn.key.purpose
        return self._role_needs(broker_id, purpose, leaders) or self._awaited(broker_id, purpose)

    def _role_needs(self, broker_id: int, purpose: Purpose, leaders: frozenset[int]) -> bool:
        """Whether a role needs a connection of ``purpose`` to ``broker_id`` now."""
        wanted = coordinators_by_purpose(self._policy)
        return broker_id in wanted[purpose] or (purpose is Purpose.DATA and broker_id in leaders)

    # --- linger --------------------------------------------------------------------------

    def deadline(self, conn: Connection) -> float:
        """When an unneeded ``conn`` may close: the linger after it became unneeded or was
        last used, whichever is later."""
        assert conn.unneeded_since_ms is not None
        return max(conn.unneeded_since_ms, conn.last_used_ms) + (
            self._policy.config.connection_linger_ms
        )

    def _wait_ends(self) -> list[float]:
        """When each wait for a lost role runs out."""
        wait = self._wait_ms()
        return [lost.at_ms + wait for lost in self._lost.values()]

    def due(self) -> bool:
        """Whether a lingering connection's linger, or a wait for a lost role, has run out.

        Asked after every event, the hot path's included: with nothing lingering and no role
        lost (a warm client's steady state) it answers without building a list."""
        if not self.lingering and not self._lost:
            return False
        now = self._policy.now_ms
        if any(end <= now for end in self._wait_ends()):
            return True
        return any(self.deadline(c) <= now for c in self.lingering)

    def review(self) -> Iterator[Decision]:
        """Close what no role needs once its linger is over; keep the rest lingering."""
        policy = self._policy
        now = policy.now_ms
        if self._lost:
            self._settle_lost(leaders_in_use(policy))
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
        """The earliest linger or wait for a lost role to run out, if any."""
        if not self.lingering and not self._lost:
            return None  # the steady state, on every event: see due()
        times = [self.deadline(c) for c in self.lingering] + self._wait_ends()
        return min(times) if times else None
