"""The workloads of real runs with aiokafka clients (stock, observed, or with the proposed
policy inside): produce or consume a scenario's records, wait for the steady state, measure,
stop, and check the kernel agrees at each point.

Besides connections, a run times its start: from just before ``client.start()`` (on
``time.perf_counter``) to the first record acknowledged (producer: the first send future to
complete successfully, whichever it is) or the first record consumed (consumer: the first
``getmany`` that returns a message)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from connmgr.aio.dropin import POLICY_OPTION_NAMES, ProposedConsumer, ProposedProducer
from connmgr.aio.kernel import averify_against_kernel
from connmgr.aio.observe import observed_consumer, observed_producer
from connmgr.core.config import ClientKind, PolicyConfig
from connmgr.errors import ConfigError, ConnMgrError
from connmgr.javalog import parse_least_loaded_picks, parse_sent_requests
from connmgr.sim.scenarios import ScenarioSpec, policy_config
from connmgr_evidence.realrun.backends import ClusterBackend

if TYPE_CHECKING:
    from connmgr.ledger import ConnectionLedger
    from connmgr_evidence.realrun.record import RealRun


class RealRunError(ConnMgrError):
    """A real run could not do what its scenario asks (records lost, client failed)."""


@dataclass(frozen=True, slots=True)
class WorkloadInputs:
    """What every workload is given, whichever client it runs (:data:`Workload`)."""

    run: RealRun
    """The run it fills: ledger, steady summary, records, timings, choices."""
    cluster: ClusterBackend
    bootstrap: str
    """The client's ``bootstrap_servers``."""
    options: Mapping[str, int]
    """The run options (``records``, ``settle_ms``, ...:
    ``connmgr_evidence.realrun.run.RUN_OPTIONS``)."""
    policy_settings: Mapping[str, str]
    """The scenario's policy settings, as the simulator gets them."""
    verify: bool
    """Check the ledger against the kernel's sockets at the steady state and after stop."""


Workload = Callable[[WorkloadInputs], Awaitable[None]]
"""A client's workload through a scenario: fills ``work.run``, raises
:class:`RealRunError` if records were lost (the table is
``connmgr_evidence.realrun.run.workload_of``)."""


def client_kwargs(
    client: str, spec: ScenarioSpec, policy_settings: Mapping[str, str], seed: int
) -> dict[str, Any]:
    """aiokafka keyword arguments for ``client``: the policy settings converted and checked
    exactly as the simulator converts them (one parser: PolicyConfig.with_settings)."""
    return config_kwargs(client, policy_config(spec, policy_settings), seed)


def config_kwargs(client: str, config: PolicyConfig, seed: int) -> dict[str, Any]:
    """aiokafka keyword arguments for ``client`` ("aiokafka" or "proposed") from ``config``:
    the idle timeout for both, and for "proposed" the policy options and ``seed``."""
    idle = config.connections_max_idle_ms
    kwargs: dict[str, Any] = {"connections_max_idle_ms": None if idle == -1 else idle}
    if client == "proposed":
        kwargs["policy_seed"] = seed  # the simulator's policy draws from the same stream
        kwargs.update({name: getattr(config, name) for name in POLICY_OPTION_NAMES})
    return kwargs


def new_producer(client: str, kwargs: Mapping[str, Any]) -> Any:
    """A producer that records its connections in ``.ledger``: ``ProposedProducer`` for
    "proposed", stock aiokafka observed (:func:`observed_producer`) otherwise."""
    if client == "proposed":
        return ProposedProducer(**kwargs)
    return observed_producer(**kwargs)


class AckClock:
    """When send futures complete successfully, on ``time.perf_counter``: the first and the
    last acknowledgement and how many there were, in completion order (not list order).

    A done-callback runs one loop iteration after the future completes; that lag is the only
    error, and it is the same for every client.
    """

    def __init__(self) -> None:
        self.first: float | None = None
        self.last: float | None = None
        self.acked = 0

    def watch(self, future: asyncio.Future[Any]) -> asyncio.Future[Any]:
        """Time ``future``'s successful completion; returns it, for chaining."""
        future.add_done_callback(self._done)
        return future

    def _done(self, future: asyncio.Future[Any]) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        self.last = now
        self.acked += 1


