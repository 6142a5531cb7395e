"""Real runs: a real aiokafka client (stock, or with the proposed policy inside) through a
scenario on a fresh embedded cluster, accounted from the client's own hooks and checked
against the kernel's view of the process's sockets.

A scenario's topology moves onto the embedded cluster by position: the i-th broker of the
scenario is the cluster's i-th broker (ids 1..N on 127.0.0.1). The same relabelled topology
is what the simulator runs when a real run is compared with the model.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaProducer

from connmgr.aio.dropin import POLICY_OPTION_NAMES, ProposedConsumer, ProposedProducer
from connmgr.aio.kernel import averify_against_kernel
from connmgr.aio.observe import observed_consumer, observed_producer
from connmgr.core.config import ClientKind
from connmgr.core.endpoint import Endpoint
from connmgr.core.identity import Role
from connmgr.embedded import MockCluster
from connmgr.errors import ConfigError, ConnMgrError
from connmgr.ledger import ConnectionLedger
from connmgr.sim.result import RunResult
from connmgr.sim.run import prepare, run_spec
from connmgr.sim.scenarios import ScenarioSpec, on_cluster, policy_config

CLIENTS = ("aiokafka", "proposed")
RUN_OPTIONS: dict[str, int] = {"records": 300, "settle_ms": 4_000, "idempotent": 0}
"""Run-only ``--set`` keys: records to produce (and consume), how long to wait after the
workload before measuring the steady state, and whether the producer is idempotent."""
STOCK_OPTIONS = frozenset({"connections_max_idle_ms", "bootstrap_offset"})


class RealRunError(ConnMgrError):
    """A real run could not do what its scenario asks (records lost, client failed)."""


@dataclass
class RealRun:
    scenario: str
    client: str
    seed: int
    ledger: ConnectionLedger
    spec: ScenarioSpec
    """The scenario relabelled onto the embedded cluster: what the simulator should run."""
    idmap: dict[int, int]
    records_sent: int = 0
    records_acked: int = 0
    records_consumed: int = 0
    duplicates: int = 0
    choices: list[tuple[str, int]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    steady_summary: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    policy_settings: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "scenario": self.scenario,
            "client": self.client,
            "seed": self.seed,
            **self.steady_summary,
        }
        data["timeline"] = self.ledger.timeline()
        data["requests"] = self.requests
        data.update(
            records_sent=self.records_sent,
            records_acked=self.records_acked,
            records_consumed=self.records_consumed,
            duplicates=self.duplicates,
            wall_s=round(self.wall_s, 3),
            choices=self.choices,
        )
        return data

    def simulate(self, policy: str, extra: Mapping[str, str] | None = None) -> RunResult:
        """The simulator's run of ``policy`` on this run's relabelled topology and duration."""
        spec = self.spec
        duration = max(self.wall_s * 1000.0, 1.0)
        relabelled = type(spec)(**{**spec.__dict__, "duration_ms": duration})
        settings = dict(self.policy_settings)
        settings.update(extra or {})
        return run_spec(relabelled, policy, settings, self.seed)


Dial = tuple[int | None, Role, str]
"""(broker, role, host:port) of one dial."""


def sequence_differences(real: Sequence[Dial], model: RunResult) -> list[str]:
    """Where a real client's dial sequence departs from the model's, or [] if it matches.

    Batch by batch (see :meth:`RunResult.dial_batches`): the real dials must come in the
    model's batches, in the model's batch order, each batch with exactly the model's
    (broker, role, host:port) multiset; only the order inside one batch is free.
    """
    problems: list[str] = []
    position = 0
    for number, batch in enumerate(model.dial_batches()):
        got = list(real[position : position + len(batch)])
        if Counter(got) != Counter(batch):
            problems.append(
                f"batch {number} (dials {position}..{position + len(batch) - 1}): "
                f"model {_show(batch)}, real {_show(got)}"
            )
            break
        position += len(batch)
    if not problems and position != len(real):
        problems.append(
            f"real client dialled {len(real) - position} more: {_show(real[position:])}"
        )
    return problems


def _show(dials: Sequence[Dial]) -> str:
    return "[" + ", ".join(f"{b}/{r.value}@{ep}" for b, r, ep in dials) + "]"


def _split(scenario: str, settings: Mapping[str, str]) -> tuple[dict[str, str], dict[str, int]]:
    rest = {k: v for k, v in settings.items() if k not in RUN_OPTIONS}
    run_options = dict(RUN_OPTIONS)
    for key in RUN_OPTIONS:
        if key in settings:
            try:
                run_options[key] = int(settings[key])
            except ValueError:
                raise ConfigError(f"{key}={settings[key]!r}: expected an integer") from None
            if run_options[key] < 0:
                raise ConfigError(f"{key}={settings[key]!r}: must be >= 0")
    return rest, run_options


async def run_real(
    scenario: str,
    client: str,
    settings: Mapping[str, str] | None = None,
    *,
    verify_kernel: bool = True,
) -> RealRun:
    """Run ``client`` ("aiokafka" or "proposed") through ``scenario`` on a fresh cluster."""
    if client not in CLIENTS:
        raise ConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    rest, options = _split(scenario, settings or {})
    spec, policy_settings, seed = prepare(scenario, rest)
    if client == "aiokafka" and set(policy_settings) - STOCK_OPTIONS:
        raise ConfigError(
            f"stock aiokafka takes no policy options ({', '.join(sorted(policy_settings))})"
        )
    unknown = set(policy_settings) - set(POLICY_OPTION_NAMES) - {"connections_max_idle_ms"}
    if unknown:
        raise ConfigError(f"options {sorted(unknown)} cannot be set on a real client")
    brokers = len(spec.cluster.brokers)
    with MockCluster(brokers, group_initial_rebalance_delay_ms=0) as cluster:
        endpoints = {i: Endpoint(h, p) for i, (h, p) in cluster.endpoints().items()}
        real_spec, idmap = on_cluster(spec, endpoints, seed=seed)
        for topic, leaders in real_spec.cluster.topics.items():
            cluster.create_topic_with_leaders(topic, leaders)
        for group, broker in real_spec.cluster.coordinators.items():
            cluster.set_coordinator("group", group, broker)
        rtt = spec.cluster.brokers[min(spec.cluster.brokers)].rtt_ms
        if rtt:
            for broker in cluster.broker_ids:
                cluster.set_rtt(broker, int(rtt))
        run = RealRun(
            scenario,
            client,
            seed,
            ConnectionLedger(),
            real_spec,
            idmap,
            policy_settings=dict(policy_settings),
        )
        bootstrap = ",".join(str(e) for e in real_spec.bootstrap)
        if real_spec.client is ClientKind.CONSUMER:
            await _produce_fixture(bootstrap, real_spec, options["records"])
        cluster.clear_requests()
        started = time.perf_counter()
        if real_spec.client is ClientKind.PRODUCER:
            await _run_producer(run, cluster, bootstrap, options, policy_settings, verify_kernel)
        else:
            await _run_consumer(run, cluster, bootstrap, options, policy_settings, verify_kernel)
        run.wall_s = time.perf_counter() - started
        run.requests = [
            {"t_us": r.timestamp_us, "broker": r.broker_id, "api": r.api_name}
            for r in cluster.requests()
        ]
    return run


def _client_kwargs(
    client: str, spec: ScenarioSpec, policy_settings: Mapping[str, str], seed: int
) -> dict[str, Any]:
    """aiokafka keyword arguments for ``client``: the policy settings converted and checked
    exactly as the simulator converts them (one parser: PolicyConfig.with_settings)."""
    config = policy_config(spec, policy_settings)
    idle = config.connections_max_idle_ms
    kwargs: dict[str, Any] = {"connections_max_idle_ms": None if idle == -1 else idle}
    if client == "proposed":
        kwargs["policy_seed"] = seed  # the simulator's policy draws from the same stream
        kwargs.update({name: getattr(config, name) for name in POLICY_OPTION_NAMES})
    return kwargs


async def _produce_fixture(bootstrap: str, spec: ScenarioSpec, records: int) -> None:
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


async def _measure(
    run: RealRun, ledger: ConnectionLedger, cluster: MockCluster, settle_ms: int, verify: bool
) -> None:
    await asyncio.sleep(settle_ms / 1000.0)
    run.steady_summary = ledger.summary()
    if verify:
        await averify_against_kernel(ledger, cluster.listeners())


async def _stop(run: RealRun, client: Any, cluster: MockCluster, verify: bool) -> None:
    """Stop the client, keep the random choices it was seen to make, and check that the
    kernel agrees nothing is left open."""
    await client.stop()
    run.choices = list(getattr(client, "choices", []))
    if verify:
        await averify_against_kernel(client.ledger, cluster.listeners())


async def _run_producer(
    run: RealRun,
    cluster: MockCluster,
    bootstrap: str,
    options: Mapping[str, int],
    policy_settings: Mapping[str, str],
    verify: bool,
) -> None:
    kwargs = _client_kwargs(run.client, run.spec, policy_settings, run.seed)
    kwargs.update(bootstrap_servers=bootstrap, acks="all")
    if options["idempotent"]:
        kwargs["enable_idempotence"] = True
    producer: Any = (
        ProposedProducer(**kwargs) if run.client == "proposed" else observed_producer(**kwargs)
    )
    run.ledger = producer.ledger
    partitions = run.spec.cluster.partitions(run.spec.topics)
    await producer.start()
    try:
        futures = []
        for i in range(options["records"]):
            tp = partitions[i % len(partitions)]
            futures.append(await producer.send(tp.topic, f"r{i}".encode(), partition=tp.partition))
            run.records_sent += 1
        results = await asyncio.gather(*futures, return_exceptions=True)
        run.records_acked = sum(1 for r in results if not isinstance(r, BaseException))
        await _measure(run, producer.ledger, cluster, options["settle_ms"], verify)
    finally:
        await _stop(run, producer, cluster, verify)
    if run.records_acked != run.records_sent:
        raise RealRunError(f"{run.records_sent - run.records_acked} records not acknowledged")


async def _run_consumer(
    run: RealRun,
    cluster: MockCluster,
    bootstrap: str,
    options: Mapping[str, int],
    policy_settings: Mapping[str, str],
    verify: bool,
) -> None:
    kwargs = _client_kwargs(run.client, run.spec, policy_settings, run.seed)
    assert run.spec.group is not None
    kwargs.update(
        bootstrap_servers=bootstrap,
        group_id=run.spec.group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    topics = run.spec.topics
    consumer: Any = (
        ProposedConsumer(*topics, **kwargs)
        if run.client == "proposed"
        else observed_consumer(*topics, **kwargs)
    )
    run.ledger = consumer.ledger
    wanted = options["records"]
    seen: set[bytes] = set()
    await consumer.start()
    try:
        deadline = time.monotonic() + 60
        while len(seen) < wanted and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=1000)
            for messages in batch.values():
                for message in messages:
                    run.records_consumed += 1
                    if message.value in seen:
                        run.duplicates += 1
                    seen.add(message.value)
        await consumer.commit()
        await _measure(run, consumer.ledger, cluster, options["settle_ms"], verify)
    finally:
        await _stop(run, consumer, cluster, verify)
    if len(seen) != wanted or run.duplicates:
        raise RealRunError(
            f"consumed {len(seen)} distinct records of {wanted} ({run.duplicates} duplicates)"
        )
