"""The long run itself: a secure 3-broker cluster, both variants' clients side by side for
the life, the rolling restart and the port move on schedule, the kernel and the brokers'
JMX sampled throughout, and the topics read back at the end.

Threads: one per client (each drives its probe JVM through :func:`connmgr_evidence.java.run_probe`),
the kernel sampler, the JMX poller's reader; the phases run on the caller's thread. A phase
that fails is recorded (the clients live on and the run is reported, with the failure, and
the CLI exits non-zero); the later phases are then skipped.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final

from connmgr_evidence.bench.longrun.lives import ConnLife, connection_lives
from connmgr_evidence.bench.longrun.plan import (
    BROKERS,
    PARTITIONS,
    ClientSpec,
    LongRunSettings,
    client_specs,
)
from connmgr_evidence.bench.longrun.records import RecordCheck, check_records, read_topic
from connmgr_evidence.bench.longrun.sampling import KernelSampler, SocketRow
from connmgr_evidence.java import (
    JavaRun,
    KernelSample,
    ProbeBuild,
    TransactionPlan,
    build_probe,
    default_extra,
    kernel_sockets,
    run_probe,
)
from connmgr_evidence.java.jmx import BrokerJmxPoller, BrokerReading
from connmgr_evidence.realkafka import KAFKA_VERSION, BrokerMove, KafkaCluster

__all__ = ["ClientOutcome", "LongRunResult", "PhaseEvent", "run_longrun"]

_MARGIN_S = 600.0
"""How long past the end of the lives a client may take to close (a close that waits for a
broker, a loaded machine)."""


@dataclass(frozen=True, slots=True)
class PhaseEvent:
    """Something the run did to the cluster, at ``t_s`` on the run's clock."""

    t_s: float
    what: str
    broker: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class ClientOutcome:
    """One client's run: the probe's result (None if it failed: ``error`` says why) and its
    connections from its log on the run's clock."""

    spec: ClientSpec
    run: JavaRun[KernelSample] | None
    error: str | None
    lives: tuple[ConnLife, ...] = ()


@dataclass(frozen=True)
class LongRunResult:
    """Everything the report is written from."""

    settings: LongRunSettings
    started_at: datetime
    """The run's clock origin (the clients' launch), local time."""
    finished_at: datetime
    origin: float
    """The same origin as ``time.time()``: JMX readings are on that clock."""
    cluster_start_s: float
    builds: dict[str, ProbeBuild]
    sasl_before: dict[int, tuple[str, int]]
    sasl_after: dict[int, tuple[str, int]]
    events: list[PhaseEvent]
    move: BrokerMove | None
    clients: list[ClientOutcome]
    sockets: list[SocketRow]
    brokers: list[BrokerReading]
    records: list[RecordCheck]
    problems: list[str] = field(default_factory=list)
    kafka_version: str = KAFKA_VERSION
    """The release the cluster ran (the one given, or the tier's default)."""


def _say(message: str) -> None:
    print(f"[longrun {datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def run_longrun(
    settings: LongRunSettings,
    *,
    cluster: KafkaCluster | None = None,
    say: Callable[[str], None] = _say,
) -> LongRunResult:
    """Run the long run (see the package doc) and return what it measured.

    It starts a cluster of its own (``security=True, jmx=True``) and stops it before it
    returns, unless given a running ``cluster`` of that kind that lacks the run's topics
    (left running, one broker moved). Unless ``settings.keep_logs``, the clients' logs are
    removed when it returns. Raises only for what stops the run before the clients start
    (no Java, the cluster or a build failing); anything later is in
    :attr:`LongRunResult.problems`."""
    logs = settings.keep_logs or Path(tempfile.mkdtemp(prefix="connmgr-longrun-"))
    logs.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    try:
        builds = {v.slug: build_probe(v.version) for v in settings.variants}
        say(f"probes built ({', '.join(v.version for v in settings.variants)})")
        if cluster is not None:
            return _run(settings, cluster, builds, logs, 0.0, say)
        with KafkaCluster(len(BROKERS), security=True, jmx=True, heap_mb=settings.heap_mb) as own:
            return _run(settings, own, builds, logs, time.monotonic() - began, say)
    finally:
        if settings.keep_logs is None:
            shutil.rmtree(logs, ignore_errors=True)


