"""The kernel's view of this process's TCP connections, and a check of a ledger against it.

A :class:`~connmgr.ledger.ConnectionLedger` is what a client *says* it did; the kernel's socket
table is what it *did*. :func:`kernel_connections` counts this process's client sockets by
remote address, and :func:`verify_against_kernel` / :func:`averify_against_kernel` compare
that count with the ledger's open connections, raising :class:`AccountingMismatch` when they
disagree.

What counts as a live client socket: a TCP socket of *this process* whose remote address is
one of the endpoints asked about, in state ``SYN_SENT`` (dial in progress), ``ESTABLISHED``
or ``CLOSE_WAIT``. ``CLOSE_WAIT`` is included on purpose: it is a socket the peer has closed
but this process still holds, which is exactly the leak these checks exist to catch (a client
that forgot to close after EOF). ``FIN_WAIT``/``TIME_WAIT``/``CLOSING``/``LAST_ACK`` are not
counted: those sockets were already closed by this process and only linger in the kernel.

The embedded mock cluster runs inside the same process, so its *server-side* sockets are in
the same table; they have the broker's port as their *local* address and an ephemeral port as
their remote one, so matching on the remote address alone leaves them out.

Data source: :mod:`psutil` when installed; otherwise ``/proc/self/net/tcp`` and
``/proc/self/net/tcp6`` (the whole network namespace's sockets) joined with the socket inodes
behind ``/proc/self/fd/*`` (this process's descriptors). Both see the same thing on Linux.
"""

from __future__ import annotations

import asyncio
import importlib
import ipaddress
import os
import socket
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from connmgr.errors import ConnMgrError
from connmgr.ledger import ConnectionLedger

__all__ = [
    "LIVE_STATES",
    "AccountingMismatch",
    "averify_against_kernel",
    "kernel_connections",
    "verify_against_kernel",
]

Address = tuple[str, int]

LIVE_STATES: Final = frozenset({"SYN_SENT", "ESTABLISHED", "CLOSE_WAIT"})
"""TCP states in which this process still holds a client socket (see the module docstring)."""

# /proc/net/tcp prints the state as the kernel's enum value in hex (include/net/tcp_states.h).
_PROC_STATES: Final = {"01": "ESTABLISHED", "02": "SYN_SENT", "08": "CLOSE_WAIT"}

_LOOPBACKS: Final = ("127.0.0.1", "::1")
"""What ``localhost`` may have resolved to when a client dialled it, IPv4 preferred."""

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


# -- the kernel's side ------------------------------------------------------------------------


def _canonical_ip(ip: str) -> str:
    """``ip`` in canonical text form; an IPv4-mapped IPv6 address becomes plain IPv4.

    A dual-stack socket that dialled 127.0.0.1 reports ``::ffff:127.0.0.1``; it is the same
    endpoint as far as a ledger is concerned.
    """
    address = ipaddress.ip_address(ip.split("%", 1)[0])  # drop an IPv6 zone id, if any
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def _candidate_ips(host: str, port: int, resolve: Callable[[str, int], list[str]]) -> list[str]:
    """The IPs a dial of ``host`` may have reached, most likely first.

    IP literals are themselves; ``localhost`` is both loopbacks (the resolver may return either
    first); any other name goes through ``resolve`` (getaddrinfo).
    """
    if _is_ip(host):
        return [_canonical_ip(host)]
    if host.lower() == "localhost":
        return list(_LOOPBACKS)
    ips: list[str] = []
    for ip in resolve(host, port):
        canonical = _canonical_ip(ip)
        if canonical not in ips:
            ips.append(canonical)
    return ips


