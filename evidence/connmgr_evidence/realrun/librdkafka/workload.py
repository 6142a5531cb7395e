"""The librdkafka workloads of real runs: confluent-kafka's ``Producer`` and ``Consumer``
through a scenario, accounted from librdkafka's own log and statistics and checked against
the kernel.

The client runs in a worker thread (confluent-kafka blocks in C; the event loop stays free)
with ``debug=broker`` into a :class:`~.account.LogAccount` and a statistics report every
:data:`STATS_INTERVAL_MS`. Its clock starts just before the client is constructed:
librdkafka has no separate start, ``rd_kafka_new`` already dials a bootstrap server. Every
callback (log lines, statistics, delivery reports) runs in that thread, from ``poll``,
``flush`` or ``close``.

At the steady state (``settle_ms`` after the workload) the ledger must match the kernel's
live sockets exactly, and then the next statistics report must match the ledger (see
:mod:`.crosscheck`); after ``close()`` the kernel must show no socket left.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer

from connmgr.aio.kernel import verify_against_kernel
from connmgr.core.config import ClientKind
from connmgr.core.endpoint import Endpoint
from connmgr.errors import ConfigError
from connmgr.kernel import Address
from connmgr.sim.scenarios import policy_config
from connmgr_evidence.realrun.librdkafka.account import LogAccount
from connmgr_evidence.realrun.librdkafka.crosscheck import (
    LibrdkafkaMismatch,
    stats_problems,
    verify_with_kernel,
)
from connmgr_evidence.realrun.librdkafka.handle import silence_before_close
from connmgr_evidence.realrun.workloads import RealRunError, WorkloadInputs, elapsed_ms

if TYPE_CHECKING:
    from connmgr_evidence.realrun.record import RealRun

__all__ = ["STATS_INTERVAL_MS", "ClientSink", "client_config", "new_sink", "run_librdkafka"]

STATS_INTERVAL_MS: Final = 250
"""How often librdkafka reports statistics: the steady check waits for the next report."""
_CONSUME_DEADLINE_S: Final = 60.0
_STATS_WAIT_S: Final = 5 * STATS_INTERVAL_MS / 1000.0


@dataclass
class ClientSink:
    """Where the client's callbacks land: log lines into ``account`` (and the client's name,
    which they carry), statistics reports (the one after ``check_next`` is set is checked
    against the ledger on arrival), errors listed. confluent-kafka calls ``log(level, fmt,
    facility, client name, message)`` as on a :class:`logging.Logger`."""

    account: LogAccount
    name: str = ""
    reports: int = 0
    check_next: bool = False
    stats_mismatch: list[str] | None = None
    errors: list[str] = field(default_factory=list)

    def log(self, level: int, fmt: str, *args: Any) -> None:
        if len(args) == 3:
            self.name = str(args[1])
            self.account.feed(str(args[0]), str(args[2]))

    def stats(self, report: str) -> None:
        self.reports += 1
        if self.check_next:
            # Compared here, on the report's arrival, so the ledger is exactly the log up to
            # the report: lines queued before it are served before it. Only this report is
            # parsed (at 1,000 brokers one is a megabyte of JSON).
            self.stats_mismatch = stats_problems(json.loads(report), self.account)
            self.check_next = False

    def error(self, err: KafkaError) -> None:
        self.errors.append(str(err))


def client_config(
    sink: ClientSink, bootstrap: str, client_id: str, idle_ms: int | None = None
) -> dict[str, Any]:
    """confluent-kafka settings that report to ``sink``: ``debug=broker`` into its ``log``,
    statistics every :data:`STATS_INTERVAL_MS` into its ``stats``, errors into its ``error``.
    ``idle_ms`` is ``connections.max.idle.ms`` (None: librdkafka's default, 0 = never)."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "debug": "broker",
        "logger": sink,
        "statistics.interval.ms": STATS_INTERVAL_MS,
        "stats_cb": sink.stats,
        "error_cb": sink.error,
    }
    if idle_ms is not None:
        config["connections.max.idle.ms"] = idle_ms
    return config


def new_sink(bootstrap: Sequence[Endpoint], started: float) -> ClientSink:
    """A sink whose ledger's clock is ms since ``started`` (``time.perf_counter``)."""
    return ClientSink(LogAccount(bootstrap, lambda: (time.perf_counter() - started) * 1000.0))


