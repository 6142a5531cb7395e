"""The driver contract (:mod:`connmgr.core.driver`): the simulator and the aiokafka adapter's
driver feed a policy the same events for the same happenings.

Each policy runs a scenario in the simulator, which records every event it fed and the
actions it got back; then the same happenings -- requests, answers, dial outcomes, time,
close -- are made to happen to the aio driver (``connmgr.testing.replay``), which drives an
identical fresh policy. Equal recordings mean the two drivers keep one contract: same events,
same request numbering, same non-reentrant order, same interpretation of every action (the
ledgers they write are compared too).

Left out, because the contract says they differ: a connection the peer closes (the aio
driver fails the requests leased on it to their callers first, ``RequestFailed``; the
simulator's client models never see the failure and the policy re-places them). Brokers that
answer KIP-1242's identity check are the last test's: the same comparison, in a world where
the bootstrap socket is asked and adopted and every dial for a known node confirms it.
"""

from __future__ import annotations

import asyncio
import math

import pytest

from connmgr import javalog
from connmgr.aio.driver import Leased
from connmgr.core.events import (
    ConnectionClosedByPeer,
    ConnectionEstablished,
    CoordinatorLost,
    IdentityChecked,
    InterestChanged,
    TimePassed,
)
from connmgr.core.metadata import ClusterMetadata
from connmgr.core.policy import Policy
from connmgr.ledger import ConnEvent
from connmgr.policies import POLICIES
from connmgr.sim import SCENARIOS
from connmgr.sim.result import RunResult, java_log_events
from connmgr.sim.run import build_simulator, prepare
from connmgr.testing.replay import FED_AS_RECORDED, AioReplay, ScriptedDriver, Step, record
from connmgr_evidence.java.accounting import build_ledger

SCRIPTS = {
    "seed-producer": {"duration_ms": "120000"},
    "seed-consumer": {"duration_ms": "120000"},
    "big-producer": {"brokers": "12", "duration_ms": "120000"},
    "big-consumer": {"brokers": "12", "duration_ms": "700000"},
    "txn-producer": {"duration_ms": "60000"},
    "ctp-producer": {"duration_ms": "60000"},
    "idle-disabled": {"duration_ms": "60000"},
}


def simulated(
    scenario: str, policy: str, *, checks: bool = False
) -> tuple[list[Step], RunResult, Policy]:
    spec, settings, seed = prepare(scenario, SCRIPTS[scenario])
    spec.cluster.confirms_identity = checks
    sim = build_simulator(spec, policy, settings, seed)
    steps = record(sim.policy)
    result = sim.run()
    fresh = build_simulator(spec, policy, settings, seed).policy
    return steps, result, fresh


WORLD = (CoordinatorLost, InterestChanged)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("scenario", SCRIPTS)
def test_the_aio_driver_feeds_what_the_simulator_feeds(scenario: str, policy: str) -> None:
    steps, result, fresh = simulated(scenario, policy)
    assert not any(isinstance(e, ConnectionEstablished) and e.node_id for _, e, _ in steps)
    assert_same_feed(steps, result, fresh)


@pytest.mark.parametrize("scenario", ["seed-producer", "seed-consumer"])
def test_with_brokers_that_answer_identity_checks_the_drivers_still_agree(scenario: str) -> None:
    """KIP-1242's world: the drop-in's bootstrap socket is asked and adopted, its dials for
    known nodes confirm them; the aio driver sends the check and feeds the answer."""
    steps, result, fresh = simulated(scenario, "proposed", checks=True)
    assert [type(e) for _, e, _ in steps].count(IdentityChecked) == 1
    confirmed = [e.node_id for _, e, _ in steps if isinstance(e, ConnectionEstablished)]
    assert confirmed[0] is None and None not in confirmed[1:]  # bootstrap, then known nodes
    assert result.ledger.count(ConnEvent.ADOPTED) == 1
    assert_same_feed(steps, result, fresh)


def assert_same_feed(steps: list[Step], result: RunResult, fresh: Policy) -> None:
    assert not any(isinstance(e, ConnectionClosedByPeer) for _, e, _ in steps), "see docstring"
    replay = AioReplay(fresh)
    seen = asyncio.run(replay.run(steps))
    for number, (expected, got) in enumerate(zip(steps, seen, strict=False)):
        assert got == expected, f"step {number}: simulator {expected}, aio driver {got}"
    assert len(seen) == len(steps)
    # The aio driver made every event but the outside world's (see connmgr.testing.replay):
    # a recorded object reaches the policy only for those, and TimePassed only as the
    # simulator's end-of-run tick, just before ClientClosed.
    recorded = {id(e) for _, e, _ in steps}
    as_recorded = [(n, type(e)) for n, (_, e, _) in enumerate(seen) if id(e) in recorded]
    world = [(n, type(e)) for n, (_, e, _) in enumerate(steps) if isinstance(e, WORLD)]
    assert as_recorded == [*world, (len(steps) - 2, TimePassed)]
    simulated_ledger = [(e.t_ms, e.kind, e.conn_id, e.key, e.reason) for e in result.ledger.entries]
    aio_ledger = [(e.t_ms, e.kind, e.conn_id, e.key, e.reason) for e in replay.ledger.entries]
    assert aio_ledger == simulated_ledger


