"""A compatibility proxy in front of the embedded mock cluster, for clients newer than the
requests librdkafka's mock parses (kafka-clients 4.x).

librdkafka's mock serves the request versions librdkafka itself sends. kafka-clients 4.4 fails
against it in four places (found with the Java probe, each pinned by a test in
``tests/java/test_probe.py``): an ApiVersions v3+ request gets a malformed UNSUPPORTED_VERSION
answer that the client reads as a ~20-minute throttle, and JoinGroup v6, SyncGroup v4 and
LeaveGroup v3+ are misparsed. The proxy forwards every byte unchanged, one upstream connection
per client connection (so connection counts are the client's own), except ApiVersions
responses: the malformed one is re-encoded as KIP-511 says, and the advertised maximum of those
three APIs is lowered, so the client itself picks versions the mock parses. Brokers are told to
advertise the proxy, so metadata leads clients through it.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Mapping

from connmgr.core.events import Api
from connmgr.embedded.mock_cluster import MockCluster

Address = tuple[str, int]


MOCK_API_VERSIONS_MAX = 2
"""librdkafka's mock answers ApiVersions v0-v2 only (its handler table: {0, 2, flexver 3})."""

MOCK_PARSE_CAPS: Mapping[int, int] = {
    # JoinGroup v6 (flexible): the mock reads the protocol count as an INT32 where v6 has a
    # compact-array varint, reads 50754145, and drops the connection ("ProtocolCnt > 1000").
    int(Api.JOIN_GROUP): 5,
    # SyncGroup v4 (flexible): the mock runs out of bytes parsing it ("Protocol read buffer
    # underflow for SyncGroup v4") and drops the connection.
    int(Api.SYNC_GROUP): 3,
    # LeaveGroup v3+ (batched members): the mock's response has no valid members array; the
    # 4.x client fails close() with "non-nullable field members was serialized as null".
    int(Api.LEAVE_GROUP): 2,
}
"""Highest version of each API the mock parses correctly, where it advertises more."""


class MockCompatShim:
    """A TCP proxy per mock broker that fixes the mock's ApiVersions answers for new clients.

    For each broker a listener on 127.0.0.1 forwards, byte for byte and one upstream connection
    per client connection, to the broker's real listener; the broker is told to advertise the
    proxy (``set_host_port``), so metadata leads clients through it too. Only ApiVersions
    responses change:

    * to a request newer than v2 the mock answers UNSUPPORTED_VERSION with a one-byte entry
      count, no tagged fields and the entry's bytes where a v3+ parser expects throttle_time_ms
      (kafka-clients 4.4 reads 1,179,648 ms and throttles the node for ~20 minutes). The shim
      re-encodes it as KIP-511 says: a v0 body (error, INT32 count, entries), which the client
      reparses as v0 and retries with ApiVersions v2;
    * a successful answer has the maximum of each API in ``caps`` lowered to the cap.

    ``rewrites`` counts the responses changed.
    """

    def __init__(self, cluster: MockCluster, caps: Mapping[int, int]) -> None:
        self.caps = dict(caps)
        self.rewrites = 0
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._closed = False
        self.endpoints: dict[int, Address] = {}
        self._listeners: list[socket.socket] = []
        for broker, upstream in cluster.listeners().items():
            listener = socket.create_server(("127.0.0.1", 0), backlog=64)
            self._listeners.append(listener)
            self.endpoints[broker] = ("127.0.0.1", listener.getsockname()[1])
            threading.Thread(target=self._accept, args=(listener, upstream), daemon=True).start()
            cluster.set_host_port(broker, *self.endpoints[broker])

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets = list(self._sockets) + self._listeners
        for s in sockets:
            with contextlib.suppress(OSError):  # a listener, or a peer already gone
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _adopt(self, client: socket.socket, server: socket.socket) -> bool:
        """Track both ends of a new pair so that :meth:`close` closes them; if the shim was
        closed already, close both now and return False. Both or neither: a pair accepted
        while the shim closed once left its upstream end unclosed (a ResourceWarning in a
        later test)."""
        with self._lock:
            if not self._closed:
                self._sockets.update((client, server))
                return True
        client.close()
        server.close()
        return False

    def _accept(self, listener: socket.socket, upstream: Address) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(upstream)
            except OSError:
                client.close()  # the broker is down: the client sees a dropped connection
                continue
            if not self._adopt(client, server):
                return
            pending: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version)
            for args in ((client, server, pending, True), (server, client, pending, False)):
                threading.Thread(target=self._pump, args=args, daemon=True).start()

    def _pump(
        self,
        src: socket.socket,
        dst: socket.socket,
        pending: dict[int, tuple[int, int]],
        requests: bool,
    ) -> None:
        buffer = b""
        try:
            while chunk := src.recv(65536):
                buffer += chunk
                while len(buffer) >= 4:
                    size = struct.unpack(">i", buffer[:4])[0]
                    if len(buffer) < 4 + size:
                        break
                    frame, buffer = buffer[4 : 4 + size], buffer[4 + size :]
                    if requests:
                        key, version, correlation = struct.unpack(">hhi", frame[:8])
                        pending[correlation] = (key, version)
                    else:
                        frame = self._response(frame, pending)
                    dst.sendall(struct.pack(">i", len(frame)) + frame)
        except OSError:
            pass
        finally:
            # Either side closing closes both: one client connection is one broker connection.
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def _response(self, frame: bytes, pending: dict[int, tuple[int, int]]) -> bytes:
        correlation = struct.unpack(">i", frame[:4])[0]
        key, version = pending.pop(correlation, (-1, -1))
        if key != Api.API_VERSIONS:
            return frame
        # ApiVersions responses always use header v0: the body starts after the correlation id.
        error = struct.unpack(">h", frame[4:6])[0]
        if version > MOCK_API_VERSIONS_MAX and error == 35:  # UNSUPPORTED_VERSION
            count = frame[6]  # the mock's one-byte count, entries of (key, min, max) follow
            entries = frame[7 : 7 + 6 * count]
            self.rewrites += 1
            return frame[:4] + struct.pack(">hi", error, count) + entries
        if version <= MOCK_API_VERSIONS_MAX and error == 0:
            body = bytearray(frame)
            count = struct.unpack(">i", frame[6:10])[0]
            for i in range(count):
                at = 10 + 6 * i
                api, _low, high = struct.unpack(">hhh", body[at : at + 6])
                cap = self.caps.get(api)
                if cap is not None and high > cap:
                    body[at + 4 : at + 6] = struct.pack(">h", cap)
                    self.rewrites += 1
            return bytes(body)
        return frame
