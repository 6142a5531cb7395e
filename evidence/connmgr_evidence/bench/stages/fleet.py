"""The fleet: thousands of clients over one cluster for a simulated hour, through a rolling
restart, as the brokers see them.

Platform teams count broker-side sockets across every client, and connection storms while
brokers restart. The fleet is ``clients`` clients of ``brokers`` brokers; the cluster is
the same for all of them and so is its schedule: from :data:`RESTART_AT_MS`, ``restarts``
brokers (drawn from the seed) are restarted one at a time, every
:data:`RESTART_INTERVAL_MS`, each down ``down_ms``, its partitions and coordinators moving
to the next live broker and back at a preferred-leader election :data:`ELECTION_MS` after
its return -- :func:`connmgr.sim.churn.restart_changes`, what ``rolling-restart`` does.

Client ``i`` is drawn from ``(seed, i)`` alone (:func:`draw_client`), as the sweep draws its
points: a long-lived producer or a group consumer (started within the first
:data:`START_SPREAD_MS`), or a short-lived producer (starting any time before
:data:`SHORT_LIVED_BY_MS`, sending a few records and closing). Its topic is led by
1..:data:`MAX_LEADERS` brokers drawn from the cluster (a consumer's group coordinator too),
so brokers' loads differ; it bootstraps from brokers 1..3, as a fleet shares one
``bootstrap.servers``. Clients share nothing but the cluster's schedule: each runs alone in
the simulator, once per policy of :data:`FLEET_POLICIES`, and a broker's sockets are the
sum of every client's sockets there (:mod:`connmgr_evidence.bench.stages.fleetview` adds them up).

Clients run at the sweep's cadence (:data:`~connmgr_evidence.bench.stages.sweep.SWEEP_TIMINGS`: a
request
every 2 minutes). A storm's shape depends on cadence where clients wait for a request to
notice a change, so it was measured against the clients' default cadence on 300 clients x
100 brokers, 10 restarts, seed 0, per policy (proposed / java-today / aiokafka-today,
default cadence in brackets): handshakes in the hour 2,667 / 2,769 / 5,716 (2,667 / 2,769
/ 5,749); in the restart window 522 / 521 / 1,763 (529 / 528 / 1,792); its busiest second
19 / 18 / 75 (20 / 20 / 78); the brokers' p99 of sockets at once 36 / 70 / 43 (39 / 70 /
45) -- at 1/50 of the CPU (6.3 s against 335 s). Most of a storm comes at the instant a
broker goes down (every client on it re-dials at once), which no cadence moves.

A client that starts at ``start_ms`` runs from its own time 0 for the rest of the hour: the
changes before its start are applied to its cluster first, the later ones shifted; its
ledger's times are shifted back (:func:`client_sockets`).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from connmgr.core.config import ClientKind
from connmgr.core.endpoint import Endpoint, parse_bootstrap
from connmgr.ledger import GONE, ConnectionLedger, ConnEntry, ConnEvent
from connmgr.sim.churn import restart_changes
from connmgr.sim.cluster import build_cluster
from connmgr.sim.run import build_simulator
from connmgr.sim.scenarios import Change, ScenarioSpec, localhost_brokers
from connmgr.sim.simulator import Simulator
from connmgr_evidence.bench.fleetplan import (
    DURATION_MS,
    ELECTION_MS,
    RESTART_AT_MS,
    RESTART_INTERVAL_MS,
    FleetSettings,
    restart_schedule,
)
from connmgr_evidence.bench.report.metrics import PROPOSED
from connmgr_evidence.bench.stages.sweep import SWEEP_POLICIES, SWEEP_TIMINGS

ON_KIP_1242: Final = "proposed-4.4"
"""The proposed policy on brokers that answer KIP-1242's identity check (Kafka 4.4): it
confirms and adopts a bootstrap socket whose broker it needs (rule c)."""
FLEET_POLICIES = (*SWEEP_POLICIES, "java-patched", ON_KIP_1242)
"""``proposed``, ``java-today``, ``aiokafka-today``, ``java-patched`` (today's Java client
with KIP (b0)'s bootstrap close alone, the model of the patched kafka-clients 4.3.1: how much
of the fleet's bootstrap hot spot that one rule removes), and :data:`ON_KIP_1242` (what
confirming the bootstrap socket saves a fleet). Every other entry runs on brokers without the
check. java-described dials every broker from every producer: the sweep's reason to leave it
out holds a thousandfold here."""

START_SPREAD_MS = 300_000
"""Long-lived clients start within the first 5 minutes, one metadata max age: their
periodic metadata refreshes then come evenly spread, as in a fleet started over days (a
fleet started within a minute refreshes in waves every 5 minutes, and a client that dials
for each refresh -- aiokafka's -- turns each wave into thousands of handshakes that a
restart window would be blamed for)."""
SHORT_LIVED_BY_MS = DURATION_MS - 60_000
"""Short-lived clients start any time before the hour's last minute."""
MAX_LEADERS = 12
BOOTSTRAP_BROKERS = 3
MAX_RECORDS = 50
KINDS = ("producer", "consumer", "short-lived")
_WEIGHTS = (4, 4, 2)
"""The mix: 40 % long-lived producers, 40 % group consumers, 20 % short-lived producers."""
TOPIC, GROUP = "events", "app"


