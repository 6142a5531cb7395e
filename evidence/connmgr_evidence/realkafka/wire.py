"""What a client said on each PLAINTEXT connection the forwarders relayed: the Kafka requests
read off the wire, with the identity fields of its ``ApiVersions`` requests (KIP-1242).

A forwarder (:mod:`~connmgr_evidence.realkafka.delay`) hands every chunk it relays to a tap, one per
connection (:meth:`DelayNetwork.set_tap`); :class:`ConnectionTrace` is such a tap. It splits
each direction into Kafka frames (a 4-byte size, then the frame) and keeps, per request, its
API key, version, correlation id and client id, and for ``ApiVersions`` v5+ the ``ClusterId``
and ``NodeId`` it carried; per response, the instant it was relayed back to the client. Nothing
else is kept, so a long run's produce traffic costs no memory.

Only a PLAINTEXT listener can be read this way (TLS bytes are opaque): record the forwarders of
``cluster.secure.access("PLAINTEXT")`` (the cluster's ``CLIENT`` listener). A frame that does
not parse as Kafka stops the trace's decoding (``broken``) rather than raising: a tap runs on
the forwarders' loop and must never end a relay.

Sans-IO: :class:`ConnectionTrace` takes instants and bytes; :class:`WireRecorder` only wires
traces to a network's tap and hands them back.
"""

from __future__ import annotations

import contextlib
import struct
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from io import BytesIO
from typing import Final

from connmgr.aio.identity import API_VERSIONS_KEY, CHECK_VERSION, ApiVersionsRequest_v5
from connmgr_evidence.realkafka.delay import DelayNetwork

__all__ = [
    "API_VERSIONS_KEY",
    "METADATA_KEY",
    "ConnectionTrace",
    "WireRecorder",
    "WireRequest",
    "parse_request",
    "recording",
    "split_at_first_metadata",
]

METADATA_KEY: Final = 3
_MAX_FRAME: Final = 100 * 1024 * 1024
"""A size above this (or below 0) is not a Kafka frame: the bytes are not Kafka's."""
_FIRST_FLEXIBLE_API_VERSIONS: Final = 3
"""``ApiVersions`` v3+ uses request header v2 (tagged fields after the client id)."""


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One request as the client sent it (``at``: :func:`time.monotonic` when relayed).

    ``cluster_id`` / ``node_id``: what an ``ApiVersions`` v5+ request carried (KIP-1242's
    identity); None and -1 for every other request and for ``ApiVersions`` below v5."""

    at: float
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    cluster_id: str | None = None
    node_id: int = -1

    @property
    def carries_identity(self) -> bool:
        """An ``ApiVersions`` that asks the broker to check it is node ``node_id`` of
        ``cluster_id`` (both set: the only case a 4.4 broker checks)."""
        return (
            self.api_key == API_VERSIONS_KEY and self.cluster_id is not None and (self.node_id >= 0)
        )


class _Frames:
    """One direction's byte stream cut into Kafka frames (sans-IO)."""

    __slots__ = ("_buffer", "broken")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.broken = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """The frames ``chunk`` completes, in order; none once the stream proved not Kafka."""
        if self.broken:
            return []
        self._buffer += chunk
        frames = []
        while len(self._buffer) >= 4:
            (size,) = struct.unpack_from(">i", self._buffer)
            if not 0 < size <= _MAX_FRAME:
                self.broken = True
                self._buffer.clear()
                break
            if len(self._buffer) < 4 + size:
                break
            frames.append(bytes(self._buffer[4 : 4 + size]))
            del self._buffer[: 4 + size]
        return frames


def _skip_tagged_fields(buffer: BytesIO) -> None:
    def uvarint() -> int:
        value = shift = 0
        while True:
            byte = buffer.read(1)
            if not byte:
                raise ValueError("truncated varint")
            value |= (byte[0] & 0x7F) << shift
            if not byte[0] & 0x80:
                return value
            shift += 7

    for _ in range(uvarint()):
        uvarint()  # the tag
        buffer.read(uvarint())


def parse_request(frame: bytes, at: float) -> WireRequest:
    """One request frame (without its size) -> :class:`WireRequest`. The header is read up to
    the client id for every request; only ``ApiVersions`` is read further (its header's
    tagged fields, then the v5 body). Raises ValueError or struct.error on bytes that are not
    such a request."""
    key, version, correlation = struct.unpack_from(">hhi", frame)
    (length,) = struct.unpack_from(">h", frame, 8)
    client_id = None if length < 0 else frame[10 : 10 + length].decode("utf-8")
    if key != API_VERSIONS_KEY or version < CHECK_VERSION:
        return WireRequest(at, key, version, correlation, client_id)
    buffer = BytesIO(frame[10 + max(length, 0) :])
    if version >= _FIRST_FLEXIBLE_API_VERSIONS:
        _skip_tagged_fields(buffer)
    body = ApiVersionsRequest_v5.SCHEMA.decode(buffer)
    _name, _software, cluster_id, node_id, _tags = body
    return WireRequest(at, key, version, correlation, client_id, cluster_id, int(node_id))


