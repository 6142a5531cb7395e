"""The invariants the agreement machines check after every step (listed in
:mod:`connmgr.testing.machines`); each raises ``AssertionError`` with a message that names it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from connmgr.core.actions import CloseReason
from connmgr.core.api import Api
from connmgr.core.config import ClientKind
from connmgr.core.identity import Purpose
from connmgr.core.state import ConnState
from connmgr.ledger import ConnEvent
from connmgr.sim.simulator import Simulator
from connmgr.testing.story import SOCKETS_PER_BROKER, Story
from connmgr.testing.world import GROUP, TOPIC


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
    return sim.ledger.count(ConnEvent.ESTABLISHED)


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


@dataclass(frozen=True, slots=True)
class Allowances:
    """What *never more sockets* allows the candidate beyond the baseline at one check, each
    the lesser of what the candidate did for a cause and what the story's causes bound
    (:func:`allowances`; the causes and bounds are listed in :func:`check_fewer_sockets`).
    Every field is zero in a story without its cause."""

    adopted: int = 0
    refresh: int = 0
    stale_held: int = 0
    draining: int = 0
    lost: int = 0
    moved: int = 0
    returned: int = 0
    stale_coordinators: int = 0
    stale_leaders: int = 0

    @property
    def held(self) -> int:
        """Allowed beyond the baseline in sockets held (draining ones are not counted)."""
        return self.adopted + self.refresh + self.stale_held

    @property
    def opened(self) -> int:
        """Allowed beyond the baseline in connections established."""
        return self.lost + self.moved + self.returned + self.stale_coordinators + self.stale_leaders

    def __str__(self) -> str:
        named = [f"{v} {k.replace('_', ' ')}" for k, v in _fields(self) if v]
        return f" (allowing {', '.join(named)})" if named else ""


def _fields(a: Allowances) -> list[tuple[str, int]]:
    return [(name, getattr(a, name)) for name in a.__dataclass_fields__]


def allowances(candidate: Simulator, baseline: Simulator, story: Story) -> Allowances:
    """Each allowance of :func:`check_fewer_sockets`, bounded by ``story``."""
    open_records = candidate.open_connections()
    adopted = sum(1 for c in open_records if c.record.adopted_as is not None)
    draining: Counter[int] = Counter(
        c.key.broker_id
        for c in candidate.policy.table.records()
        if c.state is ConnState.DRAINING and c.key.broker_id is not None
    )
    moved: Counter[int] = Counter(
        r.key.broker_id
        for r in candidate.conn_records
        if r.close_reason == CloseReason.ENDPOINT_CHANGED.value and r.key.broker_id is not None
    )
    lost = sum(1 for r in candidate.conn_records if r.close_reason in LOSSES)
    leaders = stale_leaders(candidate, baseline) & story.ex_leaders
    coordinators = stale_coordinators(candidate, baseline) & story.ex_coordinators
    per_move = len(Purpose)  # a data and a coordination connection retired per move
    return Allowances(
        adopted=min(adopted, int(story.adoption)),
        refresh=min(len(refresh_after_loss(candidate)), int(story.failures > 0)),
        stale_held=len(leaders & data_brokers_held(candidate)),
        draining=sum(min(n, per_move * story.endpoint_moves(b)) for b, n in draining.items()),
        lost=min(lost, SOCKETS_PER_BROKER * story.failures),
        moved=sum(min(n, per_move * story.endpoint_moves(b)) for b, n in moved.items()),
        returned=sum(
            min(n, story.returns(broker, purpose))
            for (broker, purpose), n in redials(candidate).items()
        ),
        stale_coordinators=len(coordinators),
        stale_leaders=len(leaders),
    )


def check_fewer_sockets(candidate: Simulator, baseline: Simulator, story: Story) -> None:
    """The candidate holds and has opened no more sockets than the baseline.

    Compared at every step at which the baseline serves the whole work
    (:func:`serves_workload`): a socket to every live leader and, for a consumer, to the
    coordinator. A baseline without one is not doing that work yet -- it is still backing
    off after losing its sockets, acting on metadata older than the candidate's, or stuck
    dialling a broker's old address -- and a count of what it holds or has opened says
    nothing about waste; at those steps the candidate is held to :func:`check_tight`
    alone (every socket it holds is needed by its own view of the cluster, busy, or inside
    its linger).

    "Held" and "opened" leave out dials to a dead broker (refused at once) and count
    connections established: such a dial is a retry, paced by the reconnect backoff, and a
    client whose metadata names only dead brokers retries under every policy until it can
    refresh, each at its own moment.

    No allowance is computed from the candidate's behaviour alone. Each is the lesser of
    what the candidate did for a cause and a bound the story (``story``, the steps and the
    cluster's truth after each) puts on that cause, so each is zero in a story without its
    cause (:class:`Allowances`; ``tests/properties/test_socket_allowances.py`` shows each
    at zero). The allowances, each a consequence of safety or of timing rather than waste:

    * **adopted** (held): one socket the baseline does not hold right after the bootstrap
      connection was adopted as a broker's, when a lazy baseline (aiokafka) has closed its
      bootstrap socket and not yet dialled that broker. Cause: a world whose brokers
      confirm their id (nothing is adopted otherwise). Bound: 1.
    * **draining** (held, not counted): a socket the candidate retired because its broker's
      endpoint changed, still draining in-flight responses, is on its way out; a baseline
      keyed by node id keeps the old socket and uses it. Cause: the broker's endpoint moved
      (``move_endpoint``, ``share_endpoint``). Bound: per broker, two (one per purpose) per
      move of that broker.
    * **refresh** (held): one socket, unneeded and within its linger, dialled when a
      failure had left the candidate no socket at all (:func:`refresh_after_loss`): its
      metadata named only lost brokers, so it refreshed through a broker picked at random,
      and the new leaders turned out to be elsewhere; a baseline that kept sockets to
      brokers it picked earlier may already hold one to a new leader. The socket closes
      when its linger runs out (*tight*). Cause: a failure step. Bound: 1.
    * **stale leaders** (held and opened, :func:`stale_leaders`): the candidate's first
      metadata request names its topics, where aiokafka-today's bootstrap request names
      none and asks for them one round trip later; a leader that moves away and back inside
      that round trip is dialled and sent to by the candidate at the broker its answer
      named, and never by the baseline. Per such broker one more opened and, while its data
      socket is open, one more held (*tight* closes it once its linger runs out). Cause: a
      partition leader moved away from that broker. Bound: the brokers a partition left.
    * **stale coordinators** (opened, :func:`stale_coordinators`): the same window for the
      coordinator. The candidate looks it up with its first metadata request, one round
      trip before java-today and aiokafka-today do; a coordinator that moves in between is
      dialled by the candidate at its old broker, then at its new one, while the baseline
      only ever hears of the new one. The earlier lookup saves that round trip on every
      start, and any lookup's answer can go stale before the dial completes, so the window
      cannot be closed, only moved. Cause: the coordinator moved away from that broker.
      Bound: the brokers the coordinator left.
    * **lost** (opened): one more per connection lost to a failure: after a loss each
      client re-dials in its own order and at its own time (a baseline may wait for a
      metadata refresh the candidate does not, or pick another broker for the refresh), so
      the totals may cross by one per loss. Cause: a failure step (``broker_down``,
      ``remove_broker``, ``drop_connections``). Bound: :data:`SOCKETS_PER_BROKER` (3) per
      failure step, the most a client holding only what it needs has to one broker.
    * **moved** (opened): one more per connection retired because its broker's endpoint
      changed: the candidate never sends to a broker on a socket to its old host:port,
      while the baselines key by node id and keep using the old socket. Cause and bound as
      for *draining*.
    * **returned** (opened): one more per connection closed as unneeded and dialled again
      when its broker was needed again for the same purpose: the price of closing what
      nothing needs, which a baseline that keeps idle sockets for minutes (or forever,
      with ``connections.max.idle.ms = -1``) does not pay; the linger sizes that trade.
      Cause: the broker became a leader (for data) or the coordinator (for either purpose)
      again after having stopped being one (:meth:`Story.returns`). Bound: per broker and
      purpose, the number of such returns. (The property stage reports every such re-dial:
      ``redials`` in its ``property-runs`` table.)

    In a world with a socket budget (:attr:`Story.budget`) the same comparison applies
    while the budget is at least what the work may need at once (:attr:`Story.peak_need`:
    one connection per broker that led a partition and one per coordinator, within any
    330 s of the story, since a client's view and its requests in flight reach that far
    back); the budget itself is checked by :func:`check_safety`. Below that the candidate
    must close sockets the work needs and re-dial them -- even a budget equal to the
    steady need does, while an old leader's socket still holds a fetch
    (``test_deep_findings.py::test_a_budget_at_the_work_s_need_thrashes_while_a_leader_hands_over``)
    -- and :func:`check_bounded_handshakes` bounds that instead.
    """
    if story.budget_binds:
        check_bounded_handshakes(candidate, baseline, story)
        return
    if serves_workload(baseline):
        compare_sockets(candidate, baseline, allowances(candidate, baseline, story))


def compare_sockets(candidate: Simulator, baseline: Simulator, allowed: Allowances) -> None:
    """The comparison of :func:`check_fewer_sockets`, given its allowances."""
    held, base_held = usable_sockets(candidate), usable_sockets(baseline)
    assert held - allowed.draining <= base_held + allowed.held, (
        f"never more sockets: candidate holds {held}, baseline {base_held}{allowed}"
    )
    opened, base_opened = established(candidate), established(baseline)
    assert opened <= base_opened + allowed.opened, (
        f"never more sockets: candidate opened {opened}, baseline {base_opened}{allowed}"
    )


def broker_requests(sim: Simulator) -> int:
    """Requests the client sent to a particular broker (a leader or a coordinator)."""
    return sum(1 for r in sim.request_log if r.target != "any")


def check_bounded_handshakes(candidate: Simulator, baseline: Simulator, story: Story) -> None:
    """Under a socket budget below what the work needs (:attr:`Story.budget_binds`), the
    candidate has opened no more connections than the baseline, its allowances
    (:func:`allowances`), and one per request the work sent to a particular broker.

    A budget below the work thrashes: a dial at the cap closes a quiet socket the work
    needs, and the next request to that broker dials it again (KIP (e), rejected;
    ``tests/test_budget_thrash.py`` measures it). The budget itself holds
    (:func:`check_safety`); what bounds the thrash is that the candidate dials only for a
    request waiting on the dial, so it cannot make more handshakes than the work makes
    requests to brokers. The work's requests are counted as the baseline sent them
    (:func:`broker_requests`): the same client model fed the same story, with no budget,
    so the count is the story's and not the candidate's. A policy that dials without a
    request waiting, or dials several times per request, fails it.
    """
    allowed = allowances(candidate, baseline, story)
    opened, base_opened = established(candidate), established(baseline)
    work = broker_requests(baseline)
    assert opened <= base_opened + allowed.opened + work, (
        f"never more sockets: under a budget of {story.budget} below the work's "
        f"{story.peak_need}, candidate opened {opened}, baseline {base_opened} and "
        f"{work} requests to brokers{allowed}"
    )


def coordinator_targets(sim: Simulator) -> set[str]:
    """The coordinators (``"coordinator:<id>"``) the client has sent a request to."""
    return {r.target for r in sim.request_log if r.target.startswith("coordinator:")}


def stale_coordinators(candidate: Simulator, baseline: Simulator) -> set[int]:
    """Brokers the candidate established a coordination connection to, and sent a
    coordinator request to, which the baseline never sent a coordinator request to: the
    coordinator had moved between the two clients' lookups."""
    told = coordinator_targets(candidate) - coordinator_targets(baseline)
    return {
        e.key.broker_id
        for e in candidate.ledger.entries
        if e.kind is ConnEvent.ESTABLISHED
        and e.key.purpose is Purpose.COORDINATION
        and e.key.broker_id is not None
        and f"coordinator:{e.key.broker_id}" in told
    }


PARTITION_APIS = frozenset({Api.PRODUCE, Api.FETCH, Api.LIST_OFFSETS})
"""Requests a client sends to a partition's leader."""


def leader_targets(sim: Simulator) -> set[int]:
    """The brokers the client has sent a partition request (produce, fetch) to, as a
    partition's leader."""
    return {
        int(r.target) for r in sim.request_log if r.api in PARTITION_APIS and r.target.isdigit()
    }


def data_brokers_held(sim: Simulator) -> set[int]:
    """The brokers the client holds an open data socket to, by the broker its key names."""
    return {
        c.key.broker_id
        for c in sim.open_connections()
        if c.key.purpose is Purpose.DATA and c.key.broker_id is not None
    }


def stale_leaders(candidate: Simulator, baseline: Simulator) -> set[int]:
    """Brokers the candidate established a data connection to and sent a partition request
    to, as a leader, which the baseline never sent a partition request to: a leader had
    moved between the two clients' metadata answers (the candidate's first one names its
    topics, aiokafka-today's asks for them one round trip later) and moved back."""
    told = leader_targets(candidate) - leader_targets(baseline)
    dialled = {
        e.key.broker_id
        for e in candidate.ledger.entries
        if e.kind is ConnEvent.ESTABLISHED
        and e.key.purpose is Purpose.DATA
        and e.key.broker_id is not None
    }
    return told & dialled


def redials(sim: Simulator) -> Counter[tuple[int, Purpose]]:
    """Connections established to a broker, for a purpose, that the client had earlier
    closed as unneeded, by (broker, purpose)."""
    closed: set[tuple[int, Purpose]] = set()
    count: Counter[tuple[int, Purpose]] = Counter()
    for entry in sim.ledger.entries:
        if entry.key.broker_id is None:
            continue
        what = (entry.key.broker_id, entry.key.purpose)
        if entry.kind is ConnEvent.CLOSED and entry.reason == CloseReason.UNNEEDED.value:
            closed.add(what)
        elif entry.kind is ConnEvent.ESTABLISHED and what in closed:
            closed.discard(what)
            count[what] += 1
    return count


def redialled(sim: Simulator) -> int:
    """Connections established to a broker, for a purpose, that the client had earlier
    closed as unneeded."""
    return sum(redials(sim).values())


def refresh_after_loss(sim: Simulator) -> list[int]:
    """Ready sockets nothing needs that the client dialled when a failure had left it no
    socket at all (its metadata refresh after the loss, to a broker picked at random since
    its metadata named only lost ones)."""
    lost = [r for r in sim.conn_records if r.close_reason in LOSSES and r.closed_ms is not None]
    idle = unneeded(sim)
    if not lost or not idle:
        return []
    found = []
    for record in sim.conn_records:
        if record.conn_id not in idle or record.closed_ms is not None:
            continue
        t = record.opened_ms
        alone = all(
            r.closed_ms is not None and r.closed_ms <= t
            for r in sim.conn_records
            if r.conn_id != record.conn_id and r.opened_ms <= t
        )
        if alone and any(r.closed_ms is not None and r.closed_ms <= t for r in lost):
            found.append(record.conn_id)
    return found


def unneeded(sim: Simulator) -> list[int] | None:
    """The candidate's ready sockets that nothing needs and nothing is using (None for a
    policy that does not say what it needs)."""
    policy = sim.policy
    needed = policy.needed_connections()
    if needed is None:
        return None
    return [
        c.conn_id
        for c in policy.table.records()
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
    linger = policy.config.connection_linger_ms
    for conn in policy.table.records():
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
    keys = [c.key for c in policy.table.records() if c.state is not ConnState.DEFERRED]
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
    return list(sim.ledger.entries), list(sim.request_log)
