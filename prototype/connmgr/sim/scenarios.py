"""Named scenarios: a cluster, a client workload, cluster changes over time, and defaults.

Every parameter can be overridden with ``--set name=value``; names that are not scenario
parameters are policy options (see :class:`~connmgr.core.config.PolicyConfig`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from connmgr.core.config import ClientKind, PolicyConfig, coerce_option
from connmgr.core.endpoint import Endpoint, parse_bootstrap
from connmgr.errors import ConfigError, UnknownName
from connmgr.sim.clients import (
    ClientModel,
    ClientTimings,
    ConsumerModel,
    ProducerModel,
    ShortLivedProducerModel,
)
from connmgr.sim.cluster import ClusterModel, build_cluster
from connmgr.sim.simulator import Simulator
from connmgr.sim.transactions import TransactionalProducerModel

ParamValue = int | float | str | bool
Change = tuple[float, Callable[[Simulator], None]]


@dataclass(frozen=True)
class ScenarioSpec:
    """A scenario with its parameters applied: everything a run needs but the policy."""

    cluster: ClusterModel
    bootstrap: tuple[Endpoint, ...]
    client: ClientKind
    topics: tuple[str, ...]
    group: str | None
    duration_ms: float
    changes: list[Change] = field(default_factory=list)
    policy_defaults: Mapping[str, str] = field(default_factory=dict)
    first_op_ms: float = 0.0
    idempotent: bool = False
    timings: ClientTimings = field(default_factory=ClientTimings)
    """The client's request cadence (defaults are the real clients' defaults)."""
    transactional_id: str | None = None
    """A transactional producer's ``transactional.id`` (None: not transactional)."""
    offsets_group: str | None = None
    """Consume-transform-produce: the consumer group whose offsets each transaction commits
    (its coordinator is ``cluster.coordinator(offsets_group)``)."""
    offsets_topic: str | None = None
    """Consume-transform-produce: the topic the consumer half reads (offsets committed)."""
    txn_interval_ms: float = 10_000.0
    """A transactional producer starts a transaction this often."""
    early_leader_dials: bool = False
    """kafka-clients, consume-transform-produce: whether the sender dialled the first
    transaction's leaders before its TxnOffsetCommit. ``Sender.sendProducerData`` calls
    ``client.ready(leader)`` for every ready batch whenever no transactional request is
    queued -- between an append and its ``maybeAddPartition``, or while the application
    waits in ``sendOffsetsToTransaction`` for the consumed topic's metadata -- a race
    between the application and sender threads. A real run's log says which (observed and
    replayed, like ``replay_choices``); a simulated run assumes the transactional requests
    won."""
    records: int | None = None
    """A short-lived producer: it sends this many records and closes once they are
    acknowledged, long before the run ends (None: it sends until the run ends)."""

    def make_client(self, sim: Simulator) -> ClientModel:
        timings = self.timings
        if self.transactional_id is not None:
            return TransactionalProducerModel(
                sim,
                self.topics,
                timings,
                transactional_id=self.transactional_id,
                txn_interval_ms=self.txn_interval_ms,
                offsets_group=self.offsets_group,
                offsets_topic=self.offsets_topic,
                early_leader_dials=self.early_leader_dials,
            )
        if self.records is not None:
            return ShortLivedProducerModel(sim, self.topics, timings, records=self.records)
        if self.client is ClientKind.PRODUCER:
            return ProducerModel(
                sim, self.topics, timings, first_op_ms=self.first_op_ms, idempotent=self.idempotent
            )
        assert self.group is not None
        return ConsumerModel(
            sim, self.topics, timings, group=self.group, first_op_ms=self.first_op_ms
        )


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    defaults: Mapping[str, ParamValue]
    build: Callable[[Mapping[str, ParamValue]], ScenarioSpec]

    def params(self, overrides: Mapping[str, str]) -> dict[str, ParamValue]:
        """Defaults with ``overrides`` (strings) converted to each default's type."""
        result = dict(self.defaults)
        for name, text in overrides.items():
            if name not in result:
                raise UnknownName(
                    f"scenario {self.name!r} has no parameter {name!r}; "
                    f"parameters: {', '.join(sorted(result))}"
                )
            result[name] = _coerce(name, result[name], text)
        return result

    def spec(self, overrides: Mapping[str, str] | None = None) -> ScenarioSpec:
        return self.build(self.params(overrides or {}))


