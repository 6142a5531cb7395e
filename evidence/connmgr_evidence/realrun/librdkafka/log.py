"""librdkafka's ``debug=broker`` log: the lines that say what a broker handle's socket did.

Every broker handle in librdkafka owns at most one socket (``rkb_transport``) and logs its
life under the ``broker`` debug context. Read in ``src/rdkafka_broker.c`` and
``src/rdkafka_transport.c`` (librdkafka 2.15/2.16) and seen on the embedded mock cluster:

* ``broker in state TRY_CONNECT connecting`` -- one connection attempt; the statistics'
  ``connects`` counter is incremented right after this line (``rd_kafka_broker_connect``);
* ``broker has no address yet: postponing connect`` -- that attempt ended without a socket
  (a logical broker not yet delegated); so did one followed by a ``FAIL`` line ``Failed to
  resolve ...`` or ``Failed to create socket ...``;
* ``Connecting to ipv4#127.0.0.1:9092 (plaintext) with socket 17`` -- the socket exists and
  ``connect()`` is issued (``rd_kafka_transport_connect``): a dial;
* ``Connected to ipv4#127.0.0.1:9092`` -- the TCP handshake completed;
* ``Broker changed state CONNECT -> APIVERSION_QUERY`` ... ``-> UP`` -- the Kafka handshake;
* ``Added new broker with NodeId 3`` -- a handle is created (its name says where and who);
* ``Broker changed state UP -> DOWN`` -- the socket was closed: ``rd_kafka_broker_fail``
  closes the transport *before* it logs its ``FAIL`` line (the reason, e.g. ``Disconnected``
  or ``Decommissioning this broker``) and sets the state to DOWN.

A line reads ``[thrd:THREAD]: NAME: TEXT`` where NAME is the broker handle's name:
``HOST:PORT/bootstrap`` for an entry of ``bootstrap.servers``, ``HOST:PORT/ID`` for a broker
learnt from metadata, and for a *logical* broker (``GroupCoordinator``, ``TxnCoordinator``:
handles that follow whichever broker currently has that role, with a socket of their own) its
bare name, or ``NAME/ID`` once delegated to broker ID -- both spellings occur for one handle.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Final

from connmgr.core.endpoint import Endpoint, parse_endpoint

__all__ = [
    "DISCONNECT_COUNTED",
    "NO_SOCKET",
    "BrokerKind",
    "BrokerName",
    "LineKind",
    "LogLine",
    "parse_line",
]

NO_SOCKET: Final = frozenset({"INIT", "DOWN", "TRY_CONNECT"})
"""Broker states in which the handle holds no socket (every later state has one)."""

DISCONNECT_COUNTED: Final = frozenset(
    {"UP", "UPDATE", "APIVERSION_QUERY", "AUTH_HANDSHAKE", "AUTH_REQ", "REAUTH"}
)
"""States whose socket, when closed, counts in the statistics' ``disconnects``:
``rd_kafka_broker_fail`` counts a close when ``rkb_state >= RD_KAFKA_BROKER_STATE_UP``, and
these are UP and the states after it in ``rd_kafka_broker_state_t``."""


class BrokerKind(enum.Enum):
    """What a broker handle stands for."""

    BOOTSTRAP = "bootstrap"
    LEARNED = "learned"
    LOGICAL = "logical"
    INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class BrokerName:
    """A broker handle's name, parsed: ``handle`` is the name its statistics entry has (for
    a logical broker the bare name, whatever the line's spelling); ``endpoint`` the address
    in the name (none for a logical or the internal broker); ``node`` the broker id (a
    learnt broker's own, a logical broker's current delegate) where the name gives one."""

    handle: str
    kind: BrokerKind
    endpoint: Endpoint | None = None
    node: int | None = None


def parse_broker_name(name: str) -> BrokerName | None:
    """``name`` as a :class:`BrokerName`, or None when it is no broker handle's name."""
    base, slash, suffix = name.rpartition("/")
    if not slash:
        base, suffix = name, ""
    if suffix == "internal":
        return BrokerName(name, BrokerKind.INTERNAL)
    if ":" not in base:
        # A logical broker: letters only, optionally "/ID" of its delegate.
        if not base.isalpha() or (suffix and not _is_node(suffix)):
            return None
        return BrokerName(base, BrokerKind.LOGICAL, None, int(suffix) if suffix else None)
    try:
        endpoint = parse_endpoint(base)
    except ValueError:
        return None
    if suffix == "bootstrap":
        return BrokerName(name, BrokerKind.BOOTSTRAP, endpoint)
    if _is_node(suffix):
        return BrokerName(name, BrokerKind.LEARNED, endpoint, int(suffix))
    return None


