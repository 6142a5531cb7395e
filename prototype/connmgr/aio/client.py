"""``PolicyClient``: aiokafka's ``AIOKafkaClient`` with every connection decision delegated to
a connection policy of the core (the proposed one by default), through a PolicyDriver.

Which seams are overridden, and why these:

* ``bootstrap()`` — aiokafka dials the bootstrap servers itself; here the policy does
  (``BootstrapRequested``). Without ``warm_up`` nothing is dialled: the first metadata
  request, made when the application first sends or subscribes, bootstraps, and fails at
  once if no bootstrap server can be dialled (:mod:`connmgr.aio.bootstrapwatch`).
* ``_metadata_update()``, ``coordinator_lookup()`` — aiokafka picks a *random* broker for
  Metadata and FindCoordinator; here they are any-node requests the policy places.
* ``send()``, ``ready()``, ``_get_conn()`` — every other request and readiness probe becomes a
  broker or coordinator request for the policy; aiokafka's own ``_conns`` table stays empty.
* ``get_random_node()`` — still answers callers that need *a* node id (InitProducerId); the
  request itself is then routed as an any-node request whatever id they pass.
* ``close()`` — the policy's ``ClientClosed`` closes everything it opened.
* ``_wait_on_metadata()`` — aiokafka's gate before every ``send()``, ``send_batch()`` and
  ``partitions_for()``: when metadata lacks the topic it also reports use before ``start()``
  or after ``stop()``, and a bootstrap that never got metadata, instead of a wrapper around
  ``send()`` (a wrapper's extra call per record cost 5-8 % of produce throughput at 0 ms RTT).

aiokafka's own idle timer is disabled on our connections (``max_idle_ms=None``): idle expiry
and prompt close are the policy's. Nothing else of aiokafka changes.

**aiokafka's metadata seams stay seams.** Tests and applications replace
``AIOKafkaClient._metadata_update`` (aiokafka's own suite does, with
``mock.patch.object(AIOKafkaClient, "_metadata_update", ...)``) or
``AIOKafkaClient._wait_on_metadata`` on the class. Our overrides would hide such a
replacement, so each first checks whether aiokafka's class still holds the function it held
when this module was imported; if not, the override steps aside and the replacement runs,
bound exactly as it would be for a stock client (``super()`` lookup). Why not let aiokafka's
``_metadata_update`` run and place the request in a piece below it instead: the only piece
below it is ``_get_conn(node_id)``, called with a broker aiokafka already chose at random
(or with nothing before the first metadata, when it gives up), which is the decision the
policy exists to make; an any-node Metadata request cannot be expressed there. The policy's
placement is :meth:`PolicyClient._place_metadata_request`; ``bootstrap()`` calls it directly,
as stock ``bootstrap()`` sends its Metadata request without ``_metadata_update``.

Class-level replacements of the request-routing methods (``send``, ``ready``, ``_get_conn``,
``coordinator_lookup``) and of ``bootstrap`` / ``close`` are *not* reached: those methods are
the policy's. Instance-level patches (``mock.patch.object(client, "send")``, the form
aiokafka's own tests use for them) work as on a stock client. aiokafka 0.14 has no
``check_version``; ``force_metadata_update`` and ``fetch_all_metadata`` are aiokafka's own and
go through ``_metadata_update``, hence through a replacement too.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

import aiokafka.errors as kafka_errors
from aiokafka.client import AIOKafkaClient, ConnectionGroup
from aiokafka.cluster import ClusterMetadata as AioClusterMetadata
from aiokafka.conn import create_conn
from aiokafka.protocol.coordination import FindCoordinatorRequest
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.protocol.produce import ProduceRequest
from aiokafka.structs import TopicPartition as AioTopicPartition
from aiokafka.util import create_task

from connmgr.aio.bootstrapwatch import (
    BootstrapWatch,
    EveryDialFailed,
    MetadataFailure,
    dial_failures,
)
from connmgr.aio.driver import Identity, Leased, NoConnection, PolicyDriver
from connmgr.aio.errors import ClientStopped, ProducerStopped
from connmgr.aio.identity import confirmed_conn
from connmgr.aio.options import PolicyOptions
from connmgr.core.config import ClientKind, PolicyConfig
from connmgr.core.coordinator import CoordinatorKind, CoordinatorRef, coordinator_kind
from connmgr.core.endpoint import Endpoint, parse_bootstrap
from connmgr.core.events import (
    AnyNodeRequestNeeded,
    Api,
    BootstrapRequested,
    BrokerRequestNeeded,
    CoordinatorLost,
    CoordinatorRequestNeeded,
    Event,
    InterestChanged,
)
from connmgr.core.identity import ConnectionKey
from connmgr.core.metadata import BrokerInfo, ClusterMetadata, TopicPartition
from connmgr.errors import ClientMisuse
from connmgr.ledger import ConnectionLedger
from connmgr.policies import make_policy
from connmgr.seeding import derive_rng

ANY_NODE_APIS = frozenset({Api.METADATA, Api.FIND_COORDINATOR, Api.API_VERSIONS})
COORDINATION_TYPES = {0: CoordinatorKind.GROUP, 1: CoordinatorKind.TRANSACTION}
"""aiokafka's ``CoordinationType`` values (FindCoordinator key types)."""
DIAL_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncio.TimeoutError,
    kafka_errors.KafkaError,
)

