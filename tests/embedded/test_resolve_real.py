"""The drop-in clients resolve broker host names (``connmgr.aio.resolver``), so the proposed
policy's rule (h2) works in them: a connection whose name moved to another address (two
answers in a row) closes with ``stale_address`` and its requests go out again once the name
answers; a resolver that fails -- times out, SERVFAIL, NXDOMAIN, empty answers -- closes
nothing and loses no record (issue 25).

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
from connmgr.aio.kernel import kernel_connections
from connmgr.aio.resolver import Resolver, is_literal, system_lookup
from connmgr.core.events import AddressesResolved, ConnectionEstablished, LookupOutcome
from connmgr.embedded import MockCluster
from connmgr.ledger import ConnEvent
from connmgr.testing.replay import record

pytestmark = pytest.mark.embedded
LEADERS = [3, 1, 2]
DARK = "127.0.0.2"
"""A loopback address nothing listens on (the mock binds 127.0.0.1): a dial there is
refused at once, as a restarted pod's old IP answers nothing."""


class FakeDns:
    """Names -> addresses (unknown: NXDOMAIN), served as a loop's ``getaddrinfo``;
    ``errors``: names whose lookup fails with that ``EAI_*`` code; ``outage``: while set,
    every lookup fails that way -- ``"hang"`` (no answer until the outage ends, then
    ``EAI_AGAIN``), ``"empty"`` (an answer with no address) or an ``EAI_*`` code. Counts
    each name's lookups."""

    def __init__(self, names: dict[str, list[str]], errors: dict[str, int] | None = None) -> None:
        self.names = names
        self.errors = errors or {}
        self.outage: str | int | None = None
        self.lookups: dict[str, int] = {}

    def install(self) -> None:
        """Answer the running loop's ``getaddrinfo`` (an attribute of this loop only)."""
        setattr(asyncio.get_running_loop(), "getaddrinfo", self.getaddrinfo)  # noqa: B010

    async def getaddrinfo(self, host: str, port: int, **_: Any) -> list[Any]:
        self.lookups[host] = self.lookups.get(host, 0) + 1
        outage = self.outage
        if outage == "hang":
            while self.outage == "hang":  # no answer for as long as the outage lasts,
                await asyncio.sleep(0.01)
            raise socket.gaierror(socket.EAI_AGAIN, "")  # then the stub resolver gives up
        if outage == "empty":
            return []
        if isinstance(outage, int) or host in self.errors:
            raise socket.gaierror(outage if isinstance(outage, int) else self.errors[host], "")
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
    of_2 = [e for e in resolved if e.host == "kafka-2.test"]
    assert of_2.count(AddressesResolved("kafka-2.test", frozenset({DARK}))) >= 2
    assert of_2[-1] == AddressesResolved("kafka-2.test", frozenset({"127.0.0.1"}))
    assert all(e.address == "127.0.0.1" for _, e, _ in steps if type(e) is ConnectionEstablished)
    assert producer.ledger.count(ConnEvent.FAILED) >= 1  # dials to the dark address


def stale(producer: ProposedProducer) -> bool:
    return any(e.reason == "stale_address" for e in producer.ledger.entries)


OUTAGES: list[tuple[str | int, LookupOutcome]] = [
    ("hang", LookupOutcome.TIMEOUT),
    (socket.EAI_AGAIN, LookupOutcome.SERVER_FAILURE),
    (socket.EAI_NONAME, LookupOutcome.NO_SUCH_NAME),
    ("empty", LookupOutcome.EMPTY),
]
"""The resolver's failures, one window each, and how the policy hears of them."""
WINDOW_S = 0.5
"""Each outage's length: ten refreshes at ``dns_ttl_ms=50``."""


