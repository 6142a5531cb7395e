"""The kernel's view of every client JVM over the run: how many live sockets each holds to
each broker, every few seconds, on a thread of its own.

The clients dial the brokers' SASL_SSL delay forwarders, so a socket's remote address names
the broker it reaches; a moved broker has two addresses over the run (its old one, refused
after the move, and its new one), both watched from the move on. A JVM that has exited is
dropped from the watch.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import psutil

from connmgr.kernel import Address, kernel_sockets

__all__ = ["KernelSampler", "SocketRow"]


@dataclass(frozen=True, slots=True)
class SocketRow:
    """At ``t_s`` (seconds since the run's origin), client ``client`` of ``variant`` held
    ``sockets`` live sockets to ``broker`` at ``port``."""

    t_s: float
    variant: str
    client: str
    broker: int
    port: int
    sockets: int


class KernelSampler:
    """Samples every watched JVM every ``every_s`` seconds from :meth:`start` to
    :meth:`stop`; ``origin`` is the run's clock origin (``time.time()``). ``addresses`` is
    (host, port) -> broker id; :meth:`add_addresses` adds more (a moved broker's new one).
    A row is written for every watched JVM and every address it holds a socket to, and one
    with 0 sockets for each broker it holds none to, so every sample names every client."""

    def __init__(self, origin: float, every_s: float, addresses: Mapping[Address, int]) -> None:
        self._origin = origin
        self._every_s = every_s
        self._lock = threading.Lock()
        self._addresses = dict(addresses)
        self._watched: dict[int, tuple[str, str]] = {}
        self._rows: list[SocketRow] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="longrun-kernel", daemon=True)

    def start(self) -> KernelSampler:
        self._thread.start()
        return self

    def watch(self, pid: int, variant: str, client: str) -> None:
        """Sample ``pid`` from the next sample on, as ``client`` of ``variant``."""
        with self._lock:
            self._watched[pid] = (variant, client)

    def add_addresses(self, addresses: Mapping[Address, int]) -> None:
        with self._lock:
            self._addresses.update(addresses)

    def addresses(self) -> dict[Address, int]:
        """(host, port) -> broker of every address watched so far."""
        with self._lock:
            return dict(self._addresses)

    def sample_now(self) -> list[SocketRow]:
        """Sample every watched JVM once, now; the rows written."""
        with self._lock:
            watched = dict(self._watched)
            addresses = dict(self._addresses)
        t_s = time.time() - self._origin
        brokers = sorted(set(addresses.values()))
        rows: list[SocketRow] = []
        for pid, (variant, client) in watched.items():
            try:
                sample = kernel_sockets(pid, list(addresses))
            except (psutil.NoSuchProcess, psutil.ZombieProcess, FileNotFoundError):
                with self._lock:
                    self._watched.pop(pid, None)
                continue
            held = Counter((ip, port) for ip, port, _state in sample.sockets)
            seen: set[int] = set()
            for (ip, port), count in sorted(held.items()):
                broker = addresses.get((ip, port))
                if broker is None:
                    continue
                seen.add(broker)
                rows.append(SocketRow(t_s, variant, client, broker, port, count))
            rows += [SocketRow(t_s, variant, client, b, 0, 0) for b in brokers if b not in seen]
        with self._lock:
            self._rows += rows
        return rows

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.sample_now()
            next_at += self._every_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> list[SocketRow]:
        """Stop sampling (after one last sample) and return every row."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30.0)
        self.sample_now()
        with self._lock:
            return list(self._rows)
