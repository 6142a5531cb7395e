"""The simulated cluster: brokers with endpoints and RTTs, partition leaders, coordinators
(group and transaction coordinators, each placed by its key), brokers going down and up,
endpoints moving, and endpoints shared by several broker ids.

Where a new TCP connection lands (:meth:`ClusterModel.resolve`) is the one modelling choice
that matters for safety:

* an endpoint advertised by exactly one broker reaches that broker;
* an endpoint advertised by several brokers is a proxy. A connection opened *for* one of
  those ids reaches it (the proxy routes per connection, as SNI-routing proxies do: without
  that, no client could use such a cluster at all); a connection opened without naming a
  broker (a bootstrap connection) lands on a backend of the proxy's choosing, drawn from the
  cluster's own random source;
* an endpoint nobody advertises refuses, and so does a broker that is down.

Names. Hosts are literal addresses unless the cluster has a name table (:attr:`ClusterModel.dns`,
empty but for the ``ip-change`` and ``resolver-outage`` scenarios): there a broker's host is a
DNS name that resolves to its pod's address, and :meth:`ClusterModel.replace_pod` restarts a
broker's pod the Kubernetes way -- the old address stops answering (no reset: a socket to it
just gets no reply), the name resolves to nothing (NXDOMAIN) while the broker is down, then to a new
address; :attr:`ClusterModel.dns_failure` is a resolver outage, every lookup failing while
the records stay as they are. The client resolves a name when it first dials it and again
every :attr:`ClusterModel.dns_ttl_ms`.

A client that re-labels a socket (for example, adopts a bootstrap connection as broker X's)
keeps whatever backend the socket reached; the simulator records that backend for every
request, so misrouting is visible, not assumed away.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from connmgr.core.coordinator import CoordinatorKind, CoordinatorRef
from connmgr.core.endpoint import Endpoint
from connmgr.core.events import AddressesResolved, LookupOutcome
from connmgr.core.identity import ConnectionKey
from connmgr.core.metadata import BrokerInfo, ClusterMetadata, TopicPartition
from connmgr.errors import ConfigError


@dataclass(slots=True)
class BrokerModel:
    broker_id: int
    endpoint: Endpoint
    rtt_ms: float = 0.0
    up: bool = True


@dataclass
class ClusterModel:
    """Mutable state of the simulated cluster; the simulator changes it on scheduled events."""

    brokers: dict[int, BrokerModel]
    topics: dict[str, list[int]] = field(default_factory=dict)
    """topic -> leader broker id of each partition (the preferred leaders)."""
    coordinators: dict[str, int] = field(default_factory=dict)
    """group id -> its (preferred) group coordinator."""
    txn_coordinators: dict[str, int] = field(default_factory=dict)
    """transactional id -> its (preferred) transaction coordinator: placed apart from the
    group coordinators, as a real cluster hashes ``__transaction_state`` and
    ``__consumer_offsets`` separately."""
    cluster_id: str = "sim-cluster"
    broker_idle_ms: int | None = 600_000
    """The brokers' own ``connections.max.idle.ms`` (None: never reap)."""
    confirms_identity: bool = False
    """Brokers answer KIP-1242's identity check (``ApiVersions`` v5, Kafka 4.4+): a client
    may ask, on a connection, whether its broker is node X of this cluster."""
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    dns: dict[str, str | None] = field(default_factory=dict)
    """Host name -> the address it resolves to now (None: no record). A host not listed is
    a literal address, which the simulator never reports as resolved."""
    dns_ttl_ms: float | None = None
    """How often the client re-resolves each name it has dialled (the answer's TTL, as a
    caching resolver honours it); None: only when it dials."""
    dns_phase_ms: dict[str, float] = field(default_factory=dict)
    """Host name -> when in each ``dns_ttl_ms`` period its cached answer expires (ms past a
    multiple of the TTL; 0 if not listed): the answer a client first gets may have any part
    of its TTL left, so the re-resolutions need not fall on the cluster's change times."""
    dns_failure: LookupOutcome | None = None
    """While set, a resolver outage: every lookup of a name fails with this outcome (the
    records are intact; the resolver cannot serve them)."""
    dark: set[str] = field(default_factory=set)
    """Addresses that stopped answering (a replaced pod's): requests on a socket to one
    get no reply."""
    _moved: dict[TopicPartition, int] = field(default_factory=dict)
    _coordinator_moved: dict[str, int] = field(default_factory=dict)
    _txn_moved: dict[str, int] = field(default_factory=dict)
    _assigned: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    _generation: dict[str, int] = field(default_factory=dict)
    _md_cache: dict[tuple[str, ...], ClusterMetadata] = field(default_factory=dict)
    _at: dict[Endpoint, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.brokers:
            raise ConfigError("a cluster needs at least one broker")
        for topic, leaders in self.topics.items():
            self._check_ids(leaders, f"leaders of topic {topic!r}")
        self._check_ids(self.coordinators.values(), "coordinators")
        self._check_ids(self.txn_coordinators.values(), "transaction coordinators")
        self._reindex()

    def _check_ids(self, ids: Iterable[int], what: str) -> None:
        unknown = sorted(set(ids) - set(self.brokers))
        if unknown:
            raise ConfigError(f"{what} name unknown broker ids {unknown}")

    def _reindex(self) -> None:
        self._at = {}
        for b in self.brokers.values():
            self._at.setdefault(b.endpoint, []).append(b.broker_id)
        self._md_cache.clear()

    # --- what clients observe ------------------------------------------------------------

    def leader(self, tp: TopicPartition) -> int:
        return self._moved.get(tp, self.topics[tp.topic][tp.partition])

    def coordinator(self, group: str) -> int:
        return self._coordinator_moved.get(group, self.coordinators[group])

    def txn_coordinator(self, transactional_id: str) -> int:
        return self._txn_moved.get(transactional_id, self.txn_coordinators[transactional_id])

    def coordinator_of(self, ref: CoordinatorRef) -> int:
        """Where coordinator ``ref`` is now (what FindCoordinator answers)."""
        if ref.kind is CoordinatorKind.TRANSACTION:
            return self.txn_coordinator(ref.key)
        return self.coordinator(ref.key)

    def assignment(self, group: str) -> frozenset[TopicPartition] | None:
        """The partitions the simulated member of ``group`` is assigned (what SyncGroup
        answers it), or None when the group has never rebalanced: the member is alone and
        owns every partition of its topics."""
        return self._assigned.get(group)

    def generation(self, group: str) -> int:
        """The group's generation: bumped by every :meth:`rebalance` (0: never)."""
        return self._generation.get(group, 0)

    def partitions(self, topics: Sequence[str]) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t in topics for p in range(len(self.topics[t]))]

    def metadata(self, topics: Sequence[str]) -> ClusterMetadata:
        """A metadata response for ``topics``: live brokers and current leaders."""
        cache_key = tuple(topics)
        cached = self._md_cache.get(cache_key)
        if cached is None:
            brokers = [BrokerInfo(b.broker_id, b.endpoint) for b in self.brokers.values() if b.up]
            leaders = {tp: self.leader(tp) for tp in self.partitions(topics)}
            cached = ClusterMetadata.build(self.cluster_id, brokers, leaders)
            self._md_cache[cache_key] = cached
        return cached

    def resolve(self, key: ConnectionKey) -> int | None:
        """The broker a new connection for ``key`` reaches, or None if it is refused."""
        ids = self._at.get(key.endpoint, [])
        if len(ids) > 1 and key.broker_id in ids:
            ids = [key.broker_id]  # per-connection routing by the proxy
        live = [i for i in ids if self.brokers[i].up]
        if not live:
            return None
        return live[0] if len(live) == 1 else live[self.rng.randrange(len(live))]

    def lookup(self, host: str) -> AddressesResolved | None:
        """A lookup of ``host`` now, or None for a literal address (not in :attr:`dns`): it
        fails with :attr:`dns_failure` during a resolver outage, with NXDOMAIN while the
        name has no record, and answers the name's address otherwise."""
        if host not in self.dns:
            return None
        address = self.dns[host]
        if self.dns_failure is not None:
            return AddressesResolved.failed(host, self.dns_failure)
        if address is None:
            return AddressesResolved.failed(host, LookupOutcome.NO_SUCH_NAME)
        return AddressesResolved(host, frozenset({address}))

    def rtt(self, broker_id: int) -> float:
        return self.brokers[broker_id].rtt_ms

    # --- changes -------------------------------------------------------------------------

    def set_down(self, broker_id: int) -> None:
        """Take a broker down; its partitions and groups move to the next live broker."""
        self.brokers[broker_id].up = False
        live = sorted(i for i, b in self.brokers.items() if b.up)
        if not live:
            raise ConfigError("cannot take the last live broker down")
        for topic, leaders in self.topics.items():
            for partition in range(len(leaders)):
                tp = TopicPartition(topic, partition)
                if self.leader(tp) == broker_id:
                    self._moved[tp] = _next_live(live, broker_id)
        for group in self.coordinators:
            if self.coordinator(group) == broker_id:
                self._coordinator_moved[group] = _next_live(live, broker_id)
        for txn in self.txn_coordinators:
            if self.txn_coordinator(txn) == broker_id:
                self._txn_moved[txn] = _next_live(live, broker_id)
        self._md_cache.clear()

    def set_up(self, broker_id: int) -> None:
        self.brokers[broker_id].up = True
        self._md_cache.clear()

    def restore_preferred(self) -> None:
        """Preferred-leader election: leaders and coordinators move back where they belong,
        for brokers that are up."""
        self._moved = {tp: b for tp, b in self._moved.items() if not self._preferred_up(tp)}
        self._coordinator_moved = {
            g: b
            for g, b in self._coordinator_moved.items()
            if not self.brokers[self.coordinators[g]].up
        }
        self._txn_moved = {
            t: b
            for t, b in self._txn_moved.items()
            if not self.brokers[self.txn_coordinators[t]].up
        }
        self._md_cache.clear()

    def _preferred_up(self, tp: TopicPartition) -> bool:
        return self.brokers[self.topics[tp.topic][tp.partition]].up

    def move_endpoint(self, broker_id: int, endpoint: Endpoint) -> None:
        self.brokers[broker_id].endpoint = endpoint
        self._reindex()

    def replace_pod(self, broker_id: int) -> None:
        """The pod of ``broker_id`` is gone: its address goes dark (sockets to it stay open
        but get no reply), its name resolves to nothing, and the broker is down (its
        partitions and coordinators move, :meth:`set_down`). :meth:`pod_back` ends it."""
        host = self.brokers[broker_id].endpoint.host
        old = self.dns.get(host)
        if old is None:
            raise ConfigError(f"broker {broker_id}'s host {host!r} has no address to lose")
        self.dark.add(old)
        self.dns[host] = None
        self.set_down(broker_id)

    def pod_back(self, broker_id: int, address: str) -> None:
        """The new pod of ``broker_id`` is up at ``address``, under the same name."""
        if address in self.dark:
            raise ConfigError(f"address {address} belonged to a replaced pod")
        self.dns[self.brokers[broker_id].endpoint.host] = address
        self.set_up(broker_id)

    def move_coordinator(self, group: str, broker_id: int) -> None:
        self._check_ids([broker_id], f"new coordinator of {group!r}")
        self._coordinator_moved[group] = broker_id

    def move_txn_coordinator(self, transactional_id: str, broker_id: int) -> None:
        self._check_ids([broker_id], f"new transaction coordinator of {transactional_id!r}")
        self._txn_moved[transactional_id] = broker_id

    def add_broker(self, broker_id: int, endpoint: Endpoint, rtt_ms: float = 0.0) -> None:
        """A new broker joins; it leads nothing until leaders are moved to it."""
        if broker_id in self.brokers:
            raise ConfigError(f"broker {broker_id} already exists")
        self.brokers[broker_id] = BrokerModel(broker_id, endpoint, rtt_ms)
        self._reindex()

    def move_leader(self, tp: TopicPartition, broker_id: int) -> None:
        self._check_ids([broker_id], f"new leader of {tp}")
        self._moved[tp] = broker_id
        self._md_cache.clear()

    def reassign(self, tp: TopicPartition, broker_id: int) -> None:
        """A partition reassignment: ``broker_id`` becomes ``tp``'s preferred leader and
        leads it now, for good (a later preferred-leader election keeps it there, unlike a
        :meth:`move_leader`)."""
        self._check_ids([broker_id], f"new preferred leader of {tp}")
        if not self.brokers[broker_id].up:
            raise ConfigError(f"broker {broker_id} is down: it cannot take over {tp}")
        self.topics[tp.topic][tp.partition] = broker_id
        self._moved.pop(tp, None)
        self._md_cache.clear()

    def rebalance(self, group: str, partitions: frozenset[TopicPartition]) -> None:
        """Members joined or left ``group``: a new generation, in which the simulated member
        is assigned ``partitions``. Its coordinator tells it on its next heartbeat
        (REBALANCE_IN_PROGRESS), and it re-joins to learn them."""
        if group not in self.coordinators:
            raise ConfigError(f"group {group!r} has no coordinator in this cluster")
        self._assigned[group] = partitions
        self._generation[group] = self.generation(group) + 1


def _next_live(live: list[int], after: int) -> int:
    for broker_id in live:
        if broker_id > after:
            return broker_id
    return live[0]


def build_cluster(
    endpoints: Mapping[int, Endpoint],
    topics: Mapping[str, Sequence[int]],
    coordinators: Mapping[str, int],
    *,
    rtt_ms: float = 0.0,
    broker_idle_ms: int | None = 600_000,
    seed: int = 0,
    txn_coordinators: Mapping[str, int] | None = None,
) -> ClusterModel:
    return ClusterModel(
        brokers={i: BrokerModel(i, ep, rtt_ms) for i, ep in endpoints.items()},
        topics={t: list(leaders) for t, leaders in topics.items()},
        coordinators=dict(coordinators),
        txn_coordinators=dict(txn_coordinators or {}),
        broker_idle_ms=broker_idle_ms,
        rng=random.Random(seed),
    )
