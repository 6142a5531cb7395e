"""An in-process, multi-broker Kafka-protocol cluster: librdkafka's mock cluster via ctypes.

:class:`MockCluster` starts ``N`` mock brokers that listen on ``127.0.0.1`` ephemeral ports and
speak enough of the Kafka protocol for real clients (aiokafka, confluent-kafka) to produce,
consume and run consumer groups against them. It lets tests place partition leaders and group
coordinators on chosen brokers, take brokers down and up, add latency, change the endpoint a
broker advertises, and see which broker received which request.

Facts about the mock this wrapper relies on (read in librdkafka's ``rdkafka_mock.c`` and
confirmed by ``tests/embedded``):

* broker ids are ``1..N``; ``bootstraps`` lists them in id order as ``127.0.0.1:PORT``;
* ``broker_set_down`` closes the broker's existing connections (orderly FIN) and swaps its
  listening socket for one bound to the same port but not listening, so new connects are
  refused; Metadata then omits the broker from its broker list while partitions it leads
  still name it as leader; ``broker_set_up`` starts listening on that same port again;
* ``broker_set_host_port`` only changes what Metadata responses advertise: the listener stays
  where it was, and the ``bootstraps`` string is never rebuilt;
* a failure half-way through ``rd_kafka_mock_cluster_new`` (e.g. out of file descriptors)
  aborts the whole process inside librdkafka, hence the descriptor check before starting.

The class is synchronous and thread-safe (one lock serialises calls into C, so ``close()`` on
one thread cannot free the cluster under a call on another). Mock-control calls block only
until the mock's own thread has applied them (micro- to milliseconds), so calling them from
asyncio code is fine.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Literal, Self

from connmgr.core.events import Api
from connmgr.embedded.errors import EmbeddedClusterError
from connmgr.embedded.librdkafka import (
    LibRdKafka,
    MockClusterPtr,
    RdKafkaPtr,
    load_librdkafka,
)

__all__ = ["ApiKey", "CoordinatorKeyType", "MockCluster", "MockRequest"]

CoordinatorKeyType = Literal["group", "transaction"]
"""The coordinator kinds ``rd_kafka_mock_coordinator_set`` understands."""

_COORDINATOR_KEY_TYPES: Final = ("group", "transaction")

_INT32_MAX: Final = 2**31 - 1
_MAX_ADVERTISED_HOST_BYTES: Final = 127  # the mock's advertised_listener is char[128]
_FD_MARGIN: Final = 64
"""Descriptors kept free beyond one listener per broker: the producer handle's own pipes and
threads, the mock thread's wake-up pipe, plus the caller's clients connecting right after."""

_DEFAULT_CONFIG: Final[Mapping[str, str]] = {
    "client.id": "connmgr-embedded-mock",
    # The handle only hosts the cluster; with no bootstrap.servers librdkafka would warn about
    # that at every start. Level 0 (LOG_EMERG) keeps it quiet.
    "log_level": "0",
}


ApiKey = Api
"""Kafka API keys, for naming tracked requests (the project's one table: ``core.events.Api``)."""


@dataclass(frozen=True, slots=True)
class MockRequest:
    """One request a mock broker received (recorded by librdkafka's request tracking).

    ``timestamp_us`` is librdkafka's ``rd_clock()``: microseconds on the monotonic clock
    (``CLOCK_MONOTONIC`` on Linux, the clock behind :func:`time.monotonic`), taken when the
    broker parsed the request -- so it is comparable with ``time.monotonic_ns() // 1000``.
    """

    broker_id: int
    api_key: int
    timestamp_us: int

    @property
    def api_name(self) -> str:
        """The request type's name, e.g. ``"PRODUCE"``, or ``"ApiKey(N)"`` when not listed."""
        api = Api.from_key(self.api_key)
        return f"ApiKey({self.api_key})" if api is Api.OTHER else api.name


def _release(lib: LibRdKafka, mc: MockClusterPtr, rk: RdKafkaPtr) -> None:
    # Module-level so weakref.finalize holds no reference to the MockCluster itself.
    # Order matters: the cluster lives on rk (it borrows rk's queues and a dummy broker), so
    # it must go first.
    lib.mock_cluster_destroy(mc)
    lib.destroy(rk)


def _check_fd_headroom(brokers: int) -> None:
    """Refuse to start when the process could run out of descriptors while creating brokers.

    librdkafka answers a failed listener creation during ``rd_kafka_mock_cluster_new`` with a
    failed assertion that aborts the process, so an ordinary exception here is much kinder.
    When the limit or the open-descriptor count cannot be read, the check is skipped.
    """
    if sys.platform == "win32":
        return
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:
        try:
            open_now = len(os.listdir("/dev/fd"))
        except OSError:
            return
    needed = brokers + _FD_MARGIN
    if open_now + needed > soft:
        raise EmbeddedClusterError(
            f"not enough file descriptors for {brokers} mock brokers: {open_now} open, "
            f"soft limit RLIMIT_NOFILE={soft}, need about {needed} more (one listener per "
            "broker plus margin); raise the limit (ulimit -n) or start fewer brokers"
        )


def _parse_bootstraps(bootstraps: str, brokers: int) -> dict[int, tuple[str, int]]:
    """Map broker id -> (host, port) from the mock's ``bootstraps`` string.

    The mock builds the string by walking its broker list, which holds ids ``1..N`` in order,
    so entry ``i`` is broker ``i + 1``. A count mismatch means that assumption broke.
    """
    entries = [entry for entry in bootstraps.split(",") if entry]
    if len(entries) != brokers:
        raise EmbeddedClusterError(
            f"mock cluster bootstraps {bootstraps!r} lists {len(entries)} brokers, "
            f"expected {brokers}"
        )
    endpoints: dict[int, tuple[str, int]] = {}
    for index, entry in enumerate(entries):
        host, sep, port_text = entry.rpartition(":")
        if not sep or not host or not port_text.isdigit():
            raise EmbeddedClusterError(f"cannot parse mock bootstrap entry {entry!r}")
        endpoints[index + 1] = (host, int(port_text))
    return endpoints


def _require_text(what: str, value: object, *, max_bytes: int | None = None) -> str:
    if not isinstance(value, str) or not value:
        raise EmbeddedClusterError(f"{what} must be a non-empty string, got {value!r}")
    if "\x00" in value:
        raise EmbeddedClusterError(f"{what} {value!r} contains a NUL character")
    if max_bytes is not None and len(value.encode()) > max_bytes:
        raise EmbeddedClusterError(f"{what} {value!r} is longer than {max_bytes} bytes")
    return value


def _require_int(what: str, value: object, low: int, high: int) -> int:
    # bool is an int subclass; True as a broker id or partition is always a bug.
    if not isinstance(value, int) or isinstance(value, bool):
        raise EmbeddedClusterError(f"{what} must be an int, got {value!r}")
    if not low <= value <= high:
        raise EmbeddedClusterError(f"{what} must be in {low}..{high}, got {value}")
    return value


class MockCluster:
    """A running librdkafka mock cluster of ``brokers`` brokers with ids ``1..brokers``.

    Construction starts it (``MockCluster.start(...)`` is a synonym); :meth:`close` stops it,
    is idempotent, and also runs when the object is garbage-collected or the interpreter exits.
    Use it as a context manager to close deterministically. Every method other than
    :meth:`close`, :attr:`closed` and ``repr`` raises :class:`EmbeddedClusterError` once closed.

    Arguments:
        brokers: number of brokers, at least 1.
        library: a loaded :class:`LibRdKafka`, a path to the shared library, or None to find
            the copy bundled with confluent-kafka.
        track_requests: record every request the brokers receive (see :meth:`requests`). The
            record grows without bound (16 bytes per request) until :meth:`clear_requests`.
        group_initial_rebalance_delay_ms: the mock's ``group.initial.rebalance.delay.ms``;
            None keeps librdkafka's default (3000 ms, like a real broker). Tests usually want 0.
        config: extra ``rd_kafka_conf_set`` properties for the handle hosting the cluster,
            e.g. ``{"debug": "mock", "log_level": "7"}`` to watch the mock at work on stderr.
    """

    def __init__(
        self,
        brokers: int,
        *,
        library: LibRdKafka | str | os.PathLike[str] | None = None,
        track_requests: bool = True,
        group_initial_rebalance_delay_ms: int | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(brokers, int) or isinstance(brokers, bool) or brokers < 1:
            raise EmbeddedClusterError(f"brokers must be an int >= 1, got {brokers!r}")
        if group_initial_rebalance_delay_ms is not None:
            _require_int(
                "group_initial_rebalance_delay_ms",
                group_initial_rebalance_delay_ms,
                0,
                _INT32_MAX,
            )
        self._lib = library if isinstance(library, LibRdKafka) else load_librdkafka(library)
        if track_requests and not self._lib.has_request_tracking:
            raise EmbeddedClusterError(
                f"librdkafka {self._lib.version} at {self._lib.path!r} lacks the request-"
                "tracking API (rd_kafka_mock_get_requests & co.); pass track_requests=False"
            )
        if group_initial_rebalance_delay_ms is not None and not self._lib.has(
            "rd_kafka_mock_group_initial_rebalance_delay_ms"
        ):
            raise EmbeddedClusterError(
                f"librdkafka {self._lib.version} cannot set group_initial_rebalance_delay_ms "
                "(no rd_kafka_mock_group_initial_rebalance_delay_ms); pass None"
            )
        _check_fd_headroom(brokers)

        self._lock = threading.Lock()
        self._closed = False
        self._broker_count = brokers
        self._tracking = track_requests
        self._topics: dict[str, int] = {}
        self._down: set[int] = set()

        rk = self._lib.new_producer({**_DEFAULT_CONFIG, **(config or {})})
        try:
            mc = self._lib.mock_cluster_new(rk, brokers)
        except BaseException:
            self._lib.destroy(rk)
            raise
        self._rk = rk
        self._mc = mc
        # From here on the finalizer owns both handles: close(), garbage collection and
        # interpreter exit (weakref.finalize runs at exit by default) all go through it once.
        self._finalizer = weakref.finalize(self, _release, self._lib, mc, rk)
        try:
            self._bootstraps = self._lib.mock_cluster_bootstraps(mc)
            self._listeners = _parse_bootstraps(self._bootstraps, brokers)
            self._advertised = dict(self._listeners)
            if track_requests:
                self._lib.mock_start_request_tracking(mc)
            if group_initial_rebalance_delay_ms is not None:
                self._lib.mock_group_initial_rebalance_delay_ms(
                    mc, group_initial_rebalance_delay_ms
                )
        except BaseException:
            self.close()
            raise

    @classmethod
    def start(
        cls,
        brokers: int,
        *,
        library: LibRdKafka | str | os.PathLike[str] | None = None,
        track_requests: bool = True,
        group_initial_rebalance_delay_ms: int | None = None,
        config: Mapping[str, str] | None = None,
    ) -> Self:
        """Start a cluster; the same as calling the constructor, for call sites that read better."""
        return cls(
            brokers,
            library=library,
            track_requests=track_requests,
            group_initial_rebalance_delay_ms=group_initial_rebalance_delay_ms,
            config=config,
        )

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Destroy the cluster (closing every listener and client connection), then its handle.

        Idempotent and thread-safe. Blocks until librdkafka has joined the mock's threads,
        typically well under a second even for a thousand brokers.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._finalizer()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        down = ",".join(str(b) for b in sorted(self._down))
        topics = ",".join(sorted(self._topics)[:5])
        if len(self._topics) > 5:
            topics += f",...(+{len(self._topics) - 5})"
        first = getattr(self, "_bootstraps", "").split(",", 1)[0]
        more = f",...(+{self._broker_count - 1})" if self._broker_count > 1 else ""
        return (
            f"<MockCluster {state} brokers={self._broker_count} down=[{down}] "
            f"topics=[{topics}] bootstrap={first}{more}>"
        )

    @contextmanager
    def _live(self) -> Iterator[MockClusterPtr]:
        # Held across the C call so close() on another thread cannot free the cluster under it.
        with self._lock:
            if self._closed:
                raise EmbeddedClusterError("MockCluster is closed")
            yield self._mc

    # -- topology ------------------------------------------------------------------------------

    @property
    def library(self) -> LibRdKafka:
        """The loaded librdkafka this cluster runs on."""
        return self._lib

    @property
    def broker_ids(self) -> tuple[int, ...]:
        """The broker ids, ``(1, ..., brokers)``."""
        with self._live():
            return tuple(range(1, self._broker_count + 1))

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of every broker's listener, in id order (``127.0.0.1:PORT,...``).

        This is the mock's ``bootstraps`` string from creation time: it always names where the
        brokers really listen, even after :meth:`set_host_port` changed what they advertise.
        """
        with self._live():
            return self._bootstraps

    def endpoints(self) -> dict[int, tuple[str, int]]:
        """Broker id -> (host, port) as the brokers advertise it in Metadata responses.

        Starts equal to :meth:`listeners`; :meth:`set_host_port` changes entries here only.
        Returns a fresh dict each call.
        """
        with self._live():
            return dict(self._advertised)

    def listeners(self) -> dict[int, tuple[str, int]]:
        """Broker id -> (host, port) where each broker actually accepts connections.

        Fixed for the cluster's lifetime: a broker keeps its port across down/up and
        :meth:`set_host_port`. Returns a fresh dict each call.
        """
        with self._live():
            return dict(self._listeners)

    @property
    def down_brokers(self) -> frozenset[int]:
        """Ids of brokers currently taken down with :meth:`broker_down`."""
        with self._live():
            return frozenset(self._down)

    @property
    def topics(self) -> dict[str, int]:
        """Topic -> partition count, for topics created through this object."""
        with self._live():
            return dict(self._topics)

    def _require_broker(self, broker_id: object) -> int:
        if not isinstance(broker_id, int) or isinstance(broker_id, bool):
            raise EmbeddedClusterError(f"broker id must be an int, got {broker_id!r}")
        if not 1 <= broker_id <= self._broker_count:
            raise EmbeddedClusterError(
                f"unknown broker id {broker_id}: this mock cluster has brokers "
                f"1..{self._broker_count}"
            )
        return broker_id

    def _require_partition(self, topic: str, partition: object) -> int:
        if topic not in self._topics:
            raise EmbeddedClusterError(
                f"unknown topic {topic!r}: create it with create_topic() first (the mock would "
                "otherwise auto-create it with its default of 4 partitions)"
            )
        count = self._topics[topic]
        if not isinstance(partition, int) or isinstance(partition, bool):
            raise EmbeddedClusterError(f"partition must be an int, got {partition!r}")
        if not 0 <= partition < count:
            raise EmbeddedClusterError(
                f"partition {partition} does not exist: topic {topic!r} has partitions "
                f"0..{count - 1}"
            )
        return partition

    # -- topics and placement ------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, replication_factor: int = 1) -> None:
        """Create ``name`` with ``partitions`` partitions (leaders placed by the mock).

        ``replication_factor`` must be in ``1..brokers`` (the mock would silently clamp it).
        Raises :class:`EmbeddedClusterError` for bad input or if librdkafka refuses, e.g.
        ``Broker: Topic already exists``.
        """
        _require_text("topic name", name)
        _require_int("partitions", partitions, 1, 1_000_000)
        _require_int("replication_factor", replication_factor, 1, self._broker_count)
        with self._live() as mc:
            self._lib.mock_topic_create(mc, name, partitions, replication_factor)
            self._topics[name] = partitions

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Make ``broker_id`` the leader of ``topic`` [``partition``]; bumps the leader epoch.

        The topic must have been created through :meth:`create_topic`. Clients learn of the
        change on their next Metadata refresh (or on a NOT_LEADER error from the old leader).
        """
        _require_text("topic name", topic)
        with self._live() as mc:
            self._require_partition(topic, partition)
            self._require_broker(broker_id)
            self._lib.mock_partition_set_leader(mc, topic, partition, broker_id)

    def create_topic_with_leaders(
        self, name: str, leaders: Sequence[int], replication_factor: int = 1
    ) -> None:
        """Create ``name`` with ``len(leaders)`` partitions, partition ``i`` led by ``leaders[i]``.

        Every leader id is checked before anything is created, so a bad list creates nothing.
        """
        _require_text("topic name", name)
        if isinstance(leaders, str | bytes) or len(leaders) == 0:
            raise EmbeddedClusterError(
                f"leaders must be a non-empty sequence of broker ids, got {leaders!r}"
            )
        for index, broker_id in enumerate(leaders):
            try:
                self._require_broker(broker_id)
            except EmbeddedClusterError as exc:
                raise EmbeddedClusterError(f"leaders[{index}]: {exc}") from None
        self.create_topic(name, len(leaders), replication_factor)
        for partition, broker_id in enumerate(leaders):
            self.set_partition_leader(name, partition, broker_id)

    def set_coordinator(self, key_type: CoordinatorKeyType, key: str, broker_id: int) -> None:
        """Make ``broker_id`` the coordinator for consumer group / transactional id ``key``.

        Without this the mock hashes the key onto a broker. FindCoordinator answers with the
        chosen broker from then on; a client already talking to another coordinator moves only
        when that one answers NOT_COORDINATOR or it looks the coordinator up again.
        """
        if key_type not in _COORDINATOR_KEY_TYPES:
            raise EmbeddedClusterError(
                f"key_type must be one of {_COORDINATOR_KEY_TYPES}, got {key_type!r}"
            )
        _require_text(f"{key_type} key", key)
        with self._live() as mc:
            self._require_broker(broker_id)
            self._lib.mock_coordinator_set(mc, key_type, key, broker_id)

    def set_group_initial_rebalance_delay(self, delay_ms: int) -> None:
        """Set ``group.initial.rebalance.delay.ms`` for the whole cluster (default 3000)."""
        _require_int("delay_ms", delay_ms, 0, _INT32_MAX)
        with self._live() as mc:
            self._lib.mock_group_initial_rebalance_delay_ms(mc, delay_ms)

    # -- broker faults -------------------------------------------------------------------------

    def broker_down(self, broker_id: int) -> None:
        """Take a broker down: close its client connections and refuse new ones.

        Existing connections see an orderly close (EOF). The port stays reserved (bound, not
        listening), so new connects are refused at once rather than timing out. Metadata
        responses leave the broker out of their broker list, but leadership does NOT move:
        partitions it leads still name it as leader (an id the client has no address for)
        until :meth:`broker_up` or :meth:`set_partition_leader`. Downing a broker that is
        already down changes nothing.
        """
        with self._live() as mc:
            self._require_broker(broker_id)
            self._lib.mock_broker_set_down(mc, broker_id)
            self._down.add(broker_id)

    def broker_up(self, broker_id: int) -> None:
        """Let a downed broker accept connections again, on the same port as before."""
        with self._live() as mc:
            self._require_broker(broker_id)
            self._lib.mock_broker_set_up(mc, broker_id)
            self._down.discard(broker_id)

    def set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response from ``broker_id`` by ``rtt_ms`` milliseconds (0 to clear).

        The delay applies to responses, not to connection setup: TCP connects stay instant.
        """
        _require_int("rtt_ms", rtt_ms, 0, _INT32_MAX)
        with self._live() as mc:
            self._require_broker(broker_id)
            self._lib.mock_broker_set_rtt(mc, broker_id, rtt_ms)

    def set_rtt_all(self, rtt_ms: int) -> None:
        """:meth:`set_rtt` for every broker at once: one command to the cluster thread
        (broker id -1), where a call per broker costs a round trip each -- minutes on a
        1,000-broker cluster."""
        _require_int("rtt_ms", rtt_ms, 0, _INT32_MAX)
        with self._live() as mc:
            self._lib.mock_broker_set_rtt(mc, -1, rtt_ms)

    def set_host_port(self, broker_id: int, host: str, port: int) -> None:
        """Change the (host, port) ``broker_id`` advertises in Metadata responses.

        Only the advertisement changes -- the broker keeps listening where it was (see
        :meth:`listeners`) and :attr:`bootstrap_servers` is unchanged -- so clients that follow
        the new metadata connect to ``host:port``, which may be nothing at all. That is the
        point: it models a broker whose advertised listener moved or is wrong. Raises
        :class:`EmbeddedClusterError` if the loaded librdkafka lacks the function.
        """
        _require_text("host", host, max_bytes=_MAX_ADVERTISED_HOST_BYTES)
        _require_int("port", port, 1, 65535)
        if not self._lib.has_set_host_port:
            raise EmbeddedClusterError(
                f"librdkafka {self._lib.version} at {self._lib.path!r} does not export "
                "'rd_kafka_mock_broker_set_host_port'"
            )
        with self._live() as mc:
            # The C function returns void and ignores unknown ids; validation is ours.
            self._require_broker(broker_id)
            self._lib.mock_broker_set_host_port(mc, broker_id, host, port)
            self._advertised[broker_id] = (host, port)

    # -- request tracking ----------------------------------------------------------------------

    def requests(self) -> list[MockRequest]:
        """Every request received since start or :meth:`clear_requests`, in arrival order.

        Requires ``track_requests=True`` (the default). Each call copies the record; it does
        not drain it.
        """
        with self._live() as mc:
            self._require_tracking()
            return [
                MockRequest(r.broker_id, r.api_key, r.timestamp_us)
                for r in self._lib.mock_get_requests(mc)
            ]

    def clear_requests(self) -> None:
        """Forget the requests recorded so far (tracking continues)."""
        with self._live() as mc:
            self._require_tracking()
            self._lib.mock_clear_requests(mc)

    def _require_tracking(self) -> None:
        if not self._tracking:
            raise EmbeddedClusterError(
                "request tracking is off for this MockCluster (created with track_requests=False)"
            )
