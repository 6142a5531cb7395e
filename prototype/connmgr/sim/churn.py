"""Churn scenarios: a cluster and a group that change under a running client for an hour --
a rolling restart, a partition reassignment, consumer-group rebalances -- and a client that
lives a few milliseconds; a restart that gives each broker's pod a new IP under its DNS
name (``ip-change``), and a resolver outage under a steady client (``resolver-outage``):
the two scenarios whose hosts are names, not literal addresses.

They register into :data:`~connmgr.sim.scenarios.SCENARIOS` when :mod:`connmgr.sim` is
imported (this module imports the registry, never the other way round). Every cluster is
``brokers`` brokers on localhost:9092.., bootstrap servers brokers 1-3, one topic
``events``, the group ``app`` coordinated by broker 2 and, for a transactional producer,
the transactional id ``txn-app`` coordinated by broker 3; every change uses the cluster
model's own primitives (:class:`~connmgr.sim.cluster.ClusterModel`), so what clients see of
it -- connections reset, metadata answers, NOT_LEADER / NOT_COORDINATOR, heartbeats
answered REBALANCE_IN_PROGRESS -- is what they see of any other scenario.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from connmgr.core.config import ClientKind
from connmgr.core.endpoint import Endpoint, parse_bootstrap
from connmgr.core.events import LookupOutcome
from connmgr.core.metadata import TopicPartition
from connmgr.errors import ConfigError
from connmgr.seeding import derive_rng
from connmgr.sim.cluster import ClusterModel, build_cluster
from connmgr.sim.scenarios import (
    COMMON,
    MINUTE,
    Change,
    ParamValue,
    Scenario,
    ScenarioSpec,
    broker_idle,
    choice_param,
    int_param,
    localhost_brokers,
    num_param,
    register,
    spread_leaders,
)
from connmgr.sim.simulator import Simulator

TOPIC = "events"
GROUP = "app"
TRANSACTIONAL_ID = "txn-app"
GROUP_COORDINATOR = 2
TXN_COORDINATOR = 3
CLIENTS = ("consumer", "producer", "transactional")
"""What ``client=`` runs: a group consumer, a producer, or a transactional producer (a
transaction every 10 s, as ``txn-producer``)."""


def _cluster(
    p: Mapping[str, ParamValue],
    leaders: Sequence[int],
    endpoints: Mapping[int, Endpoint] | None = None,
) -> ClusterModel:
    n = int_param(p, "brokers")
    return build_cluster(
        endpoints or localhost_brokers(range(1, n + 1), 9092),
        {TOPIC: leaders},
        {GROUP: min(GROUP_COORDINATOR, n)},
        txn_coordinators={TRANSACTIONAL_ID: min(TXN_COORDINATOR, n)},
        rtt_ms=num_param(p, "rtt_ms"),
        broker_idle_ms=broker_idle(p),
        seed=int_param(p, "seed"),
    )


def _spec(
    p: Mapping[str, ParamValue],
    cluster: ClusterModel,
    client: str,
    changes: list[Change],
    *,
    records: int | None = None,
) -> ScenarioSpec:
    servers = ",".join(
        str(cluster.brokers[i].endpoint) for i in range(1, min(3, len(cluster.brokers)) + 1)
    )
    consumer = client == "consumer"
    return ScenarioSpec(
        cluster=cluster,
        bootstrap=parse_bootstrap(servers),
        client=ClientKind.CONSUMER if consumer else ClientKind.PRODUCER,
        topics=(TOPIC,),
        group=GROUP if consumer else None,
        duration_ms=num_param(p, "duration_ms"),
        changes=changes,
        transactional_id=TRANSACTIONAL_ID if client == "transactional" else None,
        records=records,
    )


def _brokers(p: Mapping[str, ParamValue], least: int) -> int:
    n = int_param(p, "brokers")
    if n < least:
        raise ConfigError(f"brokers must be >= {least}")
    return n


def _positive(p: Mapping[str, ParamValue], name: str) -> float:
    value = num_param(p, name)
    if value <= 0:
        raise ConfigError(f"{name} must be > 0")
    return value


# --- rolling-restart -----------------------------------------------------------------------


def _down(broker_id: int, sim: Simulator) -> None:
    sim.broker_down(broker_id)


def _up(broker_id: int, sim: Simulator) -> None:
    sim.cluster.set_up(broker_id)


def _elect_preferred(sim: Simulator) -> None:
    sim.cluster.restore_preferred()


def restart_changes(
    broker_ids: Sequence[int],
    *,
    start_ms: float,
    interval_ms: float,
    down_ms: float,
    election_ms: float,
) -> list[Change]:
    """A rolling restart as cluster changes: the k-th of ``broker_ids`` goes down at
    ``start_ms + k * interval_ms`` (its sockets reset; its partitions and coordinators move
    to the next live broker), is back ``down_ms`` later leading nothing, and a
    preferred-leader election ``election_ms`` after that gives everything back to it.
    ``rolling-restart`` runs it over every broker; the fleet view
    (:mod:`connmgr_evidence.bench.stages.fleet`) over a few brokers of a large cluster. Raises
    :class:`ConfigError` unless one broker at a time is down (``interval_ms >= down_ms +
    election_ms``)."""
    if down_ms <= 0:
        raise ConfigError("down_ms must be > 0")
    if interval_ms < down_ms + election_ms:
        raise ConfigError(
            "restart_interval_ms must be >= down_ms + election_ms (one broker at a time)"
        )
    changes: list[Change] = []
    for k, broker_id in enumerate(broker_ids):
        at = start_ms + k * interval_ms
        changes += [
            (at, functools.partial(_down, broker_id)),
            (at + down_ms, functools.partial(_up, broker_id)),
            (at + down_ms + election_ms, _elect_preferred),
        ]
    return changes


def rolling_restart(p: Mapping[str, ParamValue]) -> ScenarioSpec:
    """Brokers 1..N restarted in turn, keeping their addresses. Broker k goes down at
    ``restart_at_ms + (k-1) * restart_interval_ms``: its sockets are reset and its
    partitions, and the coordinators it holds, move to the next live broker (the cluster
    model's failover); it is back ``down_ms`` later, leading nothing, and a preferred-leader
    election ``election_ms`` after that gives everything back to it. Partition i is led by
    broker 1 + i mod N (``partitions=0``: one per broker), so every broker leads and every
    restart moves a partition the client needs. One broker at a time: the next goes down
    only after the last one leads again."""
    n = _brokers(p, 2)
    count = int_param(p, "partitions") or n
    changes = restart_changes(
        range(1, n + 1),
        start_ms=num_param(p, "restart_at_ms"),
        interval_ms=num_param(p, "restart_interval_ms"),
        down_ms=_positive(p, "down_ms"),
        election_ms=num_param(p, "election_ms"),
    )
    cluster = _cluster(p, [1 + i % n for i in range(count)])
    return _spec(p, cluster, choice_param(p, "client", CLIENTS), changes)


# --- ip-change ---------------------------------------------------------------------------


def pod_address(broker_id: int, generation: int) -> str:
    """The address of ``broker_id``'s pod after ``generation`` restarts."""
    return f"10.0.{generation}.{broker_id}"


def _replace_pod(broker_id: int, sim: Simulator) -> None:
    sim.cluster.replace_pod(broker_id)


def _pod_back(broker_id: int, address: str, sim: Simulator) -> None:
    sim.cluster.pod_back(broker_id, address)


def _named_cluster(p: Mapping[str, ParamValue], n: int) -> ClusterModel:
    """``n`` brokers, each at its own DNS name ``kafka-<id>.kafka:9092`` resolving to its
    first pod's address; partition i led by broker 1 + i mod N (``partitions=0``: one per
    broker). The client re-resolves each name it dialled every ``dns_ttl_ms`` (0: only when
    it dials), each name's cached answer expiring at its own phase in that period (drawn
    from the seed)."""
    count = int_param(p, "partitions") or n
    endpoints = {i: Endpoint(f"kafka-{i}.kafka", 9092) for i in range(1, n + 1)}
    cluster = _cluster(p, [1 + i % n for i in range(count)], endpoints)
    cluster.dns = {endpoints[i].host: pod_address(i, 0) for i in endpoints}
    ttl = num_param(p, "dns_ttl_ms")
    cluster.dns_ttl_ms = ttl if ttl > 0 else None
    phases = derive_rng(int_param(p, "seed"), "dns")
    cluster.dns_phase_ms = {host: phases.uniform(0, ttl) for host in sorted(cluster.dns)}
    return cluster


def ip_change(p: Mapping[str, ParamValue]) -> ScenarioSpec:
    """Brokers 1..N on Kubernetes, each at its own DNS name ``kafka-<id>.kafka:9092``,
    their pods restarted in turn: as ``rolling-restart``, but the old pod's address goes
    dark instead of resetting its sockets (a socket to it gets no reply: a request on it
    waits out ``request_timeout_ms``, then the client drops the socket), the name resolves
    to nothing (NXDOMAIN) while the broker is down, and the new pod comes back ``down_ms``
    later under the same name at a new address; a preferred-leader election ``election_ms``
    after that gives everything back to it. Names and re-resolution as
    :func:`_named_cluster`."""
    n = _brokers(p, 2)
    cluster = _named_cluster(p, n)
    start, interval = num_param(p, "restart_at_ms"), num_param(p, "restart_interval_ms")
    down, election = _positive(p, "down_ms"), num_param(p, "election_ms")
    if interval < down + election:
        raise ConfigError(
            "restart_interval_ms must be >= down_ms + election_ms (one broker at a time)"
        )
    changes: list[Change] = []
    for k, broker_id in enumerate(range(1, n + 1)):
        at = start + k * interval
        changes += [
            (at, functools.partial(_replace_pod, broker_id)),
            (at + down, functools.partial(_pod_back, broker_id, pod_address(broker_id, 1))),
            (at + down + election, _elect_preferred),
        ]
    return _spec(p, cluster, choice_param(p, "client", CLIENTS), changes)


# --- resolver-outage ---------------------------------------------------------------------

FAILURES = {o.value: o for o in LookupOutcome if o is not LookupOutcome.ANSWERED}
"""What ``failure=`` makes every lookup of the first window end with."""


def _dns_fails(outcome: LookupOutcome | None, sim: Simulator) -> None:
    sim.cluster.dns_failure = outcome


def resolver_outage(p: Mapping[str, ParamValue]) -> ScenarioSpec:
    """Brokers 1..N at DNS names (as ``ip-change``), nothing restarted, a steady client,
    and the client's resolver failing twice: from ``outage_at_ms`` every lookup fails with
    ``failure`` (``timeout``, ``server_failure``, ``no_such_name`` or ``empty``) for
    ``outage_ms``, and from ``empty_at_ms`` every answer is empty for ``outage_ms``. The
    records and the brokers stay as they are: a lookup that fails says nothing about where
    a broker is, so a run with the outages should be the run without them
    (``outage_ms=0``): no connection closed, no request lost or delayed."""
    n = _brokers(p, 1)
    cluster = _named_cluster(p, n)
    failure = FAILURES[choice_param(p, "failure", tuple(FAILURES))]
    length = num_param(p, "outage_ms")
    first, second = num_param(p, "outage_at_ms"), num_param(p, "empty_at_ms")
    if length > 0 and abs(second - first) < length:
        raise ConfigError(
            "the two outages must not overlap: |empty_at_ms - outage_at_ms| >= outage_ms"
        )
    changes: list[Change] = []
    for at, outcome in ((first, failure), (second, LookupOutcome.EMPTY)):
        if length > 0:
            changes += [
                (at, functools.partial(_dns_fails, outcome)),
                (at + length, functools.partial(_dns_fails, None)),
            ]
    return _spec(p, cluster, choice_param(p, "client", CLIENTS), changes)


# --- reassignment --------------------------------------------------------------------------


def _reassign(tp: TopicPartition, broker_id: int, sim: Simulator) -> None:
    sim.cluster.reassign(tp, broker_id)


def reassignment(p: Mapping[str, ParamValue]) -> ScenarioSpec:
    """The topic moves to other brokers for good: partition i is led by broker
    1 + i mod (N/2) (the lower half), then, from ``reassign_at_ms``, one partition every
    ``reassign_step_ms``, by broker N/2 + 1 + i mod (N - N/2) (the upper half), as a
    reassignment tool moves replicas partition by partition. The old leaders lead nothing
    afterwards; broker 2, the group coordinator, stays one."""
    n = _brokers(p, 2)
    count = int_param(p, "partitions")
    if count < 1:
        raise ConfigError("partitions must be >= 1")
    half = n // 2
    old = [1 + i % half for i in range(count)]
    new = [half + 1 + i % (n - half) for i in range(count)]
    start, step = num_param(p, "reassign_at_ms"), num_param(p, "reassign_step_ms")
    changes: list[Change] = [
        (start + i * step, functools.partial(_reassign, TopicPartition(TOPIC, i), new[i]))
        for i in range(count)
    ]
    return _spec(p, _cluster(p, old), choice_param(p, "client", CLIENTS), changes)


# --- rebalance -----------------------------------------------------------------------------


def range_share(partitions: Sequence[TopicPartition], members: int) -> frozenset[TopicPartition]:
    """What the range assignor gives the group's first member (the smallest member id) of
    ``members``: the first ceil(P / members) of the topic's P partitions."""
    if members < 1:
        raise ConfigError("a group has at least one member")
    share = -(-len(partitions) // members)
    return frozenset(sorted(partitions)[:share])


def _member_counts(p: Mapping[str, ParamValue]) -> list[int]:
    text = str(p["members"])
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise ConfigError(f"members={text!r}: expected group sizes such as 1,3,12") from None
    if not counts or min(counts) < 1:
        raise ConfigError(f"members={text!r}: every group size must be >= 1")
    return counts


def _rebalance(share: frozenset[TopicPartition], sim: Simulator) -> None:
    sim.cluster.rebalance(GROUP, share)


def rebalance(p: Mapping[str, ParamValue]) -> ScenarioSpec:
    """A group consumer whose group grows and shrinks: ``members`` lists the group's size at
    the start and after each rebalance, the first at ``rebalance_at_ms`` and one every
    ``rebalance_interval_ms`` after it. The simulated member keeps the smallest member id,
    so the range assignor gives it the first ceil(P / size) partitions; partition i is led
    by broker 1 + i mod N, so the leaders it fetches from shrink and grow with the group."""
    n = _brokers(p, 1)
    count = int_param(p, "partitions")
    if count < 1:
        raise ConfigError("partitions must be >= 1")
    sizes = _member_counts(p)
    cluster = _cluster(p, [1 + i % n for i in range(count)])
    partitions = cluster.partitions([TOPIC])
    cluster.rebalance(GROUP, range_share(partitions, sizes[0]))
    start, interval = num_param(p, "rebalance_at_ms"), num_param(p, "rebalance_interval_ms")
    changes: list[Change] = [
        (start + i * interval, functools.partial(_rebalance, range_share(partitions, size)))
        for i, size in enumerate(sizes[1:])
    ]
    return _spec(p, cluster, "consumer", changes)


# --- short-lived ---------------------------------------------------------------------------


def short_lived(p: Mapping[str, ParamValue]) -> ScenarioSpec:
    """One short-lived producer: it starts, sends ``records`` records (round robin over the
    topic's partitions, led by spread leaders), and closes once they are acknowledged; the
    run goes on to ``duration_ms`` with nothing open, so the run's counts and its ledger's
    life (socket-seconds and handshakes over the run) are what one client's life costs.

    Why one client and not a stream of them in one run: the simulator runs one client with
    one policy, and each client of a stream has its own policy and connections, sharing
    nothing with the others -- a stream of clients one every ``T`` ms costs
    3,600,000 / ``T`` times one life per hour, so the single life is the measurement."""
    n = _brokers(p, 1)
    records = int_param(p, "records")
    if records < 1:
        raise ConfigError("records must be >= 1")
    count = int_param(p, "partitions")
    if count < 1:
        raise ConfigError("partitions must be >= 1")
    cluster = _cluster(p, spread_leaders(n, count))
    return _spec(p, cluster, "producer", [], records=records)


_CHURN: dict[str, ParamValue] = {
    **COMMON,
    "brokers": 6,
    "duration_ms": 60 * MINUTE,
    "broker_idle_ms": 600_000,
}
register(
    Scenario(
        "rolling-restart",
        "every broker restarted in turn (down 30 s, every 2 min), its leadership and "
        "coordinators moving away and back; client=consumer|producer|transactional",
        {
            **_CHURN,
            "partitions": 0,
            "client": "consumer",
            "restart_at_ms": 5 * MINUTE,
            "restart_interval_ms": 2 * MINUTE,
            "down_ms": 30_000,
            "election_ms": 30_000,
        },
        rolling_restart,
    )
)
register(
    Scenario(
        "ip-change",
        "every broker's pod restarted in turn under its DNS name with a new IP (the old "
        "address goes dark, down 10 s, every 2 min; names re-resolved every 5 s); "
        "client=consumer|producer|transactional",
        {
            **_CHURN,
            "partitions": 0,
            "client": "consumer",
            "restart_at_ms": 5 * MINUTE,
            "restart_interval_ms": 2 * MINUTE,
            "down_ms": 10_000,
            "election_ms": 30_000,
            # The answer's TTL: CoreDNS kubernetes plugin default ttl 5 (seconds).
            "dns_ttl_ms": 5_000,
        },
        ip_change,
    )
)
register(
    Scenario(
        "resolver-outage",
        "brokers at DNS names, nothing restarted; every lookup fails for 60 s (failure=timeout|"
        "server_failure|no_such_name|empty), then every answer is empty for 60 s; "
        "client=consumer|producer|transactional",
        {
            **_CHURN,
            "brokers": 3,
            "duration_ms": 5 * MINUTE,
            "partitions": 0,
            "client": "consumer",
            "failure": "timeout",
            "outage_at_ms": 1 * MINUTE,
            "empty_at_ms": 3 * MINUTE,
            "outage_ms": 60_000,
            "dns_ttl_ms": 5_000,
        },
        resolver_outage,
    )
)
register(
    Scenario(
        "reassignment",
        "the topic's leaders move from brokers 1..N/2 to N/2+1..N for good, a partition "
        "every reassign_step_ms; client=consumer|producer|transactional",
        {
            **_CHURN,
            "partitions": 3,
            "client": "consumer",
            "reassign_at_ms": 10 * MINUTE,
            "reassign_step_ms": 30_000,
        },
        reassignment,
    )
)
register(
    Scenario(
        "rebalance",
        "group consumer whose group size goes through members=1,3,12,2,4 (a rebalance every "
        "10 min): its range-assigned partitions, and their leaders, change",
        {
            **_CHURN,
            "partitions": 12,
            "members": "1,3,12,2,4",
            "rebalance_at_ms": 10 * MINUTE,
            "rebalance_interval_ms": 10 * MINUTE,
        },
        rebalance,
    )
)
register(
    Scenario(
        "short-lived",
        "one producer that starts, sends `records` records and closes; the run's counts "
        "and life are what one short-lived client costs",
        {**_CHURN, "partitions": 3, "records": 10},
        short_lived,
    )
)
