"""Moving a broker to new ports: what an operator does when a broker must come back at a new
address (a new host, a listener port changed), here on loopback with new free ports.

:meth:`BrokerMoves.move_broker` stops one broker with a controlled shutdown (as
:meth:`~connmgr_evidence.realkafka.restart.BrokerRestarts.stop_broker`), gives it new client
listener ports -- PLAINTEXT, and with ``security=True`` SSL and SASL_SSL together with new
delay forwarders, the old ones closed so a dial of an old address is refused -- rewrites its
``listeners`` / ``advertised.listeners`` in ``server.properties``, starts it again with the
same node id, controller port and data directory, waits until every broker's Metadata names
it at its new port, and gives the partitions back to their preferred leaders. Its remote JMX
port, not a client listener, stays. Clients learn the new address from Metadata as they
would in production: a client whose ``bootstrap.servers`` named only the moved broker has to
rebootstrap, one that names the others too does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass

from connmgr_evidence.realkafka.errors import PortTaken, RealKafkaError
from connmgr_evidence.realkafka.process import Node
from connmgr_evidence.realkafka.protocol import POLL_S, PROBE_ERRORS, metadata, run_sync
from connmgr_evidence.realkafka.restart import BrokerRestarts

__all__ = ["BrokerMove", "BrokerMoves"]

Address = tuple[str, int]

_ATTEMPTS = 4
"""New ports tried when another process binds a reserved one first (seen once, twice in a
row, while fourteen clients reconnected: the reserved ports are free, not held)."""


@dataclass(frozen=True, slots=True)
class BrokerMove:
    """One :meth:`BrokerMoves.move_broker`: the broker's advertised address per listener
    (``PLAINTEXT``, and ``SSL`` / ``SASL_SSL`` on a secure cluster) before and after, and
    the seconds each step took (``stop_s``: the controlled shutdown; ``start_s``: until
    every broker listed every broker again; ``listed_s``: until every broker named the new
    PLAINTEXT port; ``restore_s``: the preferred-leader elections)."""

    broker_id: int
    before: Mapping[str, Address]
    after: Mapping[str, Address]
    stop_s: float
    start_s: float
    listed_s: float
    restore_s: float
    elections: int

    @property
    def seconds(self) -> float:
        return self.stop_s + self.start_s + self.listed_s + self.restore_s


class BrokerMoves(BrokerRestarts):
    """:meth:`move_broker` (see the module doc). The cluster supplies the two hooks below."""

    def _relocate(self, node: Node) -> None:
        """Give ``node`` (stopped) new client listener ports and forwarders, and rewrite
        its ``server.properties`` for them."""
        raise NotImplementedError

    def _advertised(self, broker_id: int) -> dict[str, Address]:
        """Listener name -> the address ``broker_id`` advertises on it to clients."""
        raise NotImplementedError

    def move_broker(self, broker_id: int, timeout_s: float = 120.0) -> BrokerMove:
        """Move ``broker_id`` to new client listener ports (see the module doc) and return
        what moved and how long it took.

        Returns once every running broker's Metadata names the broker at its new PLAINTEXT
        port and every partition is led by its preferred replica again; :meth:`endpoints`,
        :meth:`listeners`, :meth:`access` and :attr:`bootstrap_servers` give the new
        addresses from the moment the broker is started again. A port taken by another
        process between its reservation and the broker's bind is replaced (up to
        :data:`_ATTEMPTS` sets of ports in all). Raises
        :class:`RealKafkaError` if the cluster is not running, the broker is stopped, a
        step fails or ``timeout_s`` passes (the broker is then left as the failing step
        left it).
        """
        with self._lock:
            self._require_running()
            node = self._node(broker_id)
            if broker_id in self._down:
                raise RealKafkaError(f"broker {broker_id} is stopped: start it before moving it")
            began = time.monotonic()
            deadline = began + timeout_s
            before = self._advertised(broker_id)
            stop_s = self.stop_broker(broker_id, timeout_s=min(30.0, timeout_s))
            t = time.monotonic()
            for attempt in range(1, _ATTEMPTS + 1):
                self._relocate(node)
                try:
                    self.start_broker(broker_id, timeout_s=_left(deadline))
                    break
                except PortTaken:
                    if attempt == _ATTEMPTS:
                        raise
                    # Its JVM exited on the bind: expected down again, moved again.
                    self._down.add(broker_id)
            start_s = time.monotonic() - t
            t = time.monotonic()
            ports = self._running_ports()
            run_sync(lambda: _await_listed(ports, broker_id, node.port, deadline))
            listed_s = time.monotonic() - t
            t = time.monotonic()
            elections = self.restore_preferred_leaders(timeout_s=_left(deadline))
            return BrokerMove(
                broker_id,
                before,
                self._advertised(broker_id),
                stop_s,
                start_s,
                listed_s,
                time.monotonic() - t,
                elections,
            )


def _left(deadline: float) -> float:
    return max(1.0, deadline - time.monotonic())


async def _await_listed(ports: dict[int, int], broker_id: int, port: int, deadline: float) -> None:
    """Wait until the Metadata of every broker in ``ports`` (id -> PLAINTEXT port) names
    ``broker_id`` at ``port``."""
    seen: dict[int, int | None] = {}
    while True:
        for broker, at in ports.items():
            with contextlib.suppress(*PROBE_ERRORS):
                answer = await metadata(at, [])
                listed = {int(b["node_id"]): int(b["port"]) for b in answer["brokers"]}
                seen[broker] = listed.get(broker_id)
        if len(seen) == len(ports) and all(p == port for p in seen.values()):
            return
        if time.monotonic() >= deadline:
            raise RealKafkaError(
                f"broker {broker_id} moved to port {port}, but the brokers' Metadata still "
                f"names it at {seen} (broker -> port, None: not listed)"
            )
        await asyncio.sleep(POLL_S)
