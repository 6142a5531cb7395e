"""The kernel's view of this process's sockets, against a real in-process mock cluster.

Nothing is mocked: the brokers are librdkafka's loopback listeners in this very process (so
their accepted, server-side sockets sit in the same socket table) and the clients are raw
sockets. Both data sources -- psutil and the /proc fallback -- are exercised.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from connmgr import kernel
from connmgr.aio.kernel import (
    AccountingMismatch,
    averify_against_kernel,
    kernel_connections,
    verify_against_kernel,
)
from connmgr.core.identity import Role
from connmgr.embedded import MockCluster
from connmgr.kernel import kernel_sockets
from connmgr.ledger import ConnectionLedger, observed_key

pytestmark = pytest.mark.embedded

Address = tuple[str, int]


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(3, track_requests=False) as mock:
        yield mock


@pytest.fixture(params=["psutil", "proc"])
def source(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test once with psutil and once with the /proc fallback."""
    name: str = request.param
    if name == "proc":
        monkeypatch.setattr(kernel, "_load_psutil", lambda: None)
    return name


def _ledger(*endpoints: Address, host: str | None = None) -> ConnectionLedger:
    ledger = ConnectionLedger()
    for conn_id, (ip, port) in enumerate(endpoints):
        ledger.opened(0.0, conn_id, observed_key(host or ip, port, None, Role.BOOTSTRAP))
        ledger.established(0.0, conn_id)
    return ledger


def _open(stack: ExitStack, *endpoints: Address) -> list[socket.socket]:
    return [stack.enter_context(socket.create_connection(e, timeout=5)) for e in endpoints]


def test_counts_own_client_sockets_by_remote_address(cluster: MockCluster, source: str) -> None:
    listeners = cluster.listeners()
    b1, b2, b3 = listeners[1], listeners[2], listeners[3]
    with ExitStack() as stack:
        _open(stack, b1, b1, b2)
        counts = kernel_connections(listeners.values())
        print(f"\n[{source}] kernel: {dict(counts)}")
        # The mock's accepted sockets (local = broker port) are in the same table; had they
        # been counted, they would appear under the clients' ephemeral ports, not here.
        assert counts == Counter({b1: 2, b2: 1})
        assert b3 not in counts
        assert kernel_connections([b2]) == Counter({b2: 1})
    assert kernel_connections(listeners.values()) == Counter()


def test_a_process_by_pid_is_scanned_as_this_process_is(cluster: MockCluster, source: str) -> None:
    """The Java probe's per-pid scan (:func:`kernel_sockets`) is the same scan: asked for this
    process's pid, it finds what :func:`kernel_connections` counts."""
    listeners = cluster.listeners()
    b1, b2 = listeners[1], listeners[2]
    with ExitStack() as stack:
        _open(stack, b1, b1, b2)
        sample = kernel_sockets(os.getpid(), listeners)
        assert sample.count == 3
        assert Counter((ip, port) for ip, port, _ in sample.sockets) == kernel_connections(
            listeners.values()
        )
        assert {state for _, _, state in sample.sockets} == {"ESTABLISHED"}


def test_server_side_sockets_are_not_counted(cluster: MockCluster, source: str) -> None:
    listeners = cluster.listeners()
    with ExitStack() as stack:
        (client,) = _open(stack, listeners[1])
        # The mock accepted this connection in-process: its socket has the broker port as
        # *local* address and our ephemeral port as remote. Asking for our ephemeral port
        # finds exactly that one socket, which proves it is in the table we read...
        # (The mock's thread accept()s asynchronously; until then the socket has no
        # descriptor in this process, so wait for it.)
        ephemeral: Address = client.getsockname()[:2]
        deadline = time.monotonic() + 5
        while not kernel_connections([ephemeral]) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert kernel_connections([ephemeral]) == Counter({ephemeral: 1})
        # ...and asking for the brokers finds only our client socket, not the mock's side.
        assert kernel_connections(listeners.values()) == Counter({listeners[1]: 1})


def test_ledger_matching_the_kernel_passes(cluster: MockCluster, source: str) -> None:
    listeners = cluster.listeners()
    b1, b2 = listeners[1], listeners[2]
    with ExitStack() as stack:
        _open(stack, b1, b1, b2)
        verify_against_kernel(_ledger(b1, b1, b2), listeners, settle_s=0.5)
        verify_against_kernel(_ledger(b1, b1, b2), list(listeners.values()), settle_s=0.5)