def _coerce(name: str, current: ParamValue, text: str) -> ParamValue:
    if isinstance(current, float):
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"{name}={text!r}: expected a number") from None
    if isinstance(current, str):
        return text
    value = coerce_option(name, current, text)
    assert isinstance(value, int | float | str | bool)
    if (
        isinstance(current, int)
        and isinstance(value, int)
        and not isinstance(current, bool)
        and current >= 0 > value
    ):
        raise ConfigError(f"{name}={text!r}: must be >= 0")
    return value


COMMON: dict[str, ParamValue] = {"seed": 0, "rtt_ms": 0.0}
MINUTE = 60_000


# The readers below are shared with the modules that register more scenarios (sim/churn.py).


def int_param(p: Mapping[str, ParamValue], name: str) -> int:
    """Parameter ``name`` of ``p``, an integer by its default's type."""
    value = p[name]
    assert isinstance(value, int)
    return value


def num_param(p: Mapping[str, ParamValue], name: str) -> float:
    """Parameter ``name`` of ``p`` as a float (an integer default counts too)."""
    value = p[name]
    assert isinstance(value, int | float)
    return float(value)


def broker_idle(p: Mapping[str, ParamValue]) -> int | None:
    """The brokers' ``connections.max.idle.ms`` from ``broker_idle_ms`` (0: never reap)."""
    idle = int_param(p, "broker_idle_ms")
    return None if idle == 0 else idle


def localhost_brokers(ids: range, first_port: int) -> dict[int, Endpoint]:
    """Brokers ``ids`` on localhost, on consecutive ports from ``first_port``."""
    return {i: Endpoint("localhost", first_port + n) for n, i in enumerate(ids)}


