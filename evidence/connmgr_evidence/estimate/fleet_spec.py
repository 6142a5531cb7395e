"""A fleet description: the TOML an operator writes, read into values, with errors that name
the file, the line and the field.

The schema (``docs/estimate.md`` shows it whole, ``examples/fleet-*.toml`` use it)::

    seed = 0                  # optional: every draw replays from it
    templates = 30            # optional: clients simulated per class and client model

    [cluster]
    brokers = 6               # broker ids 1..brokers
    bootstrap = [1, 2, 3]     # the ids in bootstrap.servers
    tls = true                # TLS listener: ~100 KB of broker memory per connection
    sasl = "scram"            # none | plain | scram | oauthbearer | iam

    [provider]
    name = "msk-iam"          # msk-iam | confluent-standard | confluent-enterprise | self-managed
    ecku = 2                  # confluent-*: the cluster's eCKUs
    max_connections = 5000    # self-managed: the brokers' max.connections (per broker)
    max_connection_creation_rate = 200   # self-managed, optional: per broker, per second

    [[clients]]               # one table per client class
    name = "orders"
    kind = "producer"         # producer | consumer | mixed | admin | transactional
    count = 4000              # long-lived: clients held
    partitions = 12           # or leaders = [1, 6]: its partitions' leaders, a range of brokers
    # lifetime_s = 60         # short-lived (under an hour): then starts_per_hour, not count
    # starts_per_hour = 100000
    records = [1, 10]         # short-lived producers: records sent before closing

    [restarts]                # optional: a rolling restart
    brokers = 3               # how many (at most 10), one every every_s from at_minute
    at_minute = 10
    every_s = 120
    down_s = 30

    [moves]                   # optional: ip-change | reassignment, from at_minute 10
    kind = "ip-change"

A class's clients are drawn from ``(seed, class name, index)`` with the workload stage's own
draws (:mod:`connmgr_evidence.bench.workloads.classes`): a class named and parameterised like a
stage
class (``steady``, ``serverless``, ``pollers``, ``restart``, ``ip-change``,
``reassignment``) is that class.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from connmgr_evidence.bench.workloads.limits import (
    CONFLUENT_ENTERPRISE,
    CONFLUENT_STANDARD,
    MSK,
    ProviderLimit,
    Scope,
)

KINDS: Final = ("producer", "consumer", "mixed", "admin", "transactional")
SASL: Final = ("none", "plain", "scram", "oauthbearer", "iam")
PROVIDERS: Final = ("msk-iam", "confluent-standard", "confluent-enterprise", "self-managed")
MOVES: Final = ("ip-change", "reassignment")
UNLIMITED_RATE: Final = 10**12
"""A self-managed cluster without ``max.connection.creation.rate``: no attempts cap."""


class FleetSpecError(ValueError):
    """A fleet description that cannot be used; the message names the file, the line (where
    the TOML parser knows it) and the field."""


@dataclass(frozen=True)
class ClientClass:
    """One class of clients in the description."""

    name: str
    kind: str
    count: int
    """Long-lived: clients held; short-lived: starts an hour."""
    partitions: int | None
    leaders: tuple[int, int] | None
    """A range of how many brokers lead the client's partitions (drawn per client)."""
    lifetime_s: float | None
    """None: the client lives the whole hour."""
    records: tuple[int, int]

    @property
    def short_lived(self) -> bool:
        return self.lifetime_s is not None


@dataclass(frozen=True)
class Restarts:
    brokers: int
    at_minute: float = 10.0
    every_s: float = 120.0
    down_s: float = 30.0


@dataclass(frozen=True)
class Provider:
    """A provider's limits as the estimate checks them."""

    name: str
    limit: ProviderLimit
    """Already multiplied by the eCKU count for a per-eCKU limit (scope stays ECKU: checked
    over the whole cluster)."""
    ecku: int | None = None


@dataclass(frozen=True)
class FleetSpec:
    path: str
    brokers: int
    bootstrap: tuple[int, ...]
    tls: bool
    sasl: str
    provider: Provider
    classes: tuple[ClientClass, ...]
    restarts: Restarts | None
    move: str | None
    seed: int = 0
    templates: int = 30

    @property
    def fleet_size(self) -> int:
        """Clients plus starts an hour over every class (what headroom scales)."""
        return sum(c.count for c in self.classes)


def _line_of(text: str, needle: str) -> int | None:
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith(needle):
            return n
    return None


