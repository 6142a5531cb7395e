"""Round-trip time injected in user space: TCP forwarders that hold every chunk for rtt/2 in
each direction.

The kernel here has no ``netem``, so a delay cannot be put on the loopback device; instead a
client dials a forwarder, which dials the real listener and relays bytes both ways, each chunk
released ``rtt/2`` after it arrived. Order is kept: each direction is a FIFO queue of
(due time, chunk) drained by one writer, so lowering the RTT mid-stream never lets a later
chunk overtake an earlier one (it waits behind it instead).

What is *not* delayed: the TCP handshake. The client's kernel completes it with the
forwarder's listening socket at once, so a measured connect time lacks the one round trip a
real network adds for SYN/SYN-ACK (add it when pricing a connection). Everything after it --
TLS, SASL, Kafka requests -- pays the injected RTT.

All forwarders of a :class:`DelayNetwork` share one thread running its own asyncio loop, so
they work whatever loop (or none) the client uses, and one ``close()`` ends them all: the
listening sockets, every relayed connection (both sides), the loop and the thread.

Every accepted connection is also logged with its accept and close instants
(:meth:`DelayNetwork.connections`), so a benchmark can count dials per second at each broker
and the connections open at once, not only how many there were. A tap
(:meth:`DelayNetwork.set_tap`) can see the bytes each relayed connection carries, e.g. to
decode the Kafka requests of a PLAINTEXT listener (:mod:`~connmgr_evidence.realkafka.wire`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final, Protocol, Self, TypeVar

__all__ = ["ConnectionTap", "DelayNetwork", "RelayedConnection", "TapFactory"]

T = TypeVar("T")

_CHUNK: Final = 65536
_EOF: Final = b""
"""Queued after the last chunk of a direction: the writer closes the connection there."""


@dataclass(frozen=True, slots=True)
class RelayedConnection:
    """One connection a forwarder accepted: when (:func:`time.monotonic`, seconds), and when
    its relay ended (both sides closed; None while it is open)."""

    accepted_at: float
    closed_at: float | None


class ConnectionTap(Protocol):
    """Sees one relayed connection's bytes: each chunk as it is delivered, with the
    :func:`time.monotonic` instant. Called on the forwarders' thread; must not raise or block
    (a tap that raised would end the relay)."""

    def from_client(self, at: float, chunk: bytes) -> None: ...

    def from_broker(self, at: float, chunk: bytes) -> None: ...


TapFactory = Callable[[int, float], ConnectionTap | None]
"""(listening port, accept instant) of a new connection -> its tap, or None for no tap."""


class _Logged:
    """A logged connection while it lives (the loop's thread writes ``closed_at`` once)."""

    __slots__ = ("accepted_at", "closed_at")

    def __init__(self, accepted_at: float) -> None:
        self.accepted_at = accepted_at
        self.closed_at: float | None = None


class DelayNetwork:
    """TCP forwarders on ``host`` adding ``rtt_ms`` of round trip (``rtt_ms / 2`` each way).

    :meth:`forward` opens one forwarder to a target and returns the port it listens on,
    :meth:`unforward` closes one again (its listening socket and its relayed connections);
    :meth:`set_rtt` changes the delay for chunks that arrive from then on (thread-safe);
    :meth:`close` stops everything and is idempotent. When either side of a relayed
    connection closes (EOF or error), the other side is closed once what was already in
    flight towards it has been delivered.

    Use as a context manager or call :meth:`start` / :meth:`close`.
    """

    def __init__(self, rtt_ms: float = 0.0, *, host: str = "127.0.0.1") -> None:
        self._host = host
        self._rtt_ms = 0.0
        self.set_rtt(rtt_ms)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: dict[int, asyncio.Server] = {}
        """Listening port -> its forwarder's server."""
        self._relays: set[asyncio.Task[None]] = set()
        self._relays_by_port: dict[int, set[asyncio.Task[None]]] = {}
        self._accepted: dict[int, int] = {}
        """Listening port -> connections its forwarder has accepted (kept after unforward)."""
        self._log: dict[int, list[_Logged]] = {}
        """Listening port -> every connection it accepted, in accept order (kept after
        unforward). Appended on the loop's thread only; read as a copy from any thread."""
        self._tap: TapFactory | None = None
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the loop's thread (named ``connmgr-delay``); forwarders can then be added."""
        if self._thread is not None:
            return self
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="connmgr-delay", daemon=True)
        self._thread.start()
        ready.wait()
        return self

    def close(self, timeout_s: float = 5.0) -> None:
        """Close every listening socket and relayed connection, stop the loop, join the
        thread. Idempotent; safe if never started."""
        if self._closed:
            return
        self._closed = True
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(TimeoutError, RuntimeError):
            self._call(self._shutdown(), timeout_s)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout_s)
        if not thread.is_alive():
            loop.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def thread(self) -> threading.Thread | None:
        """The loop's thread (None before :meth:`start`), for checking nothing outlives
        :meth:`close`."""
        return self._thread

    # -- configuration --------------------------------------------------------------------------

    @property
    def rtt_ms(self) -> float:
        return self._rtt_ms

    def set_rtt(self, rtt_ms: float) -> None:
        """Delay chunks arriving from now on by ``rtt_ms / 2`` each way (``rtt_ms >= 0``)."""
        if not rtt_ms >= 0.0:
            raise ValueError(f"rtt_ms must be >= 0, got {rtt_ms!r}")
        # A float assignment is atomic; relays read it once per chunk.
        self._rtt_ms = float(rtt_ms)

    def set_tap(self, factory: TapFactory | None) -> None:
        """Give every connection accepted from now on the tap ``factory(port, accepted_at)``
        returns (None: none); ``None`` stops tapping new connections. Connections already
        relayed keep the tap they got."""
        self._tap = factory  # an attribute assignment: atomic, read once per accept

    def forward(self, target_host: str, target_port: int) -> int:
        """A new forwarder to ``target_host:target_port``; returns its listening port.

        The target is dialled when a client connects, so it need not be listening yet.
        """
        if self._closed:
            raise RuntimeError("forward() on a closed DelayNetwork")
        self.start()
        return self._call(self._listen(target_host, target_port), 10.0)

    def unforward(self, port: int) -> None:
        """Close the forwarder listening on ``port`` and every connection it relays: from
        then on a dial of ``port`` is refused, as a dial of an address nothing listens on.
        Raises :class:`KeyError` for a port no open forwarder of this network listens on."""
        if self._closed or port not in self._servers:
            raise KeyError(f"no forwarder of this network listens on port {port}")
        self._call(self._unlisten(port), 10.0)

    def accepted(self, port: int) -> int:
        """Connections the forwarder listening on ``port`` has accepted so far: every TCP
        connection a client made to it (0 for a port it never listened on)."""
        return self._accepted.get(port, 0)

    def connections(self, port: int) -> tuple[RelayedConnection, ...]:
        """Every connection the forwarder listening on ``port`` has accepted so far, in accept
        order, with its accept and close instants (:func:`time.monotonic`); empty for a port
        it never listened on. ``len`` of it is :meth:`accepted` (read at the same moment)."""
        # A copy of the list (appends are atomic under the GIL), then of each entry's fields.
        return tuple(
            RelayedConnection(e.accepted_at, e.closed_at) for e in list(self._log.get(port, ()))
        )

    @property
    def open_relays(self) -> int:
        """Relayed connections currently open (each is a client and an upstream socket)."""
        return len(self._relays)

    # -- inside the loop ------------------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    async def _listen(self, target_host: str, target_port: int) -> int:
        relays: set[asyncio.Task[None]] = set()
        listening: list[int] = []

        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            (port,) = listening
            logged = _Logged(time.monotonic())
            factory = self._tap
            tap = None if factory is None else factory(port, logged.accepted_at)
            self._log.setdefault(port, []).append(logged)
            self._accepted[port] = self._accepted.get(port, 0) + 1
            task = asyncio.current_task()
            assert task is not None
            self._relays.add(task)
            relays.add(task)
            try:
                await self._relay(reader, writer, target_host, target_port, tap)
            finally:
                logged.closed_at = time.monotonic()
                self._relays.discard(task)
                relays.discard(task)

        server = await asyncio.start_server(on_client, self._host, 0)
        port = int(server.sockets[0].getsockname()[1])
        listening.append(port)
        self._servers[port] = server
        self._relays_by_port[port] = relays
        return port

    async def _unlisten(self, port: int) -> None:
        server = self._servers.pop(port)
        relays = self._relays_by_port.pop(port)
        server.close()
        for task in list(relays):
            task.cancel()
        await asyncio.gather(*relays, return_exceptions=True)
        await server.wait_closed()

    async def _relay(
        self,
        client_reader: asyncio.StreamReader,
        client_writer: asyncio.StreamWriter,
        target_host: str,
        target_port: int,
        tap: ConnectionTap | None = None,
    ) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                target_host, target_port
            )
        except OSError:
            client_writer.close()
            return
        directions = [
            asyncio.create_task(
                self._direction(client_reader, upstream_writer, tap.from_client if tap else None)
            ),
            asyncio.create_task(
                self._direction(upstream_reader, client_writer, tap.from_broker if tap else None)
            ),
        ]
        try:
            # One direction ending (its EOF delivered, or an error) ends the connection.
            await asyncio.wait(directions, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in directions:
                task.cancel()
            for writer in (client_writer, upstream_writer):
                writer.close()
            await asyncio.gather(*directions, return_exceptions=True)
            for writer in (client_writer, upstream_writer):
                with contextlib.suppress(OSError):
                    await writer.wait_closed()

    async def _direction(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        seen: Callable[[float, bytes], None] | None = None,
    ) -> None:
        """Relay ``reader`` to ``writer``, each chunk held until its due time and handed to
        ``seen`` once written; returns after delivering the EOF (or on an error either side)."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, chunk = await queue.get()
                # Sleep may end a hair early on a coarse clock: loop until really due, so the
                # injected delay is a lower bound.
                while (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                if chunk == _EOF:
                    return
                writer.write(chunk)
                if seen is not None:
                    seen(time.monotonic(), chunk)
                await writer.drain()

        async def read() -> None:
            while True:
                try:
                    chunk = await reader.read(_CHUNK)
                except OSError:
                    chunk = _EOF
                queue.put_nowait((time.monotonic() + self._rtt_ms / 2000.0, chunk))
                if chunk == _EOF:
                    return

        reading = asyncio.create_task(read())
        delivering = asyncio.create_task(deliver())
        try:
            # The writer failing ends the direction at once; the reader ending (EOF queued)
            # leaves the writer to deliver what is in flight, then the EOF.
            await asyncio.wait([reading, delivering], return_when=asyncio.FIRST_COMPLETED)
            if not delivering.done():
                await delivering
        finally:
            for task in (reading, delivering):
                task.cancel()
            await asyncio.gather(reading, delivering, return_exceptions=True)

    async def _shutdown(self) -> None:
        for server in self._servers.values():
            server.close()
        for task in list(self._relays):
            task.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)
        for server in self._servers.values():
            await server.wait_closed()
        self._servers.clear()
        self._relays_by_port.clear()
