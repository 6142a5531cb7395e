"""Transactions on the real 3-node Kafka, stock aiokafka and the drop-in clients (issue 16).

The same scenarios and assertions as ``tests/embedded/test_transactions.py`` (the workload is
``tests/txn_workload.py``), plus what the mock cannot show: a ``read_committed`` consumer
reads the output back (committed records once each, aborted ones never) and the group's
offsets, committed inside the transactions, are read back from the broker.

Placement: a real broker decides coordinators itself, so the group id and the transactional
id are *found* (``KafkaCluster.key_for_coordinator``) such that the group coordinator is
broker 1 and the transaction coordinator broker 2. A coordinator moves mid-run by moving the
leadership of its internal partition to another replica (``KafkaCluster.move_coordinator``:
a replica reordering plus a preferred-leader election), which the test undoes at the end
since the session's cluster is shared. KafkaCluster cannot stop and restart one broker, so
the mock's "coordinator's broker goes down" step has no counterpart here.

Each (scenario, pair) runs once per module with its own topics, group and transactional id.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from connmgr_evidence.realkafka import CoordinatorKind, KafkaCluster
from txn_workload import (
    PAIRS,
    PROPOSED,
    STOCK,
    ClientPair,
    CommitAbortRun,
    LoopRun,
    Progress,
    Runs,
    Scenario,
    assert_kernel_agrees,
    assert_moved_exactly_once,
    assert_no_more_sockets,
    commit_and_abort,
    duplicates,
    input_values,
    read_committed,
    seed,
    transform,
    transform_loop,
)

pytestmark = pytest.mark.real_kafka

PARTITIONS = 3
LEADERS = [1, 2, 3]  # partition i of every topic is led by LEADERS[i]
GROUP_COORDINATOR = 1
TXN_COORDINATOR = 2
RECORDS = 200
PAIR_IDS = [pair.name for pair in PAIRS]


@dataclass
class Checked:
    """A scenario's run and what a ``read_committed`` consumer read back afterwards."""

    run: CommitAbortRun | LoopRun
    read_back: list[bytes]
    group: str = ""
    transactional_id: str = ""


def _names(cluster: KafkaCluster, pair: ClientPair, scenario: str) -> tuple[str, str, str]:
    """Topic prefix, group and transactional id of one run; the ids found on their brokers."""
    base = f"txn-{scenario}-{pair.name}"
    group = cluster.key_for_coordinator("group", GROUP_COORDINATOR, prefix=f"{base}-g")
    txn = cluster.key_for_coordinator("transaction", TXN_COORDINATOR, prefix=f"{base}-t")
    return base, group, txn


def _create(cluster: KafkaCluster, *topics: str) -> None:
    for topic in topics:
        cluster.create_topic_with_leaders(topic, LEADERS)


def scenarios(cluster: KafkaCluster) -> dict[str, Scenario]:
    async def commit_abort(pair: ClientPair) -> Checked:
        base, _group, txn = await asyncio.to_thread(_names, cluster, pair, "ca")
        await asyncio.to_thread(_create, cluster, f"{base}-out")
        run = await commit_and_abort(
            pair,
            cluster.bootstrap_servers,
            txn,
            f"{base}-out",
            PARTITIONS,
            listeners=cluster.listeners().values(),
        )
        got = await read_committed(
            pair, cluster.bootstrap_servers, f"{base}-out", PARTITIONS, len(run.committed)
        )
        return Checked(run, got, transactional_id=txn)

    async def loop(pair: ClientPair, scenario: str, moving: bool) -> Checked:
        base, group, txn = await asyncio.to_thread(_names, cluster, pair, scenario)
        await asyncio.to_thread(_create, cluster, f"{base}-in", f"{base}-out")
        await seed(cluster.bootstrap_servers, f"{base}-in", RECORDS, PARTITIONS)
        events: list[str] = []
        moved: list[tuple[CoordinatorKind, str, int]] = []  # (kind, key, where it was)

        async def move(kind: CoordinatorKind, key: str, to: int) -> None:
            before = await asyncio.to_thread(cluster.move_coordinator, kind, key, to)
            moved.append((kind, key, before))

        async def hook(progress: Progress) -> None:
            if progress.transactions == 3:
                await move("transaction", txn, 3)
                await move("group", group, 2)
                events.append("after txn 3: txn 2->3, group 1->2")
                print(f"coordinators move after {progress.moved} of {RECORDS} records")
                followed = await progress.consumer_follows(2, timeout_s=60.0)
                events.append(f"consumer {'followed' if followed else 'did NOT follow'}")
            elif progress.transactions == 6:
                await move("transaction", txn, 1)
                events.append("after txn 6: txn 3->1")
                print(f"transaction coordinator moves after {progress.moved} records")

        try:
            run = await transform_loop(
                pair,
                cluster.bootstrap_servers,
                input_topic=f"{base}-in",
                output_topic=f"{base}-out",
                partitions=PARTITIONS,
                group=group,
                transactional_id=txn,
                n=RECORDS,
                leaders=LEADERS,
                listeners=cluster.listeners().values(),
                after_commit=hook if moving else None,
                timeout_s=240.0,
            )
        finally:
            # The cluster is shared: put every coordinator partition back where it was
            # (in reverse, so a key moved twice ends where it started).
            for kind, key, before in reversed(moved):
                await asyncio.to_thread(cluster.move_coordinator, kind, key, before)
        got = await read_committed(
            pair, cluster.bootstrap_servers, f"{base}-out", PARTITIONS, RECORDS
        )
        run.events = events
        return Checked(run, got, group, txn)

    async def apart(pair: ClientPair) -> Checked:
        return await loop(pair, "apart", moving=False)

    async def moving(pair: ClientPair) -> Checked:
        return await loop(pair, "moving", moving=True)

    return {
        "commit-abort": commit_abort,
        "loop-coordinators-apart": apart,
        "loop-coordinators-moving": moving,
    }


