from __future__ import annotations

import pytest

from connmgr.core.endpoint import DEFAULT_PORT, Endpoint, parse_bootstrap, parse_endpoint
from connmgr.errors import BootstrapParseError


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("localhost:9092", "localhost", 9092),
        ("  Broker-1.Example.COM:19092 ", "broker-1.example.com", 19092),
        ("kafka", "kafka", DEFAULT_PORT),
        ("[::1]:9093", "::1", 9093),
        ("[fe80::1]", "fe80::1", DEFAULT_PORT),
        ("PLAINTEXT://localhost:9092", "localhost", 9092),
        ("127.0.0.1:1", "127.0.0.1", 1),
        ("127.0.0.1:65535", "127.0.0.1", 65535),
    ],
)
def test_parse_endpoint(text: str, host: str, port: int) -> None:
    assert parse_endpoint(text) == Endpoint(host, port)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("localhost:0", "outside 1..65535"),
        ("localhost:65536", "outside 1..65535"),
        ("localhost:-1", "not a number"),
        ("localhost:abc", "not a number"),
        ("localhost:", "must be followed by a port"),
        (":9092", "missing host"),
        ("::1:9092", "needs brackets"),
        ("[::1:9092", "never closed"),
        ("[::1]9092", "expected ':PORT'"),
        ("", "empty"),
    ],
)
def test_bad_endpoint_names_the_problem(text: str, problem: str) -> None:
    with pytest.raises(BootstrapParseError, match=problem):
        parse_endpoint(text)


def test_bootstrap_list_keeps_order_and_drops_repeats() -> None:
    servers = parse_bootstrap("b:9093, a:9092,B:9093,[::1]")
    assert [str(s) for s in servers] == ["b:9093", "a:9092", "[::1]:9092"]
    assert parse_bootstrap(["x", "y:1"]) == (Endpoint("x", 9092), Endpoint("y", 1))


def test_empty_bootstrap_list_is_an_error() -> None:
    with pytest.raises(BootstrapParseError, match="empty"):
        parse_bootstrap([])
    with pytest.raises(BootstrapParseError, match="empty bootstrap entry"):
        parse_bootstrap("a:1,,b:2")


def test_endpoint_is_normalised_and_hashable() -> None:
    assert Endpoint("LOCALHOST", 9092) == Endpoint("localhost", 9092)
    assert len({Endpoint("a", 1), Endpoint("A", 1), Endpoint("[a]", 1)}) == 1
    with pytest.raises(BootstrapParseError):
        Endpoint("a", 70000)