@dataclass(frozen=True)
class FleetClient:
    """Client ``index`` of the fleet: what it is, where its topic lives, when it starts."""

    index: int
    kind: str
    leaders: tuple[int, ...]
    """The topic's partition leaders, partition i led by ``leaders[i % len]``'s distinct
    brokers (:attr:`partitions` of them)."""
    partitions: int
    bootstrap_size: int
    coordinator: int
    """The group coordinator (a consumer's; the others have no group)."""
    records: int
    """A short-lived producer's records (0 for the others)."""
    start_ms: float
    seed: int


def draw_client(index: int, settings: FleetSettings) -> FleetClient:
    """Client ``index`` of the fleet with ``settings``; depends on ``(seed, index)`` and the
    broker count alone (a string-seeded ``random.Random``: the same in every process)."""
    if index < 0:
        raise ValueError(f"fleet client index {index} must be >= 0")
    rng = random.Random(f"connmgr-fleet:{settings.seed}:{index}")
    kind = rng.choices(KINDS, _WEIGHTS)[0]
    n = settings.brokers
    spread = rng.sample(range(1, n + 1), rng.randint(1, min(n, MAX_LEADERS)))
    partitions = rng.randint(len(spread), 3 * len(spread))
    bootstrap = rng.randint(1, min(n, BOOTSTRAP_BROKERS))
    coordinator = rng.randint(1, n)
    short = kind == "short-lived"
    records = rng.randint(1, MAX_RECORDS) if short else 0
    start = rng.uniform(0, SHORT_LIVED_BY_MS if short else START_SPREAD_MS)
    seed = rng.randrange(2**31)
    leaders = tuple(spread[i % len(spread)] for i in range(partitions))
    return FleetClient(
        index, kind, leaders, partitions, bootstrap, coordinator, records, start, seed
    )


@functools.lru_cache(maxsize=4)
def _endpoints(brokers: int) -> tuple[Mapping[int, Endpoint], Mapping[Endpoint, int]]:
    """The cluster's addresses, and the broker at each (built once per process)."""
    at = localhost_brokers(range(1, brokers + 1), 9092)
    return at, {ep: i for i, ep in at.items()}


def client_spec(client: FleetClient, settings: FleetSettings) -> tuple[ScenarioSpec, list[Change]]:
    """The client's scenario from its start on, and the changes before its start (to apply
    to its cluster before it starts). A fresh cluster each call: a run changes its cluster."""
    endpoints, _ = _endpoints(settings.brokers)
    schedule = restart_changes(
        [r.broker for r in restart_schedule(settings)],
        start_ms=RESTART_AT_MS,
        interval_ms=RESTART_INTERVAL_MS,
        down_ms=settings.down_ms,
        election_ms=ELECTION_MS,
    )
    early = [(at, change) for at, change in schedule if at < client.start_ms]
    later = [(at - client.start_ms, change) for at, change in schedule if at >= client.start_ms]
    cluster = build_cluster(
        endpoints, {TOPIC: client.leaders}, {GROUP: client.coordinator}, seed=client.seed
    )
    consumer = client.kind == "consumer"
    servers = ",".join(str(endpoints[i]) for i in range(1, client.bootstrap_size + 1))
    spec = ScenarioSpec(
        cluster=cluster,
        bootstrap=parse_bootstrap(servers),
        client=ClientKind.CONSUMER if consumer else ClientKind.PRODUCER,
        topics=(TOPIC,),
        group=GROUP if consumer else None,
        duration_ms=DURATION_MS - client.start_ms,
        changes=later,
        timings=SWEEP_TIMINGS,
        records=client.records or None,
    )
    return spec, early


