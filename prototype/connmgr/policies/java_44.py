"""``java-4.4``: kafka-clients 4.4.0 as measured at every start -- two bootstrap connections.

Measured on the real KRaft tier (3 partitions led by 3 brokers, connects counted by the
kernel): a plain ``KafkaProducer`` opens 5 connections and a group ``KafkaConsumer`` 6, with
kafka-clients 4.4.0 and 4.3.1 alike: **two bootstrap connections**, then the leaders (and the
group coordinator's). The second bootstrap connection is the KIP-714 telemetry sender's: it
asks ``leastLoadedNode`` on the poll loop right after the first metadata request, while the
metadata updater's bootstrap connection is still in its ApiVersions handshake
(``CHECKING_API_VERSIONS``), which ``leastLoadedNode`` counts neither as ready nor as
connecting -- so it dials another bootstrap server.

:class:`~connmgr.policies.java_today.JavaTodayPolicy` has no handshake window (a dial is
CONNECTING until it is READY), so its telemetry loop waits on the first bootstrap connection
and each start opens one bootstrap connection. This model is java-today with that one
difference: before metadata has replaced the bootstrap nodes, the telemetry loop treats a
bootstrap connection that is not yet READY as not there, and dials the next bootstrap server
in its scan that has no connection (none when the client was given one server). Everything
else, including idle expiry of both bootstrap connections, is java-today's.

It stands for "Java 4.4 as measured" in the workload classes
(:mod:`connmgr_evidence.bench.workloads`): short-lived clients pay that second bootstrap handshake
at
every start.
"""

from __future__ import annotations

from typing import ClassVar

from connmgr.core.decisions import OpenThenPlace, Placement
from connmgr.core.events import Api
from connmgr.core.identity import BootstrapNode, ConnectionKey, Purpose
from connmgr.core.request import Request
from connmgr.core.state import ConnState
from connmgr.policies.java_today import JavaTodayPolicy


class Java44Policy(JavaTodayPolicy):
    name: ClassVar[str] = "java-4.4"
    summary: ClassVar[str] = (
        "kafka-clients 4.4.0 as measured: java-today, a second bootstrap connection per start"
    )

    def _poll_loop(self, request: Request) -> Placement:
        if request.api is Api.GET_TELEMETRY_SUBSCRIPTIONS and not self._bootstrap_replaced():
            second = self._second_bootstrap()
            if second is not None:
                # Dialled before the loop picks: its pick sees the new connection.
                return OpenThenPlace((second,))
        return super()._poll_loop(request)

    def _bootstrap_replaced(self) -> bool:
        return self.metadata is not None and bool(self.metadata.brokers)

    def _second_bootstrap(self) -> ConnectionKey | None:
        """While the metadata updater's bootstrap connection is the only one and is not
        READY, the next bootstrap server (in list order from it) that has no connection
        and is not in backoff, to dial: one second bootstrap connection, as measured."""
        servers = self.config.bootstrap
        states = [
            self.table.live_for_node(BootstrapNode(i), Purpose.DATA) for i in range(len(servers))
        ]
        if any(c is not None and c.state is ConnState.READY for c in states):
            return None
        dialled = [i for i, c in enumerate(states) if c is not None]
        if len(dialled) != 1:
            return None  # the metadata updater dials first; the loop adds one, once
        for step in range(1, len(servers)):
            i = (dialled[0] + step) % len(servers)
            key = ConnectionKey(servers[i], BootstrapNode(i), Purpose.DATA)
            if states[i] is None and not self.in_backoff(key):
                return key
        return None
