"""Plural coordinators and requests no metadata can place, at policy level (no simulator).

A consume-transform-produce producer talks to a group coordinator (``TxnOffsetCommit``) and a
transaction coordinator (``AddPartitionsToTxn``, ``AddOffsetsToTxn``, ``EndTxn``, and a
transactional ``InitProducerId``), usually on different brokers. Each has its own placement,
its own loss and its own entry among the needed connections.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from connmgr.core import (
    BrokerInfo,
    BrokerRequestNeeded,
    ClusterMetadata,
    Connect,
    ConnectionEstablished,
    CoordinatorLost,
    CoordinatorRef,
    CoordinatorRequestNeeded,
    Endpoint,
    Lease,
    MetadataReceived,
    PolicyConfig,
    Purpose,
    RefreshMetadata,
    Reject,
    RejectReason,
    ResponseReceived,
    TimePassed,
    TopicPartition,
    parse_bootstrap,
)
from connmgr.core.actions import Action, Close
from connmgr.core.api import Api
from connmgr.core.identity import BrokerNode, CoordinatorNode
from connmgr.core.policy import Policy
from connmgr.policies import make_policy

EP = {i: Endpoint("localhost", 9090 + i) for i in range(1, 6)}
GROUP = CoordinatorRef.group("g")
TXN = CoordinatorRef.transaction("tx-1")


def metadata(brokers: tuple[int, ...] = (1, 2, 3, 4, 5), leaders: int = 1) -> ClusterMetadata:
    return ClusterMetadata.build(
        "c1", [BrokerInfo(i, EP[i]) for i in brokers], {TopicPartition("t", 0): leaders}
    )


class Driver:
    """Feeds one policy, completes every dial at once and records what it was asked."""

    def __init__(self, name: str, **options: object) -> None:
        config = PolicyConfig(
            bootstrap=parse_bootstrap("localhost:9091"),
            bootstrap_offset=0,
            **options,  # type: ignore[arg-type]
        )
        self.policy: Policy = make_policy(name, config, random.Random(1))
        self.now = 0.0
        self.rid = 0
        self.dials: list[Connect] = []
        self.sends: dict[int, Lease] = {}
        self.actions: list[Action] = []

    def feed(self, event: object) -> list[Action]:
        out = self.policy.handle(event, self.now)  # type: ignore[arg-type]
        self.actions += out
        for action in out:
            if isinstance(action, Connect):
                self.dials.append(action)
                out += self.feed(ConnectionEstablished(action.conn_id))
            elif isinstance(action, Lease):
                self.sends[action.request_id] = action
        return out

    def request(self, event_type: type, *args: object) -> int:
        self.rid += 1
        self.feed(event_type(self.rid, *args))
        return self.rid

    def answer(self, rid: int) -> None:
        self.feed(ResponseReceived(rid))

    def at(self, ms: float) -> None:
        self.now = ms
        self.feed(TimePassed())

    def key_of(self, rid: int) -> tuple[int | None, Purpose]:
        conn_id = self.sends[rid].conn_id
        key = next(d.key for d in self.dials if d.conn_id == conn_id)
        return key.broker_id, key.purpose


def started(name: str, **options: object) -> Driver:
    d = Driver(name, **options)
    d.feed(MetadataReceived(0, metadata()))
    return d


def transactions(d: Driver, *, every_ms: float, until_ms: float) -> Iterator[None]:
    """One consume-transform-produce transaction every ``every_ms``: group coordinator on
    broker 2, transaction coordinator on broker 3, data to broker 1."""
    t = 0.0
    while t <= until_ms:
        d.at(t)
        for api, target in (
            (Api.ADD_PARTITIONS_TO_TXN, (3, TXN)),
            (Api.PRODUCE, None),
            (Api.ADD_OFFSETS_TO_TXN, (3, TXN)),
            (Api.TXN_OFFSET_COMMIT, (2, GROUP)),
            (Api.END_TXN, (3, TXN)),
        ):
            if target is None:
                rid = d.request(BrokerRequestNeeded, api, 1)
            else:
                rid = d.request(CoordinatorRequestNeeded, api, *target)
            d.answer(rid)
        yield
        t += every_ms


@pytest.mark.parametrize("name", ["proposed", "java-today", "aiokafka-today"])
def test_two_coordinators_apart_are_each_dialled_once(name: str) -> None:
    # One coordinator per policy used to flip between the two on every transaction, so the
    # group coordinator's socket went unneeded, closed after the linger and was re-dialled.
    d = started(name)
    for _ in transactions(d, every_ms=10_000, until_ms=120_000):
        pass
    dialled = [(c.key.broker_id, c.key.purpose) for c in d.dials]
    assert len(dialled) == len(set(dialled)), dialled
    assert not [a for a in d.actions if isinstance(a, Close)]
    assert d.policy.coordinators.broker_of(GROUP) == 2
    assert d.policy.coordinators.broker_of(TXN) == 3


def test_proposed_routes_each_coordinator_kind_to_its_connection() -> None:
    d = started("proposed")
    group = d.request(CoordinatorRequestNeeded, Api.TXN_OFFSET_COMMIT, 2, GROUP)
    txn = d.request(CoordinatorRequestNeeded, Api.END_TXN, 3, TXN)
    init = d.request(CoordinatorRequestNeeded, Api.INIT_PRODUCER_ID, 3, TXN)
    # Group requests get a coordination connection; the transaction coordinator's short
    # requests share the data connection to its broker, as Java's TransactionManager does.
    assert d.key_of(group) == (2, Purpose.COORDINATION)
    assert d.key_of(txn) == d.key_of(init) == (3, Purpose.DATA)
    assert d.sends[txn].conn_id == d.sends[init].conn_id


def test_proposed_shares_everything_with_share_coordinator() -> None:
    d = started("proposed", share_coordinator=True)
    group = d.request(CoordinatorRequestNeeded, Api.HEARTBEAT, 3, GROUP)
    txn = d.request(CoordinatorRequestNeeded, Api.END_TXN, 3, TXN)
    assert d.key_of(group) == d.key_of(txn) == (3, Purpose.DATA)
    assert len(d.dials) == 1


def test_java_today_sends_transaction_requests_on_the_brokers_own_node() -> None:
    # The TransactionManager keeps both coordinators it looks up by their real ids
    # (measured with kafka-clients 4.4.0); only the consumer's own group coordinator is the
    # separate 2147483647 - id node.
    d = started("java-today")
    offsets = d.request(CoordinatorRequestNeeded, Api.TXN_OFFSET_COMMIT, 2, GROUP)
    txn = d.request(CoordinatorRequestNeeded, Api.ADD_PARTITIONS_TO_TXN, 3, TXN)
    member = d.request(CoordinatorRequestNeeded, Api.HEARTBEAT, 2, GROUP)
    by_request = {
        r: next(c.key.node for c in d.dials if c.conn_id == d.sends[r].conn_id)
        for r in (offsets, txn, member)
    }
    assert by_request == {offsets: BrokerNode(2), txn: BrokerNode(3), member: CoordinatorNode(2)}


def test_aiokafka_today_puts_all_but_init_producer_id_on_the_coordination_group() -> None:
    d = started("aiokafka-today")
    add = d.request(CoordinatorRequestNeeded, Api.ADD_PARTITIONS_TO_TXN, 3, TXN)
    init = d.request(CoordinatorRequestNeeded, Api.INIT_PRODUCER_ID, 3, TXN)
    offsets = d.request(CoordinatorRequestNeeded, Api.TXN_OFFSET_COMMIT, 3, GROUP)
    assert d.key_of(add) == d.key_of(offsets) == (3, Purpose.COORDINATION)
    assert d.key_of(init) == (3, Purpose.DATA)


def test_losing_one_coordinator_leaves_the_other_needed() -> None:
    d = started("proposed", connection_linger_ms=1_000)
    for rid in (
        d.request(BrokerRequestNeeded, Api.PRODUCE, 1),  # the leader: any-node requests too
        d.request(CoordinatorRequestNeeded, Api.HEARTBEAT, 2, GROUP),
        d.request(CoordinatorRequestNeeded, Api.END_TXN, 4, TXN),
    ):
        d.answer(rid)
    d.feed(CoordinatorLost(TXN))
    assert d.policy.coordinators.broker_of(TXN) is None
    d.at(5_000)
    closed = {a.conn_id for a in d.actions if isinstance(a, Close)}
    by_conn = {c.conn_id: (c.key.broker_id, c.key.purpose) for c in d.dials}
    # The transaction coordinator's socket (broker 4 leads nothing) closed after its
    # linger; the group coordinator's did not.
    assert {by_conn[c] for c in closed} == {(4, Purpose.DATA)}
    assert d.policy.coordinators.broker_of(GROUP) == 2


@pytest.mark.parametrize("name", ["proposed", "java-today", "aiokafka-today", "java-described"])
def test_a_request_for_a_broker_missing_from_metadata_asks_for_metadata_once(name: str) -> None:
    d = Driver(name)
    first = d.request(CoordinatorRequestNeeded, Api.INIT_PRODUCER_ID, 3, TXN)
    second = d.request(BrokerRequestNeeded, Api.PRODUCE, 2)
    refreshes = [a for a in d.actions if isinstance(a, RefreshMetadata)]
    assert len(refreshes) == 1  # once per metadata answer, not once per request
    assert d.policy.pending_requests and not d.sends
    d.feed(MetadataReceived(0, metadata()))
    assert {first, second} <= set(d.sends)  # placed when the answer names their brokers


@pytest.mark.parametrize("name", ["proposed", "java-today", "aiokafka-today", "java-described"])
def test_a_request_whose_broker_left_newer_metadata_is_handed_back(name: str) -> None:
    d = started(name)
    d.feed(MetadataReceived(0, metadata(brokers=(1, 2, 4, 5))))  # broker 3 is gone
    rid = d.request(BrokerRequestNeeded, Api.PRODUCE, 3)
    # Not in the metadata the policy has: ask again (it may be new), keep it pending.
    assert [a for a in d.actions[-2:] if isinstance(a, RefreshMetadata)]
    assert rid not in d.sends
    d.feed(MetadataReceived(0, metadata(brokers=(1, 2, 4, 5))))
    rejected = [a for a in d.actions if isinstance(a, Reject)]
    assert rejected == [Reject(rid, RejectReason.BROKER_GONE)]
    assert not d.policy.pending_requests


def test_a_request_waiting_on_a_dial_to_a_broker_that_leaves_is_handed_back() -> None:
    d = Driver("proposed")
    d.feed(MetadataReceived(0, metadata()))
    # A dial that never completes: drive the policy without the auto-completing driver.
    p = d.policy
    out = p.handle(BrokerRequestNeeded(7, Api.PRODUCE, 3), 1.0)
    assert [a.key.broker_id for a in out if isinstance(a, Connect)] == [3]
    out = p.handle(MetadataReceived(8, metadata(brokers=(1, 2))), 2.0)
    assert Reject(7, RejectReason.BROKER_GONE) in out
    assert not p.pending_requests
