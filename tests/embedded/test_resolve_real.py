"""The drop-in clients resolve broker host names (``connmgr.aio.resolver``), so the proposed
policy's rule (h2) works in them: a connection whose name moved to another address closes
with ``stale_address`` and its requests go out again once the name answers.

The brokers advertise names (``kafka-N.test``) through the mock's ``set_host_port``; a fake
DNS installed as the running loop's ``getaddrinfo`` answers them. It is the function the
resolver's default lookup and asyncio's ``create_connection`` both call, so the dial and the
driver's resolution see one DNS, as on a real host (the dial hands aiokafka the name: TLS
verifies the certificate against it). The resolver's own behaviour is tested with a fake
lookup, waiting for the lookups it makes rather than for wall-clock time.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka.structs import TopicPartition  # type: ignore[import-untyped]
from connmgr.aio import ProposedConsumer, ProposedProducer
from connmgr.aio.resolver import Resolver, is_literal, system_lookup
from connmgr.core.events import AddressesResolved, ConnectionEstablished
from connmgr.embedded import MockCluster
from connmgr.ledger import ConnEvent
from connmgr.testing.replay import record

pytestmark = pytest.mark.embedded
LEADERS = [3, 1, 2]
DARK = "127.0.0.2"
"""A loopback address nothing listens on (the mock binds 127.0.0.1): a dial there is
refused at once, as a restarted pod's old IP answers nothing."""


class FakeDns:
    """Names -> addresses (empty or unknown: NXDOMAIN), served as a loop's ``getaddrinfo``;
    ``errors``: names whose lookup fails with that ``EAI_*`` code. Counts each name's
    lookups."""

    def __init__(self, names: dict[str, list[str]], errors: dict[str, int] | None = None) -> None:
        self.names = names
        self.errors = errors or {}
        self.lookups: dict[str, int] = {}

    def install(self) -> None:
        """Answer the running loop's ``getaddrinfo`` (an attribute of this loop only)."""
        setattr(asyncio.get_running_loop(), "getaddrinfo", self.getaddrinfo)  # noqa: B010

    async def getaddrinfo(self, host: str, port: int, **_: Any) -> list[Any]:
        self.lookups[host] = self.lookups.get(host, 0) + 1
        if host in self.errors:
            raise socket.gaierror(self.errors[host], "lookup failed")
        addresses = self.names.get(host, [])
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(3) as mc:
        mc.create_topic_with_leaders("t", LEADERS)
        yield mc


def named(mc: MockCluster) -> FakeDns:
    """Make every broker advertise ``kafka-N.test`` at its port; the DNS that answers them."""
    for broker, (_, port) in mc.listeners().items():
        mc.set_host_port(broker, f"kafka-{broker}.test", port)
    return FakeDns({f"kafka-{b}.test": ["127.0.0.1"] for b in mc.broker_ids})


async def until(condition: Any, what: str) -> None:
    try:
        async with asyncio.timeout(10):
            while not condition():
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"no {what} within 10 s") from None