# aiokafka's own seams as this module found them (see the module docstring): an override of
# ours runs only while aiokafka's class still holds these very functions.
AIOKAFKA_METADATA_UPDATE = AIOKafkaClient._metadata_update
AIOKAFKA_WAIT_ON_METADATA = AIOKafkaClient._wait_on_metadata


def to_cluster_metadata(
    response: Any,
    cluster: AioClusterMetadata,
    known: dict[tuple[int, str, int, str | None], BrokerInfo] | None = None,
) -> ClusterMetadata:
    """Our metadata value from an aiokafka metadata response already applied to ``cluster``.

    ``known`` caches broker values between responses (a client's brokers rarely change, and
    building a thousand endpoints is most of the cost: this runs on the path to the first
    record). Brokers are ordered by id (a sort key, not dataclass comparisons, for speed).
    """
    cache = {} if known is None else known
    brokers: list[BrokerInfo] = []
    for b in sorted(cluster.brokers(), key=_node_id):
        seen = (b.nodeId, b.host, b.port, b.rack)
        info = cache.get(seen)
        if info is None:
            info = cache[seen] = BrokerInfo(b.nodeId, Endpoint(b.host, b.port), b.rack)
        brokers.append(info)
    leaders: dict[TopicPartition, int] = {}
    for topic in cluster.topics(exclude_internal_topics=False):
        for partition in sorted(cluster.partitions_for_topic(topic) or ()):
            leader = cluster.leader_for_partition(AioTopicPartition(topic, partition))
            if leader is not None and leader >= 0:
                leaders[TopicPartition(topic, partition)] = leader
    return ClusterMetadata.build(getattr(response, "cluster_id", None), brokers, leaders)


def _node_id(broker: Any) -> int:
    node_id: int = broker.nodeId
    return node_id


