"""What a policy's hooks decide, for the base class to carry out: decide, then do.

A policy's hooks (:mod:`connmgr.core.policy`) never change a connection nor emit an action.
They return decisions -- the values below -- and :meth:`Executor.carry_out
<connmgr.core.execution.Executor.carry_out>` performs each one, so every close, dial, adoption
and identity check, and every action that tells the driver of one, happens in one place.

Hooks that may decide several things (``on_metadata``, ``review``, ...) are generators: the
base class carries out each decision as it is yielded, before the hook resumes, so a later
decision of the same hook sees the earlier ones done (a closed connection is gone from the
table, an adopted one has its new key).

:meth:`Policy.before_dial <connmgr.core.policy.Policy.before_dial>` answers one question for
a new connection record: :class:`Dial` it now or :class:`Defer` it, each after closing the
connections it names.

:meth:`Policy.place <connmgr.core.policy.Policy.place>` answers where one request goes, as a
:data:`Placement`: :class:`SendOn` a connection the policy holds, :class:`OpenFor` a key
(its live connection, else a new one), :class:`Wait` (pending until a later event, with the
dials a poll loop makes meanwhile), or :class:`OpenThenPlace` (dial, then ask again). ``place``
dials nothing itself: the base class carries the placement out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from connmgr.core.actions import CloseReason
from connmgr.core.connections import Connection
from connmgr.core.identity import ConnectionKey
from connmgr.core.state import ConnState


@dataclass(frozen=True, slots=True, eq=False)
class CloseNow:
    """Close ``conn`` now; whatever it held goes back to pending."""

    conn: Connection
    reason: CloseReason


@dataclass(frozen=True, slots=True, eq=False)
class Drain:
    """Let ``conn`` take no new request and close once its in-flight requests are answered
    (at once if it has none, or is not READY)."""

    conn: Connection
    reason: CloseReason


@dataclass(frozen=True, slots=True, eq=False)
class AdoptAs:
    """Give the socket of ``conn`` the identity ``key``, which must have no live record."""

    conn: Connection
    key: ConnectionKey


@dataclass(frozen=True, slots=True, eq=False)
class AskIdentity:
    """Ask the broker on READY ``conn`` whether it is ``broker_id`` of ``cluster_id``
    (KIP-1242); its answer arrives as an ``IdentityChecked`` event."""

    conn: Connection
    broker_id: int
    cluster_id: str


@dataclass(frozen=True, slots=True, eq=False)
class Open:
    """Make sure ``key`` has a connection: nothing if one is live or its backoff runs, else a
    new record, dialled or deferred as :meth:`Policy.before_dial` says."""

    key: ConnectionKey


@dataclass(frozen=True, slots=True, eq=False)
class StartDial:
    """Dial the DEFERRED record ``conn`` now."""

    conn: Connection


Decision = CloseNow | Drain | AdoptAs | AskIdentity | Open | StartDial
"""One thing a hook decided."""


@dataclass(frozen=True, slots=True)
class Dial:
    """A new record dials now, once the connections in ``closing`` are closed."""

    closing: tuple[CloseNow, ...] = ()


@dataclass(frozen=True, slots=True)
class Defer:
    """A new record stays DEFERRED, its requests queued on it, until the policy decides
    :class:`StartDial`; the connections in ``closing`` are closed first."""

    closing: tuple[CloseNow, ...] = ()


DialDecision = Dial | Defer
"""The answer of :meth:`Policy.before_dial`."""


@dataclass(frozen=True, slots=True, eq=False)
class SendOn:
    """The request goes on ``conn``: sent now if READY, queued on it while CONNECTING or
    DEFERRED (any other state is a policy's mistake)."""

    conn: Connection


@dataclass(frozen=True, slots=True)
class OpenFor:
    """The request goes on the connection for ``key``: the live one, else a new record,
    dialled or deferred as :meth:`Policy.before_dial` says. It stays pending while the
    key's connection drains or its reconnect backoff runs."""

    key: ConnectionKey


@dataclass(frozen=True, slots=True)
class Wait:
    """The request stays pending until a later event; the connections for ``opening`` are
    opened meanwhile, as :class:`OpenFor` opens one (a poll loop that dials its pick and
    sends once it is READY)."""

    opening: tuple[ConnectionKey, ...] = ()


@dataclass(frozen=True, slots=True)
class OpenThenPlace:
    """Open the connections for ``opening`` first, then offer the request to ``place``
    again, which sees them (a client whose pick depends on a dial it just made)."""

    opening: tuple[ConnectionKey, ...]


Placement = SendOn | OpenFor | Wait | OpenThenPlace
"""The answer of :meth:`Policy.place <connmgr.core.policy.Policy.place>`."""

WAIT = Wait()
"""The request stays pending, nothing opened."""

NO_DECISIONS: Iterator[Decision] = iter(())
"""A hook's answer when it decides nothing (an exhausted iterator, so one serves every
call): the base class skips carrying it out."""


def retire(conn: Connection, reason: CloseReason) -> Drain | CloseNow | None:
    """The decision that takes ``conn`` out of service: drain a READY one (it closes once
    its in-flight requests are answered), close one not yet draining, leave one draining."""
    if conn.state is ConnState.READY:
        return Drain(conn, reason)
    if conn.state is not ConnState.DRAINING:
        return CloseNow(conn, reason)
    return None
