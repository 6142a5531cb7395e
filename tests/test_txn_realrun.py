"""Real-run helpers of the transactional scenarios that need no cluster."""

from __future__ import annotations

import pytest

from connmgr.errors import ConfigError
from connmgr_evidence.java import TransactionPlan
from connmgr_evidence.realrun.transactional import early_leader_dials
from connmgr_evidence.realrun.workloads import transactions_of

P = "[2026-11-24 13:09:03,{ms:03d}] DEBUG [Producer clientId=p, transactionalId=t] "


def sending(ms: int, api: str, node: int) -> str:
    return (
        P.format(ms=ms) + f"Sending {api} request with header RequestHeader(apiKey={api}, "
        f"apiVersion=1, clientId=p, correlationId={ms}, headerVersion=1) and timeout 30000 "
        f"to node {node}: {{}} (org.apache.kafka.clients.NetworkClient:600)"
    )


def dialling(ms: int, node: int) -> str:
    return (
        P.format(ms=ms) + f"Initiating connection to node 127.0.0.1:{9000 + node} (id: {node} "
        "rack: null isFenced: false) using address /127.0.0.1 "
        "(org.apache.kafka.clients.NetworkClient:1256)"
    )


def picking(ms: int, node: int) -> str:
    return (
        P.format(ms=ms).replace("DEBUG", "TRACE") + f"Found least loaded node 127.0.0.1:"
        f"{9000 + node} (id: {node} rack: null isFenced: false) with no active connection "
        "(org.apache.kafka.clients.NetworkClient:893)"
    )


def test_early_leader_dials_reads_the_log_in_line_order() -> None:
    leaders = {2, 4}
    on_time = [
        sending(1, "ADD_PARTITIONS_TO_TXN", 6),
        dialling(1, 5),  # the group coordinator: not a leader
        sending(1, "TXN_OFFSET_COMMIT", 5),
        dialling(1, 2),  # same millisecond, after it: line order decides
    ]
    assert not early_leader_dials(on_time, leaders)
    early = [sending(1, "ADD_PARTITIONS_TO_TXN", 6), dialling(1, 4), *on_time[1:]]
    assert early_leader_dials(early, leaders)
    before_partitions = [dialling(0, 2), *on_time]  # between an append and maybeAddPartition
    assert early_leader_dials(before_partitions, leaders)
    # A dial that follows a leastLoadedNode pick of that node is the picking request's.
    by_pick = [picking(0, 4), dialling(0, 4), *on_time]
    assert not early_leader_dials(by_pick, leaders)
    other_pick = [picking(0, 3), dialling(0, 4), *on_time]
    assert early_leader_dials(other_pick, leaders)


def test_transaction_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="at least one"):
        transactions_of({"transactions": 0})
    plan = TransactionPlan("t", 3, 300, "g", "in")
    assert plan.probe_args() == [
        "--transactional-id", "t", "--transactions", "3", "--txn-interval-ms", "300",
        "--offsets-group", "g", "--offsets-topic", "in",
    ]  # fmt: skip
    with pytest.raises(Exception, match="needs offsets_topic"):
        TransactionPlan("t", offsets_group="g").probe_args()
