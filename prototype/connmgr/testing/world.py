"""The world one agreement example starts from (:class:`World`, drawn by :func:`worlds`) and
the steps fed to both of its simulators (:class:`Step`). See :mod:`connmgr.testing.machines`."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hypothesis import strategies as st

from connmgr.core.config import ClientKind
from connmgr.core.endpoint import Endpoint
from connmgr.core.metadata import TopicPartition
from connmgr.core.policy import Policy
from connmgr.sim.clients import ClientTimings
from connmgr.sim.cluster import build_cluster
from connmgr.sim.run import build_simulator
from connmgr.sim.scenarios import ScenarioSpec
from connmgr.sim.simulator import Simulator

TOPIC = "orders"
GROUP = "app"
PROXY = Endpoint("kafka-proxy", 9092)
SETTLE_MS = 0.5
"""Long enough for every in-flight exchange on the simulated loopback to finish."""

PolicyRef = str | type[Policy]

SPARSE = ClientTimings(send_interval_ms=10_000, fetch_max_wait_ms=5_000)
"""The machines' client cadence: a produce round every 10 s and fetches held 5 s, a tenth
of the defaults, so that a step of 700 s costs a tenth as much to simulate and to shrink.
Every timer the invariants turn on is left at its default: the linger (3 s), heartbeats
(3 s) and commits (5 s), metadata max age (5 min), reconnect backoff, idle timeouts."""


def endpoint_of(broker_id: int, generation: int = 0) -> Endpoint:
    """Broker ``broker_id``'s address; a new ``generation`` is the same broker moved."""
    suffix = "" if generation == 0 else f"-g{generation}"
    return Endpoint(f"kafka-{broker_id}{suffix}.test", 9092)


# --- the world ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class World:
    """The cluster and client one example starts from."""

    brokers: int
    client: ClientKind
    leaders: tuple[int, ...]
    """The preferred leader of each partition of :data:`TOPIC`."""
    coordinator: int
    shared: bool
    """Every broker behind one proxy host:port (``kafka-proxy:9092``)."""
    idle_disabled: bool
    """The client runs with ``connections.max.idle.ms = -1``."""
    max_connections: int | None
    """The candidate's socket budget (baselines have none)."""
    confirms_identity: bool
    """Brokers confirm their id on each new connection (the identity check the RFC
    proposes), so the candidate may adopt its bootstrap connection."""
    bootstrap_count: int
    bootstrap_offset: int
    """The bootstrap entry every policy tries first: which server a client happens to pick
    is luck, not policy, so both sides are dealt the same hand."""
    seed: int

    def spec(self) -> ScenarioSpec:
        endpoints = {
            b: PROXY if self.shared else endpoint_of(b) for b in range(1, self.brokers + 1)
        }
        cluster = build_cluster(
            endpoints, {TOPIC: self.leaders}, {GROUP: self.coordinator}, seed=self.seed
        )
        cluster.confirms_identity = self.confirms_identity
        bootstrap = tuple(dict.fromkeys(endpoints[b] for b in range(1, self.bootstrap_count + 1)))
        consumer = self.client is ClientKind.CONSUMER
        return ScenarioSpec(
            cluster=cluster,
            bootstrap=bootstrap,
            client=self.client,
            topics=(TOPIC,),
            group=GROUP if consumer else None,
            duration_ms=math.inf,
            timings=SPARSE,
        )

    def settings(self, candidate: bool) -> dict[str, str]:
        servers = 1 if self.shared else self.bootstrap_count
        settings = {"bootstrap_offset": str(self.bootstrap_offset % servers)}
        if self.idle_disabled:
            settings["connections_max_idle_ms"] = "-1"
        if candidate and self.max_connections is not None:
            settings["max_connections"] = str(self.max_connections)
        return settings

    def simulator(self, policy: PolicyRef, *, candidate: bool) -> Simulator:
        """A started simulator of ``policy`` in this world."""
        sim = build_simulator(self.spec(), policy, self.settings(candidate), self.seed)
        sim.start()
        # Time 0 runs before any step: every client has dialled its first connection, so a
        # change in the first step meets eager and lazy clients alike mid-bootstrap.
        sim.advance_to(0.0)
        return sim