def test_a_broker_name_moving_away_closes_its_connection_and_loses_no_record(
    cluster: MockCluster,
) -> None:
    dns = named(cluster)
    port1 = cluster.listeners()[1][1]
    n = 90

    async def main() -> tuple[list[bytes], ProposedProducer, list[Any]]:
        dns.install()
        producer = ProposedProducer(
            bootstrap_servers=f"kafka-1.test:{port1}",
            acks="all",
            retry_backoff_ms=50,
            dns_ttl_ms=50,
        )
        steps = record(producer.client.policy)
        resolver = producer.client.driver.resolver
        await producer.start()
        futures = []
        try:
            for i in range(n):
                if i == 30:
                    await asyncio.gather(*futures)  # a connection to every leader
                    dns.names["kafka-2.test"] = [DARK]  # broker 2's pod "moved"
                    await until(lambda: stale(producer), "the stale_address close")
                if i == 60:
                    await asyncio.sleep(0.3)  # records for broker 2 wait on refused dials
                    dns.names["kafka-2.test"] = ["127.0.0.1"]
                futures.append(await producer.send("t", f"m{i}".encode(), partition=i % 3))
            await asyncio.gather(*futures)
            assert resolver is not None and resolver.pending > 0  # names in use are refreshed
        finally:
            await producer.stop()
        assert resolver is not None and resolver.pending == 0
        assert [t for t in asyncio.all_tasks() if "Resolver" in repr(t.get_coro())] == []
        consumer = ProposedConsumer(
            bootstrap_servers=f"kafka-1.test:{port1}", auto_offset_reset="earliest"
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            consumer.assign([TopicPartition("t", p) for p in range(3)])
            async with asyncio.timeout(10):
                while len(set(got)) < n:
                    batch = await consumer.getmany(timeout_ms=200)
                    got += [m.value for ms in batch.values() for m in ms]
        finally:
            await consumer.stop()
        return got, producer, steps

    got, producer, steps = asyncio.run(main())
    assert set(got) == {f"m{i}".encode() for i in range(n)}
    closes = [e for e in producer.ledger.entries if e.reason == "stale_address"]
    assert [(e.kind, e.broker, e.host) for e in closes] == [(ConnEvent.CLOSED, 2, "kafka-2.test")]
    resolved = [e for _, e, _ in steps if isinstance(e, AddressesResolved)]
    assert AddressesResolved("kafka-2.test", frozenset({DARK})) in resolved
    assert resolved[-1] == AddressesResolved("kafka-2.test", frozenset({"127.0.0.1"}))
    assert all(e.address == "127.0.0.1" for _, e, _ in steps if type(e) is ConnectionEstablished)
    assert producer.ledger.count(ConnEvent.FAILED) >= 1  # dials to the dark address


def stale(producer: ProposedProducer) -> bool:
    return any(e.reason == "stale_address" for e in producer.ledger.entries)


def test_an_empty_answer_closes_too_and_ip_literals_resolve_nothing(
    cluster: MockCluster,
) -> None:
    """A name that resolves to nothing (NXDOMAIN) is stale as well; a client given only IP
    literals (every other test's) makes no lookup and feeds no AddressesResolved."""
    dns = named(cluster)
    literal = cluster.bootstrap_servers.split(",")[0]

    async def main() -> tuple[list[Any], list[Any], ProposedProducer]:
        dns.install()
        by_name = ProposedProducer(
            bootstrap_servers=f"kafka-1.test:{literal.split(':')[1]}", dns_ttl_ms=50
        )
        named_steps = record(by_name.client.policy)
        await by_name.start()
        try:
            await by_name.send_and_wait("t", b"x", partition=1)  # broker 1
            dns.names["kafka-1.test"] = []
            await until(lambda: stale(by_name), "the stale_address close")
        finally:
            await by_name.stop()
        dns.lookups.clear()
        # Broker names make no difference to a client that only dials 127.0.0.1.
        for broker, (host, port) in cluster.listeners().items():
            cluster.set_host_port(broker, host, port)
        by_ip = ProposedProducer(bootstrap_servers=literal, dns_ttl_ms=10)
        ip_steps = record(by_ip.client.policy)
        await by_ip.start()
        try:
            for i in range(9):
                await by_ip.send_and_wait("t", b"y", partition=i % 3)
            await asyncio.sleep(0.05)  # five TTLs: nothing to re-resolve
        finally:
            await by_ip.stop()
        assert dns.lookups == {}
        return named_steps, ip_steps, by_ip

    named_steps, ip_steps, by_ip = asyncio.run(main())
    assert AddressesResolved("kafka-1.test", frozenset()) in [e for _, e, _ in named_steps]
    assert not any(isinstance(e, AddressesResolved) for _, e, _ in ip_steps)
    established = [e for _, e, _ in ip_steps if isinstance(e, ConnectionEstablished)]
    assert established and all(e.address is None for e in established)
    assert by_ip.ledger.count(ConnEvent.FAILED) == 0


# --- the resolver alone --------------------------------------------------------------------


class ScriptedLookup:
    """Answers from a script, one per lookup (the last one repeats); ``calls`` counts them."""

    def __init__(self, *answers: frozenset[str] | None) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.called = asyncio.Event()

    async def __call__(self, host: str, port: int) -> frozenset[str] | None:
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        self.called.set()
        return answer

    async def wait_calls(self, count: int) -> None:
        async with asyncio.timeout(10):
            while self.calls < count:
                self.called.clear()
                await self.called.wait()


A, B = frozenset({"10.0.0.1"}), frozenset({"10.0.0.2"})


def test_the_resolver_reports_changed_answers_only_and_keeps_one_through_an_outage() -> None:
    async def main() -> list[tuple[str, frozenset[str]]]:
        lookup = ScriptedLookup(A, A, None, B, frozenset(), frozenset(), B)
        reports: list[tuple[str, frozenset[str]]] = []
        resolver = Resolver(1, lambda h, a: reports.append((h, a)), lambda h: True, lookup)
        await resolver.before_dial("kafka-1", 9092)
        await resolver.before_dial("kafka-1", 9092)  # fresh answer cached: no lookup
        assert lookup.calls == 1
        await lookup.wait_calls(8)
        await resolver.aclose()
        assert resolver.pending == 0
        return reports

    reports = asyncio.run(main())
    # A, A, (no answer: A stands), B, nothing, nothing, B
    assert reports == [("kafka-1", A), ("kafka-1", B), ("kafka-1", frozenset()), ("kafka-1", B)]


def test_the_resolver_stops_with_its_last_connection_and_ttl_zero_resolves_at_dial() -> None:
    async def main() -> None:
        in_use = {"kafka-1": True}
        lookup = ScriptedLookup(A)
        resolver = Resolver(1, lambda h, a: None, in_use.__getitem__, lookup)
        await resolver.before_dial("kafka-1", 9092)
        await lookup.wait_calls(3)
        in_use["kafka-1"] = False
        async with asyncio.timeout(10):
            while resolver.pending:  # the next expiry finds no connection and stops
                await asyncio.sleep(0.001)
        calls = lookup.calls
        await asyncio.sleep(0.01)
        assert lookup.calls == calls
        await resolver.before_dial("kafka-1", 9092)  # a new dial resolves again
        assert lookup.calls == calls + 1 and resolver.answer("kafka-1") == A
        await resolver.aclose()

        at_dial = ScriptedLookup(A, B)
        reports: list[frozenset[str]] = []
        only_dial = Resolver(0, lambda h, a: reports.append(a), lambda h: True, at_dial)
        for _ in range(3):
            await only_dial.before_dial("kafka-1", 9092)
            assert only_dial.pending == 0  # no timer
        assert at_dial.calls == 3 and reports == [A, B]

    asyncio.run(main())


def test_the_system_lookup_tells_no_such_name_from_no_answer() -> None:
    async def main() -> list[frozenset[str] | None]:
        FakeDns({"kafka-1": ["::1", "10.0.0.1"]}, {"flaky": socket.EAI_AGAIN}).install()
        return [await system_lookup(h, 9092) for h in ("gone", "flaky", "kafka-1")]

    assert asyncio.run(main()) == [frozenset(), None, frozenset({"::1", "10.0.0.1"})]
    assert is_literal("127.0.0.1") and is_literal("::1") and not is_literal("kafka-1.test")
