"""Host-name resolution for the aio driver: what makes the proposed policy's rule (h2) work in
the drop-in clients.

The driver resolves a broker's host name when it dials it and, while the client holds a
connection to that name, again every ``ttl_ms``, and tells the policy each answer that
differs from the last one it told (``AddressesResolved``); ``ConnectionEstablished.address``
says which address a socket reached (:func:`peer_address`). Literal addresses are never
resolved: a client whose hosts are all literals feeds exactly the events it fed before.

The dial itself still hands aiokafka the *name*, which resolves it again inside asyncio's
``create_connection``: that is where TLS gets its ``server_hostname`` (SNI and certificate
verification against the name; dialling the resolved IP instead would verify the certificate
against the IP and fail for every certificate issued to a name) and where SASL/GSSAPI takes
the Kerberos host. Both lookups go through the loop's ``getaddrinfo`` by default, and the
address reported for a socket is the one the kernel connected it to, never a guess, so the
policy compares facts: the peer of the socket against the name's latest answer.

A failed lookup that is not a definite "no such name" (a DNS server timeout, ``EAI_AGAIN``)
is no answer: the last one stands, so a DNS outage never closes a working connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import Any

Lookup = Callable[[str, int], Awaitable[frozenset[str] | None]]
"""``lookup(host, port)``: the addresses ``host`` names now; empty when the name does not
exist (NXDOMAIN, no address record); None when there is no answer (try again later). Must
not raise."""

_NO_SUCH_NAME = frozenset(
    code for code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)) if code is not None
)
"""``getaddrinfo`` errors that say the name resolves to nothing (not: no answer came)."""


def is_literal(host: str) -> bool:
    """True if ``host`` is an IPv4 or IPv6 address, not a name (nothing to resolve)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def system_lookup(host: str, port: int) -> frozenset[str] | None:
    """The running loop's ``getaddrinfo`` for TCP to ``host:port`` (the function asyncio's
    ``create_connection`` resolves with, looked up on the loop at each call), as a
    :data:`Lookup`."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return frozenset() if exc.errno in _NO_SUCH_NAME else None
    except OSError:
        return None
    return frozenset(str(info[4][0]) for info in infos)


def peer_address(conn: Any) -> str | None:
    """The address an aiokafka connection's socket is connected to (``getpeername()`` of its
    transport), or None if it cannot say (closed meanwhile, not an aiokafka connection).

    aiokafka 0.14 exposes no transport; ``AIOKafkaConnection._writer`` is the
    ``asyncio.StreamWriter`` its ``connect()`` built, the only way to the socket."""
    writer = getattr(conn, "_writer", None)
    peer = None if writer is None else writer.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else None


class Resolver:
    """Resolves host names for one driver and reports changed answers.

    ``report(host, addresses)`` is called with each answer that differs from the last one
    reported for ``host`` (the first answer always differs). ``in_use(host)``: whether the
    client still holds a connection to ``host``; a name is re-resolved every ``ttl_ms``
    only while it does. ``ttl_ms`` 0: names are resolved only when dialled.

    One ``loop.call_later`` timer per name in use, and at most one lookup task per name;
    :meth:`aclose` cancels both, so nothing outlives the client.
    """

    def __init__(
        self,
        ttl_ms: float,
        report: Callable[[str, frozenset[str]], None],
        in_use: Callable[[str], bool],
        lookup: Lookup | None = None,
    ) -> None:
        if ttl_ms < 0:
            raise ValueError(f"ttl_ms={ttl_ms}: must be >= 0")
        self._ttl_s = ttl_ms / 1000.0
        self._report = report
        self._in_use = in_use
        self._lookup = lookup or system_lookup
        self._loop = asyncio.get_running_loop()
        self._answers: dict[str, frozenset[str]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._lookups: dict[str, asyncio.Task[None]] = {}
        self.closed = False

    def __repr__(self) -> str:
        return f"<Resolver ttl={self._ttl_s:g}s names={sorted(self._answers)}>"

    def answer(self, host: str) -> frozenset[str] | None:
        """The last answer reported for ``host`` (None: none yet)."""
        return self._answers.get(host)

    @property
    def pending(self) -> int:
        """Timers and lookups under way (0 once closed)."""
        return len(self._timers) + len(self._lookups)

    async def before_dial(self, host: str, port: int) -> None:
        """Resolve ``host`` before the driver dials it, unless an answer younger than the TTL
        is cached (a re-resolution timer is running for it); then keep it fresh."""
        if host in self._timers:
            return
        await self._resolve(host, port)

    async def _resolve(self, host: str, port: int) -> None:
        answer = await self._lookup(host, port)
        if self.closed:
            return
        if answer is not None and answer != self._answers.get(host):
            self._answers[host] = answer
            self._report(host, answer)
        if self._ttl_s > 0 and host not in self._timers:
            self._timers[host] = self._loop.call_later(self._ttl_s, self._expire, host, port)

    def _expire(self, host: str, port: int) -> None:
        del self._timers[host]
        if self.closed or not self._in_use(host) or host in self._lookups:
            return  # no connection left: the next dial resolves it
        task = self._loop.create_task(self._resolve(host, port))
        self._lookups[host] = task
        task.add_done_callback(lambda _: self._lookups.pop(host, None))

    async def aclose(self) -> None:
        """Stop every timer and lookup; report nothing more."""
        self.closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        tasks = list(self._lookups.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._lookups.clear()