SEED_BITS = 16
SEEDS = st.lists(st.booleans(), min_size=SEED_BITS, max_size=SEED_BITS).map(
    lambda bits: sum(1 << i for i, bit in enumerate(bits) if bit)
)
"""A world's seed, 0 to 2**16 - 1, drawn bit by bit: a seed is arbitrary, and booleans are
never drawn from the constants Hypothesis mines out of loaded modules, which a wide
``st.integers`` range would be (see :mod:`connmgr.testing.constants`)."""


@st.composite
def worlds(draw: st.DrawFn) -> World:
    brokers = draw(st.integers(1, 6))
    partitions = draw(st.integers(1, 6))
    ids = st.integers(1, brokers)
    return World(
        brokers=brokers,
        client=draw(st.sampled_from(ClientKind)),
        leaders=tuple(draw(ids) for _ in range(partitions)),
        coordinator=draw(ids),
        # Drawn as its negation so that a shrunk counterexample prefers the proxy world,
        # where the hazards are.
        shared=not draw(st.booleans()),
        idle_disabled=draw(st.booleans()),
        max_connections=draw(st.none() | st.integers(1, 6)),
        confirms_identity=draw(st.booleans()),
        bootstrap_count=(count := draw(st.integers(1, min(3, brokers)))),
        bootstrap_offset=draw(st.integers(0, count - 1)),
        seed=draw(SEEDS),
    )


# --- steps -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    """One event fed to both simulators; ``str()`` reads like the event."""

    kind: str
    broker: int = 0
    other: int = 0
    ms: float = 0.0

    def apply(self, sim: Simulator) -> None:
        cluster = sim.cluster
        if self.kind == "wait":
            sim.advance_to(sim.now + self.ms)
        elif self.kind == "move_leader":
            cluster.move_leader(TopicPartition(TOPIC, self.other), self.broker)
        elif self.kind in ("broker_down", "remove_broker"):
            sim.broker_down(self.broker)
        elif self.kind == "broker_up":
            cluster.set_up(self.broker)
        elif self.kind == "add_broker":
            cluster.add_broker(self.broker, endpoint_of(self.broker))
        elif self.kind == "move_endpoint":
            cluster.move_endpoint(self.broker, endpoint_of(self.broker, self.other))
        elif self.kind == "share_endpoint":
            cluster.move_endpoint(self.broker, cluster.brokers[self.other].endpoint)
        elif self.kind == "move_coordinator":
            cluster.move_coordinator(GROUP, self.broker)
        elif self.kind == "drop_connections":
            dropped = [c for c in sim.open_connections() if c.backend == self.broker]
            sim.peer_close_all(dropped, "network")
        elif self.kind == "restore_preferred":
            cluster.restore_preferred()
        else:  # pragma: no cover - a typo in this module
            raise ValueError(f"unknown step {self.kind!r}")

    def __str__(self) -> str:
        if self.kind == "wait":
            return f"wait {self.ms:g} ms"
        if self.kind == "move_leader":
            return f"partition {self.other} -> broker {self.broker}"
        if self.kind == "move_endpoint":
            return f"broker {self.broker} moves to {endpoint_of(self.broker, self.other)}"
        if self.kind == "share_endpoint":
            return f"broker {self.broker} moves behind broker {self.other}'s host:port"
        return f"{self.kind.replace('_', ' ')} {self.broker or ''}".strip()


WAITS = (0.2, 1.0, 50.0, 500.0, 3_500.0, 30_000.0, 330_000.0, 700_000.0)
"""Time steps: within an exchange, a poll, past the linger, past a metadata refresh, past
the brokers' and clients' idle timeouts (540-600 s)."""
