"""The client log's view of a Java run: its connection events replayed into a ledger.

Every ``Initiating connection to node HOST:PORT (id: N ...)`` line is a dial, ``Completed
connection to node N`` its establishment, and the disconnect lines its end (see
:func:`connmgr.javalog.parse_connection_events`). Closing the client closes every connection
without a line per connection, so whatever is open then is closed "by client close".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from connmgr.core.identity import COORDINATOR_ID_BASE, Role
from connmgr.javalog import LoggedConnectionEvent, node_id_of
from connmgr.ledger import ConnectionLedger, observed_key

__all__ = ["LogAccount", "build_ledger", "open_counts", "role_of"]


def role_of(node: str) -> tuple[Role, int | None]:
    """The role of a Java connection id and the broker it reaches (None for bootstrap).

    ``-N``: bootstrap entry N; a group coordinator in either form, ``+B`` (kafka-clients 4.4+)
    or ``2147483647 - B`` (older clients; any id above ``2147483647 // 2``, the Java patch's
    ``CoordinatorIds`` threshold): the group coordinator on broker B; anything else: broker
    N's data connection. Raises ValueError for an id that is not an integer in either form.
    """
    n = node_id_of(node)
    if n < 0:
        return Role.BOOTSTRAP, None
    if n > COORDINATOR_ID_BASE // 2:
        return Role.COORDINATION, COORDINATOR_ID_BASE - n
    return Role.DATA, n


def _bootstrap_index(node: str) -> int:
    """Bootstrap entry ``-N`` is index N - 1 of ``bootstrap.servers``; 0 for any other id."""
    n = node_id_of(node)
    return -n - 1 if n < 0 else 0


@dataclass
class LogAccount:
    """Counts from replaying a log's connection events (see :func:`build_ledger`)."""

    opened: int = 0
    established: int = 0
    closed: int = 0
    """Connections that were established and then closed (any reason, client close included)."""
    failed: int = 0
    """Dials that never completed: refused, timed out, or a failed synchronous connect."""
    connect_errors: int = 0
    """Of ``failed``, those that failed before a socket was registered ("Error connecting"):
    the only connections ``connection-close-total`` never counts."""
    closed_by_client_close: int = 0
    unmatched: list[LoggedConnectionEvent] = field(default_factory=list)
    """Disconnect lines for a node with no open connection (e.g. a no-op close request)."""

    @property
    def open(self) -> int:
        return self.opened - self.closed - self.failed

    @property
    def metric_closes(self) -> int:
        """What ``connection-close-total`` should say: every registered socket closed."""
        return self.closed + self.failed - self.connect_errors


def _ms(t: datetime, t0: datetime) -> float:
    return (t - t0).total_seconds() * 1000.0


def build_ledger(
    events: Iterable[LoggedConnectionEvent],
    *,
    t0: datetime,
    until: datetime | None = None,
    client_closed_at: datetime | None = None,
) -> tuple[ConnectionLedger, LogAccount]:
    """Replay the log's connection events into a :class:`ConnectionLedger`.

    Each ``connect`` opens a connection (role and broker by :func:`role_of` of its node id);
    ``established`` marks it established; a ``disconnect`` of an established connection closes
    it, of one never established fails it, as does a ``connect_error``. Events after ``until``
    are ignored. If ``client_closed_at`` is given, every connection still open is closed then
    with reason ``client close`` (the client's close() logs nothing per connection). Times in
    the ledger are milliseconds since ``t0``.
    """
    ledger = ConnectionLedger()
    account = LogAccount()
    current: dict[str, int] = {}  # node id as printed -> conn_id of its open connection
    established: set[int] = set()
    for e in events:
        if until is not None and e.timestamp > until:
            break
        t_ms = _ms(e.timestamp, t0)
        if e.kind == "connect":
            role, broker = role_of(e.node)
            conn_id = account.opened
            account.opened += 1
            key = observed_key(e.host, e.port, broker, role, _bootstrap_index(e.node))
            ledger.opened(t_ms, conn_id, key)
            current[e.node] = conn_id
        elif e.kind == "established" and e.node in current:
            ledger.established(t_ms, current[e.node])
            established.add(current[e.node])
            account.established += 1
        elif e.kind in ("disconnect", "connect_error"):
            conn_id_or_none = current.pop(e.node, None)
            if conn_id_or_none is None:
                account.unmatched.append(e)
            elif conn_id_or_none in established:
                ledger.closed(t_ms, conn_id_or_none, e.reason)
                account.closed += 1
            else:
                ledger.failed(t_ms, conn_id_or_none, e.reason)
                account.failed += 1
                account.connect_errors += int(e.kind == "connect_error")
    if client_closed_at is not None:
        for entry in ledger.open_now():
            if entry.conn_id in established:
                ledger.closed(_ms(client_closed_at, t0), entry.conn_id, "client close")
                account.closed += 1
            else:
                ledger.failed(_ms(client_closed_at, t0), entry.conn_id, "client close")
                account.failed += 1
            account.closed_by_client_close += 1
    return ledger, account


def open_counts(
    events: list[LoggedConnectionEvent], t0: datetime, start: datetime, end: datetime
) -> frozenset[int]:
    """The log's open-connection count at ``start`` and after every event up to ``end``."""
    counts = {build_ledger(events, t0=t0, until=start)[1].open}
    for e in events:
        if start < e.timestamp <= end:
            counts.add(build_ledger(events, t0=t0, until=e.timestamp)[1].open)
    return frozenset(counts)
