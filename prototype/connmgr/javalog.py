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

_STAMP = r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]"
_NODE = r"(?P<host>\[[^\]]+\]|[^\s:]+):(?P<port>\d+) \(id: (?P<id>-?\d+) rack: (?P<rack>[^)]*)\)"
_CONNECT = re.compile(_STAMP + r".*?\bInitiating connection to node " + _NODE)
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


def parse_connections(lines: Iterable[str]) -> list[LoggedConnection]:
    """Every connection the log shows the client initiating, in order."""
    result = []
    for line in lines:
        m = _CONNECT.search(line)
        if m:
            result.append(
                LoggedConnection(
                    _stamp(m["ts"]), int(m["id"]), m["host"].strip("[]"), int(m["port"])
                )
            )
    return result


def parse_metadata_requests(lines: Iterable[str]) -> list[LoggedMetadataRequest]:
    """Every ``Sending metadata request ... to node`` line, in order."""
    result = []
    for line in lines:
        m = _METADATA.search(line)
        if m:
            result.append(
                LoggedMetadataRequest(
                    _stamp(m["ts"]), int(m["id"]), m["host"].strip("[]"), int(m["port"])
                )
            )
    return result


def format_time(t_ms: float) -> str:
    stamp = EPOCH + timedelta(milliseconds=t_ms)
    return stamp.strftime("%Y-%m-%d %H:%M:%S,") + f"{stamp.microsecond // 1000:03d}"


def _node(host: str, port: int, node_id: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port} (id: {node_id} rack: null)"


def connect_line(t_ms: float, who: str, host: str, port: int, node_id: int) -> str:
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


def close_line(t_ms: float, who: str, node_id: int, reason: str) -> str:
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
