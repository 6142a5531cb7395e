"""``java-described``: the Java client as the 2018-2019 articles describe it (B1, Kafka 2.1).

On top of :class:`JavaTodayPolicy` (node-id keys, leastLoadedNode, ``2147483647 - id``
coordinator, idle expiry), the articles add two producer rules:

* P1: constructing the producer opens a connection to **every** bootstrap server (scanning
  from the random offset) and sends the first metadata request on the first one dialled.
* P2/P4: after every metadata update the producer dials every broker it has no connection to,
  so idle-closed connections are re-opened at each refresh (churn) and, with
  ``connections.max.idle.ms = -1``, never closed (zombies).

The consumer rules C1-C6 coincide with today's client and are inherited unchanged.
Which of these claims the real 2.1.0 client confirms is measured in the Java-probe runs.
"""

from __future__ import annotations

from typing import ClassVar

from connmgr.core.config import ClientKind
from connmgr.core.identity import BootstrapNode, BrokerNode, ConnectionKey, Purpose
from connmgr.core.metadata import ClusterMetadata
from connmgr.core.policy import Connection, Request, ToBootstrap
from connmgr.policies.java_today import JavaTodayPolicy


class JavaDescribedPolicy(JavaTodayPolicy):
    name: ClassVar[str] = "java-described"
    summary: ClassVar[str] = "Java client as the 2019 articles describe it (2.1: P1-P6, C1-C6)"
    find_coordinator_with_first_metadata: ClassVar[bool] = True

    _first_bootstrap: Connection | None = None

    @property
    def _producer(self) -> bool:
        return self.config.client is ClientKind.PRODUCER

    def on_bootstrap(self) -> None:
        if not self._producer:
            return
        n = len(self.config.bootstrap)
        offset = self.random_offset(n)
        for i in range(n):
            index = (offset + i) % n
            key = ConnectionKey(self.config.bootstrap[index], BootstrapNode(index), Purpose.DATA)
            conn = self.live(key) or self.get_or_dial(key)
            if self._first_bootstrap is None:
                self._first_bootstrap = conn

    def place(self, request: Request) -> Connection | None:
        first = self._first_bootstrap
        if (
            isinstance(request.target, ToBootstrap)
            and first is not None
            and self.live(first.key) is first
        ):
            return first
        return super().place(request)

    def on_metadata(self, old: ClusterMetadata | None, via: Connection | None) -> None:
        if not self._producer or not self.metadata:
            return
        for broker in self.metadata.brokers:
            node = BrokerNode(broker.broker_id)
            if self.live_for_node(node, Purpose.DATA) is None:
                self.get_or_dial(ConnectionKey(broker.endpoint, node, Purpose.DATA))
