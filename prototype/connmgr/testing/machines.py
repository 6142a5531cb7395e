"""Hypothesis state machines: a candidate policy and a baseline live the same client life.

Each example draws a small cluster and a client (:class:`World`), builds two simulators on
identical copies of it -- one driving the candidate policy (``proposed`` unless a test
passes a deliberately broken variant), one driving a baseline (``java-described``,
``java-today`` or ``aiokafka-today``) -- and then feeds both the same :class:`Step` s:
leaders moving, brokers going down and up, brokers added and removed, endpoints changing or
becoming shared behind one host:port, the coordinator moving, connections failing, and time
passing. Time passing is where the client's own traffic happens: the producer model sends
to every leader each second, the consumer model fetches, heartbeats every 3 s and commits
every 5 s, and both refresh metadata on errors and every 5 minutes; idle timers and the
candidate's linger run on the same clock.

After every step the invariants of issue 5 are checked (each raises ``AssertionError`` with
a message that names it):

1. **same routing** -- every request aimed at a broker (produce, fetch, group requests)
   and sent to where that broker is reaches it, under both policies; any-node requests
   reach a live broker. (A request sent by stale metadata to an address its broker has
   left reaches whoever is there now, whatever the policy; that the policy only ever sends
   where its metadata says is checked under safety.)
2. **never more sockets** -- the candidate holds no more open sockets than the baseline and
   has opened no more in total, under the conditions stated in :func:`check_fewer_sockets`.
3. **tight** -- every socket the candidate holds is needed (a leader in use, the
   coordinator, the one kept for any-node requests, or busy), still connecting, or within
   its linger; when nothing is lingering, its ready sockets are exactly the needed ones.
4. **safety** -- one live connection per (host, port, id, purpose); requests are sent only
   on a connection to the endpoint the policy's metadata gives for the target; a bootstrap
   connection adopted as a broker's is connected to that broker (nothing re-attributed
   behind a shared endpoint); the socket budget holds; nothing unneeded outlives its linger, also
   with ``connections.max.idle.ms = -1``.
5. **determinism** -- at teardown the same world and steps are replayed on fresh
   simulators and must give the same trace.

The module is importable so that the thin test files, the deep profile and anyone chasing a
counterexample drive the same machines; :func:`pair_machine` makes one per baseline.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from connmgr.core.config import ClientKind
from connmgr.core.endpoint import Endpoint
from connmgr.core.identity import Purpose
from connmgr.core.metadata import TopicPartition
from connmgr.core.policy import Policy
from connmgr.core.state import ConnState
from connmgr.policies import make_policy
from connmgr.seeding import derive_rng
from connmgr.sim.clients import ClientTimings
from connmgr.sim.cluster import build_cluster
from connmgr.sim.scenarios import ScenarioSpec, policy_config
from connmgr.sim.simulator import Simulator
from connmgr.testing.constants import load_whole_package

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
        spec = self.spec()
        config = policy_config(spec, self.settings(candidate))
        rng = derive_rng(self.seed, "policy")
        instance = (
            make_policy(policy, config, rng) if isinstance(policy, str) else policy(config, rng)
        )
        sim = Simulator(
            instance, spec.cluster, spec.make_client, client_kind=spec.client, duration_ms=math.inf
        )
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


# --- invariants --------------------------------------------------------------------------


def sockets(sim: Simulator) -> int:
    """Open sockets, including dials that will be refused (what a budget counts)."""
    return len(sim.open_connections())


def usable_sockets(sim: Simulator) -> int:
    """Open sockets that reached a broker or are dialling one that is up: a dial to a dead
    broker is refused at once and is a retry (see :func:`check_fewer_sockets`)."""
    return sum(1 for c in sim.open_connections() if c.backend is not None)


def check_same_routing(sim: Simulator, start: int, who: str) -> None:
    """Requests logged since ``start`` reached the broker they were aimed at (or, aimed at
    any node, a broker that is up)."""
    if start >= len(sim.request_log):
        return
    dials = {r.conn_id: r for r in sim.conn_records}
    for record in sim.request_log[start:]:
        dial = dials[record.conn_id]
        if record.target == "any":
            assert sim.cluster.brokers[record.reached].up or record.t_ms < sim.now, (
                f"same routing: {who} sent {record.api.name} to a broker that is down"
            )
        elif record.key.endpoint == record.true_endpoint and (
            dial.dialled_at is None or dial.dialled_at == dial.key.endpoint
        ):
            # Sent to where the target really is, on a socket dialled while it was there
            # (or adopted as its): it must reach the target. (A socket dialled by stale
            # metadata to an address the target had left reached whoever was there then,
            # under every policy; the broker answers NOT_LEADER/NOT_COORDINATOR and the
            # client refreshes.)
            assert record.routed_ok, (
                f"same routing: {who} sent {record.api.name} for {record.target} on "
                f"{record.key}, which reached broker {record.reached}"
            )


LOSSES = frozenset({"broker_down", "network"})
"""Close reasons of connections lost to a failure step."""


def established(sim: Simulator) -> int:
    """Connections that completed their handshake so far."""
    return sum(1 for e in sim.timeline if e.kind == "established")


def serves_workload(sim: Simulator) -> bool:
    """Whether the client holds a ready socket for each part of the work: one reaching each
    live leader of the topic's partitions by its broker id, and for the consumer one
    reaching the coordinator."""
    cluster = sim.cluster
    wanted = {
        ("data", b)
        for b in (cluster.leader(tp) for tp in cluster.partitions([TOPIC]))
        if cluster.brokers[b].up
    }
    if sim.client_kind is ClientKind.CONSUMER and cluster.brokers[cluster.coordinator(GROUP)].up:
        wanted.add(("group", cluster.coordinator(GROUP)))
    shared = sim.policy.config.share_coordinator  # group requests ride the data socket
    have = set()
    for conn in sim.open_connections():
        broker = conn.key.broker_id
        if conn.ready and broker is not None and broker == conn.backend:
            if conn.key.purpose is Purpose.DATA:
                have.add(("data", broker))
            if conn.key.purpose is Purpose.COORDINATION or shared:
                have.add(("group", broker))
    return wanted <= have


def check_fewer_sockets(candidate: Simulator, baseline: Simulator) -> None:
    """The candidate holds and has opened no more sockets than the baseline.

    Compared at every step at which the baseline serves the whole work
    (:func:`serves_workload`): a socket to every live leader and, for a consumer, to the
    coordinator. A baseline without one is not doing that work yet -- it is still backing
    off after losing its sockets, acting on metadata older than the candidate's, or stuck
    dialling a broker's old address -- and a count of what it holds or has opened says
    nothing about waste; at those steps the candidate is held to :func:`check_tight`
    alone (every socket it holds is needed by its own view of the cluster, busy, or inside
    its linger). The allowances, each a consequence of safety rather than of waste:

    * the candidate may hold one socket the baseline does not right after the bootstrap
      connection was adopted as a broker's, when a lazy baseline (aiokafka) has closed its
      bootstrap socket and not yet dialled that broker;
    * "held" and "opened" leave out dials to a dead broker (refused at once) and count
      connections established: such a dial is a retry, paced by the reconnect backoff, and
      a client whose metadata names only dead brokers retries under every policy until it
      can refresh, each at its own moment;
    * it may have opened one more socket per connection it lost to a failure (a broker
      going down, a dropped link): after a loss each client re-dials in its own order and
      at its own time (a baseline may wait for a metadata refresh the candidate does not,
      or pick another broker for the refresh), so the totals may cross by one per loss.
      In a history without failures the totals compare exactly;
    * a socket the candidate has retired but that still drains in-flight responses (its
      broker moved to another host:port, say, while a fetch was held) is on its way out
      and not counted; a baseline keyed by node id keeps the old socket and uses it;
    * it may have opened one more socket per broker it closed as unneeded and later needed
      again (leadership returned to it): that is the price of closing what nothing needs,
      which a baseline that keeps idle sockets for minutes (or forever, with
      ``connections.max.idle.ms = -1``) does not pay; the linger sizes that trade;
    * it may have opened one more socket per connection it retired because its broker's
      endpoint changed: it never sends to a broker on a socket to the broker's old
      host:port, while the baselines key by node id and keep using the old socket (which
      reaches the same broker only while the old address still leads there);
    * it may have opened one more socket per broker it was told is a coordinator and the
      baseline never was (:func:`stale_coordinators`): the candidate looks the coordinator
      up with its first metadata request, one round trip before java-today and
      aiokafka-today do; a coordinator that moves in between is dialled by the candidate
      at its old broker, then at its new one, while the baseline only ever hears of the
      new one. The earlier lookup is what saves that round trip on every start, and any
      lookup's answer can go stale before the dial completes, so the window cannot be
      closed, only moved.
    """
    if not serves_workload(baseline):
        return
    held, base_held = usable_sockets(candidate), usable_sockets(baseline)
    adopted = sum(1 for c in candidate.open_connections() if c.record.adopted_as is not None)
    draining = sum(1 for c in candidate.policy.records() if c.state is ConnState.DRAINING)
    assert held - draining <= base_held + min(adopted, 1), (
        f"never more sockets: candidate holds {held}, baseline {base_held}"
    )
    opened, base_opened = established(candidate), established(baseline)
    moved = sum(1 for r in candidate.conn_records if r.close_reason == "endpoint_changed")
    lost = sum(1 for r in candidate.conn_records if r.close_reason in LOSSES)
    again = redialled(candidate)
    stale = stale_coordinators(candidate, baseline)
    assert opened <= base_opened + moved + lost + again + stale, (
        f"never more sockets: candidate opened {opened}, baseline {base_opened}"
        + (
            f" (allowing {moved} endpoint changes, {lost} lost, {again} re-dialled,"
            f" {stale} stale coordinators)"
            if moved or lost or again or stale
            else ""
        )
    )


def coordinator_targets(sim: Simulator) -> set[str]:
    """The coordinators (``"coordinator:<id>"``) the client has sent a request to."""
    return {r.target for r in sim.request_log if r.target.startswith("coordinator:")}


def stale_coordinators(candidate: Simulator, baseline: Simulator) -> int:
    """Brokers the candidate established a coordination connection to, and sent a
    coordinator request to, which the baseline never sent a coordinator request to: the
    coordinator had moved between the two clients' lookups."""
    told = coordinator_targets(candidate) - coordinator_targets(baseline)
    dialled = {
        f"coordinator:{e.key.broker_id}"
        for e in candidate.timeline
        if e.kind == "established" and e.key.purpose is Purpose.COORDINATION
    }
    return len(told & dialled)


