"""The transactional producer workload: ``initTransactions``, then one transaction every
``txn_interval_ms`` -- AddPartitionsToTxn, Produce to the leaders, EndTxn -- and, for the
producer side of consume-transform-produce, AddOffsetsToTxn and TxnOffsetCommit too.

A producer of a consume-transform-produce application talks to two coordinators: its
transactional id's *transaction* coordinator (InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn) and its consumer group's *group* coordinator (TxnOffsetCommit), each
found with its own FindCoordinator and lost on its own NOT_COORDINATOR. The consumer half of
that application is another client with its own policy (:class:`~connmgr.sim.clients.
ConsumerModel`); this model is the producer half only.

The request order follows the real clients, read from their sources:

* **aiokafka 0.14** (``aiokafka/producer/sender.py``): ``start()`` bootstraps with a
  topic-less Metadata request, then ``Sender._maybe_wait_for_pid`` looks the transaction
  coordinator up on a random broker (``_find_coordinator``), probes it with
  ``client.ready(node, group=COORDINATION)`` (a dial of the coordination connection), and
  sends InitProducerId (DEFAULT group). The topics' metadata comes with the first send.
  Every coordinator found is probed the same way before first use (the group coordinator of
  TxnOffsetCommit included). One transactional request is in flight at a time: AddPartitions,
  then AddOffsets and TxnOffsetCommit, then EndTxn once every batch is acknowledged; Produce
  waits for AddPartitions only (the partitions are muted until added), so it runs alongside
  AddOffsets/TxnOffsetCommit.
* **kafka-clients** (``Sender.maybeSendAndPollTransactionalRequest``,
  ``TransactionManager.nextRequest``): the producer's construction fetches metadata naming no
  topic; ``initTransactions`` enqueues InitProducerId, whose missing coordinator enqueues a
  FindCoordinator to ``leastLoadedNode``; the topics' metadata comes with the first send.
  While a transactional request is pending or in flight the sender sends no Produce, so
  within a transaction AddPartitions, AddOffsets, FindCoordinator(GROUP) and TxnOffsetCommit
  go before the batches; EndTxn waits for the batches. ``sendOffsetsToTransaction`` first
  waits for metadata naming the consumed topic (``awaitTopicMetadata``, in the 4.4.0 jar;
  not yet in trunk of October 2024), so the first AddOffsets waits for that answer too.
  Whenever its transactional queue is empty the sender dials the leaders of ready batches
  (``client.ready``), which in the first transaction of consume-transform-produce may
  happen before TxnOffsetCommit or not: a race between the application and sender threads
  (see :attr:`~connmgr.sim.scenarios.ScenarioSpec.early_leader_dials`).
* **the proposed client** (aiokafka with ``PolicyClient``): as aiokafka, except that the
  transaction coordinator lookup is sent with the client's first request
  (``find_coordinator_with_first_metadata``) and metadata is fetched when the policy asks
  for it (``RefreshMetadata``), naming every topic.

Which of these a run follows is the hosting library's
(:func:`connmgr.sim.library.library_of`), not the connection policy's; where each request goes
is the policy's alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from connmgr.core.coordinator import TRANSACTION_APIS, CoordinatorRef
from connmgr.core.events import Api
from connmgr.core.metadata import ClusterMetadata, TopicPartition
from connmgr.sim.clients import ClientModel, ClientTimings
from connmgr.sim.host import ClientHost
from connmgr.sim.request import SimRequest

PROBE = Api.OTHER
"""aiokafka's readiness probe of a coordinator it has just found (``client.ready``)."""


