"""f. Coordinators are plural (a group coordinator, a transaction coordinator, ...), each with its
   own placement and its own entry among the needed connections. A consumer's group
   coordinator gets its own coordination connection (group requests must not queue behind
   long-poll fetches), or shares the data connection with ``share_coordinator``; a
   producer's coordinator requests go on the data connection to its broker.

Why each purpose (:func:`coordinator_purpose`): a JoinGroup may wait a whole rebalance on the
broker, and a broker serves one request per connection at a time, so a consumer's group
requests get a connection of their own unless ``share_coordinator``. A transaction
coordinator's requests are short and its producer's data connections carry only Produce, so
they ride the data connection to that broker -- as the Java client's transaction manager does
-- which exists anyway when the broker leads a partition the producer writes. A producer's
group requests (``TxnOffsetCommit`` in a consume-transform-produce loop) are as short and wait
behind no long poll, so they ride the data connection too: with both coordinators on one broker
the producer holds one socket there, not two.

What the client needs (:func:`wanted`), which rules (c) and (g) read: a connection to a leader
in use (:func:`leaders_in_use`), and one of the right purpose to each coordinator.
"""

from __future__ import annotations

from connmgr.core.config import ClientKind, PolicyConfig
from connmgr.core.coordinator import CoordinatorKind
from connmgr.core.identity import Purpose
from connmgr.core.policy import Policy


def coordinator_purpose(config: PolicyConfig, kind: CoordinatorKind) -> Purpose:
    """The purpose of the connection that carries requests to a coordinator of ``kind``
    (see the module docstring)."""
    if (
        kind is CoordinatorKind.GROUP
        and config.client is ClientKind.CONSUMER
        and not config.share_coordinator
    ):
        return Purpose.COORDINATION
    return Purpose.DATA


def coordinators_by_purpose(policy: Policy) -> dict[Purpose, frozenset[int]]:
    """For each purpose, the brokers whose connection of that purpose a known coordinator
    needs."""

    def compute() -> dict[Purpose, frozenset[int]]:
        by_purpose: dict[Purpose, set[int]] = {p: set() for p in Purpose}
        for ref, broker_id in policy.coordinators.items():
            by_purpose[coordinator_purpose(policy.config, ref.kind)].add(broker_id)
        return {p: frozenset(ids) for p, ids in by_purpose.items()}

    return policy.derived.of_facts("coordinators_by_purpose", compute)


def leaders_in_use(policy: Policy) -> frozenset[int]:
    """The brokers leading a partition the client uses (every leader until the client says
    which partitions it uses)."""

    def compute() -> frozenset[int]:
        md, interest = policy.metadata, policy.interest
        if md is None:
            return frozenset()
        return md.leader_ids if interest is None else md.leaders_for(interest)

    return policy.derived.of_facts("leaders_in_use", compute)


def wanted(policy: Policy, broker_id: int) -> bool:
    """Whether a role needs a connection to ``broker_id``: a leader in use, or a
    coordinator."""
    if broker_id in leaders_in_use(policy):
        return True
    return any(broker_id in ids for ids in coordinators_by_purpose(policy).values())