class _Reader:
    """Field access with errors that say where."""

    def __init__(self, path: str, text: str) -> None:
        self.path, self.text = path, text

    def fail(self, field: str, message: str, near: str | None = None) -> FleetSpecError:
        line = _line_of(self.text, near or field.rsplit(".", 1)[-1].split("[")[0])
        where = f"{self.path}:{line}" if line else self.path
        return FleetSpecError(f"{where}: {field}: {message}")

    def get(
        self, table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], field: str
    ) -> Any:
        if key not in table:
            raise self.fail(field, "missing", near="[" + field.split(".")[0])
        value = table[key]
        if isinstance(value, bool) and kind is not bool and bool not in _tuple(kind):
            raise self.fail(field, f"expected {_names(kind)}, got {value!r}")
        if not isinstance(value, kind):
            raise self.fail(field, f"expected {_names(kind)}, got {value!r}")
        return value

    def opt(
        self, table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], field: str
    ) -> Any:
        return self.get(table, key, kind, field) if key in table else None

    def positive(self, value: float, field: str) -> None:
        if value <= 0:
            raise self.fail(field, f"must be > 0, got {value!r}")


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _names(kind: type | tuple[type, ...]) -> str:
    return " or ".join(
        {"int": "an integer", "float": "a number", "str": "a string", "bool": "true/false"}.get(
            k.__name__, k.__name__
        )
        for k in _tuple(kind)
    )


def load_fleet(path: Path) -> FleetSpec:
    """Read and check the description at ``path``; :class:`FleetSpecError` naming the file,
    line and field for anything wrong (a TOML syntax error carries the parser's line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FleetSpecError(f"{path}: cannot read: {exc}") from exc
    return parse_fleet(text, str(path))


def parse_fleet(text: str, path: str = "<fleet>") -> FleetSpec:
    """:func:`load_fleet` on ``text`` (``path`` names it in errors)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FleetSpecError(f"{path}: not TOML: {exc}") from exc
    r = _Reader(path, text)
    known = {"seed", "templates", "cluster", "provider", "clients", "restarts", "moves"}
    for key in data:
        if key not in known:
            raise r.fail(key, f"unknown key; known: {', '.join(sorted(known))}", near=key)
    seed = r.opt(data, "seed", int, "seed") or 0
    templates = r.opt(data, "templates", int, "templates") or 30
    r.positive(templates, "templates")
    cluster = r.get(data, "cluster", dict, "cluster")
    brokers = r.get(cluster, "brokers", int, "cluster.brokers")
    if brokers < 2:
        raise r.fail("cluster.brokers", f"a cluster needs >= 2 brokers, got {brokers}")
    raw_boot = r.opt(cluster, "bootstrap", list, "cluster.bootstrap") or [1, 2, 3][:brokers]
    if not raw_boot or not all(
        isinstance(b, int) and not isinstance(b, bool) and 1 <= b <= brokers for b in raw_boot
    ):
        raise r.fail("cluster.bootstrap", f"expected broker ids in 1..{brokers}, got {raw_boot}")
    tls = r.opt(cluster, "tls", bool, "cluster.tls")
    sasl = r.opt(cluster, "sasl", str, "cluster.sasl") or "none"
    if sasl not in SASL:
        raise r.fail("cluster.sasl", f"unknown {sasl!r}; valid: {', '.join(SASL)}")
    provider = _provider(r, r.get(data, "provider", dict, "provider"))
    raw_classes = r.get(data, "clients", list, "clients")
    if not raw_classes:
        raise r.fail("clients", "no client classes", near="[[clients]]")
    classes = tuple(_client(r, c, i, brokers) for i, c in enumerate(raw_classes))
    names = [c.name for c in classes]
    if len(set(names)) != len(names):
        raise r.fail("clients.name", f"class names must differ, got {names}", near="name")
    restarts = None
    if "restarts" in data:
        t = r.get(data, "restarts", dict, "restarts")
        n = r.get(t, "brokers", int, "restarts.brokers")
        if not 1 <= n <= min(brokers, 10):
            raise r.fail("restarts.brokers", f"must be 1..{min(brokers, 10)}, got {n}")
        restarts = Restarts(
            n,
            float(r.opt(t, "at_minute", (int, float), "restarts.at_minute") or 10.0),
            float(r.opt(t, "every_s", (int, float), "restarts.every_s") or 120.0),
            float(r.opt(t, "down_s", (int, float), "restarts.down_s") or 30.0),
        )
    move = None
    if "moves" in data:
        t = r.get(data, "moves", dict, "moves")
        move = r.get(t, "kind", str, "moves.kind")
        if move not in MOVES:
            raise r.fail("moves.kind", f"unknown {move!r}; valid: {', '.join(MOVES)}")
        if restarts is not None:
            raise r.fail("moves", "model restarts or a move, not both", near="[moves]")
        for c in classes:
            if not c.short_lived and c.kind not in ("producer", "consumer", "mixed"):
                raise r.fail(
                    f"clients[{c.name}].kind",
                    f"moves are modelled for producer, consumer and mixed classes, not {c.kind}",
                    near="kind",
                )
    return FleetSpec(
        path,
        brokers,
        tuple(raw_boot),
        bool(tls),
        sasl,
        provider,
        classes,
        restarts,
        move,
        seed,
        templates,
    )


