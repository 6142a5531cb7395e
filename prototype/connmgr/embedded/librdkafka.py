"""Locate and load librdkafka, and give the handful of C functions we use typed Python faces.

Signatures were checked against librdkafka's own headers (confluentinc/librdkafka), not
guessed:

* ``src/rdkafka_mock.h`` -- the 2.x revision that declares
  ``rd_kafka_mock_broker_set_host_port`` (returns ``void``),
  ``rd_kafka_mock_broker_add``/``_decommission``, ``rd_kafka_mock_request_destroy_array`` and
  ``int64_t rd_kafka_mock_request_timestamp`` (microseconds), cross-checked with the
  definitions in ``src/rdkafka_mock.c``. Every function used here is exported by the
  librdkafka 2.16.0 bundled with ``confluent-kafka==2.16.1`` (checked with ``nm -D``; 2.16
  adds share-group functions we do not use). Older headers declared the timestamp as
  ``rd_ts_t`` (also ``int64_t``) and lacked ``set_host_port``/``destroy_array``, hence those
  are optional here.
* ``src/rdkafka.h`` -- ``rd_kafka_conf_new``, ``rd_kafka_conf_set`` (returns
  ``rd_kafka_conf_res_t``, ``RD_KAFKA_CONF_OK == 0``), ``rd_kafka_conf_destroy``,
  ``rd_kafka_new`` (frees ``conf`` only on success), ``rd_kafka_destroy``,
  ``rd_kafka_err2str``, ``rd_kafka_version_str``, and for a client handle made elsewhere
  (confluent-kafka's) ``rd_kafka_name`` and ``rd_kafka_set_log_level``.

The mock API is marked experimental by librdkafka (no API/ABI guarantee), which is why every
symbol is looked up by name at load time and a missing one is reported by name.

Pointers cross this boundary as plain integers wrapped in :class:`typing.NewType` aliases so the
type checker keeps an ``rd_kafka_t *`` apart from an ``rd_kafka_mock_cluster_t *``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NewType

from connmgr.embedded.errors import EmbeddedClusterError

__all__ = [
    "LIBRARY_ENV_VAR",
    "LibRdKafka",
    "MockClusterPtr",
    "RdKafkaPtr",
    "RequestRecord",
    "find_librdkafka",
    "load_librdkafka",
]

LIBRARY_ENV_VAR = "CONNMGR_LIBRDKAFKA"
"""Environment variable that, when set, names the librdkafka shared library to load."""

RdKafkaPtr = NewType("RdKafkaPtr", int)
"""An ``rd_kafka_t *`` as an address; never zero."""

MockClusterPtr = NewType("MockClusterPtr", int)
"""An ``rd_kafka_mock_cluster_t *`` as an address; never zero."""

_RD_KAFKA_PRODUCER = 0  # rd_kafka_type_t: RD_KAFKA_PRODUCER
_RD_KAFKA_CONF_OK = 0  # rd_kafka_conf_res_t: RD_KAFKA_CONF_OK
_ERRSTR_SIZE = 512

_i16 = ctypes.c_int16
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
_int = ctypes.c_int
_ptr = ctypes.c_void_p
_str = ctypes.c_char_p
_size = ctypes.c_size_t
_ptr_array = ctypes.POINTER(ctypes.c_void_p)
_resp_err = ctypes.c_int  # rd_kafka_resp_err_t is a C enum: int-sized.

_CType = Any  # a ctypes type object; typeshed has no single public name for "any ctypes type"


@dataclass(frozen=True, slots=True)
class _Signature:
    restype: _CType
    argtypes: tuple[_CType, ...]
    required: bool = True


# Every function this package calls, with the C prototype it was declared with in the headers.
_SIGNATURES: dict[str, _Signature] = {
    # rdkafka.h: const char *rd_kafka_version_str(void)
    "rd_kafka_version_str": _Signature(_str, ()),
    # rdkafka.h: const char *rd_kafka_err2str(rd_kafka_resp_err_t err)
    "rd_kafka_err2str": _Signature(_str, (_resp_err,)),
    # rdkafka.h: rd_kafka_conf_t *rd_kafka_conf_new(void)
    "rd_kafka_conf_new": _Signature(_ptr, ()),
    # rdkafka.h: rd_kafka_conf_res_t rd_kafka_conf_set(rd_kafka_conf_t *conf, const char *name,
    #                                                   const char *value, char *errstr,
    #                                                   size_t errstr_size)
    "rd_kafka_conf_set": _Signature(_int, (_ptr, _str, _str, _str, _size)),
    # rdkafka.h: void rd_kafka_conf_destroy(rd_kafka_conf_t *conf)
    "rd_kafka_conf_destroy": _Signature(None, (_ptr,)),
    # rdkafka.h: rd_kafka_t *rd_kafka_new(rd_kafka_type_t type, rd_kafka_conf_t *conf,
    #                                      char *errstr, size_t errstr_size)
    "rd_kafka_new": _Signature(_ptr, (_int, _ptr, _str, _size)),
    # rdkafka.h: void rd_kafka_destroy(rd_kafka_t *rk)
    "rd_kafka_destroy": _Signature(None, (_ptr,)),
    # rdkafka.h: const char *rd_kafka_name(const rd_kafka_t *rk)
    "rd_kafka_name": _Signature(_str, (_ptr,), False),
    # rdkafka.h: void rd_kafka_set_log_level(rd_kafka_t *rk, int level) (RD_DEPRECATED, still
    # exported: the one way to change a live handle's log level)
    "rd_kafka_set_log_level": _Signature(None, (_ptr, _int), False),
    # rdkafka_mock.h: rd_kafka_mock_cluster_t *rd_kafka_mock_cluster_new(rd_kafka_t *rk,
    #                                                                     int broker_cnt)
    "rd_kafka_mock_cluster_new": _Signature(_ptr, (_ptr, _int)),
    # rdkafka_mock.h: void rd_kafka_mock_cluster_destroy(rd_kafka_mock_cluster_t *mcluster)
    "rd_kafka_mock_cluster_destroy": _Signature(None, (_ptr,)),
    # rdkafka_mock.h: const char *rd_kafka_mock_cluster_bootstraps(
    #                     const rd_kafka_mock_cluster_t *mcluster)
    "rd_kafka_mock_cluster_bootstraps": _Signature(_str, (_ptr,)),
    # rdkafka_mock.h: rd_kafka_resp_err_t rd_kafka_mock_topic_create(
    #     rd_kafka_mock_cluster_t *mcluster, const char *topic, int partition_cnt,
    #     int replication_factor)
    "rd_kafka_mock_topic_create": _Signature(_resp_err, (_ptr, _str, _int, _int)),
    # rdkafka_mock.h: rd_kafka_resp_err_t rd_kafka_mock_partition_set_leader(
    #     rd_kafka_mock_cluster_t *mcluster, const char *topic, int32_t partition,
    #     int32_t broker_id)
    "rd_kafka_mock_partition_set_leader": _Signature(_resp_err, (_ptr, _str, _i32, _i32)),
    # rdkafka_mock.h: rd_kafka_resp_err_t rd_kafka_mock_coordinator_set(
    #     rd_kafka_mock_cluster_t *mcluster, const char *key_type, const char *key,
    #     int32_t broker_id)
    "rd_kafka_mock_coordinator_set": _Signature(_resp_err, (_ptr, _str, _str, _i32)),
    # rdkafka_mock.h: rd_kafka_resp_err_t rd_kafka_mock_broker_set_down(
    #     rd_kafka_mock_cluster_t *mcluster, int32_t broker_id)
    "rd_kafka_mock_broker_set_down": _Signature(_resp_err, (_ptr, _i32)),
    # rdkafka_mock.h: rd_kafka_resp_err_t rd_kafka_mock_broker_set_up(
    #     rd_kafka_mock_cluster_t *mcluster, int32_t broker_id)
    "rd_kafka_mock_broker_set_up": _Signature(_resp_err, (_ptr, _i32)),
    # rdkafka_mock.h: rd_kafka_resp_err_t rd_kafka_mock_broker_set_rtt(
    #     rd_kafka_mock_cluster_t *mcluster, int32_t broker_id, int rtt_ms)
    "rd_kafka_mock_broker_set_rtt": _Signature(_resp_err, (_ptr, _i32, _int)),
    # rdkafka_mock.h: void rd_kafka_mock_broker_set_host_port(
    #     rd_kafka_mock_cluster_t *mcluster, int32_t broker_id, const char *host, int port)
    "rd_kafka_mock_broker_set_host_port": _Signature(None, (_ptr, _i32, _str, _int), False),
    # rdkafka_mock.h: void rd_kafka_mock_group_initial_rebalance_delay_ms(
    #     rd_kafka_mock_cluster_t *mcluster, int32_t delay_ms)
    "rd_kafka_mock_group_initial_rebalance_delay_ms": _Signature(None, (_ptr, _i32), False),
    # rdkafka_mock.h: void rd_kafka_mock_start_request_tracking(
    #     rd_kafka_mock_cluster_t *mcluster)
    "rd_kafka_mock_start_request_tracking": _Signature(None, (_ptr,), False),
    # rdkafka_mock.h: void rd_kafka_mock_stop_request_tracking(rd_kafka_mock_cluster_t *)
    "rd_kafka_mock_stop_request_tracking": _Signature(None, (_ptr,), False),
    # rdkafka_mock.h: rd_kafka_mock_request_t **rd_kafka_mock_get_requests(
    #     rd_kafka_mock_cluster_t *mcluster, size_t *cntp)
    "rd_kafka_mock_get_requests": _Signature(_ptr_array, (_ptr, ctypes.POINTER(_size)), False),
    # rdkafka_mock.h: void rd_kafka_mock_clear_requests(rd_kafka_mock_cluster_t *mcluster)
    "rd_kafka_mock_clear_requests": _Signature(None, (_ptr,), False),
    # rdkafka_mock.h: int32_t rd_kafka_mock_request_id(rd_kafka_mock_request_t *mreq)
    "rd_kafka_mock_request_id": _Signature(_i32, (_ptr,), False),
    # rdkafka_mock.h: int16_t rd_kafka_mock_request_api_key(rd_kafka_mock_request_t *mreq)
    "rd_kafka_mock_request_api_key": _Signature(_i16, (_ptr,), False),
    # rdkafka_mock.h: int64_t rd_kafka_mock_request_timestamp(rd_kafka_mock_request_t *mreq)
    "rd_kafka_mock_request_timestamp": _Signature(_i64, (_ptr,), False),
    # rdkafka_mock.h: void rd_kafka_mock_request_destroy_array(
    #     rd_kafka_mock_request_t **mreqs, size_t mreq_cnt)
    "rd_kafka_mock_request_destroy_array": _Signature(None, (_ptr_array, _size), False),
}

_REQUEST_TRACKING_SYMBOLS = (
    "rd_kafka_mock_start_request_tracking",
    "rd_kafka_mock_stop_request_tracking",
    "rd_kafka_mock_get_requests",
    "rd_kafka_mock_clear_requests",
    "rd_kafka_mock_request_id",
    "rd_kafka_mock_request_api_key",
    "rd_kafka_mock_request_timestamp",
    "rd_kafka_mock_request_destroy_array",
)


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request the mock cluster saw, as copied out of librdkafka."""

    broker_id: int
    api_key: int
    timestamp_us: int