class TransactionalProducerModel(ClientModel):
    """A transactional producer writing one record per partition of its topics in each
    transaction; with ``offsets_group``, each transaction also commits that group's offsets
    (``sendOffsetsToTransaction``)."""

    def __init__(
        self,
        sim: ClientHost,
        topics: Sequence[str],
        timings: ClientTimings,
        *,
        transactional_id: str,
        txn_interval_ms: float,
        offsets_group: str | None = None,
        offsets_topic: str | None = None,
        early_leader_dials: bool = False,
    ) -> None:
        super().__init__(sim, topics, timings)
        self.offsets_topic = offsets_topic
        self.early_leader_dials = early_leader_dials
        self.txn_ref = CoordinatorRef.transaction(transactional_id)
        self.group_ref = None if offsets_group is None else CoordinatorRef.group(offsets_group)
        self.txn_interval_ms = txn_interval_ms
        self.transactions = 0
        """Transactions committed (EndTxn answered)."""
        self._aio = sim.library.aiokafka
        self._bootstrap_at_start = False
        self._at: dict[CoordinatorRef, int] = {}
        """Coordinators found (and, for aiokafka, probed): ref -> broker."""
        self._finding: dict[int, CoordinatorRef] = {}
        """FindCoordinator requests in flight: request id -> the coordinator looked up."""
        self._queued: dict[CoordinatorRef, list[Api]] = {}
        """Requests waiting for their coordinator to be found."""
        self._have_pid = False
        self._in_txn = False
        self._wants_begin = False
        self._producing: dict[int, tuple[TopicPartition, ...]] = {}
        """Produce requests in flight this transaction: leader -> partitions."""
        self._unsent: list[TopicPartition] = []
        """Partitions whose batch failed (NOT_LEADER) or whose leader was busy: sent again
        after new metadata or the leader's answer."""
        self._held: list[TopicPartition] = []
        """kafka-clients: batches the sender holds while transactional requests are queued."""
        self._offsets_done = True
        self._asked_offsets_topic = False
        """kafka-clients: sendOffsetsToTransaction asked for the consumed topic's metadata."""
        self._offsets_waiting = False
        """kafka-clients: AddOffsets waits for that metadata."""

    # --- start-up: initTransactions --------------------------------------------------------

    def start(self, bootstrap_now: bool) -> None:
        self._bootstrap_at_start = bootstrap_now
        if bootstrap_now:
            self.request_metadata()
        if not (bootstrap_now and self._aio):
            # Java: initTransactions right after construction (the sender has already asked
            # for metadata). The proposed client: the lookup goes out with its first request.
            # Stock aiokafka waits for its bootstrap answer (on_metadata).
            self._to(self.txn_ref, Api.INIT_PRODUCER_ID)

    def metadata_topics(self) -> tuple[str, ...]:
        extra = (self.offsets_topic,) if self._asked_offsets_topic and self.offsets_topic else ()
        return (*self.topics, *extra)

    def _offsets_topic_known(self) -> bool:
        md = self.md
        topic = self.offsets_topic
        return topic is None or (md is not None and TopicPartition(topic, 0) in md.leader_of)

    def names_topics(self, bootstrap: bool) -> bool:
        # A start-up bootstrap names no topic (aiokafka's bootstrap(), the Java producer's
        # construction); the proposed client's requests name every topic.
        return not (bootstrap and self._bootstrap_at_start)

    def on_metadata(self, md: ClusterMetadata, *, had_topics: bool) -> None:
        if had_topics:
            super().on_metadata(md, had_topics=True)
            return
        # The topic-less start-up answer: the topics are asked for by the first send, once
        # initTransactions is done (the application cannot send before).
        self.md = md
        self._md_in_flight = False
        if self._md_wanted:
            self.request_metadata()
        if self._aio and not self._have_pid and not self._finding and not self._queued:
            self._to(self.txn_ref, Api.INIT_PRODUCER_ID)

    def _initialized(self) -> None:
        self._have_pid = True
        self.ops_started = True
        self._wants_begin = True
        if self._leaders_known():
            self._begin()
        else:
            self.request_metadata()  # the first send waits for its topics

    def _leaders_known(self) -> bool:
        md = self.md
        return md is not None and all(
            tp in md.leader_of for tp in self.sim.cluster.partitions(self.topics)
        )

    def on_ready(self) -> None:
        """Metadata naming the topics arrived: start the first transaction, or send again
        what NOT_LEADER sent back."""
        if self._wants_begin and not self._in_txn and self._leaders_known():
            self._begin()
        elif self._offsets_waiting and self._offsets_topic_known():
            self._offsets_waiting = False
            self._to(self.txn_ref, Api.ADD_OFFSETS_TO_TXN)
        elif self._unsent and self._in_txn:
            partitions, self._unsent = self._unsent, []
            self._produce(partitions)

    # --- coordinators ------------------------------------------------------------------------

    def _to(self, ref: CoordinatorRef, api: Api) -> None:
        """Send ``api`` to coordinator ``ref``, finding it first if it is not known."""
        broker = self._at.get(ref)
        if broker is not None:
            self.sim.send_coordinator(api, broker, ref)
            return
        self._queued.setdefault(ref, []).append(api)
        if ref not in self._finding.values():
            self._finding[self.sim.send_any(Api.FIND_COORDINATOR)] = ref

    def _found(self, rid: int) -> None:
        ref = self._finding.pop(rid)
        broker = self.sim.cluster.coordinator_of(ref)
        if self._aio:
            # Sender._find_coordinator: client.ready(node, group=COORDINATION) before the
            # coordinator is used; its answer releases the queued requests.
            self.sim.send_coordinator(PROBE, broker, ref)
            return
        self._at[ref] = broker
        self._release(ref)

    def _release(self, ref: CoordinatorRef) -> None:
        for api in self._queued.pop(ref, []):
            self._to(ref, api)

    def _coordinator_moved(self, ref: CoordinatorRef, api: Api) -> None:
        """NOT_COORDINATOR (or the policy handed the request back): look it up again and
        resend. Other coordinators are untouched."""
        self._at.pop(ref, None)
        self.sim.coordinator_lost(ref)  # a no-op for a placement the policy never had
        if api is not PROBE:
            self._queued.setdefault(ref, []).append(api)
        if ref not in self._finding.values():
            self._finding[self.sim.send_any(Api.FIND_COORDINATOR)] = ref

    # --- one transaction ---------------------------------------------------------------------

    def _begin(self) -> None:
        self._wants_begin = False
        self._in_txn = True
        self._offsets_done = self.group_ref is None
        self._to(self.txn_ref, Api.ADD_PARTITIONS_TO_TXN)
        if self.group_ref is not None and not self._aio and not self._offsets_topic_known():
            # KafkaProducer.sendOffsetsToTransaction -> awaitTopicMetadata(consumed topics),
            # while the sender sends AddPartitionsToTxn.
            self._asked_offsets_topic = True
            self.request_metadata()
            if self.early_leader_dials:
                # Sender.sendProducerData: client.ready(leader) for the ready batches while
                # no transactional request is queued -- a dial, no request yet.
                md = self.md
                assert md is not None
                for leader in sorted({md.leader_of[tp] for tp in self._partitions()}):
                    self.sim.send_broker(PROBE, leader, ())

    def _partitions(self) -> list[TopicPartition]:
        return self.sim.cluster.partitions(self.topics)

    def _partitions_added(self) -> None:
        partitions = self._partitions()
        if self.group_ref is not None:
            if self._aio or self._offsets_topic_known():
                self._to(self.txn_ref, Api.ADD_OFFSETS_TO_TXN)
            else:
                self._offsets_waiting = True  # sent once the consumed topic's metadata is in
            if not self._aio:
                # kafka-clients sends no Produce while transactional requests are queued.
                self._held = list(partitions)
                return
        self._produce(partitions)

    def _produce(self, partitions: Sequence[TopicPartition]) -> None:
        md = self.md
        assert md is not None
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            by_leader.setdefault(md.leader_of[tp], []).append(tp)
        for leader, tps in by_leader.items():
            if leader in self._producing:
                self._unsent.extend(tps)  # one request per leader at a time
                continue
            self._producing[leader] = tuple(tps)
            self.sim.send_broker(Api.PRODUCE, leader, tuple(tps))

    def _maybe_end(self) -> None:
        if (
            self._in_txn
            and self._offsets_done
            and not (self._producing or self._unsent or self._held)
        ):
            self._to(self.txn_ref, Api.END_TXN)

    def _ended(self) -> None:
        self._in_txn = False
        self.transactions += 1
        start_next = max(self.sim.now, self.transactions * self.txn_interval_ms)
        self.sim.at(start_next, self._begin)

    # --- responses ---------------------------------------------------------------------------

    def on_response(self, req: SimRequest, ok: bool) -> None:
        api = req.api
        if api is Api.FIND_COORDINATOR:
            if req.request_id in self._finding:
                self._found(req.request_id)
            return
        if api is Api.PRODUCE:
            self._produced(req, ok)
            return
        ref = req.coordinator
        if ref is None:
            return  # an any-node request of the library's own (telemetry)
        if not ok:
            self._coordinator_moved(ref, api)
            return
        if api is PROBE:
            assert req.broker_id is not None
            self._at[ref] = req.broker_id
            self._release(ref)
        elif api is Api.INIT_PRODUCER_ID:
            self._initialized()
        elif api is Api.ADD_PARTITIONS_TO_TXN:
            self._partitions_added()
        elif api is Api.ADD_OFFSETS_TO_TXN:
            assert self.group_ref is not None
            self._to(self.group_ref, Api.TXN_OFFSET_COMMIT)
        elif api is Api.TXN_OFFSET_COMMIT:
            self._offsets_done = True
            held, self._held = self._held, []
            if held:
                self._produce(held)
            self._maybe_end()
        elif api is Api.END_TXN:
            self._ended()
        else:
            assert api not in TRANSACTION_APIS, api

    def _produced(self, req: SimRequest, ok: bool) -> None:
        assert req.broker_id is not None
        self._producing.pop(req.broker_id, None)
        if ok:
            self.sim.records_acked += len(req.partitions)
            if self._unsent and self._leaders_known():
                partitions, self._unsent = self._unsent, []
                self._produce(partitions)
        else:
            self._unsent.extend(req.partitions)
            self.metadata_stale()
        self._maybe_end()
