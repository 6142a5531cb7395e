"""What one real run produced: the client's connection ledger, its records and timings, and
the scenario relabelled onto the cluster it ran on (what the simulator runs to compare)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connmgr.core.policy import Policy
from connmgr.ledger import ConnectionLedger, Life
from connmgr.sim.result import RunResult
from connmgr.sim.run import run_spec
from connmgr.sim.scenarios import ScenarioSpec
from connmgr_evidence.realrun.life import LifePlan
from connmgr_evidence.realrun.restart import RestartEvent


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
    life: LifePlan | None = None
    """A scaled life (``--set life_s=...``): the steady count is then at the life's end."""
    client_config: dict[str, Any] = field(default_factory=dict)
    """The connection timers the client was given, as it was given them (aiokafka keyword
    arguments, Java or librdkafka settings); absent ones are the client's defaults."""
    commit_failures: int = 0
    """A living consumer's commits refused (a coordinator moving in a restart)."""
    restarts: list[RestartEvent] = field(default_factory=list)
    """The rolling restart's steps, on the run's clock (``rolling_restart=1``)."""

    @property
    def represented(self) -> Life | None:
        """The life the run stands for: the ledger's life from the client's start to the
        steady count (the end of the scaled life), scaled by ``time_scale``; None for a run
        without a life."""
        if self.life is None or "life" not in self.steady_summary:
            return None
        return Life.from_json(self.steady_summary["life"]).scaled(self.life.time_scale)

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
        represented = self.represented
        if self.life is not None and represented is not None:
            data["scaled_life"] = {
                **self.life.as_json(),
                "client_config": self.client_config,
                "represented": represented.as_json(),
                "socket_s_per_h": represented.per_hour(represented.socket_seconds),
                "handshakes_per_h": represented.per_hour(represented.handshakes),
                "commit_failures": self.commit_failures,
                "restarts": [e.as_json() for e in self.restarts],
            }
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

    def model_settings(self) -> dict[str, str]:
        """:meth:`replay_settings` plus what the client was given that a model reads: the
        patched Java client's ``connections.linger.ms`` as ``connection_linger_ms``."""
        settings = self.replay_settings()
        linger = self.client_config.get("connections.linger.ms")
        if linger is not None:
            settings["connection_linger_ms"] = str(linger)
        return settings


def _rounded(ms: float | None) -> float | None:
    return None if ms is None else round(ms, 3)