def elapsed_ms(start: float, end: float | None) -> float | None:
    """Milliseconds from ``start`` to ``end`` (both ``perf_counter``), None if ``end`` is."""
    return None if end is None else (end - start) * 1000.0


async def produce_fixture(bootstrap: str, spec: ScenarioSpec, records: int) -> None:
    """Records for a consumer scenario, written by a plain producer closed before the run."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        partitions = spec.cluster.partitions(spec.topics)
        futures = [
            await producer.send(tp.topic, f"r{i}".encode(), partition=tp.partition)
            for i, tp in ((i, partitions[i % len(partitions)]) for i in range(records))
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def live_producer(run: RealRun, producer: Any, clock: AckClock) -> None:
    """The producer's scaled life (``run.life``): one record every ``every_ms`` of wall
    time, round-robin over the scenario's partitions, for ``life_ms``; every one must be
    acknowledged by the end (a send in flight through a broker restart is waited for)."""
    assert run.life is not None
    partitions = run.spec.cluster.partitions(run.spec.topics)
    end = time.perf_counter() + run.life.life_ms / 1000.0
    futures = []
    i = run.records_sent
    while (left := end - time.perf_counter()) > 0:
        await asyncio.sleep(min(left, run.life.every_ms / 1000.0))
        if time.perf_counter() >= end:
            break
        tp = partitions[i % len(partitions)]
        futures.append(
            clock.watch(await producer.send(tp.topic, f"r{i}".encode(), partition=tp.partition))
        )
        run.records_sent += 1
        i += 1
    results = await asyncio.gather(*futures, return_exceptions=True)
    run.records_acked += sum(1 for r in results if not isinstance(r, BaseException))


async def live_consumer(run: RealRun, consumer: Any, take: Any) -> None:
    """The consumer's scaled life (``run.life``): keep polling for ``life_ms`` (``take``
    counts what arrives) and commit every ``every_ms``; a commit refused while its
    coordinator moves is counted in ``run.commit_failures``, not fatal (the next one
    goes to the new coordinator)."""
    assert run.life is not None
    end = time.perf_counter() + run.life.life_ms / 1000.0
    every = run.life.every_ms / 1000.0
    next_commit = time.perf_counter() + every
    while (left := end - time.perf_counter()) > 0:
        take(await consumer.getmany(timeout_ms=max(1, int(min(left, every) * 1000))))
        if time.perf_counter() >= next_commit:
            next_commit += every
            try:
                await consumer.commit()
            except KafkaError:
                run.commit_failures += 1


async def measure_steady(work: WorkloadInputs, ledger: ConnectionLedger) -> None:
    """After the workload (and its life, if the run has one), keep the ledger's summary as
    the run's steady state and, with ``work.verify``, check that the kernel agrees. A run
    without a life first waits the ``settle_ms`` run option; a life is its settle."""
    run = work.run
    await asyncio.sleep(0 if run.life is not None else work.options["settle_ms"] / 1000.0)
    run.steady_summary = ledger.summary()
    if work.verify:
        await averify_against_kernel(ledger, work.cluster.listeners())


async def stop_client(work: WorkloadInputs, client: Any) -> None:
    """Stop the client, keep the random choices it was seen to make, and check that the
    kernel agrees nothing is left open."""
    await client.stop()
    work.run.choices = list(getattr(client, "choices", []))
    if work.verify:
        await averify_against_kernel(client.ledger, work.cluster.listeners())


async def run_producer(work: WorkloadInputs) -> None:
    """Stock aiokafka (observed) or the proposed producer: ``records`` records round-robin
    over the partitions, every one acknowledged; then the life or the settle."""
    run, options = work.run, work.options
    kwargs = client_kwargs(run.client, run.spec, work.policy_settings, run.seed)
    kwargs.update(bootstrap_servers=work.bootstrap, acks="all")
    if run.life is not None:
        kwargs.update(run.life.aiokafka_kwargs())
    run.client_config = _given(kwargs)
    if options["idempotent"]:
        kwargs["enable_idempotence"] = True
    producer = new_producer(run.client, kwargs)
    run.ledger = producer.ledger
    partitions = run.spec.cluster.partitions(run.spec.topics)
    clock = AckClock()
    started = time.perf_counter()
    await producer.start()
    try:
        futures = []
        for i in range(options["records"]):
            tp = partitions[i % len(partitions)]
            sent = await producer.send(tp.topic, f"r{i}".encode(), partition=tp.partition)
            futures.append(clock.watch(sent))
            run.records_sent += 1
        results = await asyncio.gather(*futures, return_exceptions=True)
        run.records_acked = sum(1 for r in results if not isinstance(r, BaseException))
        run.ttfa_ms = elapsed_ms(started, clock.first)
        if run.life is not None:
            await live_producer(run, producer, clock)
        await measure_steady(work, producer.ledger)
    finally:
        await stop_client(work, producer)
    if run.records_acked != run.records_sent:
        raise RealRunError(f"{run.records_sent - run.records_acked} records not acknowledged")


async def run_consumer(work: WorkloadInputs) -> None:
    """Stock aiokafka (observed) or the proposed consumer in the scenario's group: exactly
    ``records`` distinct records, committed; then the life or the settle."""
    run, options = work.run, work.options
    kwargs = client_kwargs(run.client, run.spec, work.policy_settings, run.seed)
    assert run.spec.group is not None
    kwargs.update(
        bootstrap_servers=work.bootstrap,
        group_id=run.spec.group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    if run.life is not None:
        kwargs.update(run.life.aiokafka_kwargs())
    run.client_config = _given(kwargs)
    topics = run.spec.topics
    consumer: Any = (
        ProposedConsumer(*topics, **kwargs)
        if run.client == "proposed"
        else observed_consumer(*topics, **kwargs)
    )
    run.ledger = consumer.ledger
    wanted = options["records"]
    seen: set[bytes] = set()
    started = time.perf_counter()

    def take(batch: Mapping[Any, list[Any]]) -> None:
        if run.ttfc_ms is None and any(batch.values()):
            run.ttfc_ms = elapsed_ms(started, time.perf_counter())
        for messages in batch.values():
            for message in messages:
                run.records_consumed += 1
                if message.value in seen:
                    run.duplicates += 1
                seen.add(message.value)

    await consumer.start()
    try:
        deadline = time.monotonic() + 60
        while len(seen) < wanted and time.monotonic() < deadline:
            take(await consumer.getmany(timeout_ms=1000))
        await consumer.commit()
        if run.life is not None:
            await live_consumer(run, consumer, take)
        await measure_steady(work, consumer.ledger)
    finally:
        await stop_client(work, consumer)
    if len(seen) != wanted or run.duplicates:
        raise RealRunError(
            f"consumed {len(seen)} distinct records of {wanted} ({run.duplicates} duplicates)"
        )


_TIMERS = ("metadata_max_age_ms", "connections_max_idle_ms", "connection_linger_ms")


def _given(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The connection timers among an aiokafka client's keyword arguments: what a run
    records as the configuration its client was given (absent: the client's default)."""
    return {k: kwargs[k] for k in _TIMERS if k in kwargs}


