"""The compatibility proxy's socket pairs (``connmgr.embedded.compat``): a pair accepted
while the proxy closes is closed whole, never half (the upstream end once leaked)."""

from __future__ import annotations

import socket
from typing import Any, cast

from connmgr.embedded.compat import MOCK_PARSE_CAPS, MockCompatShim
from connmgr.embedded.mock_cluster import MockCluster


class NoBrokers:
    """A cluster with no listeners: the shim starts no thread."""

    def listeners(self) -> dict[int, Any]:
        return {}


def shim() -> MockCompatShim:
    return MockCompatShim(cast(MockCluster, NoBrokers()), MOCK_PARSE_CAPS)


def test_a_pair_adopted_before_close_is_closed_by_close() -> None:
    s = shim()
    client, server = socket.socketpair()
    assert s._adopt(client, server)
    assert client.fileno() != -1 and server.fileno() != -1
    s.close()
    assert client.fileno() == -1 and server.fileno() == -1


def test_a_pair_accepted_after_close_is_closed_at_once_both_ends() -> None:
    s = shim()
    s.close()
    client, server = socket.socketpair()
    assert not s._adopt(client, server)
    assert client.fileno() == -1 and server.fileno() == -1
