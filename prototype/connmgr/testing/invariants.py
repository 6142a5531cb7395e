"""The invariants the agreement machines check after every step (listed in
:mod:`connmgr.testing.machines`); each raises ``AssertionError`` with a message that names it."""

from __future__ import annotations

from typing import Any

from connmgr.core.actions import CloseReason
from connmgr.core.api import Api
from connmgr.core.config import ClientKind
from connmgr.core.identity import Purpose
from connmgr.core.state import ConnState
from connmgr.ledger import ConnEvent
from connmgr.sim.simulator import Simulator
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
    * it may hold one more socket, unneeded and within its linger, that it dialled when a
      failure had left it no socket at all (:func:`refresh_after_loss`): its metadata
      named only lost brokers, so it refreshed through a broker picked at random, and the
      new leaders turned out to be elsewhere; a baseline that kept sockets to brokers it
      picked earlier may already hold one to a new leader. The socket closes when its
      linger runs out (*tight*);
    * it may have opened one more socket per broker it was told is a coordinator and the
      baseline never was (:func:`stale_coordinators`): the candidate looks the coordinator
      up with its first metadata request, one round trip before java-today and
      aiokafka-today do; a coordinator that moves in between is dialled by the candidate
      at its old broker, then at its new one, while the baseline only ever hears of the
      new one. The earlier lookup is what saves that round trip on every start, and any
      lookup's answer can go stale before the dial completes, so the window cannot be
      closed, only moved;
    * the same window for partition leaders (:func:`stale_leaders`): the candidate's first
      metadata request names its topics, where aiokafka-today's bootstrap request names
      none and asks for the topics one round trip later; a leader that moves away and back
      inside that round trip is dialled and sent to by the candidate at the broker its
      answer named, and never by the baseline. Per such broker the candidate may have
      opened one more socket and may hold one more (its data socket to that broker, which
      *tight* closes once its linger runs out).
    """
    if not serves_workload(baseline):
        return
    held, base_held = usable_sockets(candidate), usable_sockets(baseline)
    adopted = sum(1 for c in candidate.open_connections() if c.record.adopted_as is not None)
    draining = sum(1 for c in candidate.policy.table.records() if c.state is ConnState.DRAINING)
    refresh = min(len(refresh_after_loss(candidate)), 1)
    leaders = stale_leaders(candidate, baseline)
    stale_held = len(leaders & data_brokers_held(candidate))
    assert held - draining <= base_held + min(adopted, 1) + refresh + stale_held, (
        f"never more sockets: candidate holds {held}, baseline {base_held}"
        + (" (allowing 1 lingering refresh socket)" if refresh else "")
        + (f" (allowing {stale_held} stale leaders)" if stale_held else "")
    )
    opened, base_opened = established(candidate), established(baseline)
    moved = sum(1 for r in candidate.conn_records if r.close_reason == "endpoint_changed")
    lost = sum(1 for r in candidate.conn_records if r.close_reason in LOSSES)
    again = redialled(candidate)
    stale = stale_coordinators(candidate, baseline) + len(leaders)
    assert opened <= base_opened + moved + lost + again + stale, (
        f"never more sockets: candidate opened {opened}, baseline {base_opened}"
        + (
            f" (allowing {moved} endpoint changes, {lost} lost, {again} re-dialled,"
            f" {stale} stale coordinators or leaders)"
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
        for e in candidate.ledger.entries
        if e.kind is ConnEvent.ESTABLISHED and e.key.purpose is Purpose.COORDINATION
    }
    return len(told & dialled)


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


def redialled(sim: Simulator) -> int:
    """Connections established to a broker, for a purpose, that the client had earlier
    closed as unneeded."""
    closed: set[tuple[int, Purpose]] = set()
    count = 0
    for entry in sim.ledger.entries:
        if entry.key.broker_id is None:
            continue
        what = (entry.key.broker_id, entry.key.purpose)
        if entry.kind is ConnEvent.CLOSED and entry.reason == CloseReason.UNNEEDED.value:
            closed.add(what)
        elif entry.kind is ConnEvent.ESTABLISHED and what in closed:
            closed.discard(what)
            count += 1
    return count


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