def _probe_ms(line: Mapping[str, Any], key: str) -> float | None:
    """A timing from a probe line: ms, or None where the probe has none (null or absent)."""
    value = line.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RealRunError(f"the Java probe reported {key}={value!r}, not a number of ms")
    return float(value)


def transactions_of(options: Mapping[str, int]) -> int:
    """The ``transactions`` run option, checked: a transactional run needs one at least."""
    count = options["transactions"]
    if count < 1:
        raise ConfigError(f"transactions={count}: a transactional run needs at least one")
    return count


def java_needs_compat(version: str) -> bool:
    """kafka-clients 3.x and later send request versions the embedded mock misparses."""
    return int(version.split(".")[0]) >= 3


async def run_java(work: WorkloadInputs, version: str) -> None:
    """The real Java client (kafka-clients ``version``) through the scenario, in the probe
    JVM. Its ledger comes from its NetworkClient log; with ``verify`` the log, the client's
    own connection metrics and the kernel's view of the JVM's sockets must agree. It does
    not read ``work.policy_settings``."""
    from connmgr_evidence.java import (
        TransactionPlan,
        build_probe,
        default_extra,
        kernel_sampler,
        run_probe,
    )

    run, options = work.run, work.options
    spec = run.spec
    if len(spec.topics) != 1:
        raise RealRunError("the Java probe drives one topic per run")
    kind: Literal["producer", "consumer"] = (
        "producer" if spec.client is ClientKind.PRODUCER else "consumer"
    )
    build = await asyncio.to_thread(build_probe, version)
    extra = default_extra(version, kind)
    settle_ms, every_ms, timeout_s = options["settle_ms"], 0, 120.0
    if run.life is not None:
        # The probe lives through its settle: records or commits every ``every_ms``.
        extra.update(run.life.java_config())
        settle_ms, every_ms = run.life.life_ms, run.life.every_ms
        timeout_s += run.life.life_s
    run.client_config = dict(extra)
    java = await asyncio.to_thread(
        functools.partial(
            run_probe,
            build,
            client=kind,
            bootstrap=work.bootstrap,
            topic=spec.topics[0],
            partitions=len(spec.cluster.topics[spec.topics[0]]),
            records=options["records"],
            group=spec.group,
            settle_ms=settle_ms,
            life_every_ms=every_ms,
            timeout_s=timeout_s,
            extra=extra,
            sample=kernel_sampler(work.cluster.endpoints()),
            verify=work.verify,
            transaction=(
                None
                if spec.transactional_id is None
                else TransactionPlan(
                    spec.transactional_id,
                    transactions_of(options),
                    round(spec.txn_interval_ms),
                    spec.offsets_group,
                    spec.offsets_topic,
                )
            ),
        )
    )
    steady_ms = (java.steady.log_time - java.started_at).total_seconds() * 1000.0
    run.ledger = java.ledger
    run.steady_summary = java.ledger.until(steady_ms).summary(steady_ms)
    run.records_sent = java.steady.records_sent
    run.records_acked = java.steady.records_acked
    run.records_consumed = java.steady.records_consumed
    run.ttfa_ms = _probe_ms(java.steady.raw, "ttfa_ms")
    run.ttfc_ms = _probe_ms(java.steady.raw, "ttfc_ms")
    run.java_log = str(java.log_path)
    with open(java.log_path) as log:
        lines = log.readlines()
    run.choices = [("least_loaded", node) for node in parse_least_loaded_picks(lines)]
    # Where the telemetry sender (kafka-clients >= 3.7) asked for its subscription: its
    # pick depends on timing the model does not have, so it is observed and replayed.
    telemetry = [
        n for _, api, n in parse_sent_requests(lines) if api == "GET_TELEMETRY_SUBSCRIPTIONS"
    ]
    run.choices.extend(("telemetry", node) for node in telemetry[:1])
    # Where each FindCoordinator went: a lookup that ran before the first metadata response
    # was applied goes on a bootstrap connection, a race the model cannot time.
    run.choices.extend(
        ("lookup", n) for _, api, n in parse_sent_requests(lines) if api == "FIND_COORDINATOR"
    )
    if kind == "producer" and int(version.split(".")[0]) >= 3:
        # enable.idempotence defaults to true since kafka-clients 3.0: model it so.
        run.spec = dataclasses.replace(spec, idempotent=True)
    if kind == "producer" and run.records_acked != run.records_sent:
        raise RealRunError(f"{run.records_sent - run.records_acked} records not acknowledged")
    if kind == "consumer" and run.records_consumed != options["records"]:
        raise RealRunError(f"consumed {run.records_consumed} of {options['records']} records")
