"""A Hypothesis state machine that drives the REAL proposed aiokafka producer on the embedded
cluster and, beside it, the simulator running the same policy, and compares their connections.

Each example starts a fresh librdkafka mock cluster of :data:`BROKERS` brokers with one topic
whose partition leaders are drawn, a :class:`~connmgr.aio.ProposedProducer` on a private
event loop (the rules are synchronous; each one runs the loop with ``run_until_complete``
only for as long as it needs it), and a :class:`~connmgr.sim.simulator.Simulator` stepping
the *same* policy class with the *same* :class:`~connmgr.core.config.PolicyConfig` (taken
from the real client) against a model of the same cluster: same broker ids, same
host:port listeners, same leaders.

Every rule changes both worlds the same way. Cluster changes are applied to the model
first and then mirrored onto the mock, partition by partition, so that the two clusters
agree by construction (in particular, the model moves a downed broker's leaders to the next
live broker; the mock alone would leave them on the dead broker, so the machine moves them
there before taking the broker down). The rules:

* ``produce`` -- the real producer sends ``n`` records to *every* partition (acks=all) and
  awaits every ack; then the loop runs until the client has settled (see
  :meth:`RealPairMachine.settle_real`). The simulator's producer model, which sends to every
  leader once per ``send_interval_ms``, is advanced by :data:`SIM_PRODUCE_MS`: several
  produce rounds, a metadata refresh after a NOT_LEADER, and the linger.
* ``move_leader`` -- a partition moves to another live broker. The clients learn it from
  the NOT_LEADER answer to their next produce, which refreshes their metadata.
* ``broker_down`` / ``broker_up`` -- never the last live broker. If the client held a
  socket to it, the loop runs until the client has seen it closed and refreshed its
  metadata (as it would while time passes), so the next rule meets a client that knows.

Every example starts with ``produce`` (the other rules wait for the first one): before it the
client has no connection and no metadata, so there is nothing to change under it.

Invariants, each raising ``AssertionError`` with a message that names it: (a) after every
step, (b) and (c) at settled points (after each ``produce`` rule), (d) at teardown. What is
compared is the *settled* set of connections, not the dial-by-dial trace: the two worlds'
clocks and request cadences differ (the model produces every second; the real client only
inside ``produce``), so the order and timing of dials on the way are not expected to agree.

a. **no lost records** -- every record sent was acknowledged, with an offset, on the
   partition it was sent to.
b. **real = simulated** -- the multiset of (broker id, role) of the real policy's open
   connections equals the simulator's, where the simulator ran the same policy on the same
   cluster state. Both must also equal the independent expectation: one data connection
   per distinct leader of the topic (the producer writes to every partition, nothing else
   is needed, and nothing lingers once settled).
c. **kernel = policy** -- the kernel's count of this process's live sockets to the cluster's
   listeners equals the policy's count of open connections, and the connection ledger the
   driver writes matches the kernel socket for socket (``averify_against_kernel``).
d. **nothing left** (teardown) -- after ``stop()`` the ledger holds no open connection and
   the kernel no socket to the cluster; after the loop and the cluster are closed, the
   process has no more threads than before the example.

Known finding (pinned as a strict xfail in ``tests/embedded/test_stateful_real.py``): when
the broker a client still believes leads a partition dies before the client has a socket to
it -- leaders (1,), produce, broker 1 down (the client refreshes: 2 leads), broker 2 down,
produce -- the dial to 2 is refused, 2 leaves the client's metadata, and the request waits
in the policy (``place()`` returns None for a broker not in metadata) until
``request_timeout_ms``; ``PolicyClient.ready()`` blocks that long and the producer's batch
expires with ``NodeNotReadyError``. Invariant (a) catches it.

Settings that matter: the policy's ``connection_linger_ms`` is :data:`LINGER_MS` (short, so settling
is quick; the simulator uses the same value because it uses the same config), the bootstrap
list names every broker and starts at the first (``bootstrap_offset=0``), and the policy's
random source is seeded from the example, in both worlds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import Counter
from collections.abc import Awaitable
from typing import Any, Final, TypeVar

from hypothesis import currently_in_test_context, note
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from connmgr.aio import ProposedProducer
from connmgr.aio.kernel import averify_against_kernel, kernel_connections
from connmgr.core.config import ClientKind
from connmgr.core.endpoint import Endpoint
from connmgr.core.identity import Role
from connmgr.core.metadata import TopicPartition
from connmgr.core.state import ConnState
from connmgr.embedded import MockCluster
from connmgr.policies import make_policy
from connmgr.policies.proposed import ProposedPolicy
from connmgr.seeding import derive_rng
from connmgr.sim.cluster import ClusterModel, build_cluster
from connmgr.sim.scenarios import ScenarioSpec
from connmgr.sim.simulator import Simulator
from connmgr.testing.constants import load_whole_package

__all__ = ["BROKERS", "LINGER_MS", "TOPIC", "RealPairMachine", "open_roles"]

TOPIC: Final = "t"
BROKERS: Final = 3
LINGER_MS: Final = 150
"""The proposed policy's linger, in both worlds: short, so a retired leader closes quickly."""
SIM_PRODUCE_MS: Final = 4_000.0
"""Simulated time one ``produce`` rule covers: four produce rounds of the model (one per
second), enough for a NOT_LEADER, the metadata refresh it triggers, the new leader's dial
and the old one's linger. Rounds fall on whole seconds and every exchange on the simulated
loopback takes well under a millisecond, so ending half-way between rounds
(:data:`SIM_PHASE_MS`) leaves nothing in flight."""
SIM_PHASE_MS: Final = 500.0
SETTLE_TIMEOUT_S: Final = 15.0
"""How long a rule waits for the real client to settle before checking anyway (and failing
with both states in the message)."""
REQUEST_TIMEOUT_MS: Final = 10_000
ACK_TIMEOUT_S: Final = 60.0
POLL_S: Final = 0.02

