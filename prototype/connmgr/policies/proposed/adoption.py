"""Rule (c) of the proposed policy: confirm, then adopt or close a bootstrap connection."""

from __future__ import annotations

from collections.abc import Iterator

from connmgr.core.actions import CloseReason
from connmgr.core.connections import Connection, first_ready
from connmgr.core.decisions import AdoptAs, AskIdentity, CloseNow, Decision, retire
from connmgr.core.events import IdentityAnswer
from connmgr.core.identity import BrokerNode, ConnectionKey, Purpose, Role
from connmgr.core.metadata import ClusterMetadata
from connmgr.core.policy import Policy
from connmgr.core.state import ConnState
from connmgr.policies.proposed.coordinators import (
    coordinators_by_purpose,
    leaders_in_use,
    wanted,
)


class Adoption:
    """c. Confirm, then adopt or close: when metadata arrives and places exactly one broker X
    at a READY bootstrap connection's host:port, the client needs X (a leader in use, a
    coordinator) and the cluster id agrees, the client asks the broker on that very socket
    whether it is node X of that cluster -- KIP-1242's check, ``ApiVersions`` v5 with
    ``ClusterId`` and ``NodeId`` (Kafka 4.4+; on SASL listeners sent only after
    authentication, before which a broker does not check it). Requests for X wait for the
    answer instead of dialling X. Confirmed, the socket becomes X's data connection (or its
    coordination connection, if X is only the consumer's group coordinator): no second dial.
    Rejected (``REBOOTSTRAP_REQUIRED``), it drains and closes, counted as such; unanswered
    (another error, a timeout), it closes as one never asked; either way X is dialled. A
    broker without the check (before 4.4) keeps the rule below; so does a host:port metadata
    gives to several brokers (a proxy: no one node to ask about). ``adopt_unverified`` adopts
    a socket whose broker cannot be asked when metadata gives the host:port to exactly one
    broker (unsafe: see the safety note).
    A connection not adopted carries no broker request: if the cluster id agrees it serves
    any-node requests until the first broker dial, which closes it first (so the stand-in
    never adds to the peak; one still busy then closes as soon as a broker connection is
    ready, without a linger); if not, it drains and closes at once. It is never left as an
    orphan. Dials to known brokers carry the same check in their own handshake, so a
    host:port that now leads to another broker fails the dial instead of misrouting requests.

    Safety note. A bootstrap socket reached *some* broker behind the bootstrap host:port.
    Inferring which from metadata ("exactly one broker is advertised at this host:port") looks
    safe but is not: the property suite (tests/properties) found a proxy that led the address
    to broker 3 when the socket was dialled and to broker 4 only when the metadata answer
    arrived, so the socket was adopted as broker 4's and every request for 4 reached 3. Hence
    adoption needs the broker's own word on the socket: asked "are you 4?", broker 3 answers
    ``REBOOTSTRAP_REQUIRED`` and the socket is closed, nothing misrouted. The inference alone
    is an opt-in (``adopt_unverified``) for clusters known to have no remapping proxy in
    front. :attr:`PolicyConfig.expected_cluster_id` adds what a client can check without the
    broker: a different cluster is never adopted.

    Every part of the rule is a method here: when to ask or adopt (:meth:`on_metadata`), the
    answer (:meth:`on_answer`), requests waiting for it (:meth:`awaiting_answer`), the
    stand-in's any-node service (:meth:`stand_in`), whether a bootstrap connection is kept
    (:meth:`keeps`) and its close at the first broker dial (:meth:`closed_before_dial`) or
    once unneeded (:meth:`close_unneeded`).
    """

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self._checks: dict[int, Connection] = {}
        """Broker id -> the bootstrap connection whose broker is being asked whether it is
        that broker; requests for it wait for the answer."""

    # --- asking, adopting, closing -------------------------------------------------------

    def on_metadata(self, old: ClusterMetadata | None) -> Iterator[Decision]:
        """New metadata: ask, adopt, keep as a stand-in, or retire each bootstrap
        connection whose broker's answer is not already on its way."""
        policy = self._policy
        md = policy.metadata
        assert md is not None
        expected = policy.config.expected_cluster_id or (old.cluster_id if old else None)
        cluster_agrees = expected is None or md.cluster_id == expected
        for conn in policy.table.records():
            if conn.role is not Role.BOOTSTRAP or conn.checking is not None:
                continue  # not a bootstrap connection, or its broker's answer is on its way
            candidate = self._candidate(conn, md) if cluster_agrees else None
            if conn.state is ConnState.READY and candidate is not None and md.cluster_id:
                self._checks[candidate] = conn
                yield AskIdentity(conn, candidate, md.cluster_id)
                continue
            broker_id = self._unverified(conn, md) if cluster_agrees else None
            if conn.state is ConnState.READY and broker_id is not None:
                new_key = ConnectionKey(conn.key.endpoint, BrokerNode(broker_id), Purpose.DATA)
                if policy.table.live(new_key) is None:
                    yield AdoptAs(conn, new_key)
                    continue
            if conn.state is ConnState.READY and cluster_agrees:
                # Otherwise not adoptable (its host:port is shared, unlisted, or already has
                # its own connection, or its broker cannot be asked) but it reached a broker
                # of this cluster, which is all an any-node request needs: it serves those
                # until a broker connection can, and is closed as soon as it is quiet and not
                # needed (before a broker dial, so it never adds to the peak). Closing it now
                # would cost a dial for the very next Metadata request.
                continue
            decision = retire(conn, CloseReason.NOT_ADOPTED)
            if decision is not None:
                yield decision

    def _candidate(self, conn: Connection, md: ClusterMetadata) -> int | None:
        """The broker to ask a bootstrap connection's peer about: the one broker metadata
        places at its host:port, if its broker answers the check, the client needs that
        broker (a leader in use, a coordinator) and it has no connection of its own yet. A
        broker nothing needs is not asked: adopted, its socket would linger where the
        stand-in closes at the first broker dial (a bootstrap entry of a big cluster is
        rarely a client's leader, and would hold every starting client's socket)."""
        ids = md.ids_at(conn.key.endpoint)
        if not conn.checks_identity or md.cluster_id is None or len(ids) != 1:
            return None
        (only,) = ids
        if not wanted(self._policy, only):
            return None
        if self._policy.table.live_for_node(BrokerNode(only), Purpose.DATA) is not None:
            return None
        return only

    def _unverified(self, conn: Connection, md: ClusterMetadata) -> int | None:
        """The broker a bootstrap connection that cannot be asked may be adopted as: only with
        ``adopt_unverified``, the one broker metadata places at its host:port -- which a
        proxy that remapped the address since the dial defeats (see the safety note)."""
        ids = md.ids_at(conn.key.endpoint)
        if self._policy.config.adopt_unverified and len(ids) == 1:
            (only,) = ids
            return only
        return None

    def on_answer(
        self, conn: Connection, broker_id: int, answer: IdentityAnswer
    ) -> Iterator[Decision]:
        """The answer: adopt the socket as the broker's if it confirmed, metadata still
        places the broker there alone and the client still needs it (if not, the stand-in
        closes as an unadopted one does); close it if the broker said no."""
        policy = self._policy
        self._checks.pop(broker_id, None)
        md = policy.metadata
        if (
            answer is IdentityAnswer.CONFIRMED
            and conn.state is ConnState.READY
            and md is not None
            and md.ids_at(conn.key.endpoint) == frozenset({broker_id})
            and wanted(policy, broker_id)
        ):
            purpose = self._adopted_purpose(broker_id)
            new_key = ConnectionKey(conn.key.endpoint, BrokerNode(broker_id), purpose)
            if policy.table.live(new_key) is None:
                yield AdoptAs(conn, new_key)
                return
        decision = None
        if answer is IdentityAnswer.REJECTED:
            decision = retire(conn, CloseReason.IDENTITY_REJECTED)
        elif answer is IdentityAnswer.FAILED:
            decision = retire(conn, CloseReason.NOT_ADOPTED)  # nothing was said
        if decision is not None:
            yield decision

    def _adopted_purpose(self, broker_id: int) -> Purpose:
        """A confirmed bootstrap socket becomes the broker's data connection, or its
        coordination connection when the broker is only the consumer's group coordinator."""
        by_purpose = coordinators_by_purpose(self._policy)
        if broker_id in by_purpose[Purpose.COORDINATION] and broker_id not in leaders_in_use(
            self._policy
        ):
            return Purpose.COORDINATION
        return Purpose.DATA

    def awaiting_answer(self, broker_id: int) -> bool:
        """Whether requests for ``broker_id`` wait: the bootstrap socket may be this
        broker's, and its answer is on its way."""
        if not self._checks:
            return False
        conn = self._checks.get(broker_id)
        if conn is not None and conn.checking == broker_id and conn.state is ConnState.READY:
            return True
        self._checks.pop(broker_id, None)
        return False

    # --- the stand-in --------------------------------------------------------------------

    def stand_in(self, records: list[Connection]) -> Connection | None:
        """The READY bootstrap connection of ``records`` (fewest in flight) an any-node
        request may use when no broker connection is ready."""
        return first_ready([c for c in records if c.role is Role.BOOTSTRAP])

    def keeps(self, conn: Connection) -> bool:
        """Whether bootstrap connection ``conn`` is needed for its role: until metadata
        arrives, and while its broker is being asked."""
        return self._policy.metadata is None or conn.checking is not None

    def closed_before_dial(self, conn: Connection) -> tuple[CloseNow, ...]:
        """A broker dial (of new record ``conn``) first closes every quiet kept bootstrap
        connection, so that the stand-in never adds to the peak; a busy one goes once a
        broker connection is ready to take over (:meth:`close_unneeded`)."""
        policy = self._policy
        if conn.key.broker_id is None or policy.metadata is None:
            return ()
        return tuple(
            CloseNow(other, CloseReason.NOT_ADOPTED)
            for other in policy.table.records()
            if other.role is Role.BOOTSTRAP
            and other.state is ConnState.READY
            and not other.busy
            and other.checking is None
        )

    def close_unneeded(self, conn: Connection) -> CloseNow | None:
        """A quiet bootstrap connection its role no longer keeps goes at once, no linger: it
        has no broker of its own to return to."""
        if conn.role is Role.BOOTSTRAP and not conn.busy:
            return CloseNow(conn, CloseReason.NOT_ADOPTED)
        return None
