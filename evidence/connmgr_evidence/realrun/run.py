"""Real runs: a real client through a scenario on a cluster (a fresh embedded one, or a real
Kafka cluster shared between runs), accounted from the client's own hooks and checked
against the kernel's view of the sockets, and compared with the simulator.

A scenario's topology moves onto the cluster by position: the i-th broker of the scenario is
the cluster's i-th broker (ids 1..N on 127.0.0.1). The same relabelled topology is what the
simulator runs when a real run is compared with the model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from connmgr.aio.dropin import POLICY_OPTION_NAMES
from connmgr.core.config import ClientKind
from connmgr.core.endpoint import Endpoint
from connmgr.core.identity import Role
from connmgr.embedded import CoordinatorKeyType, MockCluster
from connmgr.embedded.compat import MOCK_PARSE_CAPS, MockCompatShim
from connmgr.errors import ConfigError
from connmgr.ledger import ConnectionLedger
from connmgr.sim.result import RunResult
from connmgr.sim.run import prepare
from connmgr.sim.scenarios import ScenarioSpec, on_cluster, policy_config
from connmgr_evidence.realrun.backends import ClusterBackend, MockBackend, unique_name
from connmgr_evidence.realrun.librdkafka import run_librdkafka
from connmgr_evidence.realrun.life import LifePlan
from connmgr_evidence.realrun.record import RealRun
from connmgr_evidence.realrun.restart import check_fits, rolling_restart
from connmgr_evidence.realrun.transactional import early_leader_dials, run_txn_producer
from connmgr_evidence.realrun.workloads import (
    Workload,
    WorkloadInputs,
    java_needs_compat,
    produce_fixture,
    run_consumer,
    run_java,
    run_producer,
)

CLIENTS = ("aiokafka", "proposed", "java", "librdkafka")
RUN_OPTIONS: dict[str, int] = {
    "records": 300,
    "settle_ms": 4_000,
    "idempotent": 0,
    "transactions": 3,
    "life_s": 0,
    "time_scale": 1,
    "rolling_restart": 0,
    "down_ms": 3_000,
}
"""Run-only ``--set`` keys: records to produce (and consume), how long to wait after the
workload before measuring the steady state, whether the producer is idempotent, and how
many transactions a transactional producer splits its records into (one starting every
``txn_interval_ms``, a scenario parameter). A scaled life (:mod:`connmgr_evidence.realrun.life`):
``life_s`` seconds of wall time after the workload (0: none, the settle instead), each
standing for ``time_scale`` seconds; ``rolling_restart=1`` restarts every broker of the
embedded cluster in turn during it, each down ``down_ms`` (wall)."""
STOCK_OPTIONS = frozenset({"connections_max_idle_ms", "bootstrap_offset"})


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


def _life_plan(
    spec: ScenarioSpec,
    options: Mapping[str, int],
    policy_settings: Mapping[str, str],
    *,
    shared: bool,
) -> LifePlan | None:
    """The scaled life the run options ask for (None: none), checked against the scenario:
    producer or consumer, and a rolling restart only of an embedded cluster it fits."""
    idle = policy_config(spec, policy_settings).connections_max_idle_ms
    life = LifePlan.from_options(options, idle)
    if life is None:
        return None
    if spec.transactional_id is not None:
        raise ConfigError("a scaled life runs producer and consumer scenarios")
    if life.rolling_restart:
        if shared:
            raise ConfigError("rolling_restart=1 restarts the embedded cluster's brokers only")
        check_fits(len(spec.cluster.brokers), life.life_s, life.down_ms)
    return life


def check_life_settings(scenario: str, settings: Mapping[str, str]) -> LifePlan | None:
    """What :func:`run_real` would decide about a life on the embedded cluster with these
    ``--set`` settings, without running it: a :class:`ConfigError` if it cannot run."""
    rest, options = _split(scenario, settings)
    spec, policy_settings, _ = prepare(scenario, rest)
    return _life_plan(spec, options, policy_settings, shared=False)


@dataclass(frozen=True)
class RunPlan:
    """One real run, decided: what runs where, with which settings."""

    scenario: str
    client: str
    spec: ScenarioSpec
    policy_settings: dict[str, str]
    seed: int
    options: Mapping[str, int]
    verify: bool
    kafka_clients: str | None
    life: LifePlan | None = None


async def run_real(
    scenario: str,
    client: str,
    settings: Mapping[str, str] | None = None,
    *,
    verify_kernel: bool = True,
    cluster: ClusterBackend | None = None,
    kafka_clients: str | None = None,
) -> RealRun:
    """Run ``client`` ("aiokafka", "proposed", "librdkafka" -- confluent-kafka's -- or
    "java" with ``kafka_clients`` = the kafka-clients version) through ``scenario``: on a
    fresh embedded cluster, or on ``cluster`` (a real Kafka cluster shared between runs)."""
    if client not in CLIENTS:
        raise ConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    if (client == "java") != (kafka_clients is not None):
        raise ConfigError("--kafka-clients VERSION goes with --client java, and only with it")
    rest, options = _split(scenario, settings or {})
    spec, policy_settings, seed = prepare(scenario, rest)
    if client != "proposed" and set(policy_settings) - STOCK_OPTIONS:
        raise ConfigError(
            f"{client} takes no policy options ({', '.join(sorted(policy_settings))})"
        )
    if client == "librdkafka" and spec.transactional_id is not None:
        raise ConfigError(
            "--client librdkafka runs producer and consumer scenarios, not transactional ones"
        )
    unknown = set(policy_settings) - set(POLICY_OPTION_NAMES) - {"connections_max_idle_ms"}
    if unknown:
        raise ConfigError(f"options {sorted(unknown)} cannot be set on a real client")
    life = _life_plan(spec, options, policy_settings, shared=cluster is not None)
    if life is not None:
        policy_settings = {**policy_settings, **life.policy_settings(client, policy_settings)}
    plan = RunPlan(
        scenario,
        client,
        spec,
        dict(policy_settings),
        seed,
        options,
        verify_kernel,
        kafka_clients,
        life,
    )
    if cluster is not None:
        return await _run_on(cluster, plan)
    with MockCluster(len(spec.cluster.brokers), group_initial_rebalance_delay_ms=0) as mock:
        if kafka_clients is not None and java_needs_compat(kafka_clients):
            proxy = MockCompatShim(mock, MOCK_PARSE_CAPS)
            try:
                return await _run_on(MockBackend(mock), plan)
            finally:
                proxy.close()
        return await _run_on(MockBackend(mock), plan)


def place_scenario(
    backend: ClusterBackend, spec: ScenarioSpec, seed: int
) -> tuple[ScenarioSpec, dict[int, int]]:
    """Create ``spec``'s topics and group on ``backend`` and return the spec relabelled onto
    it (what the simulator runs for comparison) with the broker id mapping."""
    endpoints = {i: Endpoint(h, p) for i, (h, p) in backend.endpoints().items()}
    if len(endpoints) != len(spec.cluster.brokers):
        raise ConfigError(
            f"the scenario needs {len(spec.cluster.brokers)} brokers; the cluster has "
            f"{len(endpoints)} (use --set brokers=... or a scenario of that size)"
        )
    _, idmap = on_cluster(spec, endpoints, seed=seed)
    topics = {t: unique_name(t) if backend.shared else t for t in spec.cluster.topics}
    group = None
    group_name = spec.group or spec.offsets_group  # a consumer's, or a ctp producer's
    if group_name is not None:
        wanted = unique_name(group_name) if backend.shared else group_name
        group = backend.group_coordinated_by(wanted, idmap[spec.cluster.coordinator(group_name)])
    txn = None
    if spec.transactional_id is not None:
        wanted = unique_name(spec.transactional_id) if backend.shared else spec.transactional_id
        at = idmap[spec.cluster.txn_coordinator(spec.transactional_id)]
        txn = backend.transaction_coordinated_by(wanted, at)
    real_spec, idmap = on_cluster(
        spec, endpoints, seed=seed, topics=topics, group=group, transactional_id=txn
    )
    for topic, leaders in real_spec.cluster.topics.items():
        backend.create_topic_with_leaders(topic, leaders)
    rtt = spec.cluster.brokers[min(spec.cluster.brokers)].rtt_ms
    if rtt:
        backend.set_rtt(rtt)
    return real_spec, idmap


async def _run_on(backend: ClusterBackend, plan: RunPlan) -> RealRun:
    real_spec, idmap = place_scenario(backend, plan.spec, plan.seed)
    run = RealRun(
        plan.scenario,
        plan.client,
        plan.seed,
        ConnectionLedger(),
        real_spec,
        idmap,
        policy_settings=plan.policy_settings,
        life=plan.life,
    )
    bootstrap = ",".join(str(e) for e in real_spec.bootstrap)
    if real_spec.client is ClientKind.CONSUMER:
        await produce_fixture(bootstrap, real_spec, plan.options["records"])
    backend.clear_requests()
    started = time.perf_counter()
    restart = _start_restart(backend, real_spec, plan, started, run)
    try:
        await _workload(backend, plan, run, bootstrap)
    finally:
        if restart is not None:
            await restart  # every broker is up again before the run is over
    run.wall_s = time.perf_counter() - started
    run.requests = backend.requests()
    return run


def _start_restart(
    backend: ClusterBackend, spec: ScenarioSpec, plan: RunPlan, started: float, run: RealRun
) -> asyncio.Task[None] | None:
    """The rolling restart of a life with ``rolling_restart=1``, as a task beside the
    workload (every client's workload leaves the event loop free), or None."""
    if plan.life is None or not plan.life.rolling_restart:
        return None
    if not isinstance(backend, MockBackend):
        raise ConfigError("rolling_restart=1 restarts the embedded cluster's brokers only")
    coordinators: dict[tuple[CoordinatorKeyType, str], int] = {}
    if spec.group is not None:
        coordinators[("group", spec.group)] = spec.cluster.coordinator(spec.group)
    return asyncio.create_task(
        rolling_restart(
            backend.cluster,
            spec.cluster.topics,
            coordinators,
            started=started,
            life_s=plan.life.life_s,
            down_ms=plan.life.down_ms,
            events=run.restarts,
        )
    )


def workload_of(client: str, spec: ScenarioSpec) -> Workload:
    """The workload that runs ``client`` (not "java": :func:`run_java` also takes the
    kafka-clients version) through ``spec``: librdkafka's, or aiokafka's (stock or proposed)
    transactional producer, producer or consumer."""
    if client == "librdkafka":
        return run_librdkafka
    if spec.transactional_id is not None:
        return run_txn_producer
    return run_producer if spec.client is ClientKind.PRODUCER else run_consumer


async def _workload(backend: ClusterBackend, plan: RunPlan, run: RealRun, bootstrap: str) -> None:
    work = WorkloadInputs(run, backend, bootstrap, plan.options, plan.policy_settings, plan.verify)
    if plan.kafka_clients is None:
        await workload_of(plan.client, run.spec)(work)
        return
    real_spec = run.spec
    await run_java(work, plan.kafka_clients)
    if real_spec.offsets_group is not None and run.java_log is not None:
        cluster = real_spec.cluster
        leaders = {cluster.leader(tp) for tp in cluster.partitions(real_spec.topics)}
        with open(run.java_log) as log:
            early = early_leader_dials(log, leaders)
        run.spec = dataclasses.replace(run.spec, early_leader_dials=early)
