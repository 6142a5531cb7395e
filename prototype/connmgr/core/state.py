"""Connection states and the one table of transitions between them.

Every state change of every connection in every policy goes through :func:`next_state`; a
change the table does not list raises :class:`~connmgr.errors.InvalidTransition` naming the
state and the trigger. The docs draw the state diagram from :data:`TRANSITIONS`.

    DEFERRED --dial--> CONNECTING --established--> READY --drain--> DRAINING --close--> CLOSED
                           |                         |                  |
                           +--fail--> FAILED         +--peer_closed-----+--peer_closed--> CLOSED

DEFERRED is a connection that is wanted but not dialled yet (waiting for a socket-budget slot).
FAILED holds a reconnect backoff deadline and no socket. Only CONNECTING, READY and DRAINING
hold a socket.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from connmgr.errors import InvalidTransition


class ConnState(enum.Enum):
    DEFERRED = "deferred"
    CONNECTING = "connecting"
    READY = "ready"
    DRAINING = "draining"
    FAILED = "failed"
    CLOSED = "closed"

    __hash__ = object.__hash__  # identity: see Purpose


class Trigger(enum.Enum):
    DIAL = "dial"
    ESTABLISHED = "established"
    FAIL = "fail"
    DRAIN = "drain"
    CLOSE = "close"
    PEER_CLOSED = "peer_closed"

    __hash__ = object.__hash__


S, T = ConnState, Trigger

TRANSITIONS: Mapping[tuple[ConnState, Trigger], ConnState] = {
    (S.DEFERRED, T.DIAL): S.CONNECTING,
    (S.DEFERRED, T.CLOSE): S.CLOSED,
    (S.CONNECTING, T.ESTABLISHED): S.READY,
    (S.CONNECTING, T.FAIL): S.FAILED,
    (S.CONNECTING, T.CLOSE): S.CLOSED,
    (S.READY, T.DRAIN): S.DRAINING,
    (S.READY, T.CLOSE): S.CLOSED,
    (S.READY, T.PEER_CLOSED): S.CLOSED,
    (S.DRAINING, T.CLOSE): S.CLOSED,
    (S.DRAINING, T.PEER_CLOSED): S.CLOSED,
    (S.FAILED, T.CLOSE): S.CLOSED,
}
"""(state, trigger) -> next state. Absent pairs are impossible and raise."""

SOCKET_STATES = frozenset({S.CONNECTING, S.READY, S.DRAINING})
"""States in which a connection holds an operating-system socket."""

del S, T


def next_state(state: ConnState, trigger: Trigger) -> ConnState:
    """The state after ``trigger`` in ``state``; raises InvalidTransition if not allowed."""
    try:
        return TRANSITIONS[(state, trigger)]
    except KeyError:
        allowed = sorted(t.value for (s, t) in TRANSITIONS if s is state)
        raise InvalidTransition(
            f"connection in state {state.value} cannot take {trigger.value!r}; "
            f"allowed: {', '.join(allowed) or 'nothing (terminal state)'}"
        ) from None


def transitions_markdown() -> str:
    """The transition table as a Markdown table (the docs embed this text verbatim)."""
    lines = ["| from | trigger | to |", "|---|---|---|"]
    for (state, trigger), target in TRANSITIONS.items():
        lines.append(f"| {state.value} | {trigger.value} | {target.value} |")
    return "\n".join(lines)