def _getaddrinfo(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return []  # an unresolvable name cannot match any socket: it shows up as missed
    return [str(info[4][0]) for info in infos]


def _expand(remote: Iterable[Address]) -> set[Address]:
    wanted: set[Address] = set()
    for host, port in remote:
        wanted.update((ip, port) for ip in _candidate_ips(host, port, _getaddrinfo))
    return wanted


def _load_psutil() -> Any | None:
    # psutil is a declared dependency, but the check must still work in a bare interpreter
    # (e.g. a subprocess with a minimal environment), hence the /proc fallback.
    try:
        return importlib.import_module("psutil")
    except ImportError:
        return None


def _psutil_sockets(psutil: Any) -> list[tuple[Address, str]]:
    found: list[tuple[Address, str]] = []
    for conn in psutil.Process().net_connections(kind="tcp"):
        if conn.raddr:
            found.append(((_canonical_ip(conn.raddr.ip), int(conn.raddr.port)), conn.status))
    return found


def _proc_address(hex_address: str) -> Address:
    """Decode ``/proc/net/tcp*``'s ``HEXIP:HEXPORT``.

    The IP is the kernel's in-memory bytes printed as native-endian 32-bit words (so reversed
    on little-endian machines); packing the words natively again restores network order. The
    port is printed after ``ntohs``, so it reads as an ordinary hex number.
    """
    hex_ip, hex_port = hex_address.split(":")
    words = [int(hex_ip[i : i + 8], 16) for i in range(0, len(hex_ip), 8)]
    raw = struct.pack(f"={len(words)}I", *words)
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return _canonical_ip(socket.inet_ntop(family, raw)), int(hex_port, 16)


def _proc_sockets() -> list[tuple[Address, str]]:
    inodes: set[str] = set()
    fd_dir = "/proc/self/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue  # closed between listdir and readlink
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found: list[tuple[Address, str]] = []
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(table, encoding="ascii") as lines:
                next(lines, None)  # header
                for line in lines:
                    fields = line.split()
                    # sl local rem st queues timer retrnsmt uid timeout inode ...
                    if len(fields) < 10 or fields[9] not in inodes:
                        continue
                    status = _PROC_STATES.get(fields[3])
                    if status is not None:
                        found.append((_proc_address(fields[2]), status))
        except FileNotFoundError:
            continue  # no IPv6 in this kernel / namespace
    return found


def _live_sockets() -> list[tuple[Address, str]]:
    psutil = _load_psutil()
    return _psutil_sockets(psutil) if psutil is not None else _proc_sockets()


def kernel_connections(remote: Iterable[Address]) -> Counter[Address]:
    """How many live client TCP sockets this process holds to each of ``remote``.

    ``remote`` is (host, port) pairs; hosts are normally IP literals, ``localhost`` stands for
    both ``127.0.0.1`` and ``::1``, and other names are resolved (which may block). A socket
    counts when its *remote* address is one of them and its state is in :data:`LIVE_STATES`;
    sockets whose *local* address is the endpoint (a server's accepted sockets, e.g. the
    in-process mock cluster's) do not. Keys of the result are the kernel's canonical
    (ip, port) -- IPv4-mapped IPv6 addresses reported as IPv4 -- and only endpoints with at
    least one socket appear.
    """
    wanted = _expand(remote)
    counts: Counter[Address] = Counter()
    for address, status in _live_sockets():
        if status in LIVE_STATES and address in wanted:
            counts[address] += 1
    return counts


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
            ips = _candidate_ips(entry.host, entry.port, resolve)
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
            self.cache[(host, port)] = _getaddrinfo(host, port)
        return self.cache[(host, port)]

    def unresolved(self, ledger: ConnectionLedger, listeners: list[Address]) -> set[Address]:
        """Endpoints with a real name (neither IP literal nor localhost) not resolved yet."""
        endpoints = {(e.host, e.port) for e in ledger.open_now()} | set(listeners)
        return {
            (host, port)
            for host, port in endpoints
            if not _is_ip(host) and host.lower() != "localhost"
        } - self.cache.keys()


def _plan(
    ledger: ConnectionLedger, listeners: list[Address], resolve: _Resolver
) -> tuple[list[_Expected], set[Address]]:
    expected = _expected(ledger, resolve)
    watched: set[Address] = set()
    for host, port in listeners:
        watched.update((ip, port) for ip in _candidate_ips(host, port, resolve))
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
            resolve.cache[(host, port)] = await loop.run_in_executor(None, _getaddrinfo, host, port)
        diff = _compare(*_plan(ledger, endpoints, resolve))
        remaining = deadline - time.monotonic()
        if diff.ok:
            return
        if remaining <= 0:
            raise _mismatch(diff, settle_s, ledger)
        await asyncio.sleep(min(_POLL_S, remaining))
