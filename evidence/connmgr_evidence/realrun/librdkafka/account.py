"""librdkafka's connections, replayed from its broker log into a :class:`ConnectionLedger`
as the client runs.

One socket per broker handle at a time (``rkb_transport``), so a handle's log lines (see
:mod:`.log`) are that socket's life: a ``Connecting to`` line is a dial, ``Connected to`` its
establishment, and the first state change to a socketless state (DOWN, INIT, TRY_CONNECT)
its end -- a close if it was established, a failed dial if not -- with the handle's last
``FAIL`` line as the reason. A connection's role comes from its handle:

* ``HOST:PORT/bootstrap`` -- ``Role.BOOTSTRAP``, the entry of ``bootstrap.servers`` it names;
* ``HOST:PORT/ID`` -- ``Role.DATA`` to broker ID (produce, fetch, metadata, and whatever
  else librdkafka sends to "any broker");
* a logical broker (``GroupCoordinator``, ``TxnCoordinator``) -- ``Role.COORDINATION`` to the
  broker it is delegated to when it dials, at that broker's advertised address (its
  ``nodename``). librdkafka gives these handles their own socket even when a learnt handle
  of the same broker is connected. The broker is the one the log knows at that address
  (from the names of the learnt handles); the ``/ID`` of the dial line only when the address
  is not one broker's: ``rd_kafka_broker_set_nodename`` changes the address first and the
  log name after, so a dial can be logged under the bare or the previous delegate's name.

Times are those at which the application served the log queue (confluent-kafka forwards the
log to the client's main queue: ``log.queue``), on the caller's clock: a blocked ``poll``
or ``flush`` serves a line as soon as it is queued, so the lag is the queue hand-off.
Closing the client logs nothing the application can still serve, so whatever is open then
is closed by :meth:`LogAccount.close_all` ("client close"), as the Java client's replay does.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from connmgr.core.endpoint import Endpoint
from connmgr.core.identity import ConnectionKey, Role
from connmgr.ledger import ConnectionLedger, observed_key
from connmgr_evidence.realrun.librdkafka.log import (
    DISCONNECT_COUNTED,
    NO_SOCKET,
    BrokerKind,
    BrokerName,
    LineKind,
    LogLine,
    parse_line,
)

__all__ = ["HandleTally", "LogAccount"]


@dataclass
class HandleTally:
    """One broker handle's connections as its log tells them, in the terms of its
    statistics entry (``connects``, ``disconnects``, ``state``)."""

    attempts: int = 0
    """Connection attempts (``broker in state ... connecting``): what ``connects`` counts."""
    dials: int = 0
    """Attempts that opened a socket: the ledger's dials for this handle."""
    no_socket: int = 0
    """Attempts that ended before a socket existed (no address yet, name resolution or socket
    creation failed): in ``connects``, never in the ledger."""
    disconnects: int = 0
    """Sockets closed in UP or a later state: what ``disconnects`` counts."""
    state: str = "INIT"
    open_conn: int | None = None
    """The ledger's ``conn_id`` of the socket the handle holds, if any."""
    established: bool = False
    reason: str = ""
    """The last ``FAIL`` line: why the socket about to close closes."""
    nodename: Endpoint | None = None
    """A logical broker's current address (its delegate's), from its NODENAME lines."""