def test_a_replay_that_departs_from_the_contract_is_caught() -> None:
    """The comparison can fail: a driver that reports an answer as a failure (the old
    overloading, the other way round) gives a different recording."""

    class Confused(ScriptedDriver):
        def done(self, lease: Leased, metadata: ClusterMetadata | None = None) -> None:
            if metadata is None:
                self.failed(lease)
            else:
                super().done(lease, metadata)

    steps, _, fresh = simulated("seed-producer", "proposed")
    seen = asyncio.run(AioReplay(fresh, Confused).run(steps))
    kinds = [type(e).__name__ for _, e, _ in seen]
    assert "RequestFailed" in kinds and kinds != [type(e).__name__ for _, e, _ in steps]


def test_the_replay_feeds_from_the_recording_only_what_the_outside_world_says() -> None:
    """Of the 16 event kinds, the replay hands the aio driver three as recorded: the client's
    CoordinatorLost and InterestChanged, and the simulator's end-of-run tick. Every other
    TimePassed is the driver's own timer, armed by the policy's WakeAt."""
    assert (CoordinatorLost, InterestChanged, TimePassed) == FED_AS_RECORDED
    steps, _, fresh = simulated("seed-consumer", "java-today")
    seen = asyncio.run(AioReplay(fresh).run(steps))
    recorded = {id(e) for _, e, _ in steps}
    assert [type(e) for _, e, _ in seen if id(e) in recorded] == [InterestChanged, TimePassed]
    ticks = [e for _, e, _ in seen if isinstance(e, TimePassed)]
    assert (len(ticks), sum(id(e) not in recorded for e in ticks)) == (12, 11)


def test_a_recording_that_skips_a_wake_up_is_caught() -> None:
    """The aio driver's timer fires whether or not the recording has the wake-up: a recording
    with one dropped gets it back, and the recordings differ."""
    steps, _, fresh = simulated("seed-producer", "java-today")
    first = next(n for n, (_, e, _) in enumerate(steps) if isinstance(e, TimePassed))
    doctored = steps[:first] + steps[first + 1 :]
    seen = asyncio.run(AioReplay(fresh).run(doctored))
    assert seen != doctored
    assert sum(isinstance(e, TimePassed) for _, e, _ in seen) == 11
    assert isinstance(seen[first][1], TimePassed) and seen[first][0] == steps[first][0]


@pytest.mark.parametrize("policy", ["java-today", "java-described"])
@pytest.mark.parametrize("scenario", ["seed-producer", "seed-consumer", "big-producer"])
def test_the_java_log_replay_writes_the_same_record(scenario: str, policy: str) -> None:
    """The third writer of the one ledger: a run printed as the Java client's NetworkClient
    log and read back by the Java probe's log replay (:func:`connmgr_evidence.java.accounting.
    build_ledger`, which accounts every real Java run) dials what the simulator dialled."""
    _, result, _ = simulated(scenario, policy)
    lines = list(javalog.render_events("producer", java_log_events(result)))
    replayed, _ = build_ledger(javalog.parse_connection_events(lines), t0=javalog.EPOCH)
    assert replayed.dials() == result.ledger.dials()
    # Entry by entry: each dial at its millisecond (the log's resolution) with its key,
    # numbered in dial order, and each close with its reason. The rendered log has no
    # "Completed connection" lines, so the replay reads every close as the end of a
    # connection never established: FAILED.
    numbers: dict[int, int] = {}
    expected = []
    for e in result.ledger.entries:
        if e.kind is ConnEvent.DIAL:
            numbers[e.conn_id] = len(numbers)
            expected.append((math.floor(e.t_ms), ConnEvent.DIAL, numbers[e.conn_id], e.key, ""))
        elif e.kind in (ConnEvent.CLOSED, ConnEvent.PEER_CLOSED):
            end = (math.floor(e.t_ms), ConnEvent.FAILED, numbers[e.conn_id], e.key, e.reason)
            expected.append(end)
    got = [(e.t_ms, e.kind, e.conn_id, e.key, e.reason) for e in replayed.entries]
    assert got == expected


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_ledger_counts_what_the_policy_counted(scenario: str, policy: str) -> None:
    """A simulated run's counts come from its ledger (as a real run's do); the policy's own
    metrics, kept as it emitted actions, are an independent accounting that must agree."""
    spec, settings, seed = prepare(scenario, {})
    sim = build_simulator(spec, policy, settings, seed)
    result = sim.run()
    metrics = sim.policy.metrics
    assert (result.opened, result.peak) == (metrics.opened, metrics.peak)
    assert result.failed == sum(c.failed for c in metrics.by_role.values())
    assert result.steady == len(result.steady_conn_ids)
    for role, counters in metrics.by_role.items():
        counted = result.by_role[role.value]
        for name in ("opened", "failed", "peak", "handshakes_avoided"):
            assert counted[name] == getattr(counters, name), (role, name)
