"""A check of a connection ledger against the kernel's view of this process's TCP connections.

A :class:`~connmgr.ledger.ConnectionLedger` is what a client *says* it did; the kernel's socket
table is what it *did*. :func:`kernel_connections` (from :mod:`connmgr.kernel`, the one scan
of that table, re-exported here) counts this process's live client sockets by remote address,
and :func:`verify_against_kernel` / :func:`averify_against_kernel` compare that count with the
ledger's open connections, raising :class:`AccountingMismatch` when they disagree. What counts
as a live client socket (``SYN_SENT``, ``ESTABLISHED``, ``CLOSE_WAIT``; remote address only,
so the in-process mock cluster's server sockets are left out) is stated in
:mod:`connmgr.kernel`.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from connmgr.errors import ConnMgrError
from connmgr.kernel import (
    LIVE_STATES,
    Address,
    candidate_ips,
    getaddrinfo,
    is_ip,
    kernel_connections,
)
from connmgr.ledger import ConnectionLedger

__all__ = [
    "LIVE_STATES",
    "AccountingMismatch",
    "averify_against_kernel",
    "kernel_connections",
    "verify_against_kernel",
]

_POLL_S: Final = 0.02


class AccountingMismatch(ConnMgrError):
    """The ledger's open connections and the kernel's live sockets disagree.

    ``phantom`` counts sockets the kernel has and the ledger does not know of (by the kernel's
    remote ip:port); ``missed`` counts connections the ledger believes open that have no
    socket (by the ledger's host:port). Both are non-empty-or-zero :class:`Counter` s.
    """

    def __init__(self, message: str, phantom: Counter[Address], missed: Counter[Address]):
        super().__init__(message)
        self.phantom = phantom
        self.missed = missed


# -- the comparison ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Expected:
    """One open ledger connection: where it dialled and which kernel addresses may be it."""

    dialled: Address
    candidates: tuple[Address, ...]


@dataclass(frozen=True, slots=True)
class _Diff:
    phantom: Counter[Address]
    missed: Counter[Address]

    @property
    def ok(self) -> bool:
        return not self.phantom and not self.missed


def _listener_addresses(
    listeners: Mapping[int, Address] | Iterable[Address],
) -> list[Address]:
    if isinstance(listeners, Mapping):
        return list(listeners.values())
    return list(listeners)


def _expected(ledger: ConnectionLedger, resolve: _Resolver) -> list[_Expected]:
    expected: list[_Expected] = []
    cache: dict[Address, tuple[Address, ...]] = {}
    for entry in ledger.open_now():
        dialled = (entry.host, entry.port)
        if dialled not in cache:
            ips = candidate_ips(entry.host, entry.port, resolve)
            cache[dialled] = tuple((ip, entry.port) for ip in ips)
        expected.append(_Expected(dialled, cache[dialled]))
    return expected


def _compare(expected: list[_Expected], watched: set[Address]) -> _Diff:
    """Match ledger connections to kernel sockets as a multiset; report what is left over.

    Connections with a single candidate address are matched first, then ambiguous ones
    (``localhost``) take whatever candidate still has sockets, most likely first: an
    ambiguous entry must never steal the socket an exact one needs.
    """
    kernel = kernel_connections(watched)
    missed: Counter[Address] = Counter()
    for item in sorted(expected, key=lambda e: len(e.candidates)):
        for candidate in item.candidates:
            if kernel[candidate] > 0:
                kernel[candidate] -= 1
                break
        else:
            missed[item.dialled] += 1
    phantom = Counter({address: n for address, n in kernel.items() if n > 0})
    return _Diff(phantom, missed)


def _format(counts: Counter[Address]) -> str:
    return ", ".join(
        f"{host}:{port} x{n}" for (host, port), n in sorted(counts.items(), key=lambda kv: kv[0])
    )


def _mismatch(diff: _Diff, settle_s: float, ledger: ConnectionLedger) -> AccountingMismatch:
    parts: list[str] = []
    if diff.phantom:
        parts.append(f"phantom (kernel has, ledger does not): {_format(diff.phantom)}")
    if diff.missed:
        parts.append(f"missed (ledger has, kernel does not): {_format(diff.missed)}")
    open_now = [f"#{e.conn_id} {e.host}:{e.port} {e.role.value}" for e in ledger.open_now()]
    message = (
        f"connection ledger and kernel disagree after settling {settle_s:.3f}s: "
        + "; ".join(parts)
        + f" [ledger open: {', '.join(open_now) or 'none'}]"
    )
    return AccountingMismatch(message, diff.phantom, diff.missed)


class _Resolver:
    """Name -> IPs, resolved at most once per verification (a retry loop must not re-ask DNS)."""

    def __init__(self) -> None:
        self.cache: dict[Address, list[str]] = {}

    def __call__(self, host: str, port: int) -> list[str]:
        if (host, port) not in self.cache:
            self.cache[(host, port)] = getaddrinfo(host, port)
        return self.cache[(host, port)]

    def unresolved(self, ledger: ConnectionLedger, listeners: list[Address]) -> set[Address]:
        """Endpoints with a real name (neither IP literal nor localhost) not resolved yet."""
        endpoints = {(e.host, e.port) for e in ledger.open_now()} | set(listeners)
        return {
            (host, port)
            for host, port in endpoints
            if not is_ip(host) and host.lower() != "localhost"
        } - self.cache.keys()


def _plan(
    ledger: ConnectionLedger, listeners: list[Address], resolve: _Resolver
) -> tuple[list[_Expected], set[Address]]:
    expected = _expected(ledger, resolve)
    watched: set[Address] = set()
    for host, port in listeners:
        watched.update((ip, port) for ip in candidate_ips(host, port, resolve))
    # Also watch wherever the ledger says it dialled: a connection to an endpoint that is not
    # a listener (a wrong advertised address, say) must be matched, not reported as missed.
    for item in expected:
        watched.update(item.candidates)
    return expected, watched


def verify_against_kernel(
    ledger: ConnectionLedger,
    listeners: Mapping[int, Address] | Iterable[Address],
    *,
    settle_s: float = 1.0,
) -> None:
    """Check that the ledger's open connections are exactly this process's live sockets.

    Compares, as multisets, the (host, port) every open ledger connection dialled with the
    remote (ip, port) of this process's live TCP sockets (see :func:`kernel_connections`) to
    ``listeners`` -- broker id -> (host, port) as from ``MockCluster.listeners()``, or just
    the (host, port) pairs -- and to the endpoints the ledger names. Sockets to any other
    endpoint are ignored. Ledger hosts are normalised: ``localhost`` may match ``127.0.0.1``
    or ``::1``, other names are resolved with getaddrinfo (once per call).

    A close in asyncio reaches the kernel one loop iteration later, and a dial shows up in the
    ledger a moment before its socket exists, so the comparison is retried every 20 ms for up
    to ``settle_s`` seconds (re-reading the ledger each time) before
    :class:`AccountingMismatch` is raised naming the phantom and missed connections with
    counts. Blocks with :func:`time.sleep`: inside an event loop use
    :func:`averify_against_kernel`, or the loop cannot complete the very closes awaited.
    """
    endpoints = _listener_addresses(listeners)
    resolve = _Resolver()
    deadline = time.monotonic() + settle_s
    while True:
        diff = _compare(*_plan(ledger, endpoints, resolve))
        remaining = deadline - time.monotonic()
        if diff.ok:
            return
        if remaining <= 0:
            raise _mismatch(diff, settle_s, ledger)
        time.sleep(min(_POLL_S, remaining))


async def averify_against_kernel(
    ledger: ConnectionLedger,
    listeners: Mapping[int, Address] | Iterable[Address],
    *,
    settle_s: float = 1.0,
) -> None:
    """:func:`verify_against_kernel` for use inside an event loop: waits with ``asyncio.sleep``.

    Yielding to the loop between attempts lets pending closes complete and lets the client
    update its ledger, which is re-read on every attempt. Name resolution (only for hosts that
    are neither IP literals nor ``localhost``) runs in the loop's default executor.
    """
    loop = asyncio.get_running_loop()
    endpoints = _listener_addresses(listeners)
    resolve = _Resolver()
    deadline = time.monotonic() + settle_s
    while True:
        for host, port in resolve.unresolved(ledger, endpoints):
            resolve.cache[(host, port)] = await loop.run_in_executor(None, getaddrinfo, host, port)
        diff = _compare(*_plan(ledger, endpoints, resolve))
        remaining = deadline - time.monotonic()
        if diff.ok:
            return
        if remaining <= 0:
            raise _mismatch(diff, settle_s, ledger)
        await asyncio.sleep(min(_POLL_S, remaining))
