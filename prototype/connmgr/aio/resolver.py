"""Host-name resolution for the aio driver: what makes the proposed policy's rule (h2) work in
the drop-in clients.

The driver looks a broker's host name up when it dials it -- except a name it never looked up
that no established connection reaches, whose dial's own resolution is then the only one
(:meth:`Resolver.watch` starts its refreshes once the dial is established) -- and, while the
client holds a connection to that name, again every ``ttl_ms``, and tells the policy how every
lookup ended
(``AddressesResolved``: the addresses of a successful answer, or the failure -- timeout,
SERVFAIL, NXDOMAIN, an empty answer); ``ConnectionEstablished.address`` says which address a
socket reached (:func:`peer_address`). The policy decides what a lookup means: the proposed
one closes nothing on a failed lookup, so a DNS outage never closes a working connection.
Literal addresses are never resolved: a client whose hosts are all literals feeds exactly the
events it fed before.

Lookups never block the event loop: the default one is the loop's ``getaddrinfo`` (run in the
loop's default executor), and every lookup is given up after ``timeout_ms`` and reported as a
``timeout`` (a thread still inside a hung ``getaddrinfo`` finishes on its own; the loop does
not wait for it). A dial waits for its name's lookup, at most that long, only when no answer
younger than the TTL is cached.

The dial itself still hands aiokafka the *name*, which resolves it again inside asyncio's
``create_connection``: that is where TLS gets its ``server_hostname`` (SNI and certificate
verification against the name; dialling the resolved IP instead would verify the certificate
against the IP and fail for every certificate issued to a name) and where SASL/GSSAPI takes
the Kerberos host. Both lookups go through the loop's ``getaddrinfo`` by default, and the
address reported for a socket is the one the kernel connected it to, never a guess, so the
policy compares facts: the peer of the socket against the name's latest answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from connmgr.core.events import AddressesResolved, LookupOutcome

Lookup = Callable[[str, int], Awaitable[AddressesResolved]]
"""``lookup(host, port)``: look ``host`` up once and say how it ended -- a successful answer
with its addresses, or a failed lookup (``AddressesResolved.failed``). Must not raise; may
hang: the :class:`Resolver` gives up after its timeout."""

DEFAULT_TIMEOUT_MS = 5_000.0
"""How long a lookup may take at most, unless the TTL is shorter (a lookup slower than the
refresh period is late for the next refresh anyway): the stub resolver's own default per
query (``timeout:5`` in resolv.conf)."""

_FAILURES = {
    code: outcome
    for code, outcome in (
        (socket.EAI_NONAME, LookupOutcome.NO_SUCH_NAME),
        (getattr(socket, "EAI_NODATA", None), LookupOutcome.EMPTY),
    )
    if code is not None
}
"""``getaddrinfo`` errors that are an answer without addresses; any other error
(``EAI_AGAIN``: SERVFAIL or no server answered, ``EAI_FAIL``, ...) is a server failure."""


def is_literal(host: str) -> bool:
    """True if ``host`` is an IPv4 or IPv6 address, not a name (nothing to resolve)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def system_lookup(host: str, port: int) -> AddressesResolved:
    """The running loop's ``getaddrinfo`` for TCP to ``host:port`` (the function asyncio's
    ``create_connection`` resolves with, looked up on the loop at each call), as a
    :data:`Lookup`."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        outcome = _FAILURES.get(exc.errno, LookupOutcome.SERVER_FAILURE)
        return AddressesResolved.failed(host, outcome)
    except OSError:
        return AddressesResolved.failed(host, LookupOutcome.SERVER_FAILURE)
    addresses = frozenset(str(info[4][0]) for info in infos)
    if not addresses:
        return AddressesResolved.failed(host, LookupOutcome.EMPTY)
    return AddressesResolved(host, addresses)


def peer_address(conn: Any) -> str | None:
    """The address an aiokafka connection's socket is connected to (``getpeername()`` of its
    transport), or None if it cannot say (closed meanwhile, not an aiokafka connection).

    aiokafka 0.14 exposes no transport; ``AIOKafkaConnection._writer`` is the
    ``asyncio.StreamWriter`` its ``connect()`` built, the only way to the socket."""
    writer = getattr(conn, "_writer", None)
    peer = None if writer is None else writer.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else None


class Resolver:
    """Looks host names up for one driver and reports every lookup.

    ``report(lookup)`` is called with how each lookup ended, failed or not, changed or not.
    ``in_use(host)``: whether the client still holds a connection to ``host``; a name is
    looked up again every ``ttl_ms`` only while it does. ``ttl_ms`` 0: names are looked up
    only when dialled. ``timeout_ms``: a lookup not done by then is reported as a
    ``timeout`` (default :data:`DEFAULT_TIMEOUT_MS`, or ``ttl_ms`` if shorter).

    One ``loop.call_later`` timer per name in use, and at most one lookup task per name;
    :meth:`aclose` cancels both, so nothing outlives the client.
    """

    def __init__(
        self,
        ttl_ms: float,
        report: Callable[[AddressesResolved], None],
        in_use: Callable[[str], bool],
        lookup: Lookup | None = None,
        timeout_ms: float | None = None,
    ) -> None:
        if ttl_ms < 0:
            raise ValueError(f"ttl_ms={ttl_ms}: must be >= 0")
        if timeout_ms is None:
            timeout_ms = min(DEFAULT_TIMEOUT_MS, ttl_ms) if ttl_ms > 0 else DEFAULT_TIMEOUT_MS
        if timeout_ms <= 0:
            raise ValueError(f"timeout_ms={timeout_ms}: must be > 0")
        self._ttl_s = ttl_ms / 1000.0
        self._timeout_s = timeout_ms / 1000.0
        self._report = report
        self._in_use = in_use
        self._lookup = lookup or system_lookup
        self._loop = asyncio.get_running_loop()
        self._answers: dict[str, frozenset[str]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._reported: set[str] = set()
        """Names with at least one lookup reported (see :meth:`reported`)."""
        self._lookups: dict[str, asyncio.Task[None]] = {}
        self.closed = False

    def __repr__(self) -> str:
        return f"<Resolver ttl={self._ttl_s:g}s names={sorted(self._answers)}>"

    def answer(self, host: str) -> frozenset[str] | None:
        """The addresses of the last successful answer for ``host`` (None: none yet)."""
        return self._answers.get(host)

    @property
    def pending(self) -> int:
        """Timers and lookups under way (0 once closed)."""
        return len(self._timers) + len(self._lookups)

    async def before_dial(self, host: str, port: int) -> None:
        """Look ``host`` up before the driver dials it, unless an answer younger than the TTL
        is cached (a re-resolution timer is running for it); then keep it fresh."""
        if host in self._timers:
            return
        await self._resolve(host, port)

    def reported(self, host: str) -> bool:
        """Whether a lookup of ``host`` was reported already, failed or not."""
        return host in self._reported

    def watch(self, host: str, port: int) -> None:
        """Keep ``host`` fresh from now on, without looking it up now: its first lookup comes
        one TTL later (the driver calls this when a dial it did not look up first is
        established). Nothing if a refresh is already scheduled, or with TTL 0."""
        if self.closed or self._ttl_s <= 0 or host in self._timers:
            return
        self._timers[host] = self._loop.call_later(self._ttl_s, self._expire, host, port)

    async def lookup_once(self, host: str, port: int) -> AddressesResolved:
        """One lookup of ``host``, given up after the timeout (reported as ``timeout``)."""
        try:
            async with asyncio.timeout(self._timeout_s):
                return await self._lookup(host, port)
        except TimeoutError:
            return AddressesResolved.failed(host, LookupOutcome.TIMEOUT)

    async def _resolve(self, host: str, port: int) -> None:
        lookup = await self.lookup_once(host, port)
        if self.closed:
            return
        if lookup.answered:
            self._answers[host] = lookup.addresses
        self._reported.add(host)
        self._report(lookup)
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