def _run(
    settings: LongRunSettings,
    cluster: KafkaCluster,
    builds: dict[str, ProbeBuild],
    logs: Path,
    cluster_start_s: float,
    say: Callable[[str], None],
) -> LongRunResult:
    cluster.set_rtt(settings.rtt_ms)
    for v in settings.variants:
        cluster.create_topic_with_leaders(v.topic, BROKERS)
        cluster.create_topic_with_leaders(v.txn_topic, BROKERS)
    access = cluster.access("SASL_SSL")
    sasl_before = dict(access.endpoints)
    say(f"cluster up: SASL_SSL {access.bootstrap_servers}, RTT {settings.rtt_ms:g} ms")
    specs = [
        spec
        for v in settings.variants
        for spec in client_specs(
            v,
            settings,
            access.java_properties(),
            {k: default_extra(v.version, k) for k in ("producer", "consumer", "admin")},
        )
    ]
    origin = time.time()
    started_at = datetime.fromtimestamp(origin)
    sampler = KernelSampler(origin, settings.sample_s, {a: b for b, a in sasl_before.items()})
    poller = BrokerJmxPoller(
        builds[settings.variants[0].slug],
        cluster.jmx_endpoints(),
        settings.sample_s,
        logs / "broker-jmx.stderr",
    )
    outcomes: dict[str, ClientOutcome] = {}
    threads = [
        threading.Thread(
            target=_client,
            args=(spec, builds[spec.variant.slug], access.bootstrap_servers, settings),
            kwargs={"logs": logs, "sampler": sampler, "started_at": started_at, "into": outcomes},
            name=f"longrun-{spec.label}",
            daemon=True,
        )
        for spec in specs
    ]
    sampler.start()
    poller.start()
    for thread in threads:
        thread.start()
    say(f"{len(threads)} clients launched for {settings.minutes:g} min")
    events: list[PhaseEvent] = []
    problems: list[str] = []
    logged = [logs / f"{spec.variant.slug}-{spec.name}.log" for spec in specs]
    move = _phases(cluster, settings, origin, events, sampler, logged, problems, say)
    if settings.overtime_s > 0:
        _end_lives(settings, origin, move, events, logged, say)
    for thread in threads:
        thread.join(max(1.0, origin + settings.deadline_s + _MARGIN_S - time.time()))
    sasl_after = dict(cluster.access("SASL_SSL").endpoints)
    sockets = sampler.stop()
    try:
        readings = poller.stop()
    except Exception as exc:  # the run is reported without them, and fails
        problems.append(f"broker JMX: {exc}")
        readings = poller.readings()
    finished_at = datetime.now()
    say("clients done; reading the topics back")
    clients = [outcomes.get(s.label) or ClientOutcome(s, None, "never finished") for s in specs]
    problems += [f"{c.spec.label}: {c.error}" for c in clients if c.error]
    records = _read_back(cluster.bootstrap_servers, clients, problems)
    return LongRunResult(
        settings=settings,
        started_at=started_at,
        finished_at=finished_at,
        origin=origin,
        cluster_start_s=cluster_start_s,
        builds=builds,
        sasl_before=sasl_before,
        sasl_after=sasl_after,
        events=events,
        move=move,
        clients=clients,
        sockets=sockets,
        brokers=readings,
        records=records,
        problems=problems,
        kafka_version=cluster.version,
    )