def test_a_resolver_outage_closes_nothing_and_loses_no_record(cluster: MockCluster) -> None:
    """A steady producer and a group consumer, both by name, through four resolver outages
    in a row (every lookup hangs, then SERVFAIL, NXDOMAIN, empty answers), records flowing
    all the while: the policy hears each failed lookup and closes nothing, no dial fails,
    no socket is lost, the kernel holds the sockets the ledgers say, and every record
    produced is consumed."""
    dns = named(cluster)
    server = f"kafka-1.test:{cluster.listeners()[1][1]}"
    quick = {"dns_ttl_ms": 50, "connection_linger_ms": 100}

    async def main() -> tuple[set[bytes], list[bytes], list[Any], list[Any]]:
        dns.install()
        producer = ProposedProducer(bootstrap_servers=server, acks="all", **quick)
        consumer = ProposedConsumer(
            "t", bootstrap_servers=server, group_id="g", auto_offset_reset="earliest", **quick
        )
        steps = record(producer.client.policy)
        consumer_steps = record(consumer.client.policy)
        sent: set[bytes] = set()
        got: list[bytes] = []
        await producer.start()
        await consumer.start()
        stop = asyncio.Event()

        async def consume() -> None:
            while not stop.is_set() or len(set(got)) < len(sent):
                batch = await consumer.getmany(timeout_ms=50)
                got.extend(m.value for ms in batch.values() for m in ms)

        async def produce(seconds: float) -> None:
            end = asyncio.get_running_loop().time() + seconds
            while asyncio.get_running_loop().time() < end:
                value = f"r{len(sent)}".encode()
                try:
                    async with asyncio.timeout(2):
                        await producer.send_and_wait("t", value, partition=len(sent) % 3)
                except TimeoutError:
                    raise AssertionError(f"{value!r} not acknowledged within 2 s") from None
                sent.add(value)
                await asyncio.sleep(0.01)

        reader = asyncio.create_task(consume())
        try:
            await produce(1.0)  # every leader and the coordinator connected
            await until(lambda: set(got) == sent, "the first records consumed")
            await asyncio.sleep(0.3)  # three lingers: only what is needed is left
            before = open_now(producer, consumer)
            start = [c.client.driver.now_ms for c in (producer, consumer)]
            for outage, _ in OUTAGES:
                dns.outage = outage
                await produce(WINDOW_S)
            dns.outage = None
            await produce(0.3)
            end = [c.client.driver.now_ms for c in (producer, consumer)]
            assert open_now(producer, consumer) == before
            listeners = cluster.listeners().values()
            held = len(producer.ledger.open_now()) + len(consumer.ledger.open_now())
            assert kernel_connections(listeners).total() == held
            stop.set()
            async with asyncio.timeout(10):
                await reader
        finally:
            reader.cancel()
            async with asyncio.timeout(20):  # fail, never hang, if records are stuck
                await producer.stop()
                await consumer.stop()
        # Each client's ledger keeps its own driver's time.
        entries = [
            e
            for c, t0, t1 in zip((producer, consumer), start, end, strict=True)
            for e in c.ledger.entries
            if t0 <= e.t_ms <= t1
        ]
        return sent, got, steps + consumer_steps, entries

    sent, got, steps, entries = asyncio.run(main())
    assert len(sent) > 100 and set(got) == sent
    heard = {e.outcome for _, e, _ in steps if isinstance(e, AddressesResolved)}
    assert heard == {LookupOutcome.ANSWERED} | {outcome for _, outcome in OUTAGES}
    # Not a dial, a failure or a close of any kind from the first outage until after the last.
    assert entries == []


def open_now(*clients: ProposedProducer | ProposedConsumer) -> list[tuple[int | None, str]]:
    return sorted((e.broker, e.role.value) for c in clients for e in c.ledger.open_now())


def test_ip_literals_resolve_nothing(cluster: MockCluster) -> None:
    """A client given only IP literals (every other test's) makes no lookup and feeds no
    AddressesResolved."""
    dns = named(cluster)
    literal = cluster.bootstrap_servers.split(",")[0]

    async def main() -> tuple[list[Any], ProposedProducer]:
        dns.install()
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
        return ip_steps, by_ip

    ip_steps, by_ip = asyncio.run(main())
    assert not any(isinstance(e, AddressesResolved) for _, e, _ in ip_steps)
    established = [e for _, e, _ in ip_steps if isinstance(e, ConnectionEstablished)]
    assert established and all(e.address is None for e in established)
    assert by_ip.ledger.count(ConnEvent.FAILED) == 0


def test_a_first_dial_to_a_name_never_looked_up_waits_for_no_lookup(cluster: MockCluster) -> None:
    """The first dial of a client to a name it never looked up, which no established
    connection reaches, is not preceded by a lookup (its answer could mark nothing): the
    policy hears the name's first answer only from the refresh one TTL after the dial was
    established, and the name is refreshed from then on."""
    dns = named(cluster)
    port1 = cluster.listeners()[1][1]

    async def main() -> list[Any]:
        dns.install()
        producer = ProposedProducer(bootstrap_servers=f"kafka-1.test:{port1}", dns_ttl_ms=20)
        steps = record(producer.client.policy)
        await producer.start()
        try:
            await producer.send_and_wait("t", b"x", partition=1)  # leader 1: kafka-1.test
            await until(
                lambda: any(isinstance(e, AddressesResolved) for _, e, _ in steps),
                "a refresh of kafka-1.test",
            )
        finally:
            await producer.stop()
        return steps

    events = [e for _, e, _ in asyncio.run(main())]
    first_lookup = next(i for i, e in enumerate(events) if isinstance(e, AddressesResolved))
    first_up = next(i for i, e in enumerate(events) if isinstance(e, ConnectionEstablished))
    assert first_up < first_lookup
    assert events[first_lookup] == AddressesResolved("kafka-1.test", frozenset({"127.0.0.1"}))


