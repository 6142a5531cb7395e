"""j. Metrics by role, including the handshakes adoption saved (the proposed policy's rule j).

Every policy keeps them (the baselines too, so the comparisons can be made by role): opened,
closed, open now, peak, failed dials, and handshakes avoided (a socket that changed role
instead of a new dial), per role (bootstrap, data, coordination).

A role's ``peak`` is the most sockets that held that role at once; the client's ``peak`` is the
most sockets at once in all, at most the sum of the roles' peaks (they need not coincide)."""

from __future__ import annotations

from dataclasses import dataclass, field

from connmgr.core.identity import Role


@dataclass(slots=True)
class RoleCounters:
    opened: int = 0
    closed: int = 0
    failed: int = 0
    open_now: int = 0
    peak: int = 0
    handshakes_avoided: int = 0

    def gained(self) -> None:
        """One more socket holds this role (a dial, or an adopted socket)."""
        self.open_now += 1
        self.peak = max(self.peak, self.open_now)

    def as_dict(self) -> dict[str, int]:
        return {
            "opened": self.opened,
            "closed": self.closed,
            "failed": self.failed,
            "open_now": self.open_now,
            "peak": self.peak,
            "handshakes_avoided": self.handshakes_avoided,
        }


@dataclass(slots=True)
class Metrics:
    """Live counters a policy keeps as it emits actions. ``opened`` counts dials (sockets
    created), so a dial that fails still counts; ``failed`` says how many of them did."""

    by_role: dict[Role, RoleCounters] = field(
        default_factory=lambda: {role: RoleCounters() for role in Role}
    )
    peak: int = 0

    @property
    def opened(self) -> int:
        return sum(c.opened for c in self.by_role.values())

    @property
    def open_now(self) -> int:
        return sum(c.open_now for c in self.by_role.values())

    def on_dial(self, role: Role) -> None:
        counters = self.by_role[role]
        counters.opened += 1
        counters.gained()
        self.peak = max(self.peak, self.open_now)

    def on_gone(self, role: Role, *, failed: bool) -> None:
        counters = self.by_role[role]
        counters.open_now -= 1
        if failed:
            counters.failed += 1
        else:
            counters.closed += 1

    def on_role_change(self, old: Role, new: Role) -> None:
        self.by_role[old].open_now -= 1
        self.by_role[new].gained()
        self.by_role[new].handshakes_avoided += 1

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {role.value: counters.as_dict() for role, counters in self.by_role.items()}
