"""The kernel's socket table: which live client TCP sockets a process holds, and to where.

The one scan of the table in this package, used for this process by
:mod:`connmgr.aio.kernel` (a ledger checked against the kernel) and for a JVM's pid by
:mod:`connmgr_evidence.java` (the Java client's sockets while it sits in its steady state).

What counts as a live client socket: a TCP socket of the process whose *remote* address is
one of the endpoints asked about, in state ``SYN_SENT`` (dial in progress), ``ESTABLISHED``
or ``CLOSE_WAIT``. ``CLOSE_WAIT`` is included on purpose: it is a socket the peer has closed
but the process still holds, which is exactly the leak these checks exist to catch (a client
that forgot to close after EOF). ``FIN_WAIT``/``TIME_WAIT``/``CLOSING``/``LAST_ACK`` are not
counted: those sockets were already closed by the process and only linger in the kernel.

A server in the same process (the embedded mock cluster) has the broker's port as its
sockets' *local* address and an ephemeral port as their remote one, so matching on the remote
address alone leaves them out. Addresses are compared canonically: an IPv4-mapped IPv6
address (a dual-stack socket, as a JVM's, that dialled 127.0.0.1) is the IPv4 address.

Data source: :mod:`psutil` when installed; otherwise ``/proc/<pid>/net/tcp`` and
``/proc/<pid>/net/tcp6`` (the whole network namespace's sockets) joined with the socket inodes
behind ``/proc/<pid>/fd/*`` (the process's descriptors). Both see the same thing on Linux.
"""

from __future__ import annotations

import importlib
import ipaddress
import os
import socket
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "LIVE_STATES",
    "Address",
    "KernelSample",
    "candidate_ips",
    "canonical_ip",
    "getaddrinfo",
    "is_ip",
    "kernel_connections",
    "kernel_sockets",
    "live_sockets",
]

Address = tuple[str, int]

LIVE_STATES: Final = frozenset({"SYN_SENT", "ESTABLISHED", "CLOSE_WAIT"})
"""TCP states in which a process still holds a client socket (see the module docstring)."""

# /proc/net/tcp prints the state as the kernel's enum value in hex (include/net/tcp_states.h).
_PROC_STATES: Final = {"01": "ESTABLISHED", "02": "SYN_SENT", "08": "CLOSE_WAIT"}

_LOOPBACKS: Final = ("127.0.0.1", "::1")
"""What ``localhost`` may have resolved to when a client dialled it, IPv4 preferred."""


# -- addresses ----------------------------------------------------------------------------------


def canonical_ip(ip: str) -> str:
    """``ip`` in canonical text form; an IPv4-mapped IPv6 address becomes plain IPv4.

    A dual-stack socket that dialled 127.0.0.1 reports ``::ffff:127.0.0.1``; it is the same
    endpoint as far as a ledger is concerned. Raises :class:`ValueError` for a non-IP.
    """
    address = ipaddress.ip_address(ip.split("%", 1)[0])  # drop an IPv6 zone id, if any
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def is_ip(host: str) -> bool:
    """Whether ``host`` is an IP literal (an IPv6 zone id allowed)."""
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def candidate_ips(host: str, port: int, resolve: Callable[[str, int], list[str]]) -> list[str]:
    """The IPs a dial of ``host`` may have reached, most likely first.

    IP literals are themselves; ``localhost`` is both loopbacks (the resolver may return either
    first); any other name goes through ``resolve`` (e.g. :func:`getaddrinfo`).
    """
    if is_ip(host):
        return [canonical_ip(host)]
    if host.lower() == "localhost":
        return list(_LOOPBACKS)
    ips: list[str] = []
    for ip in resolve(host, port):
        canonical = canonical_ip(ip)
        if canonical not in ips:
            ips.append(canonical)
    return ips


def getaddrinfo(host: str, port: int) -> list[str]:
    """The IPs ``host`` resolves to for TCP (may block); [] when it does not resolve."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return []  # an unresolvable name cannot match any socket: it shows up as missed
    return [str(info[4][0]) for info in infos]


def _expand(remote: Iterable[Address]) -> set[Address]:
    wanted: set[Address] = set()
    for host, port in remote:
        wanted.update((ip, port) for ip in candidate_ips(host, port, getaddrinfo))
    return wanted


def _pairs(endpoints: Mapping[int, Address] | Iterable[Address]) -> list[Address]:
    return list(endpoints.values()) if isinstance(endpoints, Mapping) else list(endpoints)


# -- the table ----------------------------------------------------------------------------------


def _load_psutil() -> Any | None:
    # psutil is a declared dependency, but the check must still work in a bare interpreter
    # (e.g. a subprocess with a minimal environment), hence the /proc fallback.
    try:
        return importlib.import_module("psutil")
    except ImportError:
        return None


def _psutil_sockets(psutil: Any, pid: int | None) -> list[tuple[Address, str]]:
    found: list[tuple[Address, str]] = []
    for conn in psutil.Process(pid).net_connections(kind="tcp"):
        if conn.raddr:
            found.append(((canonical_ip(conn.raddr.ip), int(conn.raddr.port)), str(conn.status)))
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
    return canonical_ip(socket.inet_ntop(family, raw)), int(hex_port, 16)


def _proc_sockets(pid: int | None) -> list[tuple[Address, str]]:
    proc = f"/proc/{'self' if pid is None else pid}"
    inodes: set[str] = set()
    fd_dir = f"{proc}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue  # closed between listdir and readlink
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found: list[tuple[Address, str]] = []
    for table in (f"{proc}/net/tcp", f"{proc}/net/tcp6"):
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


def live_sockets(pid: int | None = None) -> list[tuple[Address, str]]:
    """Every TCP socket of process ``pid`` (default: this process) that has a remote address,
    as ((canonical remote ip, port), state). The /proc fallback reports only the states in
    :data:`LIVE_STATES`, psutil all of them: filter on the state."""
    psutil = _load_psutil()
    return _psutil_sockets(psutil, pid) if psutil is not None else _proc_sockets(pid)


# -- counts ---------------------------------------------------------------------------------------


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
    for address, status in live_sockets():
        if status in LIVE_STATES and address in wanted:
            counts[address] += 1
    return counts


@dataclass(frozen=True, slots=True)
class KernelSample:
    """The live TCP sockets (states in :data:`LIVE_STATES`) a process holds to a set of
    endpoints, as (remote ip, remote port, state), at one instant."""

    pid: int
    sockets: tuple[tuple[str, int, str], ...]

    @property
    def count(self) -> int:
        return len(self.sockets)


def kernel_sockets(pid: int, endpoints: Mapping[int, Address] | Iterable[Address]) -> KernelSample:
    """The live client sockets process ``pid`` holds to ``endpoints`` (broker id -> (host,
    port) as from ``MockCluster.listeners()``, or just (host, port) pairs).

    A socket counts as for :func:`kernel_connections`: its *remote* address is one of the
    endpoints (IPv4-mapped IPv6 addresses compare as IPv4; ``localhost`` is both loopbacks;
    other names are resolved) and its state is in :data:`LIVE_STATES`. Sorted.
    """
    wanted = _expand(_pairs(endpoints))
    found = [
        (*address, status)
        for address, status in live_sockets(pid)
        if status in LIVE_STATES and address in wanted
    ]
    return KernelSample(pid, tuple(sorted(found)))