def _client(
    spec: ClientSpec,
    build: ProbeBuild,
    bootstrap: str,
    settings: LongRunSettings,
    *,
    logs: Path,
    sampler: KernelSampler,
    started_at: datetime,
    into: dict[str, ClientOutcome],
) -> None:
    log = logs / f"{spec.variant.slug}-{spec.name}.log"
    try:
        run = run_probe(
            build,
            client=spec.kind,
            bootstrap=bootstrap,
            topic=spec.topic,
            partitions=PARTITIONS,
            records=0,
            group=spec.group,
            settle_ms=settings.life_ms,
            settle_until=started_at.timestamp() + settings.deadline_s,
            settle_end_file=_end_file(logs) if settings.overtime_s > 0 else None,
            life_every_ms=spec.every_ms,
            extra=spec.extra,
            log_path=log,
            log_level="DEBUG",
            timeout_s=settings.deadline_s + _MARGIN_S,
            transaction=(
                None
                if spec.transactional_id is None
                else TransactionPlan(spec.transactional_id, live=True)
            ),
            allow_send_errors=spec.kind == "producer",
            sample=lambda pid: kernel_sockets(pid, list(sampler.addresses())),
            on_start=lambda pid: sampler.watch(pid, spec.variant.slug, spec.name),
        )
    except Exception as exc:
        into[spec.label] = ClientOutcome(spec, None, f"{type(exc).__name__}: {exc}")
        return
    with open(log, encoding="utf-8", errors="replace") as lines:
        lives = connection_lives(lines, started_at, closed_at=run.closed.log_time)
    into[spec.label] = ClientOutcome(spec, run, None, tuple(lives))


def _phases(
    cluster: KafkaCluster,
    settings: LongRunSettings,
    origin: float,
    events: list[PhaseEvent],
    sampler: KernelSampler,
    logged: list[Path],
    problems: list[str],
    say: Callable[[str], None],
) -> BrokerMove | None:
    """Once every client is past its bootstrap (its log, in ``logged``, shows a broker's
    connection ready: JVMs take a while to start side by side), or ``start_s`` after the
    launch (a problem then), the rolling restart, then the move, each at its fraction of the
    lives' time left (:meth:`LongRunSettings.schedule`; the move no earlier than the
    restart's end); returns the move, None if it did not happen."""

    def now() -> float:
        return time.time() - origin

    def note(what: str, broker: int | None = None, detail: str = "") -> None:
        events.append(PhaseEvent(now(), what, broker, detail))
        say(f"t={now():7.1f}s {what}{f' broker {broker}' if broker else ''} {detail}".rstrip())

    up: set[Path] = set()
    while len(up) < len(logged) and now() < settings.start_s:
        up |= {log for log in logged if log not in up and _past_bootstrap(log)}
        time.sleep(0.25)
    note("clients-up", None, f"{len(up)} of {len(logged)} clients past their bootstrap")
    if len(up) < len(logged):
        late = ", ".join(sorted(log.stem for log in logged if log not in up))
        problems.append(
            f"not past their bootstrap {settings.start_s:g} s after the launch: {late} "
            "(the phases went ahead without them)"
        )
    schedule = settings.schedule(now())
    try:
        time.sleep(max(0.0, schedule.restart_s - now()))
        note("restart-begin")
        for broker in settings.restart:
            stopped = cluster.stop_broker(broker)
            note("broker-stopped", broker, f"controlled shutdown {stopped:.1f}s")
            started = cluster.start_broker(broker)
            note("broker-started", broker, f"listed by every broker after {started:.1f}s")
            elections = cluster.restore_preferred_leaders()
            note("leaders-restored", broker, f"{elections} election requests")
        note("restart-end")
        time.sleep(max(0.0, schedule.move_s - now()))
        note("move-begin", settings.move)
        move = cluster.move_broker(settings.move)
        old, new = move.before["SASL_SSL"], move.after["SASL_SSL"]
        sampler.add_addresses({new: settings.move})
        note("move-end", settings.move, f"SASL_SSL {old[1]} -> {new[1]} in {move.seconds:.1f}s")
        return move
    except Exception as exc:
        note("phase-failed", None, f"{type(exc).__name__}: {exc}")
        problems.append(f"phase failed: {traceback.format_exception_only(exc)[-1].strip()}")
        return None