_T = TypeVar("_T")
Roles = Counter[tuple[int | None, Role]]


def open_roles(pairs: list[tuple[int | None, Role]]) -> Roles:
    """A multiset of (broker id, role) pairs, the form both worlds are compared in."""
    return Counter(pairs)


def _show(roles: Roles) -> str:
    items = sorted(roles.items(), key=lambda kv: (kv[0][0] or -1, kv[0][1].value))
    shown = [f"{b}/{r.value}" + (f" x{n}" if n > 1 else "") for (b, r), n in items]
    return "[" + ", ".join(shown) + "]"


def _thread_count() -> int:
    """Native threads of this process (librdkafka's threads are invisible to ``threading``)."""
    return len(os.listdir("/proc/self/task"))


class RealPairMachine(RuleBasedStateMachine):
    """The real proposed producer on the embedded cluster beside the simulator (see module)."""

    def __init__(self) -> None:
        super().__init__()
        load_whole_package()  # the same search in any process: see connmgr.testing.constants
        self.cluster: MockCluster | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.producer: ProposedProducer | None = None
        self.sim: Simulator | None = None
        self.sim_started = False
        self.leaders: tuple[int, ...] = ()
        self.down: set[int] = set()
        self.sent = 0
        self.acked = 0
        self.lost: list[str] = []
        self.settled = False
        self.threads_before = _thread_count()
        self.step = 0
        self.history: list[str] = []

    # --- plumbing ------------------------------------------------------------------------

    def run(self, awaitable: Awaitable[_T]) -> _T:
        """Run the private loop until ``awaitable`` is done."""
        assert self.loop is not None
        return self.loop.run_until_complete(awaitable)

    @property
    def model(self) -> ClusterModel:
        assert self.sim is not None
        return self.sim.cluster

    @property
    def policy(self) -> ProposedPolicy:
        assert self.producer is not None
        policy = self.producer.client.policy
        assert isinstance(policy, ProposedPolicy)
        return policy

    def live(self) -> list[int]:
        return [b for b in range(1, BROKERS + 1) if b not in self.down]

    def say(self, text: str) -> None:
        self.step += 1
        self.log(f"step {self.step}: {text}")

    def log(self, text: str) -> None:
        """Keep ``text`` in :attr:`history`, and note it when Hypothesis runs the machine."""
        self.history.append(text)
        if currently_in_test_context():
            note(text)

    def mirror_leaders(self) -> None:
        """Make the mock's leaders the model's, partition by partition."""
        assert self.cluster is not None
        current = list(self.leaders)
        for partition in range(len(current)):
            leader = self.model.leader(TopicPartition(TOPIC, partition))
            if leader != current[partition]:
                self.cluster.set_partition_leader(TOPIC, partition, leader)
                current[partition] = leader
        self.leaders = tuple(current)

    # --- start -----------------------------------------------------------------------------

    @initialize(
        leaders=st.lists(st.integers(1, BROKERS), min_size=1, max_size=3).map(tuple),
        seed=st.integers(0, 2**16),
    )
    def start(self, leaders: tuple[int, ...], seed: int) -> None:
        self.begin(leaders, seed)

    @rule(n=st.integers(1, 20))
    def produce(self, n: int) -> None:
        self.do_produce(n)

    @precondition(lambda self: self.sent > 0 and len(self.live()) > 1)
    @rule(data=st.data())
    def move_leader(self, data: st.DataObject) -> None:
        partition = data.draw(st.integers(0, len(self.leaders) - 1), label="partition")
        others = [b for b in self.live() if b != self.leaders[partition]]
        self.do_move_leader(partition, data.draw(st.sampled_from(others), label="to"))

    @precondition(lambda self: self.sent > 0 and len(self.live()) > 1)
    @rule(data=st.data())
    def broker_down(self, data: st.DataObject) -> None:
        self.do_broker_down(data.draw(st.sampled_from(self.live()), label="broker"))

    @precondition(lambda self: bool(self.down))
    @rule(data=st.data())
    def broker_up(self, data: st.DataObject) -> None:
        self.do_broker_up(data.draw(st.sampled_from(sorted(self.down)), label="broker"))

    # --- the steps, callable without Hypothesis (for pinned scenarios) ---------------------

    def begin(self, leaders: tuple[int, ...], seed: int) -> None:
        """Start the mock cluster, the real producer and the simulator (no dial yet)."""
        self.log(f"world: {BROKERS} brokers, topic {TOPIC!r} leaders {leaders}, seed {seed}")
        self.cluster = MockCluster(BROKERS, track_requests=False)
        self.cluster.create_topic_with_leaders(TOPIC, leaders)
        self.leaders = leaders
        self.loop = asyncio.new_event_loop()
        self.producer = self.run(self._start_producer(seed))
        listeners = self.cluster.listeners()
        endpoints = {b: Endpoint(host, port) for b, (host, port) in listeners.items()}
        # The very config the real client built, so both worlds run the same policy.
        config = self.producer.client.policy_config
        spec = ScenarioSpec(
            cluster=build_cluster(endpoints, {TOPIC: leaders}, {}, seed=seed),
            bootstrap=config.bootstrap,
            client=ClientKind.PRODUCER,
            topics=(TOPIC,),
            group=None,
            duration_ms=float("inf"),
        )
        policy = make_policy("proposed", config, derive_rng(seed, "policy"))
        self.sim = Simulator(
            policy,
            spec.cluster,
            spec.make_client,
            client_kind=ClientKind.PRODUCER,
            duration_ms=float("inf"),
        )

    async def _start_producer(self, seed: int) -> ProposedProducer:
        assert self.cluster is not None
        producer = ProposedProducer(
            bootstrap_servers=self.cluster.bootstrap_servers,
            acks="all",
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            retry_backoff_ms=50,
            connection_linger_ms=LINGER_MS,
            bootstrap_offset=0,
            policy_seed=seed,
        )
        await producer.start()
        return producer

    def do_produce(self, n: int) -> None:
        """Send ``n`` records to every partition, await the acks, let both worlds settle."""
        partitions = len(self.leaders)
        self.say(f"produce {n} record(s) to each of {partitions} partition(s)")
        self.run(self._produce(n, partitions))
        settled = self.run(self.settle_real())
        assert self.sim is not None
        if not self.sim_started:
            self.sim.start()  # the model's client starts with the first real send
            self.sim_started = True
            end = SIM_PHASE_MS + SIM_PRODUCE_MS
        else:
            end = self.sim.now + SIM_PRODUCE_MS
        self.sim.advance_to(end)
        self.log(f"  real settled: {settled}; {self.policy!r}")
        self.settled = True

    async def _produce(self, n: int, partitions: int) -> None:
        assert self.producer is not None
        sends: list[tuple[int, str, Any]] = []
        for i in range(n):
            for partition in range(partitions):
                value = f"s{self.step}-r{i}-p{partition}"
                future = await self.producer.send(TOPIC, value.encode(), partition=partition)
                sends.append((partition, value, future))
                self.sent += 1
        async with asyncio.timeout(ACK_TIMEOUT_S):
            results = await asyncio.gather(*(f for _, _, f in sends), return_exceptions=True)
        for (partition, value, _), result in zip(sends, results, strict=True):
            if isinstance(result, BaseException):
                self.lost.append(f"{value}: {type(result).__name__}: {result}")
            elif result.partition != partition or result.offset < 0:
                self.lost.append(f"{value}: acked as {result}")
            else:
                self.acked += 1

    def do_move_leader(self, partition: int, broker: int) -> None:
        """Move ``partition``'s leader to the live ``broker`` in both clusters."""
        self.say(f"partition {partition} -> broker {broker} (was {self.leaders[partition]})")
        self.model.move_leader(TopicPartition(TOPIC, partition), broker)
        self.mirror_leaders()
        self.settled = False

    def do_broker_down(self, broker: int) -> None:
        """Take ``broker`` down; its partitions move to the next live broker in both."""
        assert self.sim is not None and self.cluster is not None
        self.sim.broker_down(broker)  # moves its leaders to the next live broker...
        self.mirror_leaders()  # ...which the mock would not do: move them there first
        self.cluster.broker_down(broker)
        self.down.add(broker)
        self.say(f"broker {broker} down; leaders now {self.leaders}")
        held = any(v.key.broker_id == broker for v in self.policy.connections())
        if held:  # the client sees the socket closed and refreshes: let it, as time would
            self.run(self._until_forgotten(broker))
        self.settled = False

    async def _until_forgotten(self, broker: int) -> None:
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            md = self.policy.metadata
            if md is not None and md.endpoint_of(broker) is None:
                return
            await asyncio.sleep(POLL_S)

    def do_broker_up(self, broker: int) -> None:
        """Bring ``broker`` back (it leads nothing until a leader moves to it)."""
        assert self.cluster is not None
        self.say(f"broker {broker} up")
        self.model.set_up(broker)
        self.cluster.broker_up(broker)
        self.down.discard(broker)
        self.settled = False

    def check(self) -> None:
        """Every invariant, as Hypothesis runs them after each step: (b) and (c) only at
        settled points."""
        self.no_lost_records()
        self.real_matches_simulator()
        self.kernel_matches_policy()

    # --- settling --------------------------------------------------------------------------

    def real_is_settled(self) -> bool:
        """Nothing pending, dialling or draining, nothing lingering, ledger and policy agree."""
        policy = self.policy
        assert self.producer is not None
        views = policy.connections()
        if policy.pending_requests or any(v.state is not ConnState.READY for v in views):
            return False
        needed = policy.needed_connections()
        if needed is None or any(v.conn_id not in needed for v in views):
            return False
        return len(self.producer.ledger.open_now()) == len(views)

    async def settle_real(self) -> bool:
        """Run the loop until :meth:`real_is_settled` (True) or :data:`SETTLE_TIMEOUT_S`."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while not self.real_is_settled():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(POLL_S)
        return True

    # --- invariants ------------------------------------------------------------------------

    def real_roles(self) -> Roles:
        return open_roles([(v.key.broker_id, v.key.role) for v in self.policy.connections()])

    def sim_roles(self) -> Roles:
        assert self.sim is not None
        return open_roles([(c.key.broker_id, c.key.role) for c in self.sim.open_connections()])

    @invariant()
    def invariants_hold(self) -> None:
        """(a) always; (b) and (c) when the last step was a ``produce``."""
        self.check()

    def no_lost_records(self) -> None:
        assert not self.lost, f"no lost records: {len(self.lost)} of {self.sent} lost: " + (
            "; ".join(self.lost[:5])
        )
        assert self.acked == self.sent, f"no lost records: {self.acked} of {self.sent} acked"

    def real_matches_simulator(self) -> None:
        if not self.settled:
            return
        real, sim = self.real_roles(), self.sim_roles()
        wanted = open_roles([(b, Role.DATA) for b in sorted(set(self.leaders))])
        assert real == sim, (
            f"real = simulated: real client holds {_show(real)}, the simulator of the same "
            f"policy {_show(sim)} (leaders {self.leaders}, down {sorted(self.down)}; "
            f"real {self.policy!r})"
        )
        assert real == wanted, (
            f"real = simulated: both hold {_show(real)}, but a producer writing to every "
            f"partition needs exactly {_show(wanted)} (leaders {self.leaders})"
        )

    def kernel_matches_policy(self) -> None:
        if not self.settled:
            return
        assert self.cluster is not None and self.producer is not None
        listeners = self.cluster.listeners()
        kernel = kernel_connections(listeners.values()).total()
        count = self.policy.socket_count()
        assert kernel == count, (
            f"kernel = policy: the kernel has {kernel} live socket(s) to the cluster, the "
            f"policy counts {count} open ({self.policy!r})"
        )
        self.run(averify_against_kernel(self.producer.ledger, listeners, settle_s=2.0))

    # --- teardown --------------------------------------------------------------------------

    def teardown(self) -> None:
        """Stop the client and check nothing is left; always close the loop and the cluster.

        Changes made after an example's last ``produce`` are not compared: a last produce
        here would make every example end at a compared point, but it is left out while
        the known finding (module docstring) stands, as the derandomized suite's first
        example would then fail on it."""
        problems: list[str] = []
        try:
            if self.producer is not None and self.cluster is not None:
                listeners = self.cluster.listeners()
                self.run(self.producer.stop())
                left = self.producer.ledger.open_now()
                if left:
                    problems.append(f"ledger still has {len(left)} open after stop(): {left}")
                try:
                    self.run(averify_against_kernel(self.producer.ledger, listeners, settle_s=2.0))
                except AssertionError as exc:
                    problems.append(str(exc))
                except Exception as exc:  # AccountingMismatch and friends
                    problems.append(f"{type(exc).__name__}: {exc}")
                sockets = kernel_connections(listeners.values()).total()
                if sockets:
                    problems.append(f"{sockets} socket(s) to the cluster left after stop()")
        finally:
            self._close_loop()
            if self.cluster is not None:
                self.cluster.close()
        deadline = time.monotonic() + 5.0
        while _thread_count() > self.threads_before and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if _thread_count() > self.threads_before:
            problems.append(
                f"{_thread_count() - self.threads_before} thread(s) more than before the example"
            )
        assert not problems, "nothing left: " + "; ".join(problems)

    def _close_loop(self) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            with contextlib.suppress(Exception):
                loop.close()
