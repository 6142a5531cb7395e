"""Every connection one Java client made, from its ``NetworkClient`` log, with the moments of
its life on the run's clock -- what the report counts handshakes and bursts from. Pure.

A connection is dialled (``Initiating connection``), connected at TCP level (``Completed
connection``), ready -- its TLS and SASL handshakes done -- when the client starts fetching
its API versions (``Initiating API versions fetch from node N``: NetworkClient does that only
once the channel is ready), and ends with a disconnect line or the client's close. The two
counts differ on this tier: a client dials a broker's delay forwarder, which accepts at once
and only then dials the broker, so a dial of a broker that is down completes its TCP connect
(to the forwarder) and is closed before any TLS byte: a TCP connect, never a handshake.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final

from connmgr.core.identity import Role
from connmgr.javalog import parse_connection_event
from connmgr_evidence.java.accounting import role_of

__all__ = ["ConnLife", "connection_lives", "open_at", "seconds_since"]

_READY: Final = re.compile(
    r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\].*?\bInitiating API versions fetch from "
    r"node (?P<id>[+-]?\d+)\."
)


def seconds_since(origin: datetime, t: datetime) -> float:
    """``t`` on the run's clock: seconds since ``origin`` (both naive local times)."""
    return (t - origin).total_seconds()


@dataclass(frozen=True, slots=True)
class ConnLife:
    """One connection: its node id as logged, role, broker (None for bootstrap), the
    address dialled, and seconds on the run's clock when it was dialled, connected (TCP),
    ready (TLS + SASL done) and ended (None: not yet / never), and why it ended."""

    node: str
    role: Role
    broker: int | None
    host: str
    port: int
    dialled_s: float
    connected_s: float | None = None
    ready_s: float | None = None
    ended_s: float | None = None
    reason: str = ""

    def open_at(self, t_s: float) -> bool:
        """Whether the socket was held at ``t_s`` (dialled, not yet ended)."""
        return self.dialled_s <= t_s and (self.ended_s is None or self.ended_s > t_s)

    def seconds(self, until_s: float) -> float:
        """Socket-seconds from the dial to its end (or ``until_s``)."""
        end = until_s if self.ended_s is None else min(self.ended_s, until_s)
        return max(0.0, end - self.dialled_s)


def connection_lives(
    lines: Iterable[str], origin: datetime, closed_at: datetime | None = None
) -> list[ConnLife]:
    """Every connection in the log ``lines``, in dial order, times in seconds since
    ``origin``. With ``closed_at`` (the client's close, which logs nothing per connection)
    whatever is still open ends then with reason ``client close``.

    A line about a node with no open connection (a disconnect of a dial already ended) is
    ignored, as :func:`connmgr_evidence.java.accounting.build_ledger` ignores it."""
    lives: list[ConnLife] = []
    current: dict[str, int] = {}  # node id as printed -> index of its open connection
    for line in lines:
        if "Initiating API versions fetch" in line:
            m = _READY.search(line)
            if m is not None and m["id"] in current:
                i = current[m["id"]]
                if lives[i].ready_s is None:
                    t = seconds_since(origin, datetime.strptime(m["ts"], "%Y-%m-%d %H:%M:%S,%f"))
                    lives[i] = replace(lives[i], ready_s=t)
            continue
        event = parse_connection_event(line)
        if event is None:
            continue
        t = seconds_since(origin, event.timestamp)
        if event.kind == "connect":
            role, broker = role_of(event.node)
            current[event.node] = len(lives)
            lives.append(ConnLife(event.node, role, broker, event.host, event.port, t))
        elif event.kind == "established" and event.node in current:
            i = current[event.node]
            lives[i] = replace(lives[i], connected_s=t)
        elif event.kind in ("disconnect", "connect_error") and event.node in current:
            i = current.pop(event.node)
            lives[i] = replace(lives[i], ended_s=t, reason=event.reason)
    if closed_at is not None:
        end = seconds_since(origin, closed_at)
        for i in current.values():
            lives[i] = replace(lives[i], ended_s=end, reason="client close")
    return lives


def open_at(lives: Sequence[ConnLife], t_s: float, role: Role | None = None) -> int:
    """How many of ``lives`` held a socket at ``t_s`` (of ``role`` only, if given)."""
    return sum(1 for c in lives if c.open_at(t_s) and (role is None or c.role is role))