def redialled(sim: Simulator) -> int:
    """Connections established to a broker, for a purpose, that the client had earlier
    closed as unneeded."""
    closed: set[tuple[int, Purpose]] = set()
    count = 0
    for entry in sim.timeline:
        if entry.key.broker_id is None:
            continue
        what = (entry.key.broker_id, entry.key.purpose)
        if entry.kind == "close" and entry.reason == "unneeded":
            closed.add(what)
        elif entry.kind == "established" and what in closed:
            closed.discard(what)
            count += 1
    return count


def unneeded(sim: Simulator) -> list[int] | None:
    """The candidate's ready sockets that nothing needs and nothing is using (None for a
    policy that does not say what it needs)."""
    policy = sim.policy
    needed_of: Callable[[], frozenset[int]] | None = getattr(policy, "needed_connections", None)
    if needed_of is None:
        return None
    needed = needed_of()
    return [
        c.conn_id
        for c in policy.records()
        if c.state is ConnState.READY and c.conn_id not in needed and not c.busy
    ]


def check_tight(sim: Simulator) -> None:
    """Every ready socket is needed, busy, or lingering within its linger; with nothing
    lingering, the ready ones are exactly the needed and busy ones (which the definition of
    unneeded makes true once the first part holds)."""
    idle = unneeded(sim)
    if idle is None:
        return  # not a prompt-closing policy
    policy = sim.policy
    linger = policy.config.linger_ms
    for conn in policy.records():
        if conn.conn_id not in idle:
            continue
        since = conn.unneeded_since_ms
        assert since is not None, f"tight: connection {conn} is unneeded and not lingering"
        deadline = max(since, conn.last_used_ms) + linger
        assert deadline >= policy.now_ms, (
            f"tight: connection {conn} unneeded since {since:g} ms, past its {linger} ms "
            f"linger at {policy.now_ms:g} ms"
        )


