"""Endpoints (host, port) and the parsing of bootstrap server lists.

An :class:`Endpoint` is normalised once, here at the edge (host lower-cased, IPv6 brackets
stripped), and is then used as a plain, hashable dictionary key everywhere else. Nothing in
this module resolves names: two spellings of one machine (``localhost`` and ``127.0.0.1``) are
two endpoints, which is the conservative choice for connection reuse.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from connmgr.errors import BootstrapParseError

DEFAULT_PORT = 9092
"""The port Kafka clients assume when a bootstrap entry names none."""


@dataclass(frozen=True, slots=True, order=True)
class Endpoint:
    """A TCP endpoint as a Kafka client dials it: a host name or literal address and a port."""

    host: str
    port: int

    def __post_init__(self) -> None:
        host = self.host.strip().lower()
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not host:
            raise BootstrapParseError("an endpoint needs a non-empty host")
        if not 0 < self.port <= 65535:
            raise BootstrapParseError(f"port {self.port} of {host!r} is outside 1..65535")
        object.__setattr__(self, "host", host)

    def __str__(self) -> str:
        if ":" in self.host:
            return f"[{self.host}]:{self.port}"
        return f"{self.host}:{self.port}"


def parse_endpoint(text: str) -> Endpoint:
    """Parse one ``host[:port]`` entry; IPv6 literals must be bracketed (``[::1]:9092``).

    A missing port means :data:`DEFAULT_PORT`. A ``SCHEME://`` prefix (``PLAINTEXT://``) is
    accepted and ignored, as the Java client does. Raises :class:`BootstrapParseError` naming
    the entry and the problem.
    """
    entry = text.strip()
    if "://" in entry:
        entry = entry.split("://", 1)[1]
    if not entry:
        raise BootstrapParseError(f"empty bootstrap entry in {text!r}")
    if entry.startswith("["):
        close = entry.find("]")
        if close < 0:
            raise BootstrapParseError(f"{text!r}: '[' of an IPv6 address is never closed")
        host, rest = entry[1:close], entry[close + 1 :]
        if rest and not rest.startswith(":"):
            raise BootstrapParseError(f"{text!r}: expected ':PORT' after ']'")
        port_text = rest[1:] if rest else ""
    elif entry.count(":") > 1:
        raise BootstrapParseError(
            f"{text!r}: an IPv6 address needs brackets, e.g. [{entry}]:{DEFAULT_PORT}"
        )
    else:
        host, _, port_text = entry.partition(":")
        if entry.endswith(":"):
            raise BootstrapParseError(f"{text!r}: ':' must be followed by a port number")
    if not host:
        raise BootstrapParseError(f"{text!r}: missing host")
    if port_text == "":
        port = DEFAULT_PORT
    else:
        if not port_text.isdigit():
            raise BootstrapParseError(f"{text!r}: port {port_text!r} is not a number")
        port = int(port_text)
        if not 0 < port <= 65535:
            raise BootstrapParseError(f"{text!r}: port {port} is outside 1..65535")
    return Endpoint(host, port)


def parse_bootstrap(servers: str | Iterable[str]) -> tuple[Endpoint, ...]:
    """Parse a ``bootstrap.servers`` value (comma-separated string or list of entries).

    The result keeps the given order (it decides the bootstrap node ids -1, -2, ...) and drops
    repeated entries. An empty list is an error: a client with no bootstrap server cannot start.
    """
    entries = servers.split(",") if isinstance(servers, str) else list(servers)
    result: list[Endpoint] = []
    for entry in entries:
        endpoint = parse_endpoint(entry)
        if endpoint not in result:
            result.append(endpoint)
    if not result:
        raise BootstrapParseError("bootstrap servers list is empty")
    return tuple(result)
