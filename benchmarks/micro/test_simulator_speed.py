"""The simulator's speed with each policy: one simulated run of a fixed scenario per round.

``extra_info.events`` is the number of events the simulator delivered to the policy in one
run, so events per second = events / mean round time. The scenario is built once, outside
the timed part (building a 1,000-broker cluster is not the simulator's speed).
"""

from __future__ import annotations

from typing import Any

import pytest

from connmgr.policies import POLICIES
from connmgr.sim.result import RunResult
from connmgr.sim.run import prepare, run_spec

SCENARIO = "big-producer"
SETTINGS = {"brokers": "1000", "duration_ms": "600000"}
"""A producer to 3 leaders of 1,000 brokers for ten simulated minutes (one metadata
refresh, the Java clients' idle expiry of the bootstrap connection at nine minutes)."""


@pytest.mark.parametrize("policy", tuple(POLICIES))
def test_simulator_events_per_second(benchmark: Any, rounds: int, policy: str) -> None:
    spec, policy_settings, seed = prepare(SCENARIO, SETTINGS)
    first = run_spec(spec, policy, policy_settings, seed)
    assert first.misrouted == 0 and first.events > 0

    def one_run() -> RunResult:
        return run_spec(spec, policy, policy_settings, seed)

    benchmark.group = "simulator"
    benchmark.extra_info.update(
        {
            "policy": policy,
            "scenario": f"{SCENARIO} " + ",".join(f"{k}={v}" for k, v in SETTINGS.items()),
            "events": first.events,
        }
    )
    result = benchmark.pedantic(one_run, rounds=rounds, warmup_rounds=1)
    # Deterministic: every round delivers the same events.
    assert result.events == first.events
    if benchmark.stats is not None:
        benchmark.extra_info["events_per_s"] = first.events / benchmark.stats.stats.mean