def _wheel_candidates() -> list[Path]:
    """Where the confluent-kafka wheels put their bundled librdkafka, without importing it.

    auditwheel (Linux) and delvewheel (Windows) put it in ``confluent_kafka.libs`` beside the
    package; delocate (macOS) in ``confluent_kafka/.dylibs``. ``find_spec`` locates the package
    without running its ``__init__`` (which would load the C extension for nothing).
    """
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is None or not spec.submodule_search_locations:
        return []
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    patterns = (
        (package_dir.parent / "confluent_kafka.libs", "librdkafka*.so*"),
        (package_dir.parent / "confluent_kafka.libs", "librdkafka*.dll"),
        (package_dir / ".dylibs", "librdkafka*.dylib"),
    )
    found: list[Path] = []
    for directory, pattern in patterns:
        if directory.is_dir():
            found.extend(sorted(directory.glob(pattern)))
    return found


def find_librdkafka() -> Path:
    """Return the path of the librdkafka shared library to load.

    Order: the file named by ``$CONNMGR_LIBRDKAFKA``; the copy bundled in the confluent-kafka
    wheel; a system ``librdkafka`` found by :func:`ctypes.util.find_library`. Raises
    :class:`EmbeddedClusterError` listing what was tried when none is found.
    """
    override = os.environ.get(LIBRARY_ENV_VAR)
    if override:
        return Path(override)
    candidates = _wheel_candidates()
    if candidates:
        return candidates[0]
    system = ctypes.util.find_library("rdkafka")
    if system:
        return Path(system)
    raise EmbeddedClusterError(
        "librdkafka shared library not found: looked for the copy bundled with confluent-kafka "
        "(confluent_kafka.libs/librdkafka-*.so.1 next to the confluent_kafka package) and for a "
        f"system librdkafka; install confluent-kafka or set {LIBRARY_ENV_VAR} to the library path"
    )


