"""The Java client's NetworkClient log format: write it for any run, and parse it back.

The same parser reads the real client logs in ``tests/fixtures`` and the output of
``connmgr simulate --java-log``, so a simulated run can be compared line by line with a
recorded one. Only the lines that matter for connections are modelled:

    [2019-05-27 10:00:54,142] DEBUG [Consumer clientId=consumer-1, groupId=test] Initiating
    connection to node localhost:9092 (id: -1 rack: null) using address localhost/127.0.0.1
    (org.apache.kafka.clients.NetworkClient:944)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from connmgr.core.identity import COORDINATOR_ID_BASE

_STAMP = r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]"
_NODE = r"(?P<host>\[[^\]]+\]|[^\s:]+):(?P<port>\d+) \(id: (?P<id>[+-]?\d+) rack: (?P<rack>[^)]*)\)"
_METADATA = re.compile(_STAMP + r".*?\bSending metadata request .*?to node " + _NODE)
EPOCH = datetime(2026, 1, 1)
"""Simulated time 0 is printed as this instant."""


@dataclass(frozen=True, slots=True)
class LoggedConnection:
    """One ``Initiating connection`` line: when, to which node id, at which host:port."""

    timestamp: datetime
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class LoggedMetadataRequest:
    timestamp: datetime
    node_id: int
    host: str
    port: int


def _stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f")


def node_id_of(printed: str) -> int:
    """A connection id as printed, as one integer: ``+B`` (kafka-clients 4.4's group
    coordinator, B a non-negative broker id) becomes the classic ``2147483647 - B`` of the
    same coordinator; any other id is read as an integer. Raises ValueError for anything else
    (``+``, ``+-1``, a name)."""
    if printed.startswith("+"):
        digits = printed[1:]
        if not digits.isascii() or not digits.isdigit():
            raise ValueError(f"not a group coordinator connection id: {printed!r}")
        return COORDINATOR_ID_BASE - int(digits)
    return int(printed)


def parse_connections(lines: Iterable[str]) -> list[LoggedConnection]:
    """Every connection the log shows the client initiating, in order (any client version)."""
    return [
        LoggedConnection(e.timestamp, node_id_of(e.node), e.host, e.port)
        for e in parse_connection_events(lines)
        if e.kind == "connect"
    ]


def parse_metadata_requests(lines: Iterable[str]) -> list[LoggedMetadataRequest]:
    """Every ``Sending metadata request ... to node`` line, in order."""
    result = []
    for line in lines:
        m = _METADATA.search(line)
        if m:
            result.append(
                LoggedMetadataRequest(
                    _stamp(m["ts"]), node_id_of(m["id"]), m["host"].strip("[]"), int(m["port"])
                )
            )
    return result


def format_time(t_ms: float) -> str:
    stamp = EPOCH + timedelta(milliseconds=t_ms)
    return stamp.strftime("%Y-%m-%d %H:%M:%S,") + f"{stamp.microsecond // 1000:03d}"


def _node(host: str, port: int, node_id: int | str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port} (id: {node_id} rack: null)"


def connect_line(t_ms: float, who: str, host: str, port: int, node_id: int | str) -> str:
    """An ``Initiating connection`` line; ``node_id`` as the client prints it (an int, or a
    string such as 4.4's ``+3``)."""
    return (
        f"[{format_time(t_ms)}] DEBUG [{who}] Initiating connection to node "
        f"{_node(host, port, node_id)} using address {host}/{host} "
        "(org.apache.kafka.clients.NetworkClient)"
    )


def metadata_line(t_ms: float, who: str, host: str, port: int, node_id: int) -> str:
    return (
        f"[{format_time(t_ms)}] DEBUG [{who}] Sending metadata request "
        f"MetadataRequestData() to node {_node(host, port, node_id)} "
        "(org.apache.kafka.clients.NetworkClient)"
    )


def close_line(t_ms: float, who: str, node_id: int | str, reason: str) -> str:
    return (
        f"[{format_time(t_ms)}] DEBUG [{who}] Node {node_id} disconnected ({reason}). "
        "(org.apache.kafka.clients.NetworkClient)"
    )


def who(client: str) -> str:
    """The log prefix of a client, as the Java client prints it."""
    if client == "producer":
        return "Producer clientId=producer-1"
    return "Consumer clientId=consumer-1, groupId=test"


def render_events(
    client: str, events: Iterable[tuple[float, str, str, int, int, str]]
) -> Iterator[str]:
    """Java-format lines for (t_ms, kind, host, port, node_id, reason) events, where kind is
    ``connect``, ``metadata`` or ``close``."""
    prefix = who(client)
    for t_ms, kind, host, port, node_id, reason in events:
        if kind == "connect":
            yield connect_line(t_ms, prefix, host, port, node_id)
        elif kind == "metadata":
            yield metadata_line(t_ms, prefix, host, port, node_id)
        elif kind == "close":
            yield close_line(t_ms, prefix, node_id, reason)


# --- every connection event, both client generations ------------------------------------------
#
# ``parse_connections`` above is built on these; the functions below read
# every line NetworkClient writes about a connection's life, in the wording of 2.1.0 and of 4.x
# (checked against both clients' sources and against real logs of both):
#
# * a node prints as ``host:port (id: N rack: R)``; 4.x appends `` isFenced: B`` inside the
#   parentheses, and 4.4 names group-coordinator connections ``+B`` (B = the coordinator's broker
#   id; a GroupCoordinatorNode in its source) where older clients print ``2147483647 - B``;
# * a completed TCP connect is ``Completed connection to node N. ...``;
# * closes: ``Node N disconnected.`` (peer close, failed connect, failed send and -- before 4.x --
#   idle expiry; DEBUG in 2.1.0, INFO in 4.x), ``Idle connection to node N disconnected.`` (4.x),
#   ``Manually disconnected from N.`` (2.1.0) / ``Client requested disconnect from node N``
#   (4.x), ``Client requested connection close from node N`` (4.x),
#   ``Disconnecting from node N due to <why>.`` and the ApiVersions-error ``... Disconnecting.``;
#   the project's patched 4.3.1 adds ``Closing connection to bootstrap node N: metadata has
#   replaced the bootstrap cluster`` (INFO) and ``Closing connection to node N: nothing has
#   needed it for connections.linger.ms (L ms)`` (DEBUG);
# * a dial that failed synchronously (unresolvable host) is ``Error connecting to node <node>``;
# * closing the client itself closes every connection *without* a line per connection.
#
# The simulator's own ``close_line`` (``Node N disconnected (reason).``) is read too.

_NODE_ANY = (
    r"(?P<host>\[[^\]]+\]|[^\s:]+):(?P<port>\d+) "
    r"\(id: (?P<id>[+-]?\d+) rack: (?P<rack>[^)]*?)(?: isFenced: (?P<fenced>\w+))?\)"
)
_EVENT_PATTERNS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("connect", "", re.compile(_STAMP + r".*?\bInitiating connection to node " + _NODE_ANY)),
    (
        "connect_error",
        "connect error",
        re.compile(_STAMP + r".*?\bError connecting to node " + _NODE_ANY),
    ),
    (
        "established",
        "",
        re.compile(_STAMP + r".*?\bCompleted connection to node (?P<id>[+-]?\d+)\. "),
    ),
    (
        "disconnect",
        "idle",
        re.compile(_STAMP + r".*?\bIdle connection to node (?P<id>[+-]?\d+) disconnected\."),
    ),
    (
        "disconnect",
        "disconnected",
        # Capital "Node": "... due to node +3 being disconnected" is not a close of its own.
        re.compile(_STAMP + r".*?\bNode (?P<id>[+-]?\d+) disconnected(?: \((?P<why>[^)]*)\))?\."),
    ),
    (
        "disconnect",
        "client disconnect",
        re.compile(_STAMP + r".*?\bManually disconnected from (?P<id>[+-]?\d+)\."),
    ),
    (
        "disconnect",
        "client disconnect",
        # Not the ", which is already disconnected" variant: nothing is closed then.
        re.compile(
            _STAMP + r".*?\bClient requested disconnect from node (?P<id>[+-]?\d+)(?![\d,])"
        ),
    ),
    (
        "disconnect",
        "client close",
        re.compile(_STAMP + r".*?\bClient requested connection close from node (?P<id>[+-]?\d+)"),
    ),
    (
        "disconnect",
        "",
        re.compile(
            _STAMP + r".*?\bDisconnecting from node (?P<id>[+-]?\d+) due to (?P<why>[^.]*)\."
        ),
    ),
    (
        "disconnect",
        "bootstrap replaced",
        # The project's patch (bootstrap.connection.close.enable), INFO.
        re.compile(
            _STAMP + r".*?\bClosing connection to bootstrap node (?P<id>[+-]?\d+): metadata has "
            r"replaced the bootstrap cluster"
        ),
    ),
    (
        "disconnect",
        "unneeded",
        # The project's patch (connections.linger.ms), DEBUG.
        re.compile(
            _STAMP + r".*?\bClosing connection to node (?P<id>[+-]?\d+): nothing has needed it for "
            r"connections\.linger\.ms"
        ),
    ),
    (
        "disconnect",
        "api versions error",
        re.compile(
            _STAMP + r".*?\bReceived error \S+ from node (?P<id>[+-]?\d+) when making an "
            r"ApiVersionsRequest"
        ),
    ),
    (
        "unreachable",
        "",
        re.compile(
            _STAMP + r".*?\bConnection to node (?P<id>[+-]?\d+) \([^)]*\) could not be established"
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class LoggedConnectionEvent:
    """One NetworkClient line about a connection's life.

    ``kind`` is ``connect`` (dial started: "Initiating connection"), ``connect_error`` (the dial
    failed before a socket was registered), ``established`` ("Completed connection"),
    ``disconnect`` (the connection to ``node`` is gone, for ``reason``) or ``unreachable`` (the
    warning that follows a failed dial's ``disconnect``; informational). ``node`` is the
    connection id exactly as printed (``-1``, ``3``, ``2147483644``, ``+3``); ``host``/``port``
    are known for ``connect`` and ``connect_error`` only (empty / 0 otherwise).
    """

    timestamp: datetime
    kind: str
    node: str
    host: str = ""
    port: int = 0
    reason: str = ""


def parse_connection_event(line: str) -> LoggedConnectionEvent | None:
    """The connection event ``line`` records, or None if it records none (see the notes above
    :class:`LoggedConnectionEvent` for the wordings understood)."""
    # Every wording above holds one of these two: a line with neither (a DEBUG request line,
    # most of a long run's log) is skipped without trying a dozen patterns on it.
    if "onnect" not in line and "ApiVersionsRequest" not in line:
        return None
    for kind, reason, pattern in _EVENT_PATTERNS:
        m = pattern.search(line)
        if m is None:
            continue
        groups = m.groupdict()
        host = (groups.get("host") or "").strip("[]")
        port = int(groups["port"]) if groups.get("port") else 0
        why = groups.get("why") or reason
        return LoggedConnectionEvent(_stamp(m["ts"]), kind, m["id"], host, port, why)
    return None


def parse_connection_events(lines: Iterable[str]) -> list[LoggedConnectionEvent]:
    """Every connection event in ``lines``, in order (one per line at most)."""
    result = []
    for line in lines:
        event = parse_connection_event(line)
        if event is not None:
            result.append(event)
    return result


def parse_log_time(text: str) -> datetime:
    """A timestamp in the log's own format (``2019-05-27 10:00:54,142``), as a naive datetime."""
    return _stamp(text)


_PICK = re.compile(
    _STAMP + r".*?\bFound least loaded node " + _NODE_ANY + r" with no active connection"
)


def parse_least_loaded_picks(lines: Iterable[str]) -> list[int]:
    """The node ids ``leastLoadedNode`` returned *with no active connection* (TRACE lines), in
    order: the random choices a Java client made, to replay in its model."""
    picks = []
    for line in lines:
        m = _PICK.search(line)
        if m:
            picks.append(node_id_of(m["id"]))
    return picks


_SENT = (
    re.compile(
        _STAMP + r".*?\bSending (?P<api>[A-Z_]+) \{.*? with correlation id \d+ to node "
        r"(?P<id>[+-]?\d+)"
    ),  # 2.x TRACE
    re.compile(
        _STAMP + r".*?\bSending (?P<api>[A-Z_]+) request with header .*? to node "
        r"(?P<id>[+-]?\d+)"
    ),  # 3.x/4.x DEBUG
    re.compile(_STAMP + r".*?\bSending metadata request .*? to node \S+ \(id: (?P<id>[+-]?\d+)"),
)


def parse_sent_request(line: str) -> tuple[datetime, str, int] | None:
    """(time, API name, node id) of the request ``line`` shows being sent, or None."""
    if "Sending " not in line:
        return None
    for pattern in _SENT:
        m = pattern.search(line)
        if m:
            api = m.groupdict().get("api") or "METADATA"
            return (_stamp(m["ts"]), api, node_id_of(m["id"]))
    return None


def parse_sent_requests(lines: Iterable[str]) -> list[tuple[datetime, str, int]]:
    """(time, API name, node id) of every request the log shows being sent, in order."""
    sent = []
    for line in lines:
        request = parse_sent_request(line)
        if request is not None:
            sent.append(request)
    return sent


def request_line(t_ms: float, who: str, api: str, node_id: int | str, correlation: int) -> str:
    """A 3.x/4.x DEBUG ``Sending API request with header ...`` line (``api`` in Kafka's
    upper-case name, e.g. ``PRODUCE``), as :func:`parse_sent_request` reads it."""
    return (
        f"[{format_time(t_ms)}] DEBUG [{who}] Sending {api} request with header "
        f"RequestHeader(apiKey={api}, apiVersion=0, clientId=x, correlationId={correlation}, "
        f"headerVersion=2) and timeout 30000 to node {node_id}: {{}} "
        "(org.apache.kafka.clients.NetworkClient)"
    )


_WHO = re.compile(
    r"\] \w+ \[(?P<kind>[A-Za-z]+) clientId=(?P<client>[^,\]]*)"
    r"(?:, groupId=(?P<group>[^,\]]*))?(?:, transactionalId=(?P<txn>[^,\]]*))?[,\]]"
)
_KINDS = {
    "Producer": "producer",
    "Consumer": "consumer",
    "AdminClient": "admin",
    "ShareConsumer": "share-consumer",
}


@dataclass(frozen=True, slots=True)
class LogClient:
    """Whose line it is, from the client's log prefix (``[Consumer clientId=consumer-1,
    groupId=test]``): ``client_id`` verbatim, ``group`` (None when the prefix has none),
    ``kind`` (``producer``, ``transactional-producer``, ``consumer``, ``admin``,
    ``share-consumer``, or the prefix's word in lower case)."""

    client_id: str
    group: str | None
    kind: str


def client_of(line: str) -> LogClient | None:
    """The client a log line names in its prefix, or None (a line without one)."""
    m = _WHO.search(line)
    if m is None:
        return None
    kind = _KINDS.get(m["kind"], m["kind"].lower())
    if kind == "producer" and m["txn"]:
        kind = "transactional-producer"
    return LogClient(m["client"], m["group"], kind)


_PHASE = re.compile(_STAMP + r".*?\bProbe phase (?P<name>\w+) (?P<edge>begins|ends)")


def parse_probe_phases(lines: Iterable[str]) -> dict[str, tuple[datetime, datetime | None]]:
    """The Java probe's phase markers: phase name -> (begin, end or None)."""
    phases: dict[str, tuple[datetime, datetime | None]] = {}
    for line in lines:
        m = _PHASE.search(line)
        if m is None:
            continue
        at = _stamp(m["ts"])
        if m["edge"] == "begins":
            phases[m["name"]] = (at, None)
        elif m["name"] in phases:
            phases[m["name"]] = (phases[m["name"]][0], at)
    return phases