def _end_file(logs: Path) -> Path:
    """The file whose creation ends every life (the probes' ``--settle-end-file``)."""
    return logs / "lives.end"


def _end_lives(
    settings: LongRunSettings,
    origin: float,
    move: BrokerMove | None,
    events: list[PhaseEvent],
    logged: list[Path],
    say: Callable[[str], None],
) -> None:
    """End every life (create :func:`_end_file`) at ``settings.end_s`` if every variant's
    clients have dialled the moved broker at its new SASL_SSL port since the move began
    (their logs, in ``logged``, say so), else as soon as they have, polling, and at
    ``settings.deadline_s`` at the latest: on a loaded machine the restart and the move can
    leave the nominal life too little time after the move. With no move (a phase failed),
    at ``end_s``."""

    def now() -> float:
        return time.time() - origin

    while now() < settings.end_s:
        time.sleep(min(0.25, max(0.0, settings.end_s - now())))
    begun = [e.t_s for e in events if e.what == "move-begin"]
    if move is not None and begun:
        port = move.after["SASL_SSL"][1]
        waiting = {v.slug for v in settings.variants}
        while True:
            waiting = {
                slug
                for slug in waiting
                if not any(
                    _dialled(log, port, origin, begun[0])
                    for log in logged
                    if log.stem.startswith(f"{slug}-")
                )
            }
            if not waiting or now() >= settings.deadline_s:
                break
            time.sleep(1.0)
        late = now() - settings.end_s
        if waiting:
            say(f"t={now():7.1f}s lives end at their deadline; no dial of port {port} by {waiting}")
        elif late >= 1.0:
            say(f"t={now():7.1f}s lives end {late:.0f} s past end_s: every variant dialled {port}")
    _end_file(logged[0].parent).touch()


def _dialled(log: Path, port: int, origin: float, since_s: float) -> bool:
    """Whether the client writing ``log`` has dialled ``port`` at or after ``since_s``
    (seconds from ``origin`` on the run's clock), by its log so far."""
    try:
        with open(log, encoding="utf-8", errors="replace") as lines:
            lives = connection_lives(lines, datetime.fromtimestamp(origin))
    except OSError:
        return False  # not written yet
    return any(c.port == port and c.dialled_s >= since_s for c in lives)


_BROKER_READY: Final = re.compile(r"Initiating API versions fetch from node \d+\.")
"""A connection to a broker (not a bootstrap entry: those have negative ids) is ready."""


def _past_bootstrap(log: Path) -> bool:
    """Whether the client writing ``log`` has a broker connection ready (the log so far)."""
    try:
        return _BROKER_READY.search(log.read_text(encoding="utf-8", errors="replace")) is not None
    except OSError:
        return False  # not written yet


def _read_back(
    bootstrap: str, clients: list[ClientOutcome], problems: list[str]
) -> list[RecordCheck]:
    """Each producer's topic read back and checked (see :mod:`.records`)."""
    checks: list[RecordCheck] = []
    for outcome in clients:
        run = outcome.run
        if outcome.spec.kind != "producer" or run is None:
            continue
        raw = run.steady.raw
        not_acked = {
            int(n) for n in [*raw.get("failed_records", []), *raw.get("aborted_records", [])]
        }
        txn = outcome.spec.transactional_id is not None
        try:
            values = asyncio.run(
                read_topic(bootstrap, outcome.spec.topic, PARTITIONS, committed_only=txn)
            )
        except Exception as exc:
            problems.append(f"reading {outcome.spec.topic} back: {exc}")
            continue
        checks.append(check_records(outcome.spec.topic, values, run.steady.records_sent, not_acked))
    for check in checks:
        if not check.exactly_once:
            problems.append(
                f"{check.topic}: {len(check.lost)} lost, {len(check.duplicated)} duplicated, "
                f"{check.unexpected} unexpected"
            )
    return checks