@pytest.fixture(scope="module")
def runs(kafka_cluster: KafkaCluster) -> Iterator[Runs]:
    yield Runs(scenarios(kafka_cluster))


def _assert_read_back_once(got: list[bytes], want: list[bytes]) -> None:
    assert duplicates(got) == [], f"read back twice: {duplicates(got)}"
    assert collections.Counter(got) == collections.Counter(want), (
        f"read back {len(got)} records; missing {sorted(set(want) - set(got))[:10]}, "
        f"unexpected {sorted(set(got) - set(want))[:10]}"
    )


# -- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
def test_default_transactional_producer_starts_commits_and_aborts(
    runs: Runs, pair: ClientPair
) -> None:
    checked: Checked = runs.get("commit-abort", pair)
    run = checked.run
    assert isinstance(run, CommitAbortRun)
    print(
        f"\n{pair.name} ({checked.transactional_id}): start {run.start_s:.3f}s; "
        f"producer {run.producer.line()}"
    )
    assert sorted(run.offsets) == sorted(list(range(10)) * PARTITIONS)
    assert_kernel_agrees(run)
    # Committed records are read once each; the aborted transaction's never.
    _assert_read_back_once(checked.read_back, run.committed)


@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
def test_consume_transform_produce_with_coordinators_on_different_brokers(
    runs: Runs, pair: ClientPair
) -> None:
    checked: Checked = runs.get("loop-coordinators-apart", pair)
    run = checked.run
    assert isinstance(run, LoopRun)
    print(f"\n{pair.name} (group {checked.group}, txn {checked.transactional_id}):")
    print(run.report())
    assert_moved_exactly_once(run, RECORDS, PARTITIONS)
    assert_kernel_agrees(run)
    assert run.transactions >= RECORDS // 20
    assert run.coordinators == {
        "consumer group": GROUP_COORDINATOR,
        "producer group": GROUP_COORDINATOR,
        "producer transaction": TXN_COORDINATOR,
    }
    _assert_read_back_once(checked.read_back, run.produced)


@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
def test_consume_transform_produce_follows_moving_coordinators(
    runs: Runs, pair: ClientPair, kafka_cluster: KafkaCluster
) -> None:
    checked: Checked = runs.get("loop-coordinators-moving", pair)
    run = checked.run
    assert isinstance(run, LoopRun)
    print(f"\n{pair.name} (group {checked.group}, txn {checked.transactional_id}):")
    print(run.report())
    assert run.events == [
        "after txn 3: txn 2->3, group 1->2",
        "consumer followed",
        "after txn 6: txn 3->1",
    ]
    assert run.transactions > 6
    assert run.coordinators == {
        "consumer group": 2,
        "producer group": 2,
        "producer transaction": 1,
    }
    assert_moved_exactly_once(run, RECORDS, PARTITIONS)
    assert_kernel_agrees(run)
    _assert_read_back_once(checked.read_back, [transform(v) for v in input_values(RECORDS)])
    # The shared cluster got its coordinators back.
    assert kafka_cluster.find_coordinator("group", checked.group) == GROUP_COORDINATOR
    assert (
        kafka_cluster.find_coordinator("transaction", checked.transactional_id) == TXN_COORDINATOR
    )


@pytest.mark.parametrize(
    "scenario", ["commit-abort", "loop-coordinators-apart", "loop-coordinators-moving"]
)
def test_proposed_never_holds_more_sockets_than_stock(runs: Runs, scenario: str) -> None:
    ours: Checked = runs.get(scenario, PROPOSED)
    stock: Checked = runs.get(scenario, STOCK)
    print(f"\n{scenario}: proposed | stock")
    for client in ("producer", "consumer"):
        if hasattr(ours.run, client):
            mine, theirs = getattr(ours.run, client), getattr(stock.run, client)
            print(f"  {client}: {mine.line()} | {theirs.line()}")
            assert_no_more_sockets(mine, theirs, f"{scenario} {client}")