async def run_librdkafka(work: WorkloadInputs) -> None:
    """confluent-kafka's producer (every record acknowledged, ``flush``) or group consumer
    (exactly ``records`` distinct records) through ``run``'s scenario on ``cluster``.

    Fills ``run``: the ledger from librdkafka's log, the steady summary, records and the
    time to the first ack (``ttfa_ms``) or consumed record (``ttfc_ms``) from just before the
    client is constructed. With ``verify``: ledger == kernel at the steady state and after
    close, statistics == ledger at the steady state, else :class:`AccountingMismatch` or
    :class:`LibrdkafkaMismatch`. ``connections_max_idle_ms`` in ``policy_settings`` becomes
    ``connections.max.idle.ms`` (-1: 0); without it librdkafka keeps its default (0: never),
    what its users run. Raises :class:`ConfigError` for a transactional scenario and
    :class:`RealRunError` if a record is lost."""
    run, policy_settings = work.run, work.policy_settings
    if run.spec.transactional_id is not None:
        raise ConfigError(
            "--client librdkafka runs producer and consumer scenarios, not transactional ones"
        )
    idle_ms: int | None = None
    if "connections_max_idle_ms" in policy_settings:
        idle = policy_config(run.spec, policy_settings).connections_max_idle_ms
        idle_ms = 0 if idle == -1 else idle
    plan = _Plan(work, idle_ms, work.cluster.listeners())
    client = _produce if run.spec.client is ClientKind.PRODUCER else _consume
    await asyncio.to_thread(client, plan)


@dataclass(frozen=True)
class _Plan:
    """The workload's inputs, with what the client thread needs of the cluster."""

    work: WorkloadInputs
    idle_ms: int | None
    listeners: Mapping[int, Address]

    @property
    def run(self) -> RealRun:
        return self.work.run

    @property
    def options(self) -> Mapping[str, int]:
        return self.work.options

    @property
    def verify(self) -> bool:
        return self.work.verify

    def start(self) -> tuple[ClientSink, dict[str, Any], float]:
        """The clock's start (now), a sink on it, and the client's settings."""
        started = time.perf_counter()
        sink = new_sink(self.run.spec.bootstrap, started)
        self.run.ledger = sink.account.ledger
        client_id = f"connmgr-{self.run.scenario}"
        config = client_config(sink, self.work.bootstrap, client_id, self.idle_ms)
        if self.run.life is not None:
            config.update(self.run.life.librdkafka_config())
        self.run.client_config = {
            k: config[k]
            for k in ("topic.metadata.refresh.interval.ms", "connections.max.idle.ms")
            if k in config
        }
        return sink, config, started


def _serve_until(serve: Callable[[float], object], deadline: float) -> None:
    while (left := deadline - time.perf_counter()) > 0:
        serve(min(left, 0.1))


def _steady(sink: ClientSink, serve: Callable[[float], object], plan: _Plan) -> None:
    """Settle (not after a life: its end is the instant counted), then check the kernel and
    take the steady summary at one instant, then check the next statistics report against
    the ledger."""
    if plan.run.life is None:
        _serve_until(serve, time.perf_counter() + plan.options["settle_ms"] / 1000.0)
    ledger = sink.account.ledger
    if plan.verify:
        if sink.account.problems:
            # A line the replay could not place: the kernel would only say "phantom".
            raise LibrdkafkaMismatch("steady state", sink.account.problems)
        verify_with_kernel(ledger, plan.listeners, serve, phase="steady state")
    plan.run.steady_summary = ledger.summary()
    if not plan.verify or (plan.run.life is not None and plan.run.life.rolling_restart):
        # After a rolling restart the statistics cannot be compared: a broker the mock left
        # out of metadata while down gets a new handle in librdkafka when it comes back, its
        # counters from zero, while the log counts the name's whole history (seen: "1
        # connects, the log 3 dials" per broker). The kernel check above still holds.
        return
    sink.check_next = True
    deadline = time.perf_counter() + _STATS_WAIT_S
    while sink.stats_mismatch is None and time.perf_counter() < deadline:
        serve(0.05)
    if sink.stats_mismatch is None:
        raise LibrdkafkaMismatch("steady state", [f"no statistics report in {_STATS_WAIT_S} s"])
    if sink.stats_mismatch:
        raise LibrdkafkaMismatch("steady state", sink.stats_mismatch)


def _closed(sink: ClientSink, plan: _Plan) -> None:
    sink.account.close_all(sink.account.clock(), "client close")
    if plan.verify:
        # The client is gone: nothing to serve, its sockets must all have closed.
        verify_against_kernel(sink.account.ledger, plan.listeners)