def load_librdkafka(path: str | os.PathLike[str] | None = None) -> LibRdKafka:
    """Load librdkafka from ``path`` (default: :func:`find_librdkafka`) and declare its types.

    Loading is cached per resolved path, so every caller shares one :class:`LibRdKafka`.
    Raises :class:`EmbeddedClusterError` naming the path if the file does not exist or cannot
    be loaded, and naming the symbol if a required function is missing.
    """
    resolved = Path(path) if path is not None else find_librdkafka()
    if not resolved.is_absolute() and os.sep not in str(resolved) and not resolved.exists():
        # A bare soname such as "librdkafka.so.1" (what find_library returns on Linux) is
        # resolved by the dynamic loader's search path, not relative to the working directory.
        return _load_cached(str(resolved))
    if not resolved.exists():
        raise EmbeddedClusterError(f"librdkafka shared library {str(resolved)!r} does not exist")
    return _load_cached(str(resolved.resolve()))


@functools.cache
def _load_cached(path: str) -> LibRdKafka:
    return LibRdKafka(path)


class LibRdKafka:
    """A loaded librdkafka with ``argtypes``/``restype`` declared for every function we use.

    Methods are thin and synchronous; those wrapping a ``rd_kafka_resp_err_t`` function raise
    :class:`EmbeddedClusterError` (with ``rd_kafka_err2str`` text and the numeric ``code``) on
    any non-zero result. Pointers passed in must be live: this layer does no lifetime tracking
    (that is :class:`~connmgr.embedded.mock_cluster.MockCluster`'s job).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._dll = ctypes.CDLL(path)
        except OSError as exc:
            raise EmbeddedClusterError(
                f"cannot load librdkafka shared library {path!r}: {exc}"
            ) from exc
        self._funcs: dict[str, Any] = {}
        for name, sig in _SIGNATURES.items():
            try:
                func = getattr(self._dll, name)
            except AttributeError:
                if sig.required:
                    raise EmbeddedClusterError(
                        f"librdkafka at {path!r} does not export required symbol {name!r} "
                        "(is it older than the mock-cluster API this package needs?)"
                    ) from None
                continue
            func.restype = sig.restype
            func.argtypes = sig.argtypes
            self._funcs[name] = func
        self.version: str = self.version_str()

    def __repr__(self) -> str:
        return f"LibRdKafka(version={self.version!r}, path={self.path!r})"

    # -- capability checks ---------------------------------------------------------------------

    def has(self, symbol: str) -> bool:
        """True when ``symbol`` (one of the functions declared here) is exported."""
        return symbol in self._funcs

    @property
    def has_set_host_port(self) -> bool:
        """True when ``rd_kafka_mock_broker_set_host_port`` is available."""
        return self.has("rd_kafka_mock_broker_set_host_port")

    @property
    def has_request_tracking(self) -> bool:
        """True when every request-tracking function (start/get/clear/accessors) is available."""
        return all(self.has(name) for name in _REQUEST_TRACKING_SYMBOLS)

    def _func(self, name: str) -> Any:
        try:
            return self._funcs[name]
        except KeyError:
            raise EmbeddedClusterError(
                f"librdkafka {self.version} at {self.path!r} does not export {name!r}"
            ) from None

    def _check(self, err: int, call: str) -> None:
        if err != 0:
            raise EmbeddedClusterError(
                f"{call} failed: {self.err2str(err)} (rd_kafka_resp_err_t {err})", code=err
            )

    # -- rdkafka.h -----------------------------------------------------------------------------

    def version_str(self) -> str:
        """The library's version string, e.g. ``"2.16.0"``."""
        raw: bytes | None = self._func("rd_kafka_version_str")()
        return raw.decode() if raw else "unknown"

    def err2str(self, err: int) -> str:
        """``rd_kafka_err2str``: a human-readable text for an ``rd_kafka_resp_err_t``."""
        raw: bytes | None = self._func("rd_kafka_err2str")(err)
        return raw.decode(errors="replace") if raw else f"error {err}"

    def new_producer(self, config: Mapping[str, str]) -> RdKafkaPtr:
        """Create a producer ``rd_kafka_t`` with ``config``; raises with librdkafka's errstr."""
        conf = self._func("rd_kafka_conf_new")()
        if not conf:
            raise EmbeddedClusterError("rd_kafka_conf_new() returned NULL")
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        for key, value in config.items():
            res = self._func("rd_kafka_conf_set")(
                conf, key.encode(), value.encode(), errstr, _ERRSTR_SIZE
            )
            if res != _RD_KAFKA_CONF_OK:
                self._func("rd_kafka_conf_destroy")(conf)
                raise EmbeddedClusterError(
                    f"rd_kafka_conf_set({key!r}, {value!r}) failed: "
                    f"{errstr.value.decode(errors='replace')}"
                )
        rk: int | None = self._func("rd_kafka_new")(_RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_SIZE)
        if not rk:
            # rd_kafka_new() takes ownership of conf only when it succeeds.
            self._func("rd_kafka_conf_destroy")(conf)
            raise EmbeddedClusterError(
                f"rd_kafka_new(RD_KAFKA_PRODUCER) failed: {errstr.value.decode(errors='replace')}"
            )
        return RdKafkaPtr(rk)

    def destroy(self, rk: RdKafkaPtr) -> None:
        """``rd_kafka_destroy``: blocks until the handle's threads have stopped."""
        self._func("rd_kafka_destroy")(rk)

    def name(self, rk: RdKafkaPtr) -> str:
        """``rd_kafka_name``: the handle's name, e.g. ``"rdkafka#consumer-1"``."""
        raw: bytes | None = self._func("rd_kafka_name")(rk)
        return raw.decode(errors="replace") if raw else ""

    def set_log_level(self, rk: RdKafkaPtr, level: int) -> None:
        """``rd_kafka_set_log_level``: lines above syslog ``level`` are no longer logged
        (debug lines are level 7; 0 silences the handle)."""
        self._func("rd_kafka_set_log_level")(rk, level)

    # -- rdkafka_mock.h ------------------------------------------------------------------------

    def mock_cluster_new(self, rk: RdKafkaPtr, broker_cnt: int) -> MockClusterPtr:
        """Create a mock cluster of ``broker_cnt`` brokers (ids 1..broker_cnt) living on ``rk``.

        Warning: if librdkafka fails half-way (e.g. out of file descriptors) it asserts and
        aborts the process; callers should make sure resources suffice beforehand.
        """
        mc: int | None = self._func("rd_kafka_mock_cluster_new")(rk, broker_cnt)
        if not mc:
            raise EmbeddedClusterError(f"rd_kafka_mock_cluster_new(rk, {broker_cnt}) returned NULL")
        return MockClusterPtr(mc)

    def mock_cluster_destroy(self, mc: MockClusterPtr) -> None:
        """``rd_kafka_mock_cluster_destroy``: closes every listener and connection, joins."""
        self._func("rd_kafka_mock_cluster_destroy")(mc)

    def mock_cluster_bootstraps(self, mc: MockClusterPtr) -> str:
        """The cluster's ``bootstrap.servers`` list as built at creation time."""
        raw: bytes | None = self._func("rd_kafka_mock_cluster_bootstraps")(mc)
        if raw is None:
            raise EmbeddedClusterError("rd_kafka_mock_cluster_bootstraps() returned NULL")
        return raw.decode()

    def mock_topic_create(
        self, mc: MockClusterPtr, topic: str, partition_cnt: int, replication_factor: int
    ) -> None:
        """``rd_kafka_mock_topic_create``; raises on a non-zero error code."""
        err: int = self._func("rd_kafka_mock_topic_create")(
            mc, topic.encode(), partition_cnt, replication_factor
        )
        self._check(
            err, f"rd_kafka_mock_topic_create({topic!r}, {partition_cnt}, {replication_factor})"
        )

    def mock_partition_set_leader(
        self, mc: MockClusterPtr, topic: str, partition: int, broker_id: int
    ) -> None:
        """``rd_kafka_mock_partition_set_leader``; raises on a non-zero error code."""
        err: int = self._func("rd_kafka_mock_partition_set_leader")(
            mc, topic.encode(), partition, broker_id
        )
        self._check(err, f"rd_kafka_mock_partition_set_leader({topic!r}, {partition}, {broker_id})")

    def mock_coordinator_set(
        self, mc: MockClusterPtr, key_type: str, key: str, broker_id: int
    ) -> None:
        """``rd_kafka_mock_coordinator_set``; raises on a non-zero error code."""
        err: int = self._func("rd_kafka_mock_coordinator_set")(
            mc, key_type.encode(), key.encode(), broker_id
        )
        self._check(err, f"rd_kafka_mock_coordinator_set({key_type!r}, {key!r}, {broker_id})")

    def mock_broker_set_down(self, mc: MockClusterPtr, broker_id: int) -> None:
        """``rd_kafka_mock_broker_set_down``; raises on a non-zero error code."""
        err: int = self._func("rd_kafka_mock_broker_set_down")(mc, broker_id)
        self._check(err, f"rd_kafka_mock_broker_set_down({broker_id})")

    def mock_broker_set_up(self, mc: MockClusterPtr, broker_id: int) -> None:
        """``rd_kafka_mock_broker_set_up``; raises on a non-zero error code."""
        err: int = self._func("rd_kafka_mock_broker_set_up")(mc, broker_id)
        self._check(err, f"rd_kafka_mock_broker_set_up({broker_id})")

    def mock_broker_set_rtt(self, mc: MockClusterPtr, broker_id: int, rtt_ms: int) -> None:
        """``rd_kafka_mock_broker_set_rtt``; raises on a non-zero error code."""
        err: int = self._func("rd_kafka_mock_broker_set_rtt")(mc, broker_id, rtt_ms)
        self._check(err, f"rd_kafka_mock_broker_set_rtt({broker_id}, {rtt_ms})")

    def mock_broker_set_host_port(
        self, mc: MockClusterPtr, broker_id: int, host: str, port: int
    ) -> None:
        """``rd_kafka_mock_broker_set_host_port``: returns ``void``, so nothing is checked.

        It silently ignores an unknown ``broker_id`` and truncates ``host`` to 127 bytes;
        validation is the caller's job.
        """
        self._func("rd_kafka_mock_broker_set_host_port")(mc, broker_id, host.encode(), port)

    def mock_group_initial_rebalance_delay_ms(self, mc: MockClusterPtr, delay_ms: int) -> None:
        """Set the cluster-wide ``group.initial.rebalance.delay.ms`` (librdkafka default 3000)."""
        self._func("rd_kafka_mock_group_initial_rebalance_delay_ms")(mc, delay_ms)

    def mock_start_request_tracking(self, mc: MockClusterPtr) -> None:
        """Start recording requests; librdkafka also clears anything recorded before."""
        self._func("rd_kafka_mock_start_request_tracking")(mc)

    def mock_stop_request_tracking(self, mc: MockClusterPtr) -> None:
        """Stop recording requests (this librdkafka also clears the recorded list)."""
        self._func("rd_kafka_mock_stop_request_tracking")(mc)

    def mock_clear_requests(self, mc: MockClusterPtr) -> None:
        """Forget every request recorded so far."""
        self._func("rd_kafka_mock_clear_requests")(mc)

    def mock_get_requests(self, mc: MockClusterPtr) -> list[RequestRecord]:
        """Copy the recorded requests out, oldest first, and free librdkafka's copy."""
        count = _size(0)
        array = self._func("rd_kafka_mock_get_requests")(mc, ctypes.byref(count))
        n = int(count.value)
        if not array or n == 0:
            # librdkafka returns NULL for an empty list; nothing to free.
            return []
        try:
            request_id = self._func("rd_kafka_mock_request_id")
            api_key = self._func("rd_kafka_mock_request_api_key")
            timestamp = self._func("rd_kafka_mock_request_timestamp")
            items: Sequence[int | None] = array[:n]
            return [
                RequestRecord(
                    broker_id=int(request_id(item)),
                    api_key=int(api_key(item)),
                    timestamp_us=int(timestamp(item)),
                )
                for item in items
            ]
        finally:
            self._func("rd_kafka_mock_request_destroy_array")(array, n)