def check_safety(sim: Simulator, start: int, budget: int | None) -> None:
    policy = sim.policy
    keys = [c.key for c in policy.records() if c.state is not ConnState.DEFERRED]
    dup = {str(k) for k in keys if keys.count(k) > 1}
    assert not dup, f"safety: more than one live connection for {sorted(dup)}"
    for record in sim.request_log[start:]:
        if record.known_endpoint is not None:
            assert record.key.endpoint == record.known_endpoint, (
                f"safety: {record.api.name} for {record.target} sent on {record.key}, but the "
                f"policy's metadata places it at {record.known_endpoint}"
            )
    for conn in sim.open_connections():
        # Only a connection the policy re-labelled (an adopted bootstrap connection) is the
        # policy's claim about who is behind the socket. One dialled for an id went where
        # the policy's metadata placed that id (checked above on every send); if that
        # metadata is stale and a proxy now sends the id elsewhere, the broker says
        # NOT_LEADER and the client refreshes, under every policy alike.
        adopted = conn.record.adopted_as
        if adopted is not None and adopted == conn.key:
            assert conn.backend == adopted.broker_id, (
                f"safety: bootstrap connection adopted as {adopted} is connected to broker "
                f"{conn.backend}"
            )
    if budget is not None:
        assert sockets(sim) <= budget, f"safety: {sockets(sim)} sockets over a budget of {budget}"