def _produce(plan: _Plan) -> None:
    run, options = plan.run, plan.options
    first_ack: list[float] = []

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            run.records_acked += 1
            if not first_ack:
                first_ack.append(time.perf_counter())

    sink, config, started = plan.start()
    config.update({"acks": "all", "enable.idempotence": bool(options["idempotent"])})
    producer = Producer(config)
    try:
        partitions = run.spec.cluster.partitions(run.spec.topics)
        for i in range(options["records"]):
            tp = partitions[i % len(partitions)]
            producer.produce(
                tp.topic, f"r{i}".encode(), partition=tp.partition, on_delivery=delivered
            )
            run.records_sent += 1
        producer.flush(_CONSUME_DEADLINE_S)
        run.ttfa_ms = elapsed_ms(started, first_ack[0] if first_ack else None)
        if run.life is not None:
            _live_producer(run, producer, delivered)
        _steady(sink, producer.poll, plan)
    finally:
        silence_before_close(producer, sink.name)
        producer.close()
    _closed(sink, plan)
    if run.records_acked != run.records_sent:
        raise RealRunError(
            f"{run.records_sent - run.records_acked} records not acknowledged "
            f"(client errors: {sink.errors or 'none'})"
        )


def _consume(plan: _Plan) -> None:
    run = plan.run
    assert run.spec.group is not None
    wanted = plan.options["records"]
    seen: set[bytes] = set()
    sink, config, started = plan.start()
    config.update(
        {"group.id": run.spec.group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )

    def take(message: Message | None) -> None:
        if message is None:
            return
        if (error := message.error()) is not None:
            sink.errors.append(str(error))
            return
        if run.ttfc_ms is None:
            run.ttfc_ms = elapsed_ms(started, time.perf_counter())
        run.records_consumed += 1
        value = message.value() or b""
        run.duplicates += int(value in seen)
        seen.add(value)

    consumer = Consumer(config)
    try:
        consumer.subscribe(list(run.spec.topics))
        deadline = time.monotonic() + _CONSUME_DEADLINE_S
        while len(seen) < wanted and time.monotonic() < deadline:
            take(consumer.poll(1.0))
        if seen:
            consumer.commit(asynchronous=False)
        if run.life is not None:
            _live_consumer(run, consumer, take)
        # Records arriving while settling would be extra ones: counted, never dropped.
        _steady(sink, lambda s: take(consumer.poll(s)), plan)
    finally:
        silence_before_close(consumer, sink.name)
        consumer.close()
    _closed(sink, plan)
    if len(seen) != wanted or run.duplicates:
        raise RealRunError(
            f"consumed {len(seen)} distinct records of {wanted} ({run.duplicates} duplicates; "
            f"client errors: {sink.errors or 'none'})"
        )


def _live_producer(
    run: RealRun, producer: Producer, delivered: Callable[[KafkaError | None, Message], None]
) -> None:
    """The producer's scaled life: one record every ``every_ms`` for ``life_ms`` (serving
    callbacks between), then ``flush``: every record is acknowledged before the count."""
    assert run.life is not None
    partitions = run.spec.cluster.partitions(run.spec.topics)
    end = time.perf_counter() + run.life.life_ms / 1000.0
    every = run.life.every_ms / 1000.0
    i = run.records_sent
    while time.perf_counter() < end:
        _serve_until(producer.poll, min(end, time.perf_counter() + every))
        if time.perf_counter() >= end:
            break
        tp = partitions[i % len(partitions)]
        producer.produce(tp.topic, f"r{i}".encode(), partition=tp.partition, on_delivery=delivered)
        run.records_sent += 1
        i += 1
    producer.flush(_CONSUME_DEADLINE_S)


def _live_consumer(
    run: RealRun, consumer: Consumer, take: Callable[[Message | None], None]
) -> None:
    """The consumer's scaled life: keep polling for ``life_ms``, commit every ``every_ms``
    (asynchronously, as a polling loop does; one with nothing new to commit is no error)."""
    assert run.life is not None
    end = time.perf_counter() + run.life.life_ms / 1000.0
    every = run.life.every_ms / 1000.0
    next_commit = time.perf_counter() + every
    while (left := end - time.perf_counter()) > 0:
        take(consumer.poll(min(left, 0.1)))
        if time.perf_counter() >= next_commit:
            next_commit += every
            try:
                consumer.commit(asynchronous=True)
            except KafkaException:
                run.commit_failures += 1
