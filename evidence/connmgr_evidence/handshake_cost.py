"""What a new connection costs, per security protocol, as a line in the round-trip time:
``time ≈ fixed_ms + round_trips * rtt_ms``, plus the broker CPU it burns. Pure: fitted from
measured medians (:mod:`connmgr_evidence.realkafka.handshakes` measures them), priced for any RTT,
and
JSON round-trippable, so a simulator can take it without a cluster.

What one "connection" is here: the measured span runs from the client's TCP connect to a
connection usable for a request (aiokafka's ``create_conn``: TCP, then TLS for SSL and
SASL_SSL, then ApiVersions, then for SASL_SSL the SaslHandshake and SCRAM's two
SaslAuthenticate exchanges). The injected delay never covers the TCP handshake itself (see
:mod:`connmgr_evidence.realkafka.delay`), so ``round_trips`` counts the exchanges *after* it: a
real network adds one more round trip per connection for SYN/SYN-ACK, for every protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["HandshakeCost", "fit_handshake_cost", "fit_line"]


@dataclass(frozen=True, slots=True)
class HandshakeCost:
    """One protocol's connection cost: ``round_trips`` (the fitted slope: round trips after
    the TCP handshake), ``fixed_ms`` (the intercept: time at zero RTT -- crypto, SCRAM's key
    stretching, scheduling), and ``broker_cpu_ms`` (broker CPU per connection; None when not
    measured)."""

    protocol: str
    round_trips: float
    fixed_ms: float
    broker_cpu_ms: float | None = None

    def time_ms(self, rtt_ms: float, *, include_tcp: bool = False) -> float:
        """Predicted time to a usable connection at ``rtt_ms``; ``include_tcp`` adds the TCP
        handshake's round trip, which the fit does not contain."""
        trips = self.round_trips + (1.0 if include_tcp else 0.0)
        return self.fixed_ms + trips * rtt_ms

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types; :meth:`from_dict` reads it back equal."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HandshakeCost:
        cpu = data.get("broker_cpu_ms")
        return cls(
            protocol=str(data["protocol"]),
            round_trips=float(data["round_trips"]),
            fixed_ms=float(data["fixed_ms"]),
            broker_cpu_ms=None if cpu is None else float(cpu),
        )


def fit_line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares ``(intercept, slope)`` of ``y = intercept + slope * x`` through
    ``points`` ((x, y) pairs). Needs at least two distinct x; raises ValueError otherwise."""
    if len({x for x, _ in points}) < 2:
        raise ValueError(f"a line needs points at two distinct x at least, got {list(points)}")
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in points)
    slope = sxy / sxx
    return mean_y - slope * mean_x, slope


def fit_handshake_cost(
    protocol: str, median_ms_by_rtt: Mapping[float, float], broker_cpu_ms: float | None = None
) -> HandshakeCost:
    """Fit ``protocol``'s cost from median connection times keyed by injected RTT (ms).

    The slope is the number of round trips, the intercept the fixed cost. Neither is clamped
    or rounded: a negative intercept says the medians were noisy, which the caller should see.
    """
    intercept, slope = fit_line(sorted(median_ms_by_rtt.items()))
    return HandshakeCost(protocol, slope, intercept, broker_cpu_ms)