def trace(sim: Simulator) -> tuple[list[Any], list[Any]]:
    return list(sim.timeline), list(sim.request_log)


# --- the machine -------------------------------------------------------------------------


class PairMachine(RuleBasedStateMachine):
    """The candidate and :attr:`BASELINE` fed the same steps. Use :func:`pair_machine`."""

    BASELINE: ClassVar[str] = "java-today"
    CANDIDATE: ClassVar[PolicyRef] = "proposed"

    def __init__(self) -> None:
        super().__init__()
        load_whole_package()  # the same search in any process: see connmgr.testing.constants
        self.world: World | None = None
        self.steps: list[Step] = []
        self.down: set[int] = set()
        self.removed: set[int] = set()
        self.generation: dict[int, int] = {}
        self._checked = (0, 0)

    # The two simulators exist once initialised; every rule runs after @initialize.
    candidate: Simulator
    baseline: Simulator

    @initialize(world=worlds())
    def start(self, world: World) -> None:
        note(f"world: {world}")
        self.world = world
        self.candidate = world.simulator(self.CANDIDATE, candidate=True)
        self.baseline = world.simulator(self.BASELINE, candidate=False)

    def feed(self, step: Step) -> None:
        note(f"step {len(self.steps) + 1}: {step}")
        self.steps.append(step)
        step.apply(self.candidate)
        step.apply(self.baseline)

    # --- helpers -------------------------------------------------------------------------

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self.candidate.cluster.brokers)

    def live(self) -> list[int]:
        return [b for b in self.broker_ids if b not in self.down and b not in self.removed]

    def _pick(self, data: st.DataObject, choices: list[int], label: str) -> int:
        return data.draw(st.sampled_from(choices), label=label)

    def _take_out(self, data: st.DataObject, kind: str, into: set[int]) -> None:
        """A live broker goes down or leaves (``kind``); remember it in ``into``."""
        broker = self._pick(data, self.live(), "broker")
        into.add(broker)
        self.feed(Step(kind, broker))

    # --- rules ---------------------------------------------------------------------------

    @rule(ms=st.sampled_from(WAITS))
    def wait(self, ms: float) -> None:
        self.feed(Step("wait", ms=ms))

    @rule(data=st.data())
    def move_leader(self, data: st.DataObject) -> None:
        assert self.world is not None
        partition = data.draw(st.integers(0, len(self.world.leaders) - 1), label="partition")
        self.feed(Step("move_leader", self._pick(data, self.live(), "to"), other=partition))

    @precondition(lambda self: len(self.live()) > 1)
    @rule(data=st.data())
    def broker_down(self, data: st.DataObject) -> None:
        self._take_out(data, "broker_down", self.down)

    @precondition(lambda self: bool(self.down))
    @rule(data=st.data())
    def broker_up(self, data: st.DataObject) -> None:
        broker = self._pick(data, sorted(self.down), "broker")
        self.down.discard(broker)
        self.feed(Step("broker_up", broker))

    @precondition(lambda self: len(self.broker_ids) < 8)
    @rule()
    def add_broker(self) -> None:
        self.feed(Step("add_broker", max(self.broker_ids) + 1))

    @precondition(lambda self: len(self.live()) > 1)
    @rule(data=st.data())
    def remove_broker(self, data: st.DataObject) -> None:
        self._take_out(data, "remove_broker", self.removed)

    @rule(data=st.data())
    def move_endpoint(self, data: st.DataObject) -> None:
        broker = self._pick(data, self.broker_ids, "broker")
        self.generation[broker] = self.generation.get(broker, 0) + 1
        self.feed(Step("move_endpoint", broker, other=self.generation[broker]))

    @precondition(lambda self: len(self.broker_ids) > 1)
    @rule(data=st.data())
    def share_endpoint(self, data: st.DataObject) -> None:
        broker = self._pick(data, self.broker_ids, "broker")
        other = self._pick(data, [b for b in self.broker_ids if b != broker], "behind")
        self.feed(Step("share_endpoint", broker, other=other))

    @precondition(lambda self: self.world is not None and self.world.client is ClientKind.CONSUMER)
    @rule(data=st.data())
    def move_coordinator(self, data: st.DataObject) -> None:
        self.feed(Step("move_coordinator", self._pick(data, self.live(), "to")))

    @rule(data=st.data())
    def drop_connections(self, data: st.DataObject) -> None:
        self.feed(Step("drop_connections", self._pick(data, self.broker_ids, "broker")))

    @rule()
    def restore_preferred(self) -> None:
        self.feed(Step("restore_preferred"))

    # --- invariants ----------------------------------------------------------------------

    @invariant()
    def invariants_hold(self) -> None:
        if self.world is None:
            return
        done_c, done_b = self._checked
        # Let exchanges already under way finish on both sides before comparing counts.
        check_same_routing(self.candidate, done_c, "candidate")
        check_same_routing(self.baseline, done_b, f"baseline {self.BASELINE}")
        check_safety(self.candidate, done_c, self.world.max_connections)
        check_tight(self.candidate)
        if self.world.max_connections is None:
            check_fewer_sockets(self.candidate, self.baseline)
        self._checked = (len(self.candidate.request_log), len(self.baseline.request_log))

    def teardown(self) -> None:
        if self.world is None:
            return
        for role, policy, sim in (
            ("candidate", self.CANDIDATE, self.candidate),
            ("baseline", self.BASELINE, self.baseline),
        ):
            again = self.world.simulator(policy, candidate=role == "candidate")
            for step in self.steps:
                step.apply(again)
            assert trace(again) == trace(sim), (
                f"determinism: the {role}'s trace differs when the same world and steps are "
                "replayed"
            )


def pair_machine(baseline: str, candidate: PolicyRef = "proposed") -> type[PairMachine]:
    """A machine class comparing ``candidate`` with ``baseline`` (a policy name)."""
    label = candidate if isinstance(candidate, str) else candidate.__name__
    name = f"{label}_vs_{baseline}".replace("-", "_")
    return type(name, (PairMachine,), {"BASELINE": baseline, "CANDIDATE": candidate})