def spread_leaders(brokers: int, count: int) -> list[int]:
    """``count`` leader ids spread over brokers 1..N, away from the bootstrap brokers 1-3."""
    if brokers <= count:
        return [1 + i % brokers for i in range(count)]
    return [max(1, brokers * (i + 1) // (count + 1)) for i in range(count)]


# --- the seed articles' topologies --------------------------------------------------------


def _seed(p: Mapping[str, ParamValue], client: ClientKind, bootstrap: str) -> ScenarioSpec:
    # fixtures/java-*.log: brokers 0, 1, 2 on localhost:9092..9094; group "test" coordinated
    # by broker 2; topic t4 with one partition led by each broker. The partition order
    # (leaders 2, 0, 1) is the order in which the consumer log connects to the leaders.
    cluster = build_cluster(
        localhost_brokers(range(3), 9092),
        {"t4": [2, 0, 1]},
        {"test": 2},
        rtt_ms=num_param(p, "rtt_ms"),
        broker_idle_ms=broker_idle(p),
        seed=int_param(p, "seed"),
    )
    offset = int_param(p, "bootstrap_offset")
    return ScenarioSpec(
        cluster=cluster,
        bootstrap=parse_bootstrap(bootstrap),
        client=client,
        topics=("t4",),
        group="test" if client is ClientKind.CONSUMER else None,
        duration_ms=num_param(p, "duration_ms"),
        policy_defaults={"bootstrap_offset": str(offset)} if offset >= 0 else {},
    )


COORDINATOR_PLACEMENTS = ("auto", "shared", "separate")


def _coordinator(n: int, leaders: Sequence[int], placement: str) -> int:
    """The group coordinator of an N-broker cluster: ``shared`` with the first leader,
    ``separate`` from every leader (impossible when every broker leads), or ``auto`` (broker
    N/3, the historical default, which is separate from the spread leaders on big clusters)."""
    if placement not in COORDINATOR_PLACEMENTS:
        raise ConfigError(
            f"coordinator={placement!r}: choose one of {', '.join(COORDINATOR_PLACEMENTS)}"
        )
    if placement == "shared":
        return leaders[0]
    auto = max(1, n // 3) if n > 3 else 1
    if placement == "auto":
        return auto
    free = [b for b in range(1, n + 1) if b not in set(leaders)]
    if not free:
        raise ConfigError(f"coordinator=separate is impossible: all {n} brokers lead a partition")
    return auto if auto in free else free[0]


def _big(p: Mapping[str, ParamValue], client: ClientKind) -> ScenarioSpec:
    n = int_param(p, "brokers")
    if n < 1:
        raise ConfigError("brokers must be >= 1")
    spread = spread_leaders(n, int_param(p, "leaders"))
    partitions = int_param(p, "partitions") or len(spread)
    topic_count = int_param(p, "topics")
    if topic_count < 1:
        raise ConfigError("topics must be >= 1")
    if int_param(p, "bootstrap_size") < 1:
        raise ConfigError("bootstrap_size must be >= 1 (entries in bootstrap.servers)")
    bootstrap = min(int_param(p, "bootstrap_size"), n)  # brokers 1..bootstrap; a list cannot repeat
    # Partition i of every topic is led by the i-th spread leader, round robin: the topics
    # share their leaders, so the leader spread alone decides the data connections needed.
    leaders = [spread[i % len(spread)] for i in range(partitions)]
    names = ["events"] + [f"events-{i}" for i in range(1, topic_count)]
    coordinator = _coordinator(n, spread, str(p["coordinator"]))
    cluster = build_cluster(
        localhost_brokers(range(1, n + 1), 9092),
        dict.fromkeys(names, leaders),
        {"app": coordinator},
        rtt_ms=num_param(p, "rtt_ms"),
        broker_idle_ms=broker_idle(p),
        seed=int_param(p, "seed"),
    )
    servers = ",".join(str(cluster.brokers[i].endpoint) for i in range(1, bootstrap + 1))
    return ScenarioSpec(
        cluster=cluster,
        bootstrap=parse_bootstrap(servers),
        client=client,
        topics=tuple(names),
        group="app" if client is ClientKind.CONSUMER else None,
        duration_ms=num_param(p, "duration_ms"),
        policy_defaults=(
            {"connections_max_idle_ms": "-1"} if int_param(p, "client_idle_disabled") else {}
        ),
    )


def _k8s(p: Mapping[str, ParamValue]) -> ScenarioSpec:
    # Broker 2 is restarted as a new pod: down at restart_at, back 30 s later advertising a
    # new address; preferred-leader election gives it its partitions back 60 s after that.
    endpoints = {i: Endpoint(f"kafka-{i}-a.pods", 9092) for i in (1, 2, 3)}
    cluster = build_cluster(
        endpoints,
        {"orders": [1, 2, 3]},
        {"app": 2},
        rtt_ms=num_param(p, "rtt_ms"),
        broker_idle_ms=broker_idle(p),
        seed=int_param(p, "seed"),
    )
    restart = num_param(p, "restart_at_ms")

    def down(sim: Simulator) -> None:
        sim.broker_down(2)

    def up(sim: Simulator) -> None:
        sim.cluster.move_endpoint(2, Endpoint("kafka-2-b.pods", 9092))
        sim.cluster.set_up(2)

    def rebalance(sim: Simulator) -> None:
        sim.cluster.restore_preferred()

    return ScenarioSpec(
        cluster=cluster,
        bootstrap=parse_bootstrap("kafka-1-a.pods:9092,kafka-2-a.pods:9092"),
        client=ClientKind.CONSUMER,
        topics=("orders",),
        group="app",
        duration_ms=num_param(p, "duration_ms"),
        changes=[(restart, down), (restart + 30_000, up), (restart + 90_000, rebalance)],
    )


def _shared(p: Mapping[str, ParamValue]) -> ScenarioSpec:
    # Three brokers behind one proxy address; metadata advertises that address for all.
    proxy = Endpoint("kafka-proxy", 9092)
    cluster = build_cluster(
        {1: proxy, 2: proxy, 3: proxy},
        {"orders": [1, 2, 3]},
        {"app": 2},
        rtt_ms=num_param(p, "rtt_ms"),
        broker_idle_ms=broker_idle(p),
        seed=int_param(p, "seed"),
    )
    return ScenarioSpec(
        cluster=cluster,
        bootstrap=(proxy,),
        client=ClientKind.CONSUMER,
        topics=("orders",),
        group="app",
        duration_ms=num_param(p, "duration_ms"),
    )


TXN_COORDINATOR_PLACEMENTS = ("separate", "shared")
CTP_COORDINATOR_LAYOUTS = ("separate", "same")


def choice_param(p: Mapping[str, ParamValue], name: str, choices: Sequence[str]) -> str:
    """Parameter ``name`` of ``p``, which must be one of ``choices`` (else ConfigError)."""
    value = str(p[name])
    if value not in choices:
        raise ConfigError(f"{name}={value!r}: choose one of {', '.join(choices)}")
    return value


def _txn(p: Mapping[str, ParamValue], *, ctp: bool) -> ScenarioSpec:
    # N brokers on localhost:9092.., bootstrap brokers 1-3; topic "events" (2 partitions on
    # spread leaders); the transaction coordinator of "txn-app" and, for consume-transform-
    # produce, the group coordinator of "app" on the highest brokers that lead nothing (or on
    # one broker: coordinators=same; or, without a group, on a leader: coordinator=shared).
    # The consumer half's input topic "orders" has one partition, on the lowest free broker.
    n = int_param(p, "brokers")
    if n < 4:
        raise ConfigError("brokers must be >= 4 (two leaders and two coordinators apart)")
    leaders = spread_leaders(n, 2)
    free = [b for b in range(n, 0, -1) if b not in leaders]
    if ctp:
        same = choice_param(p, "coordinators", CTP_COORDINATOR_LAYOUTS) == "same"
        txn_at, group_at = free[0], free[0] if same else free[1]
    else:
        shared = choice_param(p, "coordinator", TXN_COORDINATOR_PLACEMENTS) == "shared"
        txn_at, group_at = (leaders[0] if shared else free[0]), None
    topics = {"events": leaders}
    if ctp:
        topics["orders"] = [free[-1]]
    cluster = build_cluster(
        localhost_brokers(range(1, n + 1), 9092),
        topics,
        {} if group_at is None else {"app": group_at},
        txn_coordinators={"txn-app": txn_at},
        rtt_ms=num_param(p, "rtt_ms"),
        broker_idle_ms=broker_idle(p),
        seed=int_param(p, "seed"),
    )
    interval = num_param(p, "txn_interval_ms")
    if interval <= 0:
        raise ConfigError("txn_interval_ms must be > 0")
    servers = ",".join(str(cluster.brokers[i].endpoint) for i in range(1, 4))
    return ScenarioSpec(
        cluster=cluster,
        bootstrap=parse_bootstrap(servers),
        client=ClientKind.PRODUCER,
        topics=("events",),
        group=None,
        duration_ms=num_param(p, "duration_ms"),
        transactional_id="txn-app",
        offsets_group="app" if ctp else None,
        offsets_topic="orders" if ctp else None,
        txn_interval_ms=interval,
    )


SCENARIOS: dict[str, Scenario] = {}


def register(scenario: Scenario) -> None:
    """Add ``scenario`` to :data:`SCENARIOS` (by its name, replacing any of that name)."""
    SCENARIOS[scenario.name] = scenario


register(
    Scenario(
        "seed-consumer",
        "consumer of fixtures/java-consumer-2019.log: 3 brokers, bootstrap localhost:9092",
        {**COMMON, "duration_ms": 15 * MINUTE, "broker_idle_ms": 600_000, "bootstrap_offset": -1},
        lambda p: _seed(p, ClientKind.CONSUMER, "localhost:9092"),
    )
)
register(
    Scenario(
        "seed-producer",
        "producer of fixtures/java-producer-2.1.log: bootstrap localhost:9092,localhost:9093",
        # The Java client scans from a random offset; the recorded log shows it picked -2.
        {**COMMON, "duration_ms": 15 * MINUTE, "broker_idle_ms": 600_000, "bootstrap_offset": 1},
        lambda p: _seed(p, ClientKind.PRODUCER, "localhost:9092,localhost:9093"),
    )
)
_BIG = {
    **COMMON,
    "brokers": 1000,
    "leaders": 3,
    "duration_ms": 60 * MINUTE,
    "broker_idle_ms": 600_000,
    "client_idle_disabled": 0,
    # 3 bootstrap servers (or all brokers if fewer), one partition per leader, one topic.
    "bootstrap_size": 3,
    "partitions": 0,
    "topics": 1,
    "coordinator": "auto",
}
register(
    Scenario(
        "big-producer",
        "producer to a topic led by 3 of N brokers (N=1000), one hour",
        _BIG,
        lambda p: _big(p, ClientKind.PRODUCER),
    )
)
register(
    Scenario(
        "big-consumer",
        "group consumer of a topic led by 3 of N brokers (N=1000), one hour",
        _BIG,
        lambda p: _big(p, ClientKind.CONSUMER),
    )
)
register(
    Scenario(
        "k8s-endpoint-change",
        "consumer; broker 2 restarts as a new pod with a new address, then regains leadership",
        {
            **COMMON,
            "duration_ms": 15 * MINUTE,
            "broker_idle_ms": 600_000,
            "restart_at_ms": 2 * MINUTE,
        },
        _k8s,
    )
)
register(
    Scenario(
        "shared-endpoint",
        "consumer; 3 brokers behind one proxy host:port that metadata advertises for all",
        {**COMMON, "duration_ms": 15 * MINUTE, "broker_idle_ms": 600_000},
        _shared,
    )
)
register(
    Scenario(
        "idle-disabled",
        "producer on 30 brokers, connections.max.idle.ms=-1 on client and broker, one hour",
        {**_BIG, "brokers": 30, "broker_idle_ms": 0, "client_idle_disabled": 1},
        lambda p: _big(p, ClientKind.PRODUCER),
    )
)


_TXN: dict[str, ParamValue] = {
    **COMMON,
    "brokers": 6,
    "txn_interval_ms": 10_000,
    "duration_ms": 5 * MINUTE,
    "broker_idle_ms": 600_000,
}
register(
    Scenario(
        "txn-producer",
        "transactional producer: a transaction every txn_interval_ms (AddPartitionsToTxn, "
        "Produce, EndTxn); coordinator=shared puts the transaction coordinator on a leader",
        {**_TXN, "coordinator": "separate"},
        lambda p: _txn(p, ctp=False),
    )
)
register(
    Scenario(
        "ctp-producer",
        "producer of consume-transform-produce: each transaction also AddOffsetsToTxn and "
        "TxnOffsetCommit (group coordinator); coordinators=same puts both on one broker",
        {**_TXN, "coordinators": "separate"},
        lambda p: _txn(p, ctp=True),
    )
)


class UnsupportedScenario(ConfigError):
    """The scenario cannot be mapped onto the requested cluster."""


def on_cluster(
    spec: ScenarioSpec,
    endpoints: Mapping[int, Endpoint],
    *,
    seed: int = 0,
    topics: Mapping[str, str] | None = None,
    group: str | None = None,
    transactional_id: str | None = None,
) -> tuple[ScenarioSpec, dict[int, int]]:
    """``spec`` moved onto a concrete cluster (embedded or real): the i-th broker of ``spec``
    by id becomes the i-th id of ``endpoints`` at its endpoint; ``topics``, ``group`` and
    ``transactional_id`` rename the topics, the group (the consumer's, or the one whose
    offsets a transactional producer commits) and the transactional id (a shared cluster
    needs fresh names). Returns
    the new spec and the id mapping. Scenarios with scheduled cluster changes or shared
    endpoints cannot move, nor can a short-lived client (no real run closes one early)."""
    if spec.changes:
        raise UnsupportedScenario("scenarios with scheduled cluster changes cannot be relabelled")
    if spec.records is not None:
        raise UnsupportedScenario("a short-lived client runs in the simulator only")
    old_ids = sorted(spec.cluster.brokers)
    new_ids = sorted(endpoints)
    if len(old_ids) != len(new_ids):
        raise UnsupportedScenario(
            f"the scenario has {len(old_ids)} brokers, the cluster {len(new_ids)}"
        )
    idmap = dict(zip(old_ids, new_ids, strict=True))
    old = spec.cluster
    names = dict(topics or {})
    cluster = build_cluster(
        {idmap[i]: endpoints[idmap[i]] for i in old_ids},
        {names.get(t, t): [idmap[b] for b in leaders] for t, leaders in old.topics.items()},
        {(group or g): idmap[b] for g, b in old.coordinators.items()},
        txn_coordinators={
            (transactional_id or t): idmap[b] for t, b in old.txn_coordinators.items()
        },
        rtt_ms=old.brokers[old_ids[0]].rtt_ms,
        broker_idle_ms=old.broker_idle_ms,
        seed=seed,
    )
    bootstrap = []
    for endpoint in spec.bootstrap:
        ids = [i for i, b in old.brokers.items() if b.endpoint == endpoint]
        if len(ids) != 1:
            raise UnsupportedScenario(
                f"bootstrap server {endpoint} is not the address of exactly one broker"
            )
        bootstrap.append(endpoints[idmap[ids[0]]])
    moved = dataclasses.replace(
        spec,
        cluster=cluster,
        bootstrap=tuple(bootstrap),
        topics=tuple(names.get(t, t) for t in spec.topics),
        group=(group or spec.group) if spec.group is not None else None,
        offsets_group=(group or spec.offsets_group) if spec.offsets_group is not None else None,
        offsets_topic=None
        if spec.offsets_topic is None
        else names.get(spec.offsets_topic, spec.offsets_topic),
        transactional_id=(
            (transactional_id or spec.transactional_id)
            if spec.transactional_id is not None
            else None
        ),
    )
    return moved, idmap


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise UnknownName(
            f"unknown scenario {name!r}; known scenarios: {', '.join(SCENARIOS)}"
        ) from None


def policy_config(spec: ScenarioSpec, settings: Mapping[str, str]) -> PolicyConfig:
    """The policy configuration for ``spec``: its defaults, then ``settings``."""
    base = PolicyConfig(bootstrap=spec.bootstrap, client=spec.client)
    return base.with_settings({**spec.policy_defaults, **settings})
