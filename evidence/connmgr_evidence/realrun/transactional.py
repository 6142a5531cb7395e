"""The transactional producer workload of real runs (``txn-producer``, ``ctp-producer``): the
same transactions the simulator's :class:`~connmgr.sim.transactions.TransactionalProducerModel`
makes, by a real client.

``transactions`` transactions (a run option), transaction ``t`` starting ``t *
txn_interval_ms`` after the client starts (or at once, if the previous one ended later):
``begin_transaction``, its share of the records round-robin over the partitions, for
consume-transform-produce ``send_offsets_to_transaction`` (the offset of partition 0 of the
consumer half's input topic, for its group), ``commit_transaction``. Every record sent must be
acknowledged. The records are not read back: read_committed on the embedded mock fails for
every client (CorruptRecordException), and what is measured here is connections.

The Java client runs the same plan in its probe (:class:`connmgr_evidence.java.TransactionPlan`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

from aiokafka.structs import TopicPartition as AioTopicPartition

from connmgr.javalog import (
    parse_connection_event,
    parse_least_loaded_picks,
    parse_sent_requests,
)
from connmgr_evidence.realrun.workloads import (
    AckClock,
    RealRunError,
    WorkloadInputs,
    client_kwargs,
    elapsed_ms,
    measure_steady,
    new_producer,
    stop_client,
    transactions_of,
)


async def run_txn_producer(work: WorkloadInputs) -> None:
    """Stock aiokafka (observed) or the proposed producer through the transactions."""
    run, options = work.run, work.options
    spec = run.spec
    assert spec.transactional_id is not None
    count = transactions_of(options)
    kwargs = client_kwargs(run.client, spec, work.policy_settings, run.seed)
    kwargs.update(
        bootstrap_servers=work.bootstrap, acks="all", transactional_id=spec.transactional_id
    )
    producer = new_producer(run.client, kwargs)
    run.ledger = producer.ledger
    partitions = spec.cluster.partitions(spec.topics)
    records = options["records"]
    clock = AckClock()
    started = time.perf_counter()
    await producer.start()
    try:
        futures: list[asyncio.Future[Any]] = []
        for t in range(count):
            wait = started + t * spec.txn_interval_ms / 1000.0 - time.perf_counter()
            if t and wait > 0:
                await asyncio.sleep(wait)
            await producer.begin_transaction()
            for i in range(records * t // count, records * (t + 1) // count):
                tp = partitions[i % len(partitions)]
                sent = await producer.send(tp.topic, f"r{i}".encode(), partition=tp.partition)
                futures.append(clock.watch(sent))
                run.records_sent += 1
            if spec.offsets_group is not None:
                assert spec.offsets_topic is not None
                offsets = {AioTopicPartition(spec.offsets_topic, 0): t + 1}
                await producer.send_offsets_to_transaction(offsets, spec.offsets_group)
            await producer.commit_transaction()
        results = await asyncio.gather(*futures, return_exceptions=True)
        run.records_acked = sum(1 for r in results if not isinstance(r, BaseException))
        run.ttfa_ms = elapsed_ms(started, clock.first)
        await measure_steady(work, producer.ledger)
    finally:
        await stop_client(work, producer)
    if run.records_acked != run.records_sent:
        raise RealRunError(f"{run.records_sent - run.records_acked} records not acknowledged")


def early_leader_dials(lines: Iterable[str], leaders: Iterable[int]) -> bool:
    """Whether a Java consume-transform-produce run dialled a leader for its batches before
    its first TxnOffsetCommit (from the NetworkClient log, in line order: timestamps are only
    milliseconds). A dial right after a ``leastLoadedNode`` pick of that node ("with no
    active connection": metadata, telemetry) is that request's, not the batches'.

    kafka-clients' ``Sender.sendProducerData`` calls ``client.ready(leader)`` for every
    ready batch whenever no transactional request is queued, which in the first transaction
    happens or not by the timing of the application and sender threads: see
    ``ScenarioSpec.early_leader_dials``."""
    leader_ids = {str(b) for b in leaders}
    picked: int | None = None
    for line in lines:
        if any(api == "TXN_OFFSET_COMMIT" for _, api, _ in parse_sent_requests([line])):
            return False
        picks = parse_least_loaded_picks([line])
        if picks:
            picked = picks[-1]
            continue
        event = parse_connection_event(line)
        if event is None or event.kind != "connect":
            continue
        by_pick = picked is not None and event.node == str(picked)
        picked = None
        if event.node in leader_ids and not by_pick:
            return True
    return False
