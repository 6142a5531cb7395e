"""The limits operators hit, as the providers publish them: one declaration, with sources.

Operators do not count sockets in the abstract: a managed Kafka service caps the TCP
connections a broker (or a capacity unit) holds and the new connections it accepts each
second, and every TLS connection costs broker memory. These figures are facts of the field,
copied with their public source (document and section) into ``docs/operator-limits.md``,
which a test holds to this module.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final


class Scope(enum.Enum):
    """What a limit counts over."""

    BROKER = "per broker"
    """Each broker's own connections and connection attempts."""
    ECKU = "per eCKU"
    """The whole cluster's, per elastic capacity unit it is sized at: a cluster of ``k``
    eCKUs allows ``k`` times the figure."""


@dataclass(frozen=True)
class ProviderLimit:
    """One provider's published caps on connections and on new connections per second."""

    name: str
    """Short name, as the tables show it."""
    scope: Scope
    connections: int
    """TCP connections held at once."""
    attempts_per_s: int
    """New connections (connection attempts) per second."""
    source: str
    """Where the provider publishes it: document and section."""


MSK: Final = ProviderLimit(
    "MSK (IAM)",
    Scope.BROKER,
    connections=3_000,
    attempts_per_s=100,
    source="Amazon MSK Developer Guide, 'Amazon MSK quota' (brokers with IAM access "
    "control; 100 new connections per second per broker on M-family brokers)",
)
CONFLUENT_STANDARD: Final = ProviderLimit(
    "Confluent Standard",
    Scope.ECKU,
    connections=1_000,
    attempts_per_s=50,
    source="Confluent Cloud documentation, 'Kafka cluster types', limits per eCKU "
    "(stricter enforcement from 2026-06-30)",
)
CONFLUENT_ENTERPRISE: Final = ProviderLimit(
    "Confluent Enterprise",
    Scope.ECKU,
    connections=18_000,
    attempts_per_s=500,
    source="Confluent Cloud documentation, 'Kafka cluster types', limits per eCKU "
    "(Enterprise and Dedicated)",
)
LIMITS: Final = (MSK, CONFLUENT_STANDARD, CONFLUENT_ENTERPRISE)
"""The limits the workload classes' headroom is computed against, in table order."""

TLS_BYTES_PER_CONNECTION: Final = 100_000
"""Broker memory a TLS connection holds, about 100 KB (a plaintext one about 250 B): the
KIP-1015 discussion thread (dev@kafka.apache.org), on connection memory."""
TLS_SOURCE: Final = "KIP-1015 discussion (dev@kafka.apache.org): ~100 KB per TLS connection"
