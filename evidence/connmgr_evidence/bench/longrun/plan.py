"""What the long run runs: its settings, the clients of each variant, and when the cluster's
phases (the rolling restart, the port move) happen. Pure values, no I/O.

Each variant (``stock`` = kafka-clients 4.3.1, ``patched`` = the project's patched 4.3.1 with
its switches on) runs the same seven clients, each a Java probe JVM, on topics, groups and a
transactional id of its own, so the variants share the brokers and nothing else:

* ``producer`` -- idempotent, ``acks=all``, numbered records (``record-N``) at a steady rate;
* ``classic-1``, ``classic-2`` -- a classic consumer group of two members on that topic;
* ``kip848-1``, ``kip848-2`` -- a KIP-848 (``group.protocol=consumer``) group of two on it;
* ``admin`` -- an admin client asking describeCluster and listTopics every few seconds;
* ``txn`` -- a transactional producer, one transaction of one record every second, on a
  topic of its own.

Every client is given all three brokers' SASL_SSL addresses in ``bootstrap.servers``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from connmgr.errors import ConfigError

__all__ = [
    "BROKERS",
    "CLIENT_NAMES",
    "VARIANTS",
    "ClientSpec",
    "LongRunSettings",
    "Schedule",
    "Variant",
    "client_specs",
]

BROKERS: Final = (1, 2, 3)
PARTITIONS: Final = len(BROKERS)
"""Every topic has one partition led by each broker: every broker serves every client."""


@dataclass(frozen=True, slots=True)
class Variant:
    """A client build: ``slug`` names its topics, groups and rows; ``version`` is what
    :func:`connmgr_evidence.java.build_probe` builds."""

    slug: str
    version: str

    @property
    def topic(self) -> str:
        return f"longrun-{self.slug}"

    @property
    def txn_topic(self) -> str:
        return f"longrun-{self.slug}-txn"

    @property
    def transactional_id(self) -> str:
        return f"longrun-{self.slug}-txn"

    def group(self, protocol: str) -> str:
        return f"longrun-{self.slug}-{protocol}"


VARIANTS: Final = (Variant("stock", "4.3.1"), Variant("patched", "4.3.1-patched"))

ClientKind = Literal["producer", "consumer", "admin"]
CLIENT_NAMES: Final = ("producer", "classic-1", "classic-2", "kip848-1", "kip848-2", "admin", "txn")


@dataclass(frozen=True, slots=True)
class LongRunSettings:
    """The run's knobs. ``minutes`` is the clients' life: every client lives until
    ``start_s + minutes`` after the launch, whenever its JVM got going; the phases scale with
    what is left of it once every client is past its bootstrap (the rolling restart starts at
    ``restart_at`` of that window, the move at ``move_at``). Rates are per client."""

    minutes: float = 60.0
    start_s: float = 120.0
    """What the clients' JVMs are given to start side by side and get past their bootstrap
    (20-50 s on a loaded 2-core machine): a client still not past it then is a problem of
    the run, and its life is that much shorter."""
    out: Path = Path("reports/longrun")
    rtt_ms: float = 0.0
    sample_s: float = 5.0
    """How often the kernel and the brokers' JMX are sampled."""
    record_every_ms: int = 100
    txn_every_ms: int = 1000
    commit_every_ms: int = 1000
    admin_every_ms: int = 5000
    restart_at: float = 1 / 3
    move_at: float = 2 / 3
    restart: tuple[int, ...] = BROKERS
    """The brokers the rolling restart restarts, in order (all of them by default)."""
    move: int = 3
    """The broker moved to new ports."""
    keep_logs: Path | None = None
    """Where to keep the clients' logs (default: a temporary directory, removed)."""
    variants: tuple[Variant, ...] = VARIANTS
    heap_mb: int = 384
    overtime_s: float = 0.0
    """How much longer than :attr:`end_s` the lives may last so that every variant is seen
    dialling the moved broker at its new port: with overtime, the lives end at
    :attr:`end_s` if each variant has already dialled it, else as soon as each has (the
    driver polls the clients' logs), at :attr:`deadline_s` at the latest. 0: they end at
    :attr:`end_s` (a loaded machine can leave the move too little of the life for that)."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.minutes) and self.minutes > 0):
            raise ConfigError(f"minutes must be > 0, got {self.minutes!r}")
        if not (math.isfinite(self.start_s) and self.start_s > 0):
            raise ConfigError(f"start_s must be > 0, got {self.start_s!r}")
        if not (math.isfinite(self.overtime_s) and self.overtime_s >= 0):
            raise ConfigError(f"overtime_s must be >= 0, got {self.overtime_s!r}")
        if not (self.rtt_ms >= 0 and self.sample_s > 0):
            raise ConfigError("rtt_ms must be >= 0 and sample_s > 0")
        if not 0 < self.restart_at < self.move_at < 1:
            raise ConfigError(
                f"phases must satisfy 0 < restart_at < move_at < 1, got "
                f"{self.restart_at!r}, {self.move_at!r}"
            )
        rates = (self.record_every_ms, self.txn_every_ms, self.commit_every_ms, self.admin_every_ms)
        if min(rates) < 1:
            raise ConfigError(f"every rate's period must be >= 1 ms, got {rates}")
        brokers = set(BROKERS)
        if not set(self.restart) <= brokers or self.move not in brokers:
            raise ConfigError(f"restart {self.restart} and move {self.move} must name {BROKERS}")

    @property
    def life_s(self) -> float:
        return self.minutes * 60.0

    @property
    def life_ms(self) -> int:
        return round(self.life_s * 1000.0)

    @property
    def end_s(self) -> float:
        """When every life ends, in seconds from the launch."""
        return self.start_s + self.life_s

    @property
    def deadline_s(self) -> float:
        """When every life has ended at the latest, in seconds from the launch: :attr:`end_s`
        plus :attr:`overtime_s`."""
        return self.end_s + self.overtime_s

    def schedule(self, up_s: float) -> Schedule:
        """The phases' times once every client was past its bootstrap ``up_s`` after the
        launch: at their fractions of the window left until :attr:`end_s`."""
        window = max(0.0, self.end_s - up_s)
        return Schedule(up_s + window * self.restart_at, up_s + window * self.move_at, self.end_s)


@dataclass(frozen=True, slots=True)
class Schedule:
    """Seconds from the clients' launch: when the rolling restart starts, when the move
    starts (or as soon as the restart is over, if that is later), when every life ends."""

    restart_s: float
    move_s: float
    end_s: float


@dataclass(frozen=True, slots=True)
class ClientSpec:
    """One client of one variant: what :func:`connmgr_evidence.java.run_probe` is given."""

    variant: Variant
    name: str
    kind: ClientKind
    topic: str
    every_ms: int
    group: str | None = None
    transactional_id: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.variant.slug}/{self.name}"


def client_specs(
    variant: Variant,
    settings: LongRunSettings,
    security: Mapping[str, str],
    defaults: Mapping[ClientKind, Mapping[str, str]],
) -> list[ClientSpec]:
    """The seven clients of ``variant`` (see the module doc), in :data:`CLIENT_NAMES` order.
    ``security`` is the SASL_SSL listener's client settings, ``defaults`` each kind's
    :func:`connmgr_evidence.java.default_extra` for the variant's version (the patched one's
    switches); both go into every client's settings, then its own."""

    def extra(kind: ClientKind, name: str, **own: str) -> dict[str, str]:
        return {
            **security,
            **defaults[kind],
            "client.id": f"longrun-{variant.slug}-{name}",
            **own,
        }

    specs = [
        ClientSpec(
            variant,
            "producer",
            "producer",
            variant.topic,
            settings.record_every_ms,
            extra=extra("producer", "producer", **{"enable.idempotence": "true"}),
        )
    ]
    for protocol in ("classic", "kip848"):
        for member in (1, 2):
            name = f"{protocol}-{member}"
            own = {"group.protocol": "classic" if protocol == "classic" else "consumer"}
            specs.append(
                ClientSpec(
                    variant,
                    name,
                    "consumer",
                    variant.topic,
                    settings.commit_every_ms,
                    group=variant.group(protocol),
                    extra=extra("consumer", name, **own),
                )
            )
    specs.append(
        ClientSpec(
            variant,
            "admin",
            "admin",
            variant.topic,
            settings.admin_every_ms,
            extra=extra("admin", "admin"),
        )
    )
    specs.append(
        ClientSpec(
            variant,
            "txn",
            "producer",
            variant.txn_topic,
            settings.txn_every_ms,
            transactional_id=variant.transactional_id,
            extra=extra("producer", "txn"),
        )
    )
    return specs
