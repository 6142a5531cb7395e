"""The transactional cases the model-vs-real tests run (embedded and Java tiers), and the
request shape they compare: which transactional API (and Produce) went first, and where."""

from __future__ import annotations

from typing import TYPE_CHECKING

from connmgr.core.events import Api

if TYPE_CHECKING:
    from connmgr.sim.result import RunResult
    from connmgr_evidence.realrun import RealRun

TXN_CASES: dict[str, dict[str, str]] = {
    "txn-producer": {},
    "txn-producer/coordinator=shared": {"coordinator": "shared"},
    "ctp-producer": {},
    "ctp-producer/coordinators=same": {"coordinators": "same"},
}
TXN_SETTINGS = {"records": "60", "settle_ms": "1500", "txn_interval_ms": "300"}
TXN_APIS = (
    Api.FIND_COORDINATOR,
    Api.INIT_PRODUCER_ID,
    Api.ADD_PARTITIONS_TO_TXN,
    Api.ADD_OFFSETS_TO_TXN,
    Api.TXN_OFFSET_COMMIT,
    Api.PRODUCE,
    Api.END_TXN,
)
PLACED_APIS = TXN_APIS[1:]
"""Requests whose broker the scenario fixes (a coordinator, a leader); FindCoordinator's
is the client's random or least-loaded choice."""


def request_shape(
    sent: list[tuple[str, int]],
) -> tuple[list[str], dict[str, set[int]]]:
    """From (API name, broker) of every request in order: the transactional APIs and
    Produce in the order each was first sent, and the brokers each placed API reached."""
    names = {api.name for api in TXN_APIS}
    order: list[str] = []
    brokers: dict[str, set[int]] = {}
    for api, broker in sent:
        if api not in names:
            continue
        if api not in order:
            order.append(api)
        if api in {a.name for a in PLACED_APIS}:
            brokers.setdefault(api, set()).add(broker)
    return order, brokers


Shape = tuple[list[str], dict[str, set[int]]]


def real_shape(run: RealRun) -> Shape:
    return request_shape([(r["api"], int(r["broker"])) for r in run.requests])


def model_shape(model: RunResult) -> Shape:
    return request_shape([(r.api.name, r.reached) for r in model.requests])


AIOKAFKA_CHAINS = (
    ("FIND_COORDINATOR", "INIT_PRODUCER_ID", "ADD_PARTITIONS_TO_TXN", "PRODUCE", "END_TXN"),
    ("ADD_PARTITIONS_TO_TXN", "ADD_OFFSETS_TO_TXN", "TXN_OFFSET_COMMIT", "END_TXN"),
)
"""What aiokafka's sender orders for certain (stock and the proposed client): one
transactional request at a time (AddPartitions, AddOffsets, TxnOffsetCommit, EndTxn), the
batches drained once their partitions are added. AddOffsetsToTxn and the first Produce are
written in one event-loop turn to two brokers, so which one a broker of the embedded cluster
receives first is not the client's to say; nor is TxnOffsetCommit against Produce."""

JAVA_CHAINS = (
    ("FIND_COORDINATOR", "INIT_PRODUCER_ID", "ADD_PARTITIONS_TO_TXN", "PRODUCE", "END_TXN"),
    ("INIT_PRODUCER_ID", "ADD_OFFSETS_TO_TXN", "TXN_OFFSET_COMMIT", "END_TXN"),
)
"""What kafka-clients orders for certain: the batches drain only once their partitions are
added, TxnOffsetCommit follows AddOffsetsToTxn, EndTxn comes last. Whether the first batches
go before AddOffsetsToTxn, and whether AddPartitions or AddOffsets is enqueued first, is a race
between the application and sender threads (``ScenarioSpec.early_leader_dials``)."""

Chains = tuple[tuple[str, ...], ...]


def chain_shape(shape: Shape, chains: Chains) -> tuple[list[list[str]], dict[str, set[int]]]:
    """``shape`` reduced to what the client determines: the first-use order along each of
    ``chains``, and where each placed request went."""
    order, brokers = shape
    return [[api for api in order if api in chain] for chain in chains], brokers