def test_ledger_missing_a_connection_names_the_phantom(cluster: MockCluster) -> None:
    listeners = cluster.listeners()
    b1, b2 = listeners[1], listeners[2]
    with ExitStack() as stack:
        _open(stack, b1, b1, b2)
        start = time.monotonic()
        with pytest.raises(AccountingMismatch) as caught:
            verify_against_kernel(_ledger(b1, b2), listeners, settle_s=0.2)
        waited = time.monotonic() - start
    message = str(caught.value)
    print(f"\n{message} (after {waited * 1000:.0f} ms)")
    assert f"phantom (kernel has, ledger does not): {b1[0]}:{b1[1]} x1" in message
    assert "missed" not in message
    assert caught.value.phantom == Counter({b1: 1})
    assert caught.value.missed == Counter()
    assert waited >= 0.2  # it retried for the whole settle time before failing


def test_ledger_claiming_an_extra_connection_names_the_missed_one(cluster: MockCluster) -> None:
    listeners = cluster.listeners()
    b1, b2, b3 = listeners[1], listeners[2], listeners[3]
    with ExitStack() as stack:
        _open(stack, b1, b1, b2)
        with pytest.raises(AccountingMismatch) as caught:
            verify_against_kernel(_ledger(b1, b1, b2, b3, b3), listeners, settle_s=0.1)
    message = str(caught.value)
    print(f"\n{message}")
    assert f"missed (ledger has, kernel does not): {b3[0]}:{b3[1]} x2" in message
    assert "phantom" not in message
    assert caught.value.missed == Counter({b3: 2})


def test_count_returns_to_zero_after_close_and_empty_ledger_passes(
    cluster: MockCluster, source: str
) -> None:
    listeners = cluster.listeners()
    with ExitStack() as stack:
        _open(stack, listeners[1], listeners[1], listeners[2])
        assert sum(kernel_connections(listeners.values()).values()) == 3
    assert kernel_connections(listeners.values()) == Counter()
    verify_against_kernel(ConnectionLedger(), listeners, settle_s=0.5)


def test_localhost_in_the_ledger_matches_a_loopback_socket(cluster: MockCluster) -> None:
    listeners = cluster.listeners()
    b1 = listeners[1]
    with ExitStack() as stack:
        _open(stack, b1)
        verify_against_kernel(_ledger(b1, host="localhost"), listeners, settle_s=0.5)
        # A listener given as localhost watches both loopbacks too.
        verify_against_kernel(_ledger(b1), [("localhost", b1[1])], settle_s=0.5)
        with pytest.raises(AccountingMismatch, match=rf"missed .*localhost:{b1[1]} x1"):
            verify_against_kernel(_ledger(b1, b1, host="localhost"), listeners, settle_s=0.1)


def test_socket_the_peer_closed_but_we_hold_counts_as_open(source: str) -> None:
    # A plain listener rather than a mock broker: the mock may not have accept()ed yet when
    # told to go down, and a connection still in the accept queue is reset (no CLOSE_WAIT).
    with socket.create_server(("127.0.0.1", 0)) as server:
        endpoint: Address = server.getsockname()[:2]
        with socket.create_connection(endpoint, timeout=5) as client:
            accepted, _ = server.accept()
            accepted.close()  # the peer closes: our side goes to CLOSE_WAIT
            assert client.recv(1) == b""  # EOF seen: the peer's FIN has arrived
            assert kernel_connections([endpoint]) == Counter({endpoint: 1})
            with pytest.raises(AccountingMismatch, match="phantom"):
                verify_against_kernel(ConnectionLedger(), [endpoint], settle_s=0.05)
            verify_against_kernel(_ledger(endpoint), [endpoint], settle_s=0.05)
        assert kernel_connections([endpoint]) == Counter()


def test_async_verify_lets_the_loop_finish_a_close(cluster: MockCluster) -> None:
    listeners = cluster.listeners()
    b1 = listeners[1]

    async def scenario() -> None:
        _reader, writer = await asyncio.open_connection(*b1)
        ledger = _ledger(b1)
        await averify_against_kernel(ledger, listeners, settle_s=0.5)

        # asyncio closes the socket itself one loop iteration after writer.close(). A blocking
        # check never lets that iteration run, so it sees a phantom; the async one yields and
        # sees the close complete.
        writer.close()
        ledger.closed(0.0, 0, "test")
        with pytest.raises(AccountingMismatch, match="phantom"):
            verify_against_kernel(ledger, listeners, settle_s=0.05)
        await averify_against_kernel(ledger, listeners, settle_s=1.0)
        await writer.wait_closed()
        with pytest.raises(AccountingMismatch, match="missed"):
            await averify_against_kernel(_ledger(b1), listeners, settle_s=0.05)

    asyncio.run(scenario())
