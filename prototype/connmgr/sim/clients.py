"""Client workloads: what a producer or a consumer asks of its connection policy, and when.

These models are the Kafka protocol flows common to the clients we model (metadata refresh,
produce to leaders, the group protocol, fetch loops, heartbeats and commits). They know
nothing about connections: they emit request events and react to responses, errors and
losses; the policy under test decides where every request goes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from connmgr.core.coordinator import CoordinatorRef
from connmgr.core.events import Api
from connmgr.core.metadata import ClusterMetadata, TopicPartition
from connmgr.sim.host import ClientHost
from connmgr.sim.request import SimRequest


@dataclass(frozen=True, slots=True)
class ClientTimings:
    metadata_max_age_ms: int = 300_000
    retry_backoff_ms: int = 100
    heartbeat_interval_ms: int = 3_000
    auto_commit_interval_ms: int = 5_000
    fetch_max_wait_ms: int = 500
    send_interval_ms: int = 1_000
    request_timeout_ms: int = 30_000
    """How long a request waits for an answer before the client drops its connection (the
    Java clients' default; only sockets to an address that stopped answering wait it out)."""


class ClientModel:
    """Shared by producer and consumer: metadata bookkeeping and refresh."""

    def __init__(
        self,
        sim: ClientHost,
        topics: Sequence[str],
        timings: ClientTimings,
        *,
        first_op_ms: float = 0.0,
    ) -> None:
        self.sim = sim
        self.topics = list(topics)
        self.timings = timings
        self.first_op_ms = first_op_ms
        self.md: ClusterMetadata | None = None
        self._md_in_flight = False
        self._md_wanted = False
        self._refresh_seq = 0
        self.ops_started = False
        self._telemetry_asked = False
        self.closed = False
        """The application closed the client (:meth:`close`): it sends nothing more."""

    # --- lifecycle -----------------------------------------------------------------------

    def start(self, bootstrap_now: bool) -> None:
        self.on_start()
        if bootstrap_now:
            self.request_metadata()
        self.sim.at(self.first_op_ms, self._first_op)

    def on_start(self) -> None:
        """The client was constructed or started (before any metadata request)."""

    def _first_op(self) -> None:
        self.ops_started = True
        self.on_first_op()
        if self.md is None:
            if not self._md_in_flight:
                self.request_metadata()  # else on_metadata() calls on_ready()
        else:
            self.on_ready()

    def on_first_op(self) -> None:
        """The application's first send or poll, before metadata may be known."""

    def on_ready(self) -> None:
        """Metadata is known and the application has started sending or polling."""

    def close(self) -> None:
        """The application closes the client before the run ends: the simulator tells the
        policy (``ClientClosed``), and every timer of the model stops sending."""
        if not self.closed:
            self.closed = True
            self.sim.close_client()

    # --- metadata ------------------------------------------------------------------------

    def request_metadata(self) -> None:
        if self.closed:
            return
        if self._md_in_flight:
            self._md_wanted = True
            return
        self._md_in_flight = True
        self._md_wanted = False
        bootstrap = self.md is None
        topics = self.metadata_topics() if self.names_topics(bootstrap) else ()
        self.sim.send_metadata(topics, bootstrap=bootstrap)
        if bootstrap and self.sim.library.pushes_telemetry and not self._telemetry_asked:
            # KIP-714 (kafka-clients >= 3.7): the network client's poll asks some node for
            # its telemetry subscription, right after its first metadata request.
            self._telemetry_asked = True
            self.sim.send_any(Api.GET_TELEMETRY_SUBSCRIPTIONS)

    def metadata_topics(self) -> tuple[str, ...]:
        """The topics a metadata request names (when it names any)."""
        return tuple(self.topics)

    def names_topics(self, bootstrap: bool) -> bool:
        """Whether the next metadata request (the first one if ``bootstrap``) names the
        client's topics."""
        # aiokafka's start() bootstraps with a topic-less request; a client that defers its
        # bootstrap to the application's first send or poll asks for its topics.
        return not (bootstrap and self.sim.library.aiokafka and not self.ops_started)

    def on_metadata(self, md: ClusterMetadata, *, had_topics: bool) -> None:
        self.md = md
        self._md_in_flight = False
        if not had_topics:
            self.request_metadata()  # aiokafka: the topics come in a second request
            return
        self._refresh_seq += 1
        seq = self._refresh_seq
        self.sim.after(self.timings.metadata_max_age_ms, lambda: self._periodic(seq))
        if self._md_wanted:
            self.request_metadata()
        elif self.ops_started:
            self.on_ready()

    def _periodic(self, seq: int) -> None:
        if seq == self._refresh_seq:
            self.request_metadata()

    def send_per_leader(
        self, api: Api, busy: set[int], only: Collection[TopicPartition] | None = None
    ) -> None:
        """One ``api`` request to every leader without one in flight (``busy``), carrying
        the partitions it leads (of ``only``, if given): how producers drain batches and
        consumers fetch."""
        md = self.md
        assert md is not None
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp, leader in md.leaders:
            if only is None or tp in only:
                by_leader.setdefault(leader, []).append(tp)
        for leader, tps in by_leader.items():
            if leader not in busy:
                busy.add(leader)
                self.sim.send_broker(api, leader, tuple(tps))

    def metadata_wanted(self) -> None:
        """The policy cannot place a request without (newer) metadata: ask, unless a request
        is already on its way -- its answer is the newer metadata the policy waits for."""
        if not self._md_in_flight:
            self.request_metadata()

    def metadata_stale(self) -> None:
        """An error or a lost connection says the metadata may be stale: refresh it."""
        if self.md is not None:
            self.request_metadata()

    # --- responses -----------------------------------------------------------------------

    def on_response(self, req: SimRequest, ok: bool) -> None:
        """A response to ``req``; ok=False for a routing error (not leader/coordinator)."""

    def on_lost(self, req: SimRequest) -> None:
        """``req`` will be re-sent by the policy; nothing to do by default."""


class ProducerModel(ClientModel):
    """Sends one Produce request per leader every ``send_interval_ms`` while active."""

    def __init__(
        self,
        sim: ClientHost,
        topics: Sequence[str],
        timings: ClientTimings,
        *,
        first_op_ms: float = 0.0,
        send_until_ms: float | None = None,
        idempotent: bool = False,
        records_per_batch: int = 1,
    ) -> None:
        super().__init__(sim, topics, timings, first_op_ms=first_op_ms)
        self.send_until_ms = send_until_ms
        self.idempotent = idempotent
        self.records_per_batch = records_per_batch
        self._ticking = False
        self._in_flight: set[int] = set()
        self._have_pid = not idempotent
        self._pid_requested = False

    def on_start(self) -> None:
        # The Java producer's transaction manager asks for a producer id as soon as the sender
        # runs, before the first metadata request; aiokafka's sender waits for metadata.
        if self.idempotent and self.sim.library.java:
            self._pid_requested = True
            self.sim.send_any(Api.INIT_PRODUCER_ID)

    def on_ready(self) -> None:
        if self.idempotent and not self._pid_requested:
            self._pid_requested = True
            self.sim.send_any(Api.INIT_PRODUCER_ID)
            return
        if self._have_pid and not self._ticking:
            self._ticking = True
            self._tick()

    def _tick(self) -> None:
        if self.send_until_ms is not None and self.sim.now > self.send_until_ms:
            self._ticking = False
            return
        self.send_per_leader(Api.PRODUCE, self._in_flight)
        self.sim.after(self.timings.send_interval_ms, self._tick)

    def on_response(self, req: SimRequest, ok: bool) -> None:
        if req.api is Api.INIT_PRODUCER_ID:
            self._have_pid = True
            if self.md is not None and self.ops_started:
                self.on_ready()
            return
        if req.api is Api.PRODUCE and req.broker_id is not None:
            self._in_flight.discard(req.broker_id)
            if ok:
                self.sim.records_acked += self.records_per_batch * len(req.partitions)
            else:
                self.metadata_stale()


class ShortLivedProducerModel(ProducerModel):
    """A producer that starts, sends ``records`` records and closes: the application's
    ``send`` calls spread the records round robin over its topics' partitions, its
    ``close()`` flushes them (one Produce per leader of a partition with a record, re-sent
    after NOT_LEADER every ``send_interval_ms``) and closes the client once every record
    is acknowledged."""

    def __init__(
        self, sim: ClientHost, topics: Sequence[str], timings: ClientTimings, *, records: int
    ) -> None:
        super().__init__(sim, topics, timings)
        self.records = records
        self._unacked: dict[TopicPartition, int] | None = None
        """Records per partition not yet acknowledged (None: not yet sent)."""

    def on_ready(self) -> None:
        if self._unacked is None:
            assert self.md is not None
            partitions = sorted(tp for tp, _ in self.md.leaders)  # as the partitioner sees
            self._unacked = {}
            for n in range(self.records):
                tp = partitions[n % len(partitions)]
                self._unacked[tp] = self._unacked.get(tp, 0) + 1
        super().on_ready()

    def _tick(self) -> None:
        if self.closed or not self._unacked:
            self._ticking = False
            return
        self.send_per_leader(Api.PRODUCE, self._in_flight, self._unacked)
        self.sim.after(self.timings.send_interval_ms, self._tick)

    def on_response(self, req: SimRequest, ok: bool) -> None:
        if req.api is not Api.PRODUCE or req.broker_id is None or self._unacked is None:
            super().on_response(req, ok)
            return
        self._in_flight.discard(req.broker_id)
        if not ok:
            self.metadata_stale()
            return
        for tp in req.partitions:
            self.sim.records_acked += self._unacked.pop(tp, 0)
        if not self._unacked:
            self.close()


class ConsumerModel(ClientModel):
    """A group member: FindCoordinator, JoinGroup, SyncGroup, OffsetFetch, then one fetch
    loop per leader of its assigned partitions, heartbeats and auto-commits.

    It owns every partition of its topics until its group rebalances
    (:meth:`~connmgr.sim.cluster.ClusterModel.rebalance`): the next heartbeat answer tells
    it (REBALANCE_IN_PROGRESS), it stops fetching (the eager protocol revokes every
    partition), joins and syncs again, and fetches what SyncGroup assigned it. The interest
    it reports changes once, at the SyncGroup answer: the revocation lasts a few round
    trips, far less than any linger or idle timeout it could affect."""

    def __init__(
        self,
        sim: ClientHost,
        topics: Sequence[str],
        timings: ClientTimings,
        *,
        group: str,
        first_op_ms: float = 0.0,
    ) -> None:
        super().__init__(sim, topics, timings, first_op_ms=first_op_ms)
        self.group = group
        self.ref = CoordinatorRef.group(group)
        self.coordinator: int | None = None
        self._joined = False
        self._finding = False
        self._fetching: set[int] = set()
        self._timers_started = False
        self._generation = 0
        """The group generation whose assignment the member holds."""
        self._assigned: frozenset[TopicPartition] | None = None
        """The partitions it fetches (None: every partition of its topics)."""

    def on_first_op(self) -> None:
        # The Java consumer's first poll sends FindCoordinator alongside the first metadata
        # request (both on the bootstrap node in fixtures/java-consumer-2019.log); aiokafka
        # looks the coordinator up on a random known broker, so only after metadata.
        if self.sim.library.find_coordinator_with_first_metadata:
            self._find_coordinator()

    def on_ready(self) -> None:
        if self.coordinator is None:
            self._find_coordinator()
        elif self._joined:
            self._fetch_all()

    def _find_coordinator(self) -> None:
        if not self._finding:
            self._finding = True
            self.sim.send_any(Api.FIND_COORDINATOR)

    def _to_coordinator(self, api: Api) -> int:
        assert self.coordinator is not None
        return self.sim.send_coordinator(api, self.coordinator, self.ref)

    def _fetch_all(self) -> None:
        self.send_per_leader(Api.FETCH, self._fetching, self._assigned)

    def _start_timers(self) -> None:
        if self._timers_started:
            return
        self._timers_started = True
        self._every(self.timings.heartbeat_interval_ms, Api.HEARTBEAT)
        self._every(self.timings.auto_commit_interval_ms, Api.OFFSET_COMMIT)

    def _every(self, interval: int, api: Api) -> None:
        # One at a time, as both real consumers do (Java's heartbeat thread waits for the
        # heartbeat in flight, aiokafka's heartbeat and auto-commit routines await theirs):
        # while the coordinator cannot be reached, ticks are skipped, not queued.
        last: int | None = None

        def fire() -> None:
            nonlocal last
            if self.closed:
                return  # a member that left the group: its timers stop
            idle = last is None or not self.sim.request_open(last)
            if self.coordinator is not None and self._joined and idle:
                last = self._to_coordinator(api)
            self.sim.after(interval, fire)

        self.sim.after(interval, fire)

    def on_response(self, req: SimRequest, ok: bool) -> None:
        if self.closed:
            return  # answers and losses after close() start nothing new
        handler = self._handlers().get(req.api)
        if handler is not None:
            handler(req, ok)

    def _handlers(self) -> dict[Api, Callable[[SimRequest, bool], None]]:
        return {
            Api.FIND_COORDINATOR: self._found,
            Api.JOIN_GROUP: self._joined_group,
            Api.SYNC_GROUP: self._synced,
            Api.OFFSET_FETCH: self._offsets,
            Api.FETCH: self._fetched,
            Api.HEARTBEAT: self._group_reply,
            Api.OFFSET_COMMIT: self._group_reply,
        }

    def _found(self, req: SimRequest, ok: bool) -> None:
        self._finding = False
        self.coordinator = self.sim.cluster.coordinator(self.group)
        if not self._joined:
            self._to_coordinator(Api.JOIN_GROUP)

    def _joined_group(self, req: SimRequest, ok: bool) -> None:
        if self._rediscover(ok):
            return
        self._to_coordinator(Api.SYNC_GROUP)

    def _synced(self, req: SimRequest, ok: bool) -> None:
        if self._rediscover(ok):
            return
        md = self.md
        assert md is not None
        self._generation = self.sim.cluster.generation(self.group)
        self._assigned = self.sim.cluster.assignment(self.group)
        if self._assigned is None:
            self.sim.interest(frozenset(tp for tp, _ in md.leaders))
        else:
            self.sim.interest(self._assigned)
        self._to_coordinator(Api.OFFSET_FETCH)

    def _offsets(self, req: SimRequest, ok: bool) -> None:
        if self._rediscover(ok):
            return
        self._joined = True
        self._start_timers()
        self._fetch_all()

    def _group_reply(self, req: SimRequest, ok: bool) -> None:
        if self._rediscover(ok):
            return
        rebalanced = self.sim.cluster.generation(self.group) != self._generation
        if req.api is Api.HEARTBEAT and self._joined and rebalanced:
            # REBALANCE_IN_PROGRESS: revoke everything and join the new generation.
            self._joined = False
            self._to_coordinator(Api.JOIN_GROUP)

    def _rediscover(self, ok: bool) -> bool:
        """NOT_COORDINATOR: find the coordinator again (the group stays joined: a model)."""
        if ok:
            return False
        self.coordinator = None
        self.sim.coordinator_lost(self.ref)
        # Both real consumers wait retry.backoff.ms before asking again (aiokafka's
        # coordinator loop sleeps, Java's join loop does timer.sleep); asking at once loops
        # every round trip against a coordinator that keeps refusing.
        self.sim.after(self.timings.retry_backoff_ms, self._retry_lookup)
        return True

    def _retry_lookup(self) -> None:
        if self.coordinator is None:
            self._find_coordinator()

    def _fetched(self, req: SimRequest, ok: bool) -> None:
        if req.broker_id is not None:
            self._fetching.discard(req.broker_id)
        if not ok:
            self.metadata_stale()
            return
        if self._joined:  # not while re-joining: the eager protocol revoked everything
            self._fetch_all()

    def on_metadata(self, md: ClusterMetadata, *, had_topics: bool) -> None:
        super().on_metadata(md, had_topics=had_topics)
        if self._joined and had_topics:
            self._fetch_all()
