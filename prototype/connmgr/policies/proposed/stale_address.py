"""Rule (h2) of the proposed policy: stale addresses."""

from __future__ import annotations

from collections.abc import Iterator

from connmgr.core.actions import CloseReason
from connmgr.core.decisions import CloseNow, Decision
from connmgr.core.events import AddressesResolved
from connmgr.core.policy import Policy
from connmgr.core.state import ConnState


class StaleAddresses:
    """h2. Stale address: a connection to a host name is retired only when DNS says, twice,
    that its address is no longer the name's. A lookup that failed -- timed out, SERVFAIL,
    NXDOMAIN, or an answer with no address -- changes nothing: an established TCP connection
    does not depend on DNS (a reused IP cannot take it over: the new host answers RST), so a
    DNS outage closes no working connection, as with today's clients. A successful answer
    that leaves out the address a connection reached marks it; the next successful answer for
    that name (the driver's next refresh, one TTL later; failed lookups between them neither
    count nor clear the mark) confirms it if it leaves the address out too, and then the
    connection closes at once, busy or not, and its in-flight requests go back to be placed
    again, as when a connection is lost: the next request for the broker dials anew instead
    of waiting out ``request_timeout_ms`` on an address that may never answer (a pod
    restarted under its DNS name with a new IP). An answer that includes the address clears
    the mark.

    Why two: one answer may be a resolver's mistake (a stale or split-horizon view, a
    half-updated record set); the same answer on the driver's next refresh, a TTL later, is
    the name's. Why at once then: that address no longer belongs to this broker (a dark pod
    never answers, a reused IP is another host), so waiting for its replies only waits out
    ``request_timeout_ms``; today's clients close the connection and retry its requests after
    that timeout, so no delivery guarantee changes, only when the retry happens. A connection
    whose address the driver never said (None) is left alone: nothing says it is stale.
    """

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self._marks: set[int] = set()
        """Connections a successful answer for their name left out once."""

    def on_lookup(self, lookup: AddressesResolved) -> Iterator[Decision]:
        """The rule applied to one lookup: a READY or DRAINING connection to ``lookup.host``
        closes when this answer leaves its address out for the second time."""
        if not lookup.answered:
            return  # a DNS outage is not a broker moving: the marks stand, nothing closes
        marked, self._marks = self._marks, set()
        for conn in self._policy.table.records():
            if conn.key.endpoint.host != lookup.host:
                if conn.conn_id in marked:
                    self._marks.add(conn.conn_id)  # another name's mark: untouched
            elif (
                conn.state in (ConnState.READY, ConnState.DRAINING)
                and conn.address is not None
                and conn.address not in lookup.addresses
            ):
                if conn.conn_id in marked:
                    yield CloseNow(conn, CloseReason.STALE_ADDRESS)
                else:
                    self._marks.add(conn.conn_id)
