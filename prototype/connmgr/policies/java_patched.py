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

Not modelled: ``patches/0010-bootstrap-connection-awaited.diff``, by which the patch keeps a
bootstrap connection a caller asked ``ready()`` about since the last check (the idempotent
producer's ``InitProducerId`` pick) until that caller's request is answered. This model still
closes it and places the queued request again at once (the patch before 0010 instead left the
caller waiting out ``request.timeout.ms``).

The same switch keeps the patch from dialling a second bootstrap server at start
(``patches/0009-bootstrap-connection-in-setup.diff``): *while the bootstrap cluster is current,
a bootstrap node whose connection is established but cannot take a request yet counts as
connecting for ``leastLoadedNode``*, so the telemetry sender, which 4.3.1 lets dial another
bootstrap server in the poll that sent the first metadata request, waits for the first one; a
failed connection still lets the next pick dial another. This model has no rule for it:
java-today's own picks do not make that second dial (:mod:`connmgr.policies.java_44` adds it);
in a replayed run it comes from the recorded picks (``replay_choices``), and a patched run
records none.

Rule 6, ``connections.linger.ms`` (KIP (b) rule 6, ``patches/0007`` and ``0008``, at this
model's ``connection_linger_ms``): *a READY connection that no component's published needs name,
that carries no request and that no caller waits for, is closed once the linger has passed since
the check first saw it so; the connection to a node of the current cluster last used is kept for
any-node requests when no kept connection is to such a node.* As in the patch:

* the needs: a producer's are the leaders of its topics and the brokers of its transaction
  manager's coordinators, by their real ids (``Sender``); a consumer's are the leaders of its
  assigned partitions (``AbstractFetch``) and its group coordinator's separate
  ``2147483647 - id`` connection (``AbstractCoordinator``);
* a producer publishes from its first loop; a consumer from its first coordinator or
  assignment: until then nothing is closed and no linger runs;
* a request in flight or waiting for the connection keeps it (the patch: in flight, or a
  caller asked ``ready()`` for it since the last check), and its linger starts again after;
* the check runs after every event, the close is the client's choice (no backoff, reason
  ``unneeded``), and the next linger deadline wakes the model.

Rule 6's exception for a lost role (``patches/0011-lost-role-waits.diff``): *when the
connection to a node the published needs name is lost (reset by its peer), a connection to that
node waits for the role to come back instead of lingering out; the wait ends when the role is
back after the client saw it go elsewhere, when the node's broker leaves the metadata, or 9
minutes after the loss* (:data:`LOST_ROLE_WAIT_MS`). The patch also ends a wait when idle
expiry closes the awaited connection; this model bounds it by the 9 minutes alone (the same
value as the Java clients' default ``connections.max.idle.ms``).

The switch ``connection.role.metrics.enable`` only adds metrics: no connection differs.
``endpoint.change.retire.enable`` (KIP (a) rule 2, ``patches/0003``) acts only when metadata
gives a broker another host or port than its open connection's; no scenario this model is
compared on moves a broker, so it changes nothing here either.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar, Final

from connmgr.core.actions import CloseReason
from connmgr.core.config import ClientKind
from connmgr.core.connections import Connection
from connmgr.core.coordinator import CoordinatorKind
from connmgr.core.decisions import CloseNow, Decision, Dial, DialDecision
from connmgr.core.identity import BootstrapNode, BrokerNode, CoordinatorNode, NodeIdentity
from connmgr.core.state import ConnState
from connmgr.policies.java_today import JavaTodayPolicy

LOST_ROLE_WAIT_MS: Final = 540_000
"""Rule 6: the longest a connection waits for a lost role after the loss (the patch's
``NetworkClient.LOST_ROLE_WAIT_MS``)."""


@dataclass(slots=True)
class _LostRole:
    """A node whose needed connection was lost: since when, and whether the client has since
    seen its role go elsewhere."""

    at_ms: float
    away: bool = False


class JavaPatchedPolicy(JavaTodayPolicy):
    name: ClassVar[str] = "java-patched"
    extra_options: ClassVar[frozenset[str]] = frozenset({"connection_linger_ms"})
    summary: ClassVar[str] = (
        "kafka-clients 4.3.1 + the project's patch: java-today, bootstrap connection closed"
    )
    closes_bootstrap: ClassVar[bool] = True
    """Whether rule (b0) is switched on (``bootstrap.connection.close.enable``)."""
    closes_unneeded: ClassVar[bool] = True
    """Whether rule 6 is switched on (``connections.linger.ms``)."""

    _tracked: dict[int, Connection] | None = None
    """Bootstrap connections dialled while the bootstrap cluster was current, by id."""

    _publishing: bool = False
    """Rule 6: whether the client has published its needs yet (nothing closes before)."""

    _linger_starts: dict[int, float] | None = None
    """Rule 6: per READY connection lingering, when its linger started, by id."""

    _next_linger_deadline: float | None = None
    """Rule 6: the earliest linger deadline left after the last check."""

    _lost_roles: dict[NodeIdentity, _LostRole] | None = None
    """Rule 6: per node whose needed connection was lost, when and whether its role went away."""

    def _bootstrap_cluster_current(self) -> bool:
        return self.metadata is None or not self.metadata.brokers

    def before_dial(self, conn: Connection) -> DialDecision:
        """Every dial goes ahead; one to a bootstrap node while the bootstrap cluster is
        current is tracked for rule (b0)."""
        if isinstance(conn.key.node, BootstrapNode) and self._bootstrap_cluster_current():
            if self._tracked is None:
                self._tracked = {}
            self._tracked[conn.conn_id] = conn
        return Dial()

    def on_connection_lost(self, conn: Connection) -> Iterator[Decision]:
        """Rule 6's exception: a needed connection reset by its peer leaves its node waiting
        for the role (the patch's ``maybeRecordLostRole``)."""
        node = conn.key.node
        if (
            self.closes_unneeded
            and self._publishing
            and not isinstance(node, BootstrapNode)
            and node in self._needed_nodes()
        ):
            if self._lost_roles is None:
                self._lost_roles = {}
            self._lost_roles[node] = _LostRole(self.now_ms)
        return iter(())

    def _settle_lost_roles(self, needed: frozenset[NodeIdentity]) -> None:
        """Forget the lost roles that came back after going away, whose broker left the
        metadata, or whose wait ran out; mark those not needed now as gone elsewhere (the
        patch's ``settleLostRoles``)."""
        lost_roles = self._lost_roles
        if not lost_roles:
            return
        md = self.metadata
        for node, lost in list(lost_roles.items()):
            broker_id = node.broker_id if isinstance(node, BrokerNode | CoordinatorNode) else None
            gone = md is not None and broker_id not in md.by_id
            is_needed = node in needed
            if gone or self.now_ms >= lost.at_ms + LOST_ROLE_WAIT_MS or (is_needed and lost.away):
                del lost_roles[node]
            elif not is_needed:
                lost.away = True
            if node in lost_roles:
                end = lost.at_ms + LOST_ROLE_WAIT_MS
                if self._next_linger_deadline is None or end < self._next_linger_deadline:
                    self._next_linger_deadline = end

    def review(self) -> Iterator[Decision]:
        if self.closes_bootstrap:
            yield from self._close_bootstrap_connections()
        if self.closes_unneeded:
            yield from self._close_unneeded_connections()

    def next_deadline(self) -> float | None:
        times = [t for t in (super().next_deadline(), self._next_linger_deadline) if t is not None]
        return min(times) if times else None

    def _close_unneeded_connections(self) -> Iterator[Decision]:
        """Rule 6 (see the module docstring): one check, as ``closeUnneededConnections``."""
        self._next_linger_deadline = None
        if not self._publishing:
            is_producer = self.config.client is ClientKind.PRODUCER
            if not (is_producer or len(self.coordinators) or self.interest is not None):
                return
            self._publishing = True
        starts = self._linger_starts
        if starts is None:
            starts = self._linger_starts = {}
        needed = self._needed_nodes()
        self._settle_lost_roles(needed)
        awaited = self._lost_roles or {}
        in_cluster = self._in_cluster
        anchor_held = False
        lingering: list[Connection] = []
        for conn in self.table.records():
            if conn.state is not ConnState.READY:
                continue
            if conn.key.node in needed or conn.busy or conn.key.node in awaited:
                anchor_held = anchor_held or in_cluster(conn.key.node)
                continue
            starts.setdefault(conn.conn_id, self.now_ms)
            lingering.append(conn)
        # A kept connection (needed, or carrying a request) forgets its linger start, as does
        # one gone: its next linger starts afresh, after its last use.
        live = {c.conn_id for c in lingering}
        for conn_id in [i for i in starts if i not in live]:
            del starts[conn_id]
        anchor: Connection | None = None
        if not anchor_held:
            candidates = [c for c in lingering if in_cluster(c.key.node)]
            if candidates:
                anchor = max(candidates, key=lambda c: (starts[c.conn_id], c.conn_id))
        linger = self.config.connection_linger_ms
        for conn in lingering:
            if conn is anchor:
                continue
            deadline = starts[conn.conn_id] + linger
            if deadline > self.now_ms:
                if self._next_linger_deadline is None or deadline < self._next_linger_deadline:
                    self._next_linger_deadline = deadline
                continue
            del starts[conn.conn_id]
            yield CloseNow(conn, CloseReason.UNNEEDED)

    def _needed_nodes(self) -> frozenset[NodeIdentity]:
        """The nodes the client's components publish as needed (the module docstring)."""
        return self.derived.of_facts("java_needed_nodes", self._publish_needs)

    def _publish_needs(self) -> frozenset[NodeIdentity]:
        md = self.metadata
        needed: set[NodeIdentity] = set()
        if self.config.client is ClientKind.PRODUCER:
            leaders = frozenset() if md is None else md.leader_ids
            needed.update(BrokerNode(b) for b in leaders)
            needed.update(BrokerNode(b) for _, b in self.coordinators.items())
        else:
            if md is not None and self.interest is not None:
                needed.update(BrokerNode(b) for b in md.leaders_for(self.interest))
            group = self.coordinators.brokers(CoordinatorKind.GROUP)
            needed.update(CoordinatorNode(b) for b in group)
        return frozenset(needed)

    def _in_cluster(self, node: NodeIdentity) -> bool:
        """Whether ``node`` is one of the metadata updater's current cluster: the bootstrap
        nodes until a response replaced them, then the brokers it named."""
        md = self.metadata
        if md is None or not md.brokers:
            return isinstance(node, BootstrapNode)
        return isinstance(node, BrokerNode) and node.broker_id in md.by_id

    def _close_bootstrap_connections(self) -> Iterator[Decision]:
        """Rule (b0) (see the module docstring)."""
        tracked = self._tracked
        if not tracked or self._bootstrap_cluster_current():
            return
        for conn_id, conn in list(tracked.items()):
            if conn.state not in (ConnState.CONNECTING, ConnState.READY):
                del tracked[conn_id]  # closed or failed since: a new dial is judged afresh
            elif not conn.in_flight:
                del tracked[conn_id]
                yield CloseNow(conn, CloseReason.BOOTSTRAP_DONE)


class JavaB0Policy(JavaPatchedPolicy):
    """kafka-clients 4.3.1 with KIP (b0)'s switch alone: what closing the bootstrap connection
    buys on its own, against today's client (the workload classes' per-KIP rows)."""

    name: ClassVar[str] = "java-b0"
    summary: ClassVar[str] = "java-today + KIP (b0) alone: the bootstrap connection closed"
    closes_unneeded: ClassVar[bool] = False


class JavaLingerPolicy(JavaPatchedPolicy):
    """kafka-clients 4.3.1 with KIP (b) rule 6's switch alone (``connections.linger.ms``):
    what prompt close buys and costs on its own, against today's client."""

    name: ClassVar[str] = "java-linger"
    summary: ClassVar[str] = "java-today + KIP (b) rule 6 alone: prompt close after a linger"
    closes_bootstrap: ClassVar[bool] = False
