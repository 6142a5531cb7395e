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
   has opened no more in total, under the conditions stated in :func:`check_fewer_sockets`:
   every allowance there is bounded by a cause in the story (:class:`Story`, kept by the
   machine), and a world with a socket budget below what the work needs is held to a bound
   on handshakes instead.
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

from collections.abc import Sequence
from typing import ClassVar

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
from connmgr.sim.simulator import Simulator
from connmgr.testing.constants import load_whole_package
from connmgr.testing.invariants import (
    LOSSES,
    check_fewer_sockets,
    check_safety,
    check_same_routing,
    check_tight,
    coordinator_targets,
    established,
    redialled,
    refresh_after_loss,
    serves_workload,
    sockets,
    stale_coordinators,
    stale_leaders,
    trace,
    unneeded,
    usable_sockets,
)
from connmgr.testing.story import Story
from connmgr.testing.world import (
    GROUP,
    PROXY,
    SETTLE_MS,
    SPARSE,
    TOPIC,
    WAITS,
    PolicyRef,
    Step,
    World,
    endpoint_of,
    worlds,
)

__all__ = [
    "GROUP",
    "LOSSES",
    "PROXY",
    "SETTLE_MS",
    "SPARSE",
    "TOPIC",
    "WAITS",
    "PairMachine",
    "PolicyRef",
    "Step",
    "Story",
    "World",
    "check_fewer_sockets",
    "check_safety",
    "check_same_routing",
    "check_tight",
    "coordinator_targets",
    "endpoint_of",
    "established",
    "pair_machine",
    "redialled",
    "refresh_after_loss",
    "serves_workload",
    "sockets",
    "stale_coordinators",
    "stale_leaders",
    "trace",
    "unneeded",
    "usable_sockets",
    "worlds",
]


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
    story: Story
    """The steps fed so far and the truth after each: what bounds the allowances of *never
    more sockets* (:mod:`connmgr.testing.story`)."""

    @initialize(world=worlds())
    def start(self, world: World) -> None:
        note(f"world: {world}")
        self._begin(world)

    def feed(self, step: Step) -> None:
        note(f"step {len(self.steps) + 1}: {step}")
        self._apply(step)

    def _begin(self, world: World) -> None:
        self.world = world
        self.candidate = world.simulator(self.CANDIDATE, candidate=True)
        self.baseline = world.simulator(self.BASELINE, candidate=False)
        self.story = Story.begin(world, self.candidate.cluster)

    def _apply(self, step: Step) -> None:
        self.steps.append(step)
        step.apply(self.candidate)
        step.apply(self.baseline)
        # Both clusters are the same truth; the candidate's is read.
        self.story = self.story.then(step, self.candidate.cluster)

    @classmethod
    def replay(cls, world: World, steps: Sequence[Step]) -> None:
        """Live ``world`` and ``steps`` outside a search, through the same checks a search
        makes (the invariants after the start and after every step, determinism at the
        end): raises the ``AssertionError`` a search meeting this story would. What a
        shrinker outside Hypothesis needs (:mod:`connmgr.testing.evidence`)."""
        machine = cls()
        machine._begin(world)
        machine.invariants_hold()
        for step in steps:
            machine._apply(step)
            machine.invariants_hold()
        machine.teardown()

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
        check_fewer_sockets(self.candidate, self.baseline, self.story)
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
