"""The user-space delay forwarders (connmgr_evidence.realkafka.delay) against a local echo
server."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from connmgr_evidence.realkafka.delay import DelayNetwork


@pytest.fixture
def echo_port() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    handlers: list[threading.Thread] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return

            def echo(conn: socket.socket = conn) -> None:
                with conn:
                    while data := conn.recv(65536):
                        conn.sendall(data)

            handler = threading.Thread(target=echo, daemon=True)
            handlers.append(handler)
            handler.start()

    acceptor = threading.Thread(target=serve, daemon=True)
    acceptor.start()
    yield int(server.getsockname()[1])
    server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (close() alone does not)
    server.close()
    acceptor.join(5)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_a_round_trip_takes_at_least_the_rtt(echo_port: int) -> None:
    with DelayNetwork(20.0) as network:
        port = network.forward("127.0.0.1", echo_port)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            for _ in range(3):
                began = time.perf_counter()
                sock.sendall(b"ping")
                assert _recv_exactly(sock, 4) == b"ping"
                assert (time.perf_counter() - began) * 1000.0 >= 20.0


def test_order_is_kept_when_the_rtt_drops_mid_stream(echo_port: int) -> None:
    with DelayNetwork(40.0) as network:
        port = network.forward("127.0.0.1", echo_port)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sent = b""
            for i in range(50):
                if i == 10:
                    network.set_rtt(0.0)  # later chunks are due before earlier ones
                piece = f"<{i}>".encode()
                sock.sendall(piece)
                sent += piece
                time.sleep(0.001)
            assert _recv_exactly(sock, len(sent)) == sent


def test_a_client_closing_closes_the_relay_and_close_leaves_nothing(echo_port: int) -> None:
    network = DelayNetwork(10.0).start()
    port = network.forward("127.0.0.1", echo_port)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"x")
        assert _recv_exactly(sock, 1) == b"x"
        assert network.open_relays == 1
    deadline = time.monotonic() + 5
    while network.open_relays and time.monotonic() < deadline:
        time.sleep(0.01)
    assert network.open_relays == 0
    # A relay still open at close() is closed too: its client sees EOF.
    held = socket.create_connection(("127.0.0.1", port))
    held.sendall(b"y")
    assert _recv_exactly(held, 1) == b"y"
    network.close()
    assert held.recv(1) == b""
    held.close()
    assert network.thread is not None and not network.thread.is_alive()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_a_negative_rtt_is_refused() -> None:
    with pytest.raises(ValueError, match="rtt_ms"):
        DelayNetwork(-1.0)


def test_unforward_refuses_new_dials_and_closes_the_relayed_ones(echo_port: int) -> None:
    with DelayNetwork() as network:
        gone = network.forward("127.0.0.1", echo_port)
        kept = network.forward("127.0.0.1", echo_port)
        relayed = socket.create_connection(("127.0.0.1", gone))
        relayed.sendall(b"ping")
        assert _recv_exactly(relayed, 4) == b"ping"
        network.unforward(gone)
        # The relayed connection is closed: EOF, not an echo.
        relayed.settimeout(5)
        assert relayed.recv(4) == b""
        relayed.close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", gone), timeout=5)
        # The other forwarder is untouched.
        with socket.create_connection(("127.0.0.1", kept)) as sock:
            sock.sendall(b"pong")
            assert _recv_exactly(sock, 4) == b"pong"
        assert network.open_relays <= 1
        with pytest.raises(KeyError):
            network.unforward(gone)


def test_the_log_has_each_accept_and_close_in_order(echo_port: int) -> None:
    with DelayNetwork() as network:
        port = network.forward("127.0.0.1", echo_port)
        assert network.connections(port) == ()
        before = time.monotonic()
        first = socket.create_connection(("127.0.0.1", port))
        first.sendall(b"a")
        assert _recv_exactly(first, 1) == b"a"
        second = socket.create_connection(("127.0.0.1", port))
        second.sendall(b"b")
        assert _recv_exactly(second, 1) == b"b"
        first.close()
        deadline = time.monotonic() + 5
        while network.connections(port)[0].closed_at is None and time.monotonic() < deadline:
            time.sleep(0.01)
        log = network.connections(port)
        assert len(log) == network.accepted(port) == 2
        assert before <= log[0].accepted_at <= log[1].accepted_at <= time.monotonic()
        assert log[0].closed_at is not None and log[0].closed_at >= log[0].accepted_at
        assert log[1].closed_at is None  # still open
        second.close()
        assert network.connections(0) == ()  # a port it never listened on


class _Seen:
    """A tap that keeps what it saw, per direction."""

    def __init__(self) -> None:
        self.to_broker = b""
        self.to_client = b""

    def from_client(self, at: float, chunk: bytes) -> None:
        self.to_broker += chunk

    def from_broker(self, at: float, chunk: bytes) -> None:
        self.to_client += chunk


def test_a_tap_sees_both_directions_of_the_connections_accepted_while_it_is_set(
    echo_port: int,
) -> None:
    taps: list[tuple[int, _Seen]] = []

    def factory(port: int, accepted_at: float) -> _Seen:
        taps.append((port, _Seen()))
        return taps[-1][1]

    with DelayNetwork() as network:
        port = network.forward("127.0.0.1", echo_port)
        network.set_tap(factory)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"hello")
            assert _recv_exactly(sock, 5) == b"hello"
        network.set_tap(None)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"untapped")
            assert _recv_exactly(sock, 8) == b"untapped"
    assert [(p, s.to_broker, s.to_client) for p, s in taps] == [(port, b"hello", b"hello")]
