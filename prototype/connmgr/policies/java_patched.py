"""``java-patched``: kafka-clients 4.3.1 with the project's patch, its switches on.

Rule (b0), ``bootstrap.connection.close.enable`` (KIP (b0),
``benchmarks/kafka-clients-patch/patches/0001-bootstrap-connection-close.diff``): *a connection
to a bootstrap node (negative id), dialled while the bootstrap nodes were the cluster the
metadata updater knew, is closed once a metadata response has replaced the bootstrap cluster,
as soon as it carries no request in flight.*

Everything else is :class:`~connmgr.policies.java_today.JavaTodayPolicy` (the patch leaves
node choice, keys and idle expiry as they are). As in the patch:

* only dials made while the bootstrap cluster was current are tracked: a dial to a bootstrap
  node made after metadata replaced it (a pick made before) is left to idle expiry;
* the check runs after every event (the patch: at the end of every ``poll()``), so an idle
  bootstrap connection closes in the same turn that applies the first metadata, and a busy one
  in the turn that completes its last in-flight request; a connection still dialling has
  nothing in flight and closes too;
* the close is the client's choice: no reconnect backoff, nothing failed; requests queued on
  it, not yet sent, go back to be placed again.

The second switch, ``connection.role.metrics.enable``, only adds metrics: no connection
differs. The third, ``endpoint.change.retire.enable`` (KIP (a) rule 2, ``patches/0003``),
acts only when metadata gives a broker another host or port than its open connection's; no
scenario this model is compared on moves a broker, so it changes nothing here either.
"""

from __future__ import annotations

from typing import ClassVar

from connmgr.core.actions import CloseReason
from connmgr.core.connections import Connection
from connmgr.core.identity import BootstrapNode
from connmgr.core.state import ConnState
from connmgr.policies.java_today import JavaTodayPolicy


class JavaPatchedPolicy(JavaTodayPolicy):
    name: ClassVar[str] = "java-patched"
    summary: ClassVar[str] = (
        "kafka-clients 4.3.1 + the project's patch: java-today, bootstrap connection closed"
    )

    _tracked: dict[int, Connection] | None = None
    """Bootstrap connections dialled while the bootstrap cluster was current, by id."""

    def _bootstrap_cluster_current(self) -> bool:
        return self.metadata is None or not self.metadata.brokers

    def start_dial(self, conn: Connection) -> None:
        super().start_dial(conn)
        if isinstance(conn.key.node, BootstrapNode) and self._bootstrap_cluster_current():
            if self._tracked is None:
                self._tracked = {}
            self._tracked[conn.conn_id] = conn

    def maintain(self) -> None:
        super().maintain()
        tracked = self._tracked
        if not tracked or self._bootstrap_cluster_current():
            return
        for conn_id, conn in list(tracked.items()):
            if conn.state not in (ConnState.CONNECTING, ConnState.READY):
                del tracked[conn_id]  # closed or failed since: a new dial is judged afresh
            elif not conn.in_flight:
                del tracked[conn_id]
                self.close(conn, CloseReason.BOOTSTRAP_DONE)
