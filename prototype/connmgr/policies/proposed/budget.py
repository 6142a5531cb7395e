"""Rule (i) of the proposed policy: the socket budget."""

from __future__ import annotations

from collections.abc import Iterator

from connmgr.core.actions import CloseReason
from connmgr.core.connections import Connection
from connmgr.core.decisions import CloseNow, Decision, Defer, Dial, StartDial
from connmgr.core.policy import Policy
from connmgr.core.state import ConnState


class SocketBudget:
    """i. Socket budget: with ``max_connections``, a dial at the cap first closes the least
    recently used quiet connection, unneeded ones first; with none quiet, the dial is DEFERRED
    and its requests wait for the next socket to go quiet. The cap is never exceeded.
    Needed-but-quiet connections may be closed too: otherwise a budget below the number of
    needed connections (a consumer's fetch and coordinator sockets with a budget of 1) would
    starve a request forever instead of slowing it down.

    Sockets counted are those CONNECTING, READY or DRAINING (:meth:`Policy.socket_count`).
    """

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self.waiting: list[Connection] = []
        """The DEFERRED records, in the order their dials were deferred."""

    def admit(self, conn: Connection, closing: tuple[CloseNow, ...]) -> Dial | Defer:
        """Whether new record ``conn`` dials now, once the READY connections ``closing`` are
        closed (and, at the cap, a quiet one more), or waits for a socket."""
        if self._has_room(freed=len(closing)):
            return Dial(closing)
        victim = self._victim(frozenset(c.conn.conn_id for c in closing))
        if victim is not None:
            return Dial((*closing, CloseNow(victim, CloseReason.BUDGET)))
        self.waiting.append(conn)  # requests wait on it until a socket is free
        return Defer(closing)

    def dial_deferred(self) -> Iterator[Decision]:
        """Start the deferred dials a socket is free for (or can be made free for)."""
        waiting, self.waiting = self.waiting, []
        for conn in waiting:
            if conn.state is not ConnState.DEFERRED:
                continue  # closed meanwhile
            if self._has_room():
                yield StartDial(conn)
                continue
            victim = self._victim(frozenset())
            if victim is None:
                self.waiting.append(conn)
                continue
            yield CloseNow(victim, CloseReason.BUDGET)
            yield StartDial(conn)

    def _has_room(self, freed: int = 0) -> bool:
        cap = self._policy.config.max_connections
        return cap is None or self._policy.metrics.open_now - freed < cap

    def _victim(self, spared: frozenset[int]) -> Connection | None:
        """The quiet connection to close for a dial: unneeded first, then least recently
        used. ``spared``: connections already being closed for it (the needed set does not
        depend on them: they are quiet bootstrap stand-ins, never kept once a broker dials)."""
        needed = self._policy.needed_connections()
        assert needed is not None
        quiet = [
            c
            for c in self._policy.table.records()
            if c.state is ConnState.READY and not c.busy and c.conn_id not in spared
        ]
        if not quiet:
            return None
        return min(quiet, key=lambda c: (c.conn_id in needed, c.last_used_ms, c.conn_id))