# --- the resolver alone --------------------------------------------------------------------


HANG = "hang"
"""In a script: a lookup that never answers."""


class ScriptedLookup:
    """Answers from a script, one per lookup (the last one repeats): addresses, a failure,
    or :data:`HANG`; ``calls`` counts them."""

    def __init__(self, *answers: frozenset[str] | LookupOutcome | str) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.called = asyncio.Event()

    async def __call__(self, host: str, port: int) -> AddressesResolved:
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        self.called.set()
        if answer == HANG:
            await asyncio.Event().wait()
        if isinstance(answer, LookupOutcome):
            return AddressesResolved.failed(host, answer)
        assert isinstance(answer, frozenset)
        return AddressesResolved(host, answer)

    async def wait_calls(self, count: int) -> None:
        async with asyncio.timeout(10):
            while self.calls < count:
                self.called.clear()
                await self.called.wait()


A, B = frozenset({"10.0.0.1"}), frozenset({"10.0.0.2"})
NXDOMAIN, EMPTY = LookupOutcome.NO_SUCH_NAME, LookupOutcome.EMPTY


def test_the_resolver_reports_every_lookup_and_times_out_a_hung_one() -> None:
    """Changed or not, failed or not, every lookup is reported; one that hangs is given up
    after the timeout (the TTL here, 1 ms) and reported as a timeout, the loop running on
    meanwhile; the last successful answer stands through the failures."""

    async def main() -> tuple[list[AddressesResolved], frozenset[str] | None]:
        script = (A, A, LookupOutcome.SERVER_FAILURE, HANG, B, EMPTY, NXDOMAIN, B)
        lookup = ScriptedLookup(*script)
        reports: list[AddressesResolved] = []
        resolver = Resolver(1, reports.append, lambda h: True, lookup)
        await resolver.before_dial("kafka-1", 9092)
        await resolver.before_dial("kafka-1", 9092)  # fresh answer cached: no lookup
        assert lookup.calls == 1
        await lookup.wait_calls(7)
        answer_after_failures = resolver.answer("kafka-1")
        await lookup.wait_calls(9)
        await resolver.aclose()
        assert resolver.pending == 0
        return reports, answer_after_failures

    reports, standing = asyncio.run(main())
    h = "kafka-1"
    failed = AddressesResolved.failed
    assert reports[:8] == [
        AddressesResolved(h, A),
        AddressesResolved(h, A),
        failed(h, LookupOutcome.SERVER_FAILURE),
        failed(h, LookupOutcome.TIMEOUT),
        AddressesResolved(h, B),
        failed(h, EMPTY),
        failed(h, NXDOMAIN),
        AddressesResolved(h, B),
    ]
    assert standing == B


def test_a_hung_lookup_before_a_dial_waits_the_timeout_only() -> None:
    async def main() -> AddressesResolved:
        reports: list[AddressesResolved] = []
        resolver = Resolver(30_000, reports.append, lambda h: True, ScriptedLookup(HANG), 20)
        async with asyncio.timeout(5):
            await resolver.before_dial("kafka-1", 9092)
        await resolver.aclose()
        (report,) = reports
        return report

    assert asyncio.run(main()) == AddressesResolved.failed("kafka-1", LookupOutcome.TIMEOUT)


def test_the_resolver_stops_with_its_last_connection_and_ttl_zero_resolves_at_dial() -> None:
    async def main() -> None:
        in_use = {"kafka-1": True}
        lookup = ScriptedLookup(A)
        resolver = Resolver(1, lambda lookup: None, in_use.__getitem__, lookup)
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
        reports: list[AddressesResolved] = []
        only_dial = Resolver(0, reports.append, lambda h: True, at_dial)
        for _ in range(3):
            await only_dial.before_dial("kafka-1", 9092)
            assert only_dial.pending == 0  # no timer
        assert at_dial.calls == 3 and [r.addresses for r in reports] == [A, B, B]

    asyncio.run(main())


def test_the_system_lookup_says_how_a_lookup_failed() -> None:
    async def main() -> list[AddressesResolved]:
        dns = FakeDns({"kafka-1": ["::1", "10.0.0.1"]}, {"flaky": socket.EAI_AGAIN})
        dns.install()
        results = [await system_lookup(h, 9092) for h in ("gone", "flaky", "kafka-1")]
        dns.outage = "empty"
        return [*results, await system_lookup("kafka-1", 9092)]

    failed = AddressesResolved.failed
    assert asyncio.run(main()) == [
        failed("gone", NXDOMAIN),
        failed("flaky", LookupOutcome.SERVER_FAILURE),
        AddressesResolved("kafka-1", frozenset({"::1", "10.0.0.1"})),
        failed("kafka-1", EMPTY),
    ]
    assert is_literal("127.0.0.1") and is_literal("::1") and not is_literal("kafka-1.test")