def _provider(r: _Reader, t: Mapping[str, Any]) -> Provider:
    name = r.get(t, "name", str, "provider.name")
    if name not in PROVIDERS:
        raise r.fail("provider.name", f"unknown provider {name!r}; valid: {', '.join(PROVIDERS)}")
    if name == "msk-iam":
        return Provider(name, MSK)
    if name.startswith("confluent-"):
        ecku = r.get(t, "ecku", int, "provider.ecku")
        r.positive(ecku, "provider.ecku")
        base = CONFLUENT_STANDARD if name == "confluent-standard" else CONFLUENT_ENTERPRISE
        limit = ProviderLimit(
            f"{base.name} x{ecku} eCKU",
            Scope.ECKU,
            base.connections * ecku,
            base.attempts_per_s * ecku,
            base.source,
        )
        return Provider(name, limit, ecku)
    conns = r.get(t, "max_connections", int, "provider.max_connections")
    r.positive(conns, "provider.max_connections")
    rate = r.opt(t, "max_connection_creation_rate", int, "provider.max_connection_creation_rate")
    if rate is not None:
        r.positive(rate, "provider.max_connection_creation_rate")
    limit = ProviderLimit(
        "self-managed",
        Scope.BROKER,
        conns,
        UNLIMITED_RATE if rate is None else rate,
        "the brokers' own max.connections / max.connection.creation.rate",
    )
    return Provider(name, limit)


def _client(r: _Reader, t: Any, i: int, brokers: int) -> ClientClass:
    if not isinstance(t, dict):
        raise r.fail(f"clients[{i}]", "expected a table ([[clients]])", near="[[clients]]")
    name = r.get(t, "name", str, f"clients[{i}].name")
    f = f"clients[{name}]"
    kind = r.get(t, "kind", str, f"{f}.kind")
    if kind not in KINDS:
        raise r.fail(f"{f}.kind", f"unknown {kind!r}; valid: {', '.join(KINDS)}", near="kind")
    lifetime = r.opt(t, "lifetime_s", (int, float), f"{f}.lifetime_s")
    if lifetime is not None:
        r.positive(lifetime, f"{f}.lifetime_s")
        if lifetime >= 3600:
            lifetime = None  # the hour is the model's horizon: a client living it is long-lived
    # A long-lived class counts clients; a short-lived one, starts an hour.
    counted = "count" if lifetime is None else "starts_per_hour"
    count = r.get(t, counted, int, f"{f}.{counted}")
    r.positive(count, f"{f}.{counted}")
    partitions = r.opt(t, "partitions", int, f"{f}.partitions")
    if partitions is not None:
        r.positive(partitions, f"{f}.partitions")
    leaders = None
    if "leaders" in t:
        raw = r.get(t, "leaders", list, f"{f}.leaders")
        if (
            len(raw) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in raw)
            or not 1 <= raw[0] <= raw[1]
        ):
            raise r.fail(f"{f}.leaders", f"expected [least, most] with 1 <= least <= most: {raw}")
        leaders = (raw[0], raw[1])
    if partitions is not None and leaders is not None:
        raise r.fail(f"{f}.partitions", "give partitions or leaders, not both")
    raw_rec = r.opt(t, "records", list, f"{f}.records") or [1, 10]
    if len(raw_rec) != 2 or not all(isinstance(v, int) and v >= 1 for v in raw_rec):
        raise r.fail(f"{f}.records", f"expected [least, most] >= 1, got {raw_rec}")
    for key in t:
        if key not in {"name", "kind", counted, "partitions", "leaders", "lifetime_s", "records"}:
            raise r.fail(f"{f}.{key}", "unknown field", near=key)
    return ClientClass(name, kind, count, partitions, leaders, lifetime, (raw_rec[0], raw_rec[1]))