@dataclass
class LogAccount:
    """The ledger of one librdkafka client, written line by line from its log.

    ``bootstrap`` is the client's ``bootstrap.servers``, in order (a bootstrap connection's
    index); ``clock`` gives the ledger's time in ms from the client's start. ``problems``
    lists lines the replay could not place (a dial with no known address, a second socket on
    one handle): the run's cross-check reports them.
    """

    bootstrap: Sequence[Endpoint]
    clock: Callable[[], float]
    ledger: ConnectionLedger = field(init=False)
    handles: dict[str, HandleTally] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    brokers_at: dict[Endpoint, set[int]] = field(default_factory=dict)
    """The broker ids learnt handles have had at each address (from their names)."""
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.ledger = ConnectionLedger(clock=self.clock)

    def feed(self, facility: str, message: str) -> None:
        """One log line as the client delivered it (see :func:`.log.parse_line`)."""
        line = parse_line(facility, message)
        if line is not None:
            self.apply(self.clock(), line)

    def apply(self, t_ms: float, line: LogLine) -> None:
        """Write what ``line`` says happened at ``t_ms`` to the ledger and the tallies."""
        broker = line.broker
        if broker.kind is BrokerKind.LEARNED:
            assert broker.endpoint is not None and broker.node is not None
            self.brokers_at.setdefault(broker.endpoint, set()).add(broker.node)
        tally = self.handles.setdefault(broker.handle, HandleTally())
        kind = line.kind
        if kind is LineKind.ATTEMPT:
            tally.attempts += 1
        elif kind is LineKind.POSTPONED:
            tally.no_socket += 1
        elif kind is LineKind.FAIL:
            tally.reason = line.text
            tally.no_socket += int(line.opens_no_socket)
        elif kind is LineKind.NODENAME:
            tally.nodename = line.address
        elif kind is LineKind.DIAL:
            self._dial(t_ms, line, tally)
        elif kind is LineKind.CONNECTED and tally.open_conn is not None:
            self.ledger.established(t_ms, tally.open_conn)
            tally.established = True
        elif kind is LineKind.STATE:
            tally.state = line.new
            if line.new in NO_SOCKET and tally.open_conn is not None:
                self._end(t_ms, tally, tally.reason or f"{line.old} -> {line.new}")
                tally.disconnects += int(line.old in DISCONNECT_COUNTED)

    def close_all(self, t_ms: float, reason: str) -> None:
        """End every connection still open at ``t_ms`` (the client was closed)."""
        for tally in self.handles.values():
            if tally.open_conn is not None:
                self._end(t_ms, tally, reason)

    def _dial(self, t_ms: float, line: LogLine, tally: HandleTally) -> None:
        if tally.open_conn is not None:
            # librdkafka asserts a handle has no transport before it dials: a missed close.
            self.problems.append(f"{line.broker.handle}: dialled again with a socket open")
            self._end(t_ms, tally, "dialled again")
        key = self._key(line.broker, line.address, tally)
        if key is None:
            return
        conn_id = next(self._ids)
        self.ledger.opened(t_ms, conn_id, key)
        tally.dials += 1
        tally.open_conn = conn_id
        tally.established = False
        tally.reason = ""

    def _end(self, t_ms: float, tally: HandleTally, reason: str) -> None:
        assert tally.open_conn is not None
        if tally.established:
            self.ledger.closed(t_ms, tally.open_conn, reason)
        else:
            self.ledger.failed(t_ms, tally.open_conn, reason)
        tally.open_conn = None
        tally.established = False
        tally.reason = ""

    def _key(
        self, broker: BrokerName, dialled: Endpoint | None, tally: HandleTally
    ) -> ConnectionKey | None:
        """The ledger key of a dial by ``broker``, or None (and a problem) if unplaceable."""
        if broker.kind is BrokerKind.BOOTSTRAP:
            assert broker.endpoint is not None
            if broker.endpoint not in self.bootstrap:
                self.problems.append(f"{broker.handle}: not an entry of bootstrap.servers")
                return None
            index = list(self.bootstrap).index(broker.endpoint)
            return observed_key(
                broker.endpoint.host, broker.endpoint.port, None, Role.BOOTSTRAP, index
            )
        if broker.kind is BrokerKind.LEARNED:
            assert broker.endpoint is not None
            return observed_key(broker.endpoint.host, broker.endpoint.port, broker.node, Role.DATA)
        where = tally.nodename or dialled
        there = self.brokers_at.get(where, set()) if where is not None else set()
        node = next(iter(there)) if len(there) == 1 else broker.node
        if broker.kind is BrokerKind.LOGICAL and node is not None and where is not None:
            return observed_key(where.host, where.port, node, Role.COORDINATION)
        self.problems.append(
            f"{broker.handle}: a dial to {where} the log does not place (no broker id)"
        )
        return None