class ConnectionTrace:
    """The Kafka traffic of one relayed connection (a tap for :class:`DelayNetwork`).

    ``broker``: the broker whose forwarder accepted it; ``accepted_at``: when
    (:func:`time.monotonic`). Written on the forwarders' thread, read from any: the lists only
    grow and are read as copies (:meth:`requests`)."""

    def __init__(self, broker: int, accepted_at: float) -> None:
        self.broker = broker
        self.accepted_at = accepted_at
        self._requests: list[WireRequest] = []
        self._answered: dict[int, float] = {}
        self._to_broker = _Frames()
        self._to_client = _Frames()

    def from_client(self, at: float, chunk: bytes) -> None:
        """Bytes the forwarder relayed to the broker at ``at``. Never raises."""
        for frame in self._to_broker.feed(chunk):
            try:
                self._requests.append(parse_request(frame, at))
            except (ValueError, struct.error, UnicodeDecodeError):
                self._to_broker.broken = True
                return

    def from_broker(self, at: float, chunk: bytes) -> None:
        """Bytes the forwarder relayed to the client at ``at``. Never raises."""
        for frame in self._to_client.feed(chunk):
            if len(frame) < 4:
                self._to_client.broken = True
                return
            # Every response header starts with the correlation id.
            (correlation,) = struct.unpack_from(">i", frame)
            self._answered.setdefault(correlation, at)

    @property
    def broken(self) -> bool:
        """Some bytes did not parse as Kafka: what follows them was not decoded."""
        return self._to_broker.broken or self._to_client.broken

    def requests(self) -> tuple[WireRequest, ...]:
        return tuple(self._requests)

    def answered_at(self, request: WireRequest) -> float | None:
        """When the response to ``request`` was relayed to the client (None: not yet)."""
        return self._answered.get(request.correlation_id)

    def api_versions(self) -> tuple[WireRequest, ...]:
        """The ``ApiVersions`` requests sent on this connection, in order."""
        return tuple(r for r in self._requests if r.api_key == API_VERSIONS_KEY)

    def first_answer_at(self, api_key: int) -> float | None:
        """When the first response to a request of ``api_key`` went back to the client."""
        times = [
            t
            for r in self.requests()
            if r.api_key == api_key and (t := self.answered_at(r)) is not None
        ]
        return min(times, default=None)

    def __repr__(self) -> str:
        keys = ",".join(str(r.api_key) for r in self._requests)
        return f"<ConnectionTrace broker={self.broker} at={self.accepted_at:.3f} keys=[{keys}]>"


class WireRecorder:
    """A trace for every connection accepted by the forwarders on ``ports`` (port -> broker)
    while recording; :meth:`traces` returns them in accept order."""

    def __init__(self, ports: Mapping[int, int]) -> None:
        self._ports = dict(ports)
        self._traces: list[ConnectionTrace] = []
        self._lock = threading.Lock()

    def tap(self, port: int, accepted_at: float) -> ConnectionTrace | None:
        broker = self._ports.get(port)
        if broker is None:
            return None
        trace = ConnectionTrace(broker, accepted_at)
        with self._lock:
            self._traces.append(trace)
        return trace

    def traces(
        self, since: float = float("-inf"), until: float = float("inf")
    ) -> list[ConnectionTrace]:
        """The traces of connections accepted in [since, until], in accept order."""
        with self._lock:
            found = list(self._traces)
        return sorted(
            (t for t in found if since <= t.accepted_at <= until), key=lambda t: t.accepted_at
        )


@contextlib.contextmanager
def recording(network: DelayNetwork, ports: Mapping[int, int]) -> Iterator[WireRecorder]:
    """Record the connections of the forwarders on ``ports`` (port -> broker id) of
    ``network`` for the ``with`` block; the tap is removed after it."""
    recorder = WireRecorder(ports)
    network.set_tap(recorder.tap)
    try:
        yield recorder
    finally:
        network.set_tap(None)


def split_at_first_metadata(
    traces: list[ConnectionTrace],
) -> tuple[list[ConnectionTrace], list[ConnectionTrace]]:
    """One client's connections -> (bootstrap, known): those accepted before the first
    ``Metadata`` response on any of them was relayed back to the client, and the rest.

    Until that response a client knows no node id, so every dial before it is a bootstrap
    dial; after it, the Java client's cluster view no longer holds the bootstrap nodes, so
    every dial is to a node that metadata named. (The response is stamped when the forwarder
    wrote it, a little before the client read it, so a bootstrap dial made in that gap would be
    counted as known; for kafka-clients 4.4.0 the split is checked against the identity its
    ``ApiVersions`` carries, which it sends to known nodes only.) With no ``Metadata``
    answered, every connection is a bootstrap connection."""
    answers = [t for tr in traces if (t := tr.first_answer_at(METADATA_KEY)) is not None]
    first = min(answers, default=None)
    if first is None:
        return list(traces), []
    return (
        [t for t in traces if t.accepted_at < first],
        [t for t in traces if t.accepted_at >= first],
    )