def _is_node(text: str) -> bool:
    return text.removeprefix("-").isdigit()


class LineKind(enum.Enum):
    ATTEMPT = "attempt"
    POSTPONED = "postponed"
    DIAL = "dial"
    CONNECTED = "connected"
    STATE = "state"
    FAIL = "fail"
    NODENAME = "nodename"
    ADDED = "added"


@dataclass(frozen=True, slots=True)
class LogLine:
    """One log line that matters for connections.

    ``address``: DIAL, the address dialled (``ipv4#IP:PORT`` decoded); NODENAME, the new
    nodename (None when cleared). ``old``/``new``: STATE, the states. ``text``: FAIL, the
    reason as logged."""

    kind: LineKind
    broker: BrokerName
    address: Endpoint | None = None
    old: str = ""
    new: str = ""
    text: str = ""

    @property
    def opens_no_socket(self) -> bool:
        """A FAIL line that ends an attempt before its socket existed."""
        return self.kind is LineKind.FAIL and self.text.startswith(_NO_SOCKET_FAILS)


_NO_SOCKET_FAILS: Final = ("Failed to resolve", "Failed to create socket")
_LINE: Final = re.compile(r"\[thrd:[^\]]*\]: (?P<name>\S+?): (?P<text>.*)", re.S)
_ATTEMPT: Final = re.compile(r"broker in state \w+ connecting$")
_DIAL: Final = re.compile(
    r"Connecting to (?:ipv4|ipv6)#(?P<address>\S+) \([^)]*\) with socket \d+$"
)
_CONNECTED: Final = re.compile(r"Connected to (?:ipv4|ipv6)#")
_STATE: Final = re.compile(r"Broker changed state (?P<old>\w+) -> (?P<new>\w+)$")
_NODENAME: Final = re.compile(r'Broker nodename changed from "[^"]*" to "(?P<new>[^"]*)"$')
_POSTPONED: Final = "broker has no address yet: postponing connect"
_ADDED: Final = re.compile(r"Added new broker with NodeId -?\d+$")


def parse_line(facility: str, message: str) -> LogLine | None:
    """The line librdkafka logged as ``facility`` (``CONNECT``, ``STATE``, ``FAIL``, ...)
    with ``message`` (``[thrd:...]: NAME: TEXT``), or None if it says nothing about a
    broker handle's socket."""
    found = _LINE.match(message)
    if found is None:
        return None
    broker = parse_broker_name(found["name"])
    if broker is None:
        return None
    text = found["text"].rstrip()
    if facility == "FAIL":
        return LogLine(LineKind.FAIL, broker, text=text)
    if (state := _STATE.match(text)) is not None:
        return LogLine(LineKind.STATE, broker, old=state["old"], new=state["new"])
    if (dial := _DIAL.match(text)) is not None:
        return LogLine(LineKind.DIAL, broker, address=_address(dial["address"]))
    if _CONNECTED.match(text):
        return LogLine(LineKind.CONNECTED, broker)
    if _ATTEMPT.match(text):
        return LogLine(LineKind.ATTEMPT, broker)
    if text == _POSTPONED:
        return LogLine(LineKind.POSTPONED, broker)
    if _ADDED.match(text):
        return LogLine(LineKind.ADDED, broker)
    if (nodename := _NODENAME.match(text)) is not None:
        new = nodename["new"]
        return LogLine(LineKind.NODENAME, broker, address=_address(new) if new else None)
    return None


def _address(text: str) -> Endpoint | None:
    # None rather than an error: the accounting reports a dial it cannot place, and an
    # exception raised inside librdkafka's log callback would surface from an unrelated poll().
    try:
        return parse_endpoint(text)
    except ValueError:
        return None
