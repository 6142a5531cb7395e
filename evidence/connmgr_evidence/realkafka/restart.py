"""Restarting the real cluster's brokers: a controlled shutdown, the same node started again,
and leadership given back to the preferred replicas.

What an operator's rolling restart does, one broker at a time: SIGTERM the node (Kafka's
shutdown hook runs a *controlled* shutdown: the controller moves the leadership of the
node's partitions to other in-sync replicas before the node closes its sockets), wait for
the JVM to exit, start ``kafka.Kafka`` again on the same ``server.properties`` and data
directory (so the node id, the ports and the advertised listeners are those it had), wait
until every broker lists it again, and then ask for preferred-leader elections (as
``kafka-leader-election --election-type PREFERRED`` would) until every partition is led by
its first replica again. :class:`BrokerRestarts` is a mixin of
:class:`~connmgr_evidence.realkafka.KafkaCluster`, which supplies the nodes, their spawning and the
wait for the brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import threading
import time
from collections.abc import Sequence

from connmgr_evidence.realkafka.errors import RealKafkaError
from connmgr_evidence.realkafka.process import Node
from connmgr_evidence.realkafka.protocol import (
    POLL_S,
    PROBE_ERRORS,
    metadata,
    partition_leaders,
    partition_replicas,
    run_sync,
)
from connmgr_evidence.realkafka.topics import TopicAdmin, elect_preferred

__all__ = ["BrokerRestarts"]

_ELECT_EVERY_S = 1.0
"""How often :meth:`BrokerRestarts.restore_preferred_leaders` asks again: an election is
refused (PREFERRED_LEADER_NOT_AVAILABLE) until the restarted replica is back in sync, which
on an idle test cluster takes well under a second."""


class BrokerRestarts(TopicAdmin):
    """Stopping, starting and restarting brokers, and preferred-leader restoration (see the
    module doc). The cluster supplies the hooks below."""

    _lock: threading.RLock
    _down: set[int]
    """Ids of the brokers stopped by :meth:`stop_broker` and not started again."""

    def _node(self, broker_id: int) -> Node:
        """The node ``broker_id``; raises :class:`RealKafkaError` for an unknown id."""
        raise NotImplementedError

    def _require_running(self) -> list[Node]:
        """Every node; raises :class:`RealKafkaError` unless the cluster is running."""
        raise NotImplementedError

    def _spawn_node(self, node: Node) -> None:
        """Start ``node``'s JVM again on its properties, and track the new process."""
        raise NotImplementedError

    async def _await_brokers(self, deadline: float) -> None:
        """Wait until every node lists every broker; raise at ``deadline`` or if one died."""
        raise NotImplementedError

    def stop_broker(self, broker_id: int, timeout_s: float = 30.0) -> float:
        """Stop one broker with a controlled shutdown; the seconds until its JVM exited.

        Sends SIGTERM and waits up to ``timeout_s`` for the exit. The broker's partitions are
        led by other in-sync replicas from then on; its data stays for :meth:`start_broker`.
        Raises :class:`RealKafkaError` if the cluster is not running, the broker is already
        down, stopping it would leave fewer than a majority of the controllers (every node
        is one: a 3-node cluster restarts one broker at a time), or it does not exit in time
        (it is then SIGKILLed, so no JVM is left behind either way).
        """
        with self._lock:
            nodes = self._require_running()
            node = self._node(broker_id)
            if broker_id in self._down:
                raise RealKafkaError(f"broker {broker_id} is already stopped")
            up = len(nodes) - len(self._down) - 1
            if up < len(nodes) // 2 + 1:
                raise RealKafkaError(
                    f"stopping broker {broker_id} would leave {up} of {len(nodes)} controllers "
                    f"up, not a majority (stopped: {sorted(self._down)}); start one first"
                )
            process = node.process
            if process is None:
                raise RealKafkaError(f"broker {broker_id} has no process")
            began = time.monotonic()
            # From here on the node's exit is expected: the liveness checks skip it.
            self._down.add(broker_id)
            process.terminate()
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired as exc:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                process.wait(timeout=10)
                raise RealKafkaError(
                    f"broker {broker_id} did not finish its controlled shutdown within "
                    f"{timeout_s}s and was killed:\n{node.tail(10)}"
                ) from exc
            return time.monotonic() - began

    def start_broker(self, broker_id: int, timeout_s: float = 60.0) -> float:
        """Start a broker :meth:`stop_broker` stopped, as it was; the seconds until it serves.

        The same ``server.properties`` and data directory: the same node id, ports and
        advertised listener. Returns once every broker's Metadata lists every broker again
        (the restarted one has registered, caught up with the metadata log and been
        unfenced). It leads nothing yet: see :meth:`restore_preferred_leaders`. Raises
        :class:`RealKafkaError` if the broker is not stopped, or if a node dies or
        ``timeout_s`` passes first (with the log tails).
        """
        with self._lock:
            self._require_running()
            node = self._node(broker_id)
            if broker_id not in self._down:
                raise RealKafkaError(f"broker {broker_id} is not stopped")
            began = time.monotonic()
            self._spawn_node(node)
            self._down.discard(broker_id)
            deadline = began + timeout_s
            run_sync(lambda: self._await_brokers(deadline))
            return time.monotonic() - began

    def restore_preferred_leaders(
        self, topics: Sequence[str] | None = None, timeout_s: float = 30.0
    ) -> int:
        """Elect preferred leaders until every partition of ``topics`` (default: every
        topic, the internal ones too) is led by its first replica in every running broker's
        Metadata; the number of ElectLeaders requests that took.

        Elections are asked of the first running broker at once and again every second for
        the partitions still led by another broker, since one is refused until the
        preferred replica is back in the in-sync set. Raises :class:`RealKafkaError` after
        ``timeout_s``, showing the leaders wanted and seen.
        """
        ports = self._running_ports()
        deadline = time.monotonic() + timeout_s
        names = None if topics is None else list(topics)
        return run_sync(lambda: _restore(ports, names, deadline))


async def _restore(ports: dict[int, int], topics: list[str] | None, deadline: float) -> int:
    first = next(iter(ports.values()))
    elections = 0
    elect_at = time.monotonic()
    note = ""
    while True:
        wrong: dict[str, set[int]] = {}
        want: dict[str, dict[int, int]] = {}
        views: dict[int, dict[str, dict[int, int]]] = {}
        for broker, port in ports.items():
            with contextlib.suppress(*PROBE_ERRORS):
                answer = await metadata(port, topics)
                views[broker] = partition_leaders(answer)
                for topic, replicas in partition_replicas(answer).items():
                    want[topic] = {p: r[0] for p, r in replicas.items() if r}
        for view in views.values():
            for topic, preferred in want.items():
                led = view.get(topic, {})
                for partition, leader in preferred.items():
                    if led.get(partition) != leader:
                        wrong.setdefault(topic, set()).add(partition)
        known = want.keys() >= set(topics or ())
        if len(views) == len(ports) and known and not wrong:
            return elections
        now = time.monotonic()
        if now >= deadline:
            raise RealKafkaError(
                f"preferred leaders {want} not restored; brokers' views {views}"
                + (f"; last election: {note}" if note else "")
            )
        if wrong and now >= elect_at:
            for topic, partitions in sorted(wrong.items()):
                note = f"{topic}: " + await elect_preferred(first, topic, sorted(partitions))
                elections += 1
            elect_at = now + _ELECT_EVERY_S
        await asyncio.sleep(POLL_S)
