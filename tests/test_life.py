"""A client's life in its ledger: socket-seconds (the time-integral of open sockets) and
handshakes, by role, over a horizon, scaled to a client-hour."""

from __future__ import annotations

import pytest

from connmgr.core.endpoint import Endpoint
from connmgr.core.identity import BootstrapNode, BrokerNode, ConnectionKey, Role
from connmgr.ledger import ConnectionLedger
from connmgr.sim.run import build_simulator, prepare

ENDPOINT = Endpoint("b1", 9092)
BOOT = ConnectionKey(ENDPOINT, BootstrapNode(0))
DATA = ConnectionKey(ENDPOINT, BrokerNode(1))
OTHER = ConnectionKey(Endpoint("b2", 9092), BrokerNode(2))


def _story() -> ConnectionLedger:
    """A bootstrap socket adopted as broker 1's at 1 s and closed at 4 s; a dial to broker 2
    that fails after 0.1 s; a second dial to broker 2 at 2 s, still open."""
    ledger = ConnectionLedger()
    ledger.opened(0.0, 1, BOOT)
    ledger.established(10.0, 1)
    ledger.adopted(1_000.0, 1, DATA)
    ledger.opened(500.0, 2, OTHER)
    ledger.failed(600.0, 2)
    ledger.opened(2_000.0, 3, OTHER)
    ledger.established(2_010.0, 3)
    ledger.closed(4_000.0, 1)
    return ledger


def test_socket_seconds_split_at_adoption_and_open_sockets_count_to_the_instant() -> None:
    life = _story().life(5_000.0)
    assert life.horizon_s == 5.0
    assert life.socket_seconds == pytest.approx(
        {"bootstrap": 1.0, "data": 3.0 + 0.1 + 3.0, "coordination": 0.0}
    )
    assert life.handshakes == {"bootstrap": 1, "data": 1, "coordination": 0}
    assert life.per_hour(life.handshakes) == {"bootstrap": 720.0, "data": 720.0, "coordination": 0}


def test_an_earlier_instant_ignores_later_entries() -> None:
    life = _story().life(1_500.0)
    assert life.socket_seconds == pytest.approx(
        {"bootstrap": 1.0, "data": 0.5 + 0.1, "coordination": 0}
    )
    assert life.handshakes["data"] == 0


def test_counts_default_to_the_writers_clock_then_the_last_entry() -> None:
    ledger = _story()
    assert ledger.counts().life.horizon_s == 4.0
    ledger.clock = lambda: 6_000.0
    assert ledger.counts().life.horizon_s == 6.0
    assert ledger.counts(5_000.0).life == ledger.life(5_000.0)


@pytest.mark.parametrize("policy", ["proposed", "java-today", "aiokafka-today", "java-described"])
@pytest.mark.parametrize(
    "scenario", ["big-producer", "big-consumer", "k8s-endpoint-change", "idle-disabled"]
)
def test_a_simulated_life_agrees_with_the_simulators_own_sockets(
    scenario: str, policy: str
) -> None:
    """Two accountings: the ledger's integral and the simulator's per-socket records (its
    network model's truth, dial to close)."""
    spec, settings, seed = prepare(scenario, {"duration_ms": "3600000"})
    sim = build_simulator(spec, policy, settings, seed)
    result = sim.run()
    end = result.duration_ms
    assert result.life.horizon_s == pytest.approx(end / 1000.0)
    held = sum(
        (min(end, r.closed_ms if r.closed_ms is not None else end) - r.opened_ms) / 1000.0
        for r in result.conn_records
    )
    assert sum(result.life.socket_seconds.values()) == pytest.approx(held, rel=1e-9, abs=1e-9)
    assert sum(result.life.socket_seconds.values()) <= result.peak * result.life.horizon_s
    assert sum(result.life.handshakes.values()) <= result.opened - result.failed
    by_role = {r.value: result.by_role.get(r.value, {}).get("opened", 0) for r in Role}
    for role, shakes in result.life.handshakes.items():
        # A handshake in a role needs a dial in it (an adopted socket keeps its first role).
        assert shakes <= by_role[role], role
