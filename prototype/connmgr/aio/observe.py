"""Observe *stock* aiokafka's connections and random choices without changing what it does.

We compare unmodified aiokafka 0.14 (``AIOKafkaProducer``, ``AIOKafkaConsumer``) with a model
of it, so we need its exact connection sequence -- which broker, for what, opened and closed
when -- and the random choices that sequence depends on. Everything here **only observes**:
every override and wrapper calls the original with the same arguments, returns its result
unchanged, lets its exceptions through unchanged, and adds no ``await`` (so no scheduling
point) of its own. The recording is a few list appends per connection or choice.

Where aiokafka 0.14 connects (``aiokafka/client.py``), and what this module hooks:

* :meth:`AIOKafkaClient.bootstrap` dials the bootstrap hosts one after the other until one
  answers, with the module-level ``create_conn``, sends Metadata, and closes that connection
  (role ``BOOTSTRAP``). Note the order is *not* the configured one: ``self.hosts`` is
  ``collect_hosts(bootstrap_servers)``, which ``random.shuffle`` s by default -- a fourth
  random choice, recorded from the dial (as the entry's index in ``bootstrap_servers``);
* :meth:`AIOKafkaClient._get_conn` dials broker ``node_id`` for connection group ``DEFAULT``
  (role ``DATA``) or ``COORDINATION`` (role ``COORDINATION``);
* the choices: :meth:`~AIOKafkaClient.get_random_node` (``random.choice``; used by
  :meth:`~AIOKafkaClient.coordinator_lookup` for FindCoordinator and by the producer's sender
  for InitProducerId) and the ``random.shuffle`` in :meth:`~AIOKafkaClient._metadata_update`
  whose first reachable node gets the Metadata request.

:class:`ObservedAIOKafkaClient` overrides exactly those five methods. Each sets a
:class:`~contextvars.ContextVar` saying what a dial made *now, in this task* would be for, then
delegates to ``super()``. The dial itself is seen by a wrapper around ``aiokafka.client``'s
module-global ``create_conn``, installed once (idempotently) when this module is imported.
The wrapper is a pure pass-through unless the ContextVar names an observed client *and* the
current task is the one that set it -- so other clients in the process are unaffected, and
a task that merely inherited the variable (``bootstrap()`` creates the metadata-sync task,
which copies the context) does not record under a stale purpose.

A connection's close is seen through aiokafka's own ``on_close`` hook: the wrapper passes
``create_conn`` a callback that records and then calls the original callback (the client's
``_on_connection_closed`` for ``_get_conn`` dials; none for bootstrap dials). aiokafka calls it
exactly once, from ``AIOKafkaConnection.close``, when a live connection is torn down -- which
covers shutdown, broken connections, request timeouts and the idle close
(``_idle_check`` closes with ``IDLE_DROP``) -- with the :class:`~aiokafka.conn.CloseReason`,
whose name is recorded (``UNSPECIFIED`` when aiokafka passes none, as bootstrap does). The one
close that bypasses the hook is ``AIOKafkaConnection.__del__`` (an unclosed connection being
garbage-collected); a :func:`weakref.finalize` per connection records that as ``COLLECTED``.

Construction: :func:`observed_producer` / :func:`observed_consumer` build the stock class
(through thin subclasses that add only read-only attributes) and then turn the very client
object the stock constructor built into an :class:`ObservedAIOKafkaClient` by reassigning its
``__class__`` (see :func:`observe_client` for why this, and not a second client).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
import sys
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import aiokafka.client as _aiokafka_client
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.client import AIOKafkaClient, ConnectionGroup
from aiokafka.conn import collect_hosts

from connmgr.core.identity import Role
from connmgr.errors import ConnMgrError
from connmgr.ledger import ConnectionLedger, ConnEvent, observed_key

__all__ = [
    "Choice",
    "ObservationError",
    "ObservedAIOKafkaClient",
    "ObservedAIOKafkaConsumer",
    "ObservedAIOKafkaProducer",
    "expected_stock_sequence",
    "observe_client",
    "observed_consumer",
    "observed_producer",
]

Choice = tuple[str, int]
"""(purpose, node id) of one random choice aiokafka made, in the order it made them.