class PolicyClient(AIOKafkaClient):  # type: ignore[misc]  # aiokafka is untyped
    """An ``AIOKafkaClient`` whose connections are managed by a policy. Build it with
    :meth:`upgrade` from a client aiokafka constructed, so no constructor code is copied."""

    policy_options: PolicyOptions
    client_kind: ClientKind
    ledger: ConnectionLedger
    _driver: PolicyDriver | None
    _lifecycle: str

    @classmethod
    def upgrade(
        cls,
        client: AIOKafkaClient,
        options: PolicyOptions,
        kind: ClientKind,
        coordinators: tuple[CoordinatorRef, ...] = (),
    ) -> PolicyClient:
        """Turn the stock ``client`` (already referenced by its producer's sender and
        accumulator; a consumer's fetcher and coordinator take it at ``start()``) into a
        PolicyClient in place: aiokafka's constructors leave no way to build it as one (see
        :mod:`connmgr.aio.dropin`). ``coordinators``:
        the ones its producer or consumer will look up (its group, its transactional id),
        looked up together with the first metadata request (see :meth:`bootstrap`)."""
        if type(client) is not AIOKafkaClient:
            raise TypeError(f"expected a stock AIOKafkaClient, got {type(client).__name__}")
        client.__class__ = cls
        assert isinstance(client, PolicyClient)
        client._init_policy(options, kind)
        client._prefetch_refs = coordinators
        return client

    def _init_policy(self, options: PolicyOptions, kind: ClientKind) -> None:
        self.policy_options = options
        self.client_kind = kind
        self.ledger = ConnectionLedger()
        self._driver = None
        self._coordinator_refs: dict[CoordinatorKind, CoordinatorRef] = {}
        self._coordinator_at: dict[int, CoordinatorRef] = {}
        self._prefetch_refs: tuple[CoordinatorRef, ...] = ()
        self._broker_values: dict[tuple[int, str, int, str | None], BrokerInfo] = {}
        self._prefetched: dict[CoordinatorRef, asyncio.Task[int]] = {}
        self._lifecycle = "new"  # "running" from bootstrap(), "closed" from close()
        self._subscription_state: Any = None
        self._assignment_task: asyncio.Task[None] | None = None
        # None once a Metadata request the policy placed succeeded (see _no_bootstrap).
        self._metadata_failure: MetadataFailure | None = None
        self._timeout_s = float(self._request_timeout_ms) / 1000.0
        """How long a request waits for the policy's connection: ``request_timeout_ms``."""
        idle = self._connections_max_idle_ms
        self.policy_config = PolicyConfig(
            bootstrap=parse_bootstrap(self._bootstrap_servers),
            client=kind,
            connections_max_idle_ms=-1 if idle is None else int(idle),
            reconnect_backoff_ms=max(1, int(self._retry_backoff * 1000)),
            **options.policy_settings,
        )
        self._bootstrap_watch = BootstrapWatch(frozenset(self.policy_config.bootstrap))
        rng = derive_rng(options.seed, "policy") if options.seed is not None else random.Random()
        self.policy = make_policy(options.policy, self.policy_config, rng)

    @property
    def bootstrap_text(self) -> str:
        return ",".join(str(e) for e in self.policy_config.bootstrap)

    # --- the driver ----------------------------------------------------------------------

    @property
    def driver(self) -> PolicyDriver:
        if self._driver is None:
            self._driver = PolicyDriver(
                self.policy,
                self._dial,
                ledger=self.ledger,
                dial_errors=DIAL_ERRORS,
                on_lost=lambda why: self.force_metadata_update(),
                on_refresh=self.force_metadata_update,
                on_dial_failed=lambda key, exc: self._bootstrap_watch.dial_failed(
                    key.endpoint, exc, self.driver.give_up
                ),
                dns_ttl_ms=self.policy_options.dns_ttl_ms,
            )
        return self._driver

    async def _dial(self, key: ConnectionKey, on_close: Any, identity: Identity | None) -> Any:
        host, port = key.endpoint.host, key.endpoint.port
        if identity is None:
            return await create_conn(host, port, **self._connection_settings(on_close))
        # A known node of a 4.4+ cluster: its set-up confirms that it is that node.
        return await confirmed_conn(host, port, *identity, **self._connection_settings(on_close))

    def _connection_settings(self, on_close: Any) -> dict[str, Any]:
        """aiokafka's connection arguments, as the application gave them to the client."""
        return dict(
            client_id=self._client_id,
            request_timeout_ms=self._request_timeout_ms,
            ssl_context=self._ssl_context,
            security_protocol=self._security_protocol,
            on_close=on_close,
            max_idle_ms=None,  # idle expiry is the policy's
            sasl_mechanism=self._sasl_mechanism,
            sasl_plain_username=self._sasl_plain_username,
            sasl_plain_password=self._sasl_plain_password,
            sasl_kerberos_service_name=self._sasl_kerberos_service_name,
            sasl_kerberos_domain_name=self._sasl_kerberos_domain_name,
            sasl_oauth_token_provider=self._sasl_oauth_token_provider,
        )

    async def _acquire(self, make_event: Any) -> Leased:
        """The connection the policy chose for the request ``make_event`` makes, or
        ``KafkaConnectionError``: after ``request_timeout_ms``, or, before any metadata came,
        as soon as every bootstrap server's dial failed (``EveryDialFailed``)."""
        watch = None if self.policy.metadata is not None else self._bootstrap_watch.watch()
        try:  # before any metadata, every dial is a bootstrap server's: watched
            event = make_event if watch is None else watch.event_of(make_event)
            return await self.driver.acquire(event, self._timeout_s)
        except NoConnection as exc:
            raise kafka_errors.KafkaConnectionError(str(exc)) from exc
        finally:
            if watch is not None:
                self._bootstrap_watch.unwatch(watch)

    # --- bootstrap and metadata ----------------------------------------------------------

    async def bootstrap(self) -> None:
        """With ``warm_up``, fetch metadata now: ``KafkaConnectionError`` saying why if none
        comes within ``request_timeout_ms`` (as stock ``bootstrap()``, an answer that names no
        broker is accepted); without, only start the metadata synchronizer: the first
        metadata request, when the application needs one, dials."""
        self._lifecycle = "running"
        # The start-up exchange goes out together: the coordinator lookups the producer or
        # consumer is about to make ride the first connection with the first metadata
        # request, instead of waiting for its answer (aiokafka's order; a round trip lost at
        # every start, and a coordinator move in between costs a socket).
        for ref in self._prefetch_refs:
            self._prefetched[ref] = create_task(self._find_coordinator(ref))
        # The placement itself, not the _metadata_update seam: stock bootstrap() does not go
        # through _metadata_update either, so a replaced seam changes neither client's start.
        if self.policy_config.warm_up and not await self._place_metadata_request(self.cluster, []):
            failure = self._metadata_failure
            if failure is None or not failure.answered:
                raise self._no_bootstrap()
        if getattr(self, "_sync_task", None) is None:
            self._sync_task = create_task(self._md_synchronizer())
        if self._subscription_state is not None and self._assignment_task is None:
            self._assignment_task = create_task(self._assignments(self._subscription_state))

    async def _metadata_update(self, cluster_metadata: AioClusterMetadata, topics: Any) -> bool:
        """aiokafka's seam for every metadata refresh (the synchronizer, hence
        ``force_metadata_update()``, and ``fetch_all_metadata()``): updates
        ``cluster_metadata`` and returns True, or returns False. The policy places the request
        (:meth:`_place_metadata_request`), unless ``AIOKafkaClient._metadata_update`` was
        replaced on aiokafka's class: then the replacement runs, as for a stock client."""
        if AIOKafkaClient._metadata_update is not AIOKAFKA_METADATA_UPDATE:
            replaced: bool = await super()._metadata_update(cluster_metadata, topics)
            return replaced
        return await self._place_metadata_request(cluster_metadata, topics)

    async def _place_metadata_request(
        self, cluster_metadata: AioClusterMetadata, topics: Any
    ) -> bool:
        """One Metadata request for ``topics`` (all topics if empty or None) on the
        connection the policy chooses; True once ``cluster_metadata`` holds its answer.
        False, with ``cluster_metadata`` marked failed where aiokafka marks it and the reason
        kept for :meth:`_no_bootstrap`, when: the client is not started (stock has no broker
        to ask before ``bootstrap()``), no connection came within ``request_timeout_ms``, the
        request timed out or failed, or the answer named no broker."""
        if self._lifecycle == "new":
            self._metadata_failure = MetadataFailure("the client is not started")
            cluster_metadata.failed_update(None)
            return False
        # The topics the application waits for, from the very first request: asking for
        # brokers only (an empty list) would leave the first send waiting one
        # retry_backoff_ms for a second round trip (found by the A/B runs).
        request = MetadataRequest(list(topics) if topics else None)
        try:
            lease = await self._acquire(self._metadata_event)
        except EveryDialFailed as exc:
            self._metadata_failure = self._bootstrap_watch.metadata_failed(exc)
            cluster_metadata.failed_update(None)
            return False
        except kafka_errors.KafkaConnectionError:
            self._metadata_failure = MetadataFailure(
                "no bootstrap server could be connected within request_timeout_ms="
                f"{self._request_timeout_ms} ({dial_failures(self.ledger)})"
            )
            cluster_metadata.failed_update(None)
            return False
        server = self._endpoint_of(lease.conn_id)
        try:
            response = await lease.conn.send(request)
        except TimeoutError:
            self.driver.failed(lease)
            self._metadata_failure = MetadataFailure(
                f"{server} accepted the connection but did not answer the Metadata request "
                f"within request_timeout_ms={self._request_timeout_ms}"
            )
            cluster_metadata.failed_update(None)
            return False
        except kafka_errors.KafkaError as exc:
            self.driver.failed(lease)
            self._metadata_failure = MetadataFailure(
                f"the Metadata request to {server} failed: {exc}"
            )
            cluster_metadata.failed_update(None)
            return False
        if not response.brokers:
            # As aiokafka: an answer without brokers leaves the metadata as it was, unfailed
            # (the cluster may still be creating the topic).
            self.driver.done(lease)
            self._metadata_failure = MetadataFailure(
                f"{server} answered the Metadata request, but with no broker in it",
                answered=True,
            )
            return False
        cluster_metadata.update_metadata(response)
        self.driver.done(
            lease, to_cluster_metadata(response, cluster_metadata, self._broker_values)
        )
        self._metadata_failure = None
        return True

    def _metadata_event(self, request_id: int) -> Event:
        """The client's first metadata request bootstraps (the policy has no metadata yet);
        every later one is an any-node request."""
        if self.policy.metadata is None:
            return BootstrapRequested(request_id)
        return AnyNodeRequestNeeded(request_id, Api.METADATA)

    def follow_assignment(self, subscription: Any) -> None:
        """Tell the policy the consumer's partitions each time ``subscription`` (aiokafka's
        ``SubscriptionState``) gets an assignment (InterestChanged), from ``bootstrap()``
        until ``close()``."""
        self._subscription_state = subscription

    async def _assignments(self, subscription: Any) -> None:
        while True:
            await subscription.wait_for_assignment()
            assigned = subscription.assigned_partitions()
            if self._driver is not None and not self._driver.closed:
                self._driver.feed(
                    InterestChanged(
                        frozenset(TopicPartition(tp.topic, tp.partition) for tp in assigned)
                    )
                )

    def _endpoint_of(self, conn_id: int) -> str:
        """``host:port`` of the ledger's connection ``conn_id`` (for error messages)."""
        for entry in reversed(self.ledger.entries):
            if entry.conn_id == conn_id:
                return f"{entry.host}:{entry.port}"
        return "the server"

    async def _wait_on_metadata(self, topic: str) -> Any:
        """The partitions of ``topic``, as aiokafka's: at once if metadata has them (the path
        every record takes, also after ``stop()``, where aiokafka's accumulator then refuses
        the record), else after metadata updates, ``UnknownTopicOrPartitionError`` after
        ``request_timeout_ms``. Where the topic is missing and stock aiokafka would wait
        forever (nothing refreshes metadata before ``start()`` or after ``stop()``), raises
        ``ClientMisuse`` before ``start()`` and, for a producer, ``ProducerStopped`` (a
        ``ProducerClosed``) after ``stop()``. If no Metadata request ever got usable
        metadata, the error stock aiokafka would have raised says why: ``KafkaConnectionError``
        (see :meth:`_no_bootstrap`), or ``UnknownTopicOrPartitionError`` when a server
        answered without brokers (stock's bootstrap accepts that answer). If
        ``AIOKafkaClient._wait_on_metadata`` was replaced on aiokafka's class, the
        replacement runs instead, as for a stock client."""
        if AIOKafkaClient._wait_on_metadata is not AIOKAFKA_WAIT_ON_METADATA:
            return await super()._wait_on_metadata(topic)
        partitions = self.cluster.partitions_for_topic(topic)
        if partitions is not None:
            return partitions
        if self._lifecycle == "new":
            raise ClientMisuse("the client is used before start(): await start() first")
        if self._lifecycle == "closed":
            message = "the client is used after stop(): create and start a new client"
            if self.client_kind is ClientKind.PRODUCER:
                raise ProducerStopped(message)
            raise ClientMisuse(message)
        try:
            if self.policy.metadata is None:
                return await self._bootstrap_watch.unless_every_dial_fails(
                    super()._wait_on_metadata(topic), self._no_bootstrap
                )
            return await super()._wait_on_metadata(topic)
        except (kafka_errors.KafkaTimeoutError, kafka_errors.UnknownTopicOrPartitionError) as exc:
            # Only our own placement's failures before any metadata mean "no bootstrap": a
            # replaced _metadata_update that never answers is aiokafka's unknown topic.
            failure = self._metadata_failure
            if self.policy.metadata is not None or failure is None:
                raise
            if failure.answered:
                raise kafka_errors.UnknownTopicOrPartitionError(
                    f"no metadata for topic {topic!r} within request_timeout_ms="
                    f"{self._request_timeout_ms}: {failure.why}"
                ) from exc
            raise self._no_bootstrap() from exc

    def _no_bootstrap(self) -> kafka_errors.KafkaConnectionError:
        """aiokafka's error for a bootstrap that got no metadata (``KafkaConnectionError``,
        "Unable to bootstrap from ..."), saying which of these happened last: no bootstrap
        server could be connected, a server's Metadata answer did not come within
        ``request_timeout_ms``, or the request failed (the connection closed, an error)."""
        failure = self._metadata_failure
        why = "no Metadata request was answered" if failure is None else failure.why
        return kafka_errors.KafkaConnectionError(
            f"Unable to bootstrap from {self.bootstrap_text}: {why}"
        )

    async def coordinator_lookup(self, coordinator_type: Any, coordinator_key: Any) -> int:
        """aiokafka's lookup (FindCoordinator), placed as an any-node request. A lookup means
        the caller dropped its coordinator (it never looks up one it still trusts), so the
        policy first hears that this coordinator's placement is void; the answer is kept to
        name the coordinator of the requests and probes that follow."""
        kind = COORDINATION_TYPES.get(int(coordinator_type), CoordinatorKind.GROUP)
        ref = CoordinatorRef(kind, str(coordinator_key))
        prefetched = self._prefetched.pop(ref, None)
        if prefetched is not None:
            # The answer of the lookup sent with the first metadata request, used once; if
            # it failed, look up afresh.
            with contextlib.suppress(kafka_errors.KafkaError):
                return await prefetched
        if self._driver is not None and self.policy.coordinators.broker_of(ref) is not None:
            self._driver.feed(CoordinatorLost(ref))
        return await self._find_coordinator(ref)

    async def _find_coordinator(self, ref: CoordinatorRef) -> int:
        key_type = next(t for t, k in COORDINATION_TYPES.items() if k is ref.kind)
        request = FindCoordinatorRequest(ref.key, key_type)
        response = await self._send_on(
            lambda rid: AnyNodeRequestNeeded(rid, Api.FIND_COORDINATOR), request
        )
        error_type = kafka_errors.for_code(response.error_code)
        if error_type is not kafka_errors.NoError:
            raise error_type()
        coordinator_id: int = response.coordinator_id
        self._coordinator_refs[ref.kind] = ref
        self._coordinator_at[coordinator_id] = ref
        return coordinator_id

    def get_random_node(self) -> int | None:
        """A node id for callers that need one (the request is placed by the policy): a
        broker we hold a connection to, else the lowest known id."""
        known: set[int] = {b.nodeId for b in self.cluster.brokers()}
        if not known:
            return None
        for view in self.policy.connections():
            if view.key.broker_id in known:
                return view.key.broker_id
        return min(known)

    # --- requests ------------------------------------------------------------------------

    def _event_for(self, node_id: int, api: Api, group: Any, request: Any = None) -> Any:
        """The request event for ``api`` to ``node_id``: any-node, coordinator or broker.

        A transactional ``InitProducerId`` goes to the transaction coordinator (aiokafka
        sends it on the DEFAULT group, to the node its lookup returned); an idempotent one
        (no transactional id) is an any-node request."""
        # aiokafka 0.14's request builder keeps the id as ``_transactional_id``.
        if api in ANY_NODE_APIS or (
            api is Api.INIT_PRODUCER_ID and getattr(request, "_transactional_id", None) is None
        ):
            return lambda rid: AnyNodeRequestNeeded(rid, api)
        kind = coordinator_kind(api)
        if group is ConnectionGroup.COORDINATION or kind is not None:
            ref = self._coordinator_ref(node_id, kind)
            return lambda rid: CoordinatorRequestNeeded(rid, api, node_id, ref)
        return lambda rid: BrokerRequestNeeded(rid, api, node_id)

    def _coordinator_ref(self, node_id: int, kind: CoordinatorKind | None) -> CoordinatorRef:
        """Which coordinator a request of ``kind`` (None: a readiness probe) to ``node_id``
        is for: the one of that kind aiokafka looked up last (it keeps one per kind), or for
        a probe the one last found on that node."""
        if kind is None:
            found = self._coordinator_at.get(node_id)
            if found is not None:
                return found
            kind = CoordinatorKind.GROUP
        return self._coordinator_refs.get(kind) or CoordinatorRef(kind, "")

    async def send(
        self, node_id: int, request: Any, *, group: Any = ConnectionGroup.DEFAULT
    ) -> Any:
        api = Api.from_key(request.API_KEY)
        self._require_known(node_id, api, group)
        return await self._send_on(self._event_for(node_id, api, group, request), request)

    def _require_known(self, node_id: int, api: Api, group: Any) -> None:
        """As stock aiokafka: a node missing from metadata fails at once and refreshes
        metadata, so callers retry against fresh metadata instead of waiting."""
        if api in ANY_NODE_APIS or self.policy.metadata is None:
            return
        if self.cluster.broker_metadata(node_id) is None:
            self.force_metadata_update()
            raise kafka_errors.NodeNotReadyError(f"broker {node_id} is not in current metadata")

    async def _send_on(self, make_event: Any, request: Any) -> Any:
        if self._lifecycle == "closed":
            raise ClientStopped(
                f"{type(request).__name__} after stop(): the client's connections are closed; "
                "create and start a new client"
            )
        try:
            lease = await self._acquire(make_event)
        except kafka_errors.KafkaConnectionError as exc:
            raise kafka_errors.NodeNotReadyError(str(exc)) from exc
        expect_response = not (isinstance(request, ProduceRequest) and request.required_acks == 0)
        try:
            response = await lease.conn.send(request, expect_response=expect_response)
        except TimeoutError as exc:
            self.driver.connection_broken(lease)  # reports the request failed with it
            raise kafka_errors.RequestTimedOutError() from exc
        except asyncio.CancelledError:
            self.driver.withdraw(lease)
            raise
        except BaseException:
            self.driver.failed(lease)
            raise
        self.driver.done(lease)
        return response

    async def ready(self, node_id: int, *, group: Any = ConnectionGroup.DEFAULT) -> bool:
        """aiokafka asks this to make sure a node can be reached (it dials if needed)."""
        try:
            self._require_known(node_id, Api.OTHER, group)
            lease = await self._acquire(self._probe_event(node_id, group))
        except (kafka_errors.KafkaConnectionError, kafka_errors.NodeNotReadyError):
            return False
        self.driver.withdraw(lease)  # a probe: nothing is written on the connection
        return True

    async def _get_conn(
        self, node_id: int, *, group: Any = ConnectionGroup.DEFAULT, no_hint: bool = False
    ) -> Any:
        try:
            lease = await self._acquire(self._probe_event(node_id, group))
        except kafka_errors.KafkaConnectionError:
            return None
        self.driver.withdraw(lease)  # the caller writes on it outside the policy's sight
        return lease.conn

    def _probe_event(self, node_id: int, group: Any) -> Any:
        return self._event_for(node_id, Api.OTHER, group)

    async def close(self) -> None:
        self._lifecycle = "closed"
        prefetched, self._prefetched = self._prefetched, {}
        tasks: list[asyncio.Task[Any]] = list(prefetched.values())
        if self._assignment_task is not None:
            tasks.append(self._assignment_task)
            self._assignment_task = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, kafka_errors.KafkaError):
                await task
        await super().close()  # stops the metadata synchronizer; aiokafka's _conns is empty
        if self._driver is not None:
            await self._driver.aclose()
