"""What one real run produced: the client's connection ledger, its records and timings, and
the scenario relabelled onto the cluster it ran on (what the simulator runs to compare)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connmgr.core.policy import Policy
from connmgr.ledger import ConnectionLedger
from connmgr.sim.result import RunResult
from connmgr.sim.run import run_spec
from connmgr.sim.scenarios import ScenarioSpec


@dataclass
class RealRun:
    scenario: str
    client: str
    seed: int
    ledger: ConnectionLedger
    spec: ScenarioSpec
    """The scenario relabelled onto the embedded cluster: what the simulator should run."""
    idmap: dict[int, int]
    records_sent: int = 0
    records_acked: int = 0
    records_consumed: int = 0
    duplicates: int = 0
    choices: list[tuple[str, int]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    steady_summary: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    policy_settings: dict[str, str] = field(default_factory=dict)
    java_log: str | None = None
    """The Java client's NetworkClient log, for ``--client java``."""
    ttfa_ms: float | None = None
    """Producer: ms from just before the client started to its first acknowledged record
    (Java, librdkafka: from just before the client was constructed); None for a consumer."""
    ttfc_ms: float | None = None
    """Consumer: ms from just before the client started to its first consumed record (Java,
    librdkafka: from just before the client was constructed); None for a producer."""

    @property
    def handshakes(self) -> int:
        """Connection set-ups completed by the steady state: dials opened minus dials failed
        (from the steady summary, or the whole ledger if the run has none)."""
        summary = self.steady_summary or self.ledger.summary()
        return int(summary["opened"]) - int(summary["failed"])

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "scenario": self.scenario,
            "client": self.client,
            "seed": self.seed,
            **self.steady_summary,
        }
        data["timeline"] = self.ledger.timeline()
        data["requests"] = self.requests
        data.update(
            records_sent=self.records_sent,
            records_acked=self.records_acked,
            records_consumed=self.records_consumed,
            duplicates=self.duplicates,
            handshakes=self.handshakes,
            ttfa_ms=_rounded(self.ttfa_ms),
            ttfc_ms=_rounded(self.ttfc_ms),
            wall_s=round(self.wall_s, 3),
            choices=self.choices,
        )
        return data

    def simulate(
        self, policy: str | type[Policy], extra: Mapping[str, str] | None = None
    ) -> RunResult:
        """The simulator's run of ``policy`` on this run's relabelled topology and duration."""
        spec = self.spec
        duration = max(self.wall_s * 1000.0, 1.0)
        relabelled = type(spec)(**{**spec.__dict__, "duration_ms": duration})
        settings = dict(self.policy_settings)
        settings.update(extra or {})
        return run_spec(relabelled, policy, settings, self.seed)

    def replay_settings(self) -> dict[str, str]:
        """Policy settings that make a model replay this run's observed choices: the
        ``least_loaded`` picks as ``replay_choices``, the ``telemetry`` node (Java) as
        ``replay_telemetry``, the FindCoordinator nodes (Java) as ``replay_lookups``."""
        settings: dict[str, str] = {}
        for kind, option in (
            ("least_loaded", "replay_choices"),
            ("telemetry", "replay_telemetry"),
            ("lookup", "replay_lookups"),
        ):
            nodes = [str(node) for seen, node in self.choices if seen == kind]
            if nodes:
                settings[option] = ",".join(nodes)
        return settings


def _rounded(ms: float | None) -> float | None:
    return None if ms is None else round(ms, 3)