Purposes: ``bootstrap`` (the first entry a ``bootstrap()`` call dialled, as its 0-based
index in ``bootstrap_servers``, or -1 if it cannot be matched; aiokafka shuffles that list),
``bootstrap_retry`` (a further entry the same call moved on to after a failure), ``metadata``
(the first node a ``_metadata_update`` sent its request to, i.e. the
first reachable one of its shuffled list), ``metadata_retry`` (a further node the same update
moved on to after a failure), ``find_coordinator`` (``get_random_node`` inside
``coordinator_lookup``), ``init_producer_id`` (``get_random_node`` from the sender's
``_maybe_wait_for_pid``) and ``random`` (``get_random_node`` from anywhere else). aiokafka's
``"bootstrap"`` pseudo-node (kept only while Metadata lists no brokers) is recorded as -1.
"""

BOOTSTRAP_PSEUDO_NODE: Final = -1

_UNSPECIFIED: Final = "UNSPECIFIED"
_COLLECTED: Final = "COLLECTED"

# Callers of get_random_node, by function name, whose purpose is known (aiokafka 0.14).
_RANDOM_NODE_CALLERS: Final = {"_maybe_wait_for_pid": "init_producer_id"}


class ObservationError(ConnMgrError):
    """An observer was attached in a way that could not see everything (or could change it)."""


# -- what the current task is doing -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Scope:
    """Set in a ContextVar by an override: valid only for ``client`` in ``task``."""

    client: ObservedAIOKafkaClient
    task: asyncio.Task[Any] | None

    def active_for(self, client: ObservedAIOKafkaClient | None = None) -> bool:
        # Tasks created inside the scope copy the context; they must not inherit it.
        if client is not None and self.client is not client:
            return False
        return _current_task() is self.task


@dataclass(frozen=True, slots=True)
class _DialScope(_Scope):
    role: Role
    broker: int | None
    dialled: list[int] = field(default_factory=list)
    """Bootstrap only: indexes of the bootstrap entries this bootstrap() call dialled so far."""


@dataclass(frozen=True, slots=True)
class _MetadataScope(_Scope):
    reached: list[int] = field(default_factory=list)
    """Nodes this update got a connection to, in order: each was then sent the request."""


_DIAL: contextvars.ContextVar[_DialScope | None] = contextvars.ContextVar(
    "connmgr_observe_dial", default=None
)
_METADATA: contextvars.ContextVar[_MetadataScope | None] = contextvars.ContextVar(
    "connmgr_observe_metadata", default=None
)
_LOOKUP: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "connmgr_observe_lookup", default=None
)


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop
        return None


# -- the create_conn wrapper ------------------------------------------------------------------

_MARK: Final = "__connmgr_observer__"


def _install() -> None:
    """Wrap ``aiokafka.client.create_conn`` once; re-importing this module re-wraps the original.

    Only the module global of ``aiokafka.client`` is replaced -- the name ``bootstrap()`` and
    ``_get_conn()`` look up at call time. ``aiokafka.conn.create_conn`` and anyone who imported
    it directly are untouched.
    """
    current = _aiokafka_client.create_conn
    original = current.__wrapped__ if getattr(current, _MARK, False) else current

    @functools.wraps(original)
    async def create_conn(host: str, port: int, **kwargs: Any) -> Any:
        scope = _DIAL.get()
        if scope is None or not scope.active_for():
            return await original(host, port, **kwargs)
        return await scope.client._observe_dial(original, host, port, kwargs, scope)

    setattr(create_conn, _MARK, True)
    _aiokafka_client.create_conn = create_conn


_install()


# -- the observed client ----------------------------------------------------------------------


class ObservedAIOKafkaClient(AIOKafkaClient):  # type: ignore[misc]
    """A stock :class:`AIOKafkaClient` that records its connections and random choices.

    ``ledger`` gets one ``open`` entry per dial (t_ms since ``t0``, the host and port dialled,
    the broker id -- None for bootstrap dials -- and the role), then ``established`` or
    ``failed`` (reason: the exception's type and message), then ``close`` with aiokafka's
    CloseReason name (see the module docstring). ``choices`` lists the random choices in the
    order made (see :data:`Choice`). ``bootstrap_brokers`` maps a bootstrap connection's
    ledger id to the broker whose advertised host:port it dialled, once metadata names one;
    the ledger itself keeps ``broker=None`` and role ``BOOTSTRAP`` for those.

    Every override delegates to ``super()`` with the same arguments and returns its result;
    see the module docstring. Build one directly (keyword arguments as for
    ``AIOKafkaClient``, plus ``ledger`` and ``t0``) or convert a fresh stock client with
    :func:`observe_client`.
    """

    # Declared for mypy; set by _init_observer (also when converted via __class__).
    ledger: ConnectionLedger
    choices: list[Choice]
    bootstrap_brokers: dict[int, int]
    t0: float

    def __init__(
        self, *, ledger: ConnectionLedger | None = None, t0: float | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._init_observer(ledger, t0)

    def _init_observer(self, ledger: ConnectionLedger | None, t0: float | None) -> None:
        self.ledger = ledger if ledger is not None else ConnectionLedger()
        self.choices = []
        self.bootstrap_brokers = {}
        self.t0 = time.monotonic() if t0 is None else t0
        self.ledger.clock = self.now_ms
        self._observed_ids: Iterator[int] = itertools.count()
        self._observed_live: dict[int, weakref.finalize[Any, Any]] = {}

    def now_ms(self) -> float:
        """Milliseconds since ``t0`` on the monotonic clock (the ledger's time base)."""
        return (time.monotonic() - self.t0) * 1000.0

    # -- the five observed methods ------------------------------------------------------------

    async def bootstrap(self) -> None:
        token = _DIAL.set(_DialScope(self, _current_task(), Role.BOOTSTRAP, None))
        try:
            await super().bootstrap()
        finally:
            _DIAL.reset(token)
            self._resolve_bootstrap_brokers()

    async def _get_conn(
        self, node_id: Any, *, group: Any = ConnectionGroup.DEFAULT, no_hint: bool = False
    ) -> Any:
        role = Role.COORDINATION if group == ConnectionGroup.COORDINATION else Role.DATA
        broker = node_id if isinstance(node_id, int) else None
        token = _DIAL.set(_DialScope(self, _current_task(), role, broker))
        try:
            conn = await super()._get_conn(node_id, group=group, no_hint=no_hint)
        finally:
            _DIAL.reset(token)
        metadata = _METADATA.get()
        # _metadata_update sends its request right after a _get_conn that returned a
        # connection, with no await in between: that node is the one it sent to.
        if conn is not None and metadata is not None and metadata.active_for(self):
            node = node_id if isinstance(node_id, int) else BOOTSTRAP_PSEUDO_NODE
            self.choices.append(("metadata" if not metadata.reached else "metadata_retry", node))
            metadata.reached.append(node)
        return conn

    def get_random_node(self) -> Any:
        node = super().get_random_node()
        if node is not None:  # None: no brokers known, nothing was chosen
            lookup = _LOOKUP.get()
            if lookup is not None and lookup.active_for(self):
                purpose = "find_coordinator"
            else:
                # Frame 1 is whoever called us; reading its name changes nothing.
                purpose = _RANDOM_NODE_CALLERS.get(sys._getframe(1).f_code.co_name, "random")
            self.choices.append((purpose, node))
        return node

    async def _metadata_update(self, cluster_metadata: Any, topics: Any) -> Any:
        token = _METADATA.set(_MetadataScope(self, _current_task()))
        try:
            return await super()._metadata_update(cluster_metadata, topics)
        finally:
            _METADATA.reset(token)
            self._resolve_bootstrap_brokers()

    async def coordinator_lookup(self, coordinator_type: Any, coordinator_key: Any) -> Any:
        token = _LOOKUP.set(_Scope(self, _current_task()))
        try:
            return await super().coordinator_lookup(coordinator_type, coordinator_key)
        finally:
            _LOOKUP.reset(token)

    # -- recording ----------------------------------------------------------------------------

    async def _observe_dial(
        self,
        original: Callable[..., Awaitable[Any]],
        host: str,
        port: int,
        kwargs: dict[str, Any],
        scope: _DialScope,
    ) -> Any:
        """Record one ``create_conn`` call made for ``scope``; called by the wrapper only."""
        conn_id = next(self._observed_ids)
        index = 0
        if scope.role is Role.BOOTSTRAP:
            index = self._record_bootstrap_choice(host, port, scope)
        self.ledger.opened(
            self.now_ms(), conn_id, observed_key(host, port, scope.broker, scope.role, index)
        )
        kwargs = {**kwargs, "on_close": self._close_hook(conn_id, kwargs.get("on_close"))}
        try:
            conn = await original(host, port, **kwargs)
        except BaseException as exc:  # cancellation included: the dial did not complete
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self.ledger.failed(self.now_ms(), conn_id, reason)
            raise
        self.ledger.established(self.now_ms(), conn_id)
        finalizer = weakref.finalize(conn, self._record_close, conn_id, _COLLECTED)
        finalizer.atexit = False  # at exit nothing reads the ledger any more
        self._observed_live[conn_id] = finalizer
        return conn

    def _record_bootstrap_choice(self, host: str, port: int, scope: _DialScope) -> int:
        # bootstrap() walks a random.shuffle of bootstrap_servers (aiokafka.conn.collect_hosts
        # shuffles by default): name the entry dialled by its index in the configured list.
        # randomize=False parses the same list without touching the random module's state.
        configured = [(h, p) for h, p, _afi in collect_hosts(self._bootstrap_servers, False)]
        index = configured.index((host, port)) if (host, port) in configured else -1
        self.choices.append(("bootstrap_retry" if scope.dialled else "bootstrap", index))
        scope.dialled.append(index)
        return index

    def _close_hook(
        self, conn_id: int, original: Callable[[Any, Any], None] | None
    ) -> Callable[[Any, Any], None]:
        def on_close(conn: Any, reason: Any) -> None:
            # A close during connect() (handshake failure) also calls this, before the dial
            # returns: that connection is recorded as failed by _observe_dial instead.
            if conn_id in self._observed_live:
                name = getattr(reason, "name", None) or (
                    _UNSPECIFIED if reason is None else str(reason)
                )
                self._record_close(conn_id, name)
            if original is not None:
                original(conn, reason)

        return on_close

    def _record_close(self, conn_id: int, reason: str) -> None:
        finalizer = self._observed_live.pop(conn_id, None)
        if finalizer is None:
            return
        finalizer.detach()
        self.ledger.closed(self.now_ms(), conn_id, reason)

    def _resolve_bootstrap_brokers(self) -> None:
        """Name the broker behind each bootstrap connection by the host:port it dialled."""
        by_endpoint = {(b.host, b.port): b.nodeId for b in self.cluster.brokers()}
        for entry in self.ledger.entries:
            if (
                entry.kind is ConnEvent.DIAL
                and entry.role is Role.BOOTSTRAP
                and entry.conn_id not in self.bootstrap_brokers
            ):
                broker = by_endpoint.get((entry.host, entry.port))
                if broker is not None:
                    self.bootstrap_brokers[entry.conn_id] = broker

    # -- views --------------------------------------------------------------------------------

    def sequence(self, *, resolve_bootstrap: bool = False) -> list[tuple[int | None, Role]]:
        """(broker, role) of every dial in order; ``ledger.sequence()`` unless resolving.

        With ``resolve_bootstrap`` a bootstrap dial names the broker at the endpoint it dialled
        (when metadata named one) instead of None; its role stays ``BOOTSTRAP``.
        """
        return [
            (
                self.bootstrap_brokers.get(e.conn_id, e.broker)
                if resolve_bootstrap and e.role is Role.BOOTSTRAP
                else e.broker,
                e.role,
            )
            for e in self.ledger.entries
            if e.kind is ConnEvent.DIAL
        ]


def observe_client(
    client: Any, *, ledger: ConnectionLedger | None = None, t0: float | None = None
) -> ObservedAIOKafkaClient:
    """Turn a freshly built stock ``AIOKafkaClient`` into an observed one, in place.

    The object keeps its identity and every attribute the stock constructor gave it; only its
    class becomes :class:`ObservedAIOKafkaClient` (which adds no state aiokafka reads and whose
    overrides only observe). That is what keeps producer and consumer behaviour identical:

    * ``AIOKafkaProducer.__init__`` hands its client to the ``Sender`` and the client's
      ``cluster`` to the ``MessageAccumulator``; a second, observed client built afterwards
      would be used by ``producer.client`` but not by the sender that actually dials leaders;
    * ``AIOKafkaConsumer.__init__`` already calls ``client.set_topics(...)``, which arms a
      metadata-update future on that client; a replacement would silently lose it;
    * patching ``AIOKafkaClient`` in aiokafka's modules during construction would change the
      class for every client built concurrently, anywhere in the process.

    Must happen before the client is used (no bootstrap, no connections yet): dials made
    before could never be recorded. Only an exact ``AIOKafkaClient`` is accepted, since
    reassigning the class of a subclass instance would drop the subclass's behaviour.
    """
    if isinstance(client, ObservedAIOKafkaClient):
        raise ObservationError(f"{client!r} is already observed")
    if type(client) is not AIOKafkaClient:
        raise ObservationError(
            f"can only observe a stock AIOKafkaClient, got {type(client).__qualname__}"
        )
    if client._conns or client._sync_task is not None:
        raise ObservationError(
            f"{client!r} has already bootstrapped or connected; observe it before start()"
        )
    client.__class__ = ObservedAIOKafkaClient
    observed: ObservedAIOKafkaClient = client
    observed._init_observer(ledger, t0)
    return observed


# -- stock producer and consumer with an observed client --------------------------------------


class _ObservedViews:
    """What the observed producer and consumer add to the stock classes: read-only views."""

    _connmgr_observer: ObservedAIOKafkaClient

    @property
    def observer(self) -> ObservedAIOKafkaClient:
        return self._connmgr_observer

    @property
    def ledger(self) -> ConnectionLedger:
        return self._connmgr_observer.ledger

    @property
    def choices(self) -> list[Choice]:
        return self._connmgr_observer.choices


class ObservedAIOKafkaProducer(_ObservedViews, AIOKafkaProducer):  # type: ignore[misc]
    """``AIOKafkaProducer`` whose ``client`` is observed; adds only ``ledger``/``choices``."""

    def __init__(
        self, *, ledger: ConnectionLedger | None = None, t0: float | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._connmgr_observer = observe_client(self.client, ledger=ledger, t0=t0)


class ObservedAIOKafkaConsumer(_ObservedViews, AIOKafkaConsumer):  # type: ignore[misc]
    """``AIOKafkaConsumer`` whose ``_client`` is observed; adds only ``ledger``/``choices``."""

    def __init__(
        self,
        *topics: str,
        ledger: ConnectionLedger | None = None,
        t0: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*topics, **kwargs)
        self._connmgr_observer = observe_client(self._client, ledger=ledger, t0=t0)


def observed_producer(
    *, ledger: ConnectionLedger | None = None, t0: float | None = None, **kwargs: Any
) -> ObservedAIOKafkaProducer:
    """A stock ``AIOKafkaProducer(**kwargs)`` with an observed client (call inside a loop)."""
    return ObservedAIOKafkaProducer(ledger=ledger, t0=t0, **kwargs)


def observed_consumer(
    *topics: str, ledger: ConnectionLedger | None = None, t0: float | None = None, **kwargs: Any
) -> ObservedAIOKafkaConsumer:
    """A stock ``AIOKafkaConsumer(*topics, **kwargs)`` with an observed client."""
    return ObservedAIOKafkaConsumer(*topics, ledger=ledger, t0=t0, **kwargs)


def expected_stock_sequence(
    choices: Sequence[Choice], leaders: Sequence[int], *, coordinator: int | None = None
) -> list[tuple[int | None, Role]]:
    """The (broker, role) dial sequence stock aiokafka 0.14 makes, given its observed choices.

    The model, which holds for a start-up without failures or closes other than bootstrap's
    (checked against the embedded mock cluster, see ``tests/embedded/test_observe.py``):

    * each ``bootstrap``/``bootstrap_retry`` choice is one bootstrap dial (broker None); that
      connection is closed after its Metadata, so it is never reused;
    * every other choice dials a ``DATA`` connection to its node at that moment unless one to
      that node is already open (aiokafka keeps one per node and group); a ``metadata``
      choice of the bootstrap pseudo-node (-1) reuses the kept bootstrap connection;
    * right after a ``find_coordinator`` choice the ``COORDINATION`` connection to
      ``coordinator`` is dialled (once);
    * then ``DATA`` connections to ``leaders`` -- the leaders in the order the client first
      needs them -- that are not open yet. For the producer that is the leader of each
      partition in the order batches were first added (one request task per leader, created
      in that order, serialised by the client's connection lock); for the consumer it is the
      iteration order of its assignment's ``frozenset`` of partitions, which depends on
      string hashing (``PYTHONHASHSEED``), not on the random module.
    """
    sequence: list[tuple[int | None, Role]] = []
    data_open: set[int] = set()
    coordination_open = False

    def data(node: int) -> None:
        if node != BOOTSTRAP_PSEUDO_NODE and node not in data_open:
            data_open.add(node)
            sequence.append((node, Role.DATA))

    for purpose, node in choices:
        if purpose in ("bootstrap", "bootstrap_retry"):
            sequence.append((None, Role.BOOTSTRAP))
            continue
        data(node)
        if purpose == "find_coordinator" and coordinator is not None and not coordination_open:
            coordination_open = True
            sequence.append((coordinator, Role.COORDINATION))
    for leader in leaders:
        data(leader)
    return sequence