Interval = tuple[int, float, float]
"""(broker, from ms, to ms): one socket, from its dial to its end, in the fleet's time."""
Instant = tuple[int, float]
"""(broker, at ms): one connection established, or one dial refused."""


@dataclass(frozen=True)
class ClientSockets:
    """One client's sockets under one policy, as the brokers saw them."""

    index: int
    policy: str
    intervals: tuple[Interval, ...]
    """Every socket that reached a broker, from its dial to its end."""
    handshakes: tuple[Instant, ...]
    refused: tuple[Instant, ...]
    """Dials that reached no broker (it was down): no socket on any broker, counted at the
    broker they were for (or the one at their address)."""


def simulate_client(client: FleetClient, policy: str, settings: FleetSettings) -> ClientSockets:
    """Run ``client`` under ``policy`` for the rest of the hour; its sockets per broker."""
    sim = run_client(client, policy, settings)
    _, broker_at = _endpoints(settings.brokers)
    return client_sockets(client, policy, sim.ledger, broker_at, sim.duration_ms)


def run_client(client: FleetClient, policy: str, settings: FleetSettings) -> Simulator:
    """The finished simulator of ``client`` under ``policy`` (its ledger's times are from
    the client's start)."""
    spec, early = client_spec(client, settings)
    spec.cluster.confirms_identity = policy == ON_KIP_1242
    sim = build_simulator(spec, PROPOSED if policy == ON_KIP_1242 else policy, {}, client.seed)
    for _, change in early:
        change(sim)  # nothing is open yet: only the cluster changes
    sim.run()
    return sim


class Started(Protocol):
    """A client placed in the fleet's hour: its index, and the instant it starts."""

    @property
    def index(self) -> int: ...

    @property
    def start_ms(self) -> float: ...


def client_sockets(
    client: Started,
    policy: str,
    ledger: ConnectionLedger,
    broker_at: Mapping[Endpoint, int],
    end_ms: float,
) -> ClientSockets:
    """The sockets of ``ledger`` (times from the client's start) per broker, in the fleet's
    time: from each dial to its end (failed, closed or reset; ``end_ms`` if never ended) at
    the broker the socket reached (the simulator knows it), and each connection
    established; a dial that reached no broker is a refused dial, not a socket."""
    shift = client.start_ms
    opened: dict[int, tuple[int, float]] = {}
    intervals: list[Interval] = []
    handshakes: list[Instant] = []
    refused: list[Instant] = []
    for e in ledger.entries:
        if e.kind is ConnEvent.DIAL:
            if e.reached is None:
                refused.append((_meant(e, broker_at), e.t_ms + shift))
            else:
                opened[e.conn_id] = (e.reached, e.t_ms + shift)
        elif e.conn_id not in opened:
            continue  # a refused dial's end, or an adoption
        elif e.kind is ConnEvent.ESTABLISHED:
            handshakes.append((opened[e.conn_id][0], e.t_ms + shift))
        elif e.kind in GONE:
            broker, since = opened.pop(e.conn_id)
            intervals.append((broker, since, e.t_ms + shift))
    intervals += [(b, since, end_ms + shift) for b, since in opened.values()]
    return ClientSockets(client.index, policy, tuple(intervals), tuple(handshakes), tuple(refused))


def _meant(e: ConnEntry, broker_at: Mapping[Endpoint, int]) -> int:
    """The broker a dial was for: its key's, else the one at its address (bootstrap)."""
    if e.key.broker_id is not None:
        return e.key.broker_id
    return broker_at[e.key.endpoint]


def fleet_sockets(
    indices: Iterable[int], settings: FleetSettings, policies: Sequence[str] = FLEET_POLICIES
) -> Iterable[ClientSockets]:
    """Every policy's sockets of the clients ``indices``, client by client."""
    for i in indices:
        client = draw_client(i, settings)
        for policy in policies:
            yield simulate_client(client, policy, settings)
