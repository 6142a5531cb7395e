"""The story an agreement example tells, as the cluster (the truth) lived it: what bounds
each allowance of *never more sockets* (:func:`connmgr.testing.invariants.check_fewer_sockets`).

An allowance must never be computed from the candidate's own behaviour alone: a policy that
closes every quiet socket at once and re-dials it at the next request
(:class:`connmgr.testing.mutants.Thrashing`) would excuse itself. Each allowance is the
lesser of what the candidate did for a cause and what the story's causes permit: a return of
a leader or coordinator, a failure step, an endpoint move, a leader or coordinator moving
away, a world whose brokers confirm their id. A story without the cause permits nothing.

:class:`PairMachine` keeps one, appending the truth after every step; a test replaying a
story by hand builds one with :meth:`Story.told`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise

from connmgr.core.config import ClientKind
from connmgr.core.identity import Purpose
from connmgr.sim.cluster import ClusterModel
from connmgr.sim.simulator import Simulator
from connmgr.testing.world import GROUP, SPARSE, TOPIC, Step, World

FAILURES = frozenset({"broker_down", "remove_broker", "drop_connections"})
"""Steps that cut the client's sockets to a broker."""

ENDPOINT_MOVES = frozenset({"move_endpoint", "share_endpoint"})
"""Steps that give a broker another host:port."""

NEED_WINDOW_MS = SPARSE.metadata_max_age_ms + SPARSE.request_timeout_ms
"""How far back a client's sockets can reach into the story: its metadata is refreshed at
least every ``metadata.max.age.ms`` (300 s), and a request sent by it stays in flight for up
to ``request.timeout.ms`` (30 s), the machines' timings (:data:`connmgr.testing.world.SPARSE`)."""

SOCKETS_PER_BROKER = len(Purpose) + 1
"""The most sockets a client holding only what its work needs has to one broker: one per
purpose (data, coordination), and a bootstrap socket that happened to reach it."""


@dataclass(frozen=True, slots=True)
class Truth:
    """The cluster after one step, as far as the work is concerned."""

    leaders: tuple[int, ...]
    """The leader of each partition of :data:`TOPIC`."""
    coordinator: int | None
    """The group coordinator, for a consumer (a producer has no group)."""

    @classmethod
    def of(cls, cluster: ClusterModel, client: ClientKind) -> Truth:
        leaders = tuple(cluster.leader(tp) for tp in cluster.partitions([TOPIC]))
        consumer = client is ClientKind.CONSUMER
        return cls(leaders, cluster.coordinator(GROUP) if consumer else None)

    @property
    def coordinators(self) -> frozenset[int]:
        """The coordinator, as a set (empty for a producer)."""
        return frozenset() if self.coordinator is None else frozenset({self.coordinator})


@dataclass(frozen=True)
class Story:
    """A world's client, budget and adoption rule, the steps fed, and the truth at the start
    (``truths[0]``) and after each step (``truths[i]`` after ``steps[i - 1]``)."""

    client: ClientKind
    adoption: bool
    """Brokers confirm their id, so the candidate may adopt its bootstrap connection."""
    budget: int | None
    truths: tuple[Truth, ...]
    steps: tuple[Step, ...] = ()

    @classmethod
    def begin(cls, world: World, cluster: ClusterModel) -> Story:
        """A story before its first step, in ``world`` (``cluster`` as it starts)."""
        truth = Truth.of(cluster, world.client)
        return cls(world.client, world.confirms_identity, world.max_connections, (truth,))

    def then(self, step: Step, cluster: ClusterModel) -> Story:
        """This story with ``step`` fed, ``cluster`` as that step left it."""
        return Story(
            self.client,
            self.adoption,
            self.budget,
            (*self.truths, Truth.of(cluster, self.client)),
            (*self.steps, step),
        )

    @classmethod
    def told(cls, world: World, steps: Iterable[Step], *sims: Simulator) -> Story:
        """Feed ``steps`` to every one of ``sims`` (simulators of ``world``, started); the
        story they lived."""
        story = cls.begin(world, sims[0].cluster)
        for step in steps:
            for sim in sims:
                step.apply(sim)
            story = story.then(step, sims[0].cluster)
        return story

    # --- the causes, counted --------------------------------------------------------------

    @cached_property
    def failures(self) -> int:
        """Failure steps: a broker going down or leaving, a broker's sockets dropped."""
        return sum(1 for s in self.steps if s.kind in FAILURES)

    def endpoint_moves(self, broker: int) -> int:
        """Steps that moved ``broker`` to another host:port."""
        return sum(1 for s in self.steps if s.kind in ENDPOINT_MOVES and s.broker == broker)

    def returns(self, broker: int, purpose: Purpose) -> int:
        """How often ``broker`` became, for a connection of ``purpose``, needed again after
        having been needed and then not: for coordination, the returns of the coordinator
        to it; for data, those and the returns of a partition's leadership to it (a
        coordinator's requests ride the data connection when it is shared)."""
        coordinator = _returns([broker in t.coordinators for t in self.truths])
        if purpose is Purpose.COORDINATION:
            return coordinator
        return coordinator + _returns([broker in t.leaders for t in self.truths])

    @cached_property
    def ex_leaders(self) -> frozenset[int]:
        """Brokers that led a partition which then moved away from them."""
        return _left([t.leaders for t in self.truths])

    @cached_property
    def ex_coordinators(self) -> frozenset[int]:
        """Brokers that were the coordinator, which then moved away from them."""
        return _left([(t.coordinator,) for t in self.truths if t.coordinator is not None])

    @cached_property
    def times(self) -> tuple[float, ...]:
        """The simulated time of each truth (``times[i]`` of ``truths[i]``)."""
        elapsed = [0.0]
        for step in self.steps:
            elapsed.append(elapsed[-1] + (step.ms if step.kind == "wait" else 0.0))
        return tuple(elapsed)

    @cached_property
    def peak_need(self) -> int:
        """The most connections the work may need at once: one per broker that led a
        partition, and one per broker that was the coordinator (a consumer's coordination
        connection is its own: the worlds leave ``share_coordinator`` off), within any
        :data:`NEED_WINDOW_MS` of the story (the truth in force at the window's start
        included). A client's view of the cluster may be that far behind it, and a request
        on the socket to a leader that has since moved stays in flight while the new
        leader's socket is dialled."""
        peak = 0
        for i, now in enumerate(self.times):
            first = max(j for j in range(i + 1) if j == 0 or self.times[j] <= now - NEED_WINDOW_MS)
            window = self.truths[first : i + 1]
            leaders = frozenset(b for t in window for b in t.leaders)
            coordinators = frozenset(b for t in window for b in t.coordinators)
            peak = max(peak, len(leaders) + len(coordinators))
        return peak

    @property
    def budget_binds(self) -> bool:
        """The candidate's socket budget was below what the work may need
        (:attr:`peak_need`) at some point of the story."""
        return self.budget is not None and self.budget < self.peak_need


def _returns(needed: Sequence[bool]) -> int:
    entries = sum(1 for before, now in pairwise([False, *needed]) if now > before)
    return max(entries - 1, 0)


def _left(holders: Sequence[tuple[int, ...]]) -> frozenset[int]:
    return frozenset(
        b
        for before, after in pairwise(holders)
        for b, b_after in zip(before, after, strict=True)
        if b != b_after
    )
