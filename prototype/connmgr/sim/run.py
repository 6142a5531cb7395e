"""``simulate()``: one scenario, one policy, one seed -> a :class:`RunResult`."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping

from connmgr.core.config import PolicyConfig
from connmgr.core.policy import Policy
from connmgr.errors import ConfigError, UnknownName
from connmgr.policies import policy_class
from connmgr.policies.recorded import RECORDED_OPTIONS, split_recorded
from connmgr.seeding import derive_rng
from connmgr.sim.result import RunResult
from connmgr.sim.scenarios import ScenarioSpec, get_scenario, policy_config
from connmgr.sim.simulator import Simulator

POLICY_OPTIONS = frozenset(
    f.name for f in dataclasses.fields(PolicyConfig) if f.name != "client"
) | frozenset(s.name for s in RECORDED_OPTIONS)
"""What ``--set`` takes besides scenario parameters: the policy options and a recorded run's
choices (:mod:`connmgr.policies.recorded`), which the models of today's clients replay."""

COMMON_POLICY_OPTIONS = frozenset(
    {"bootstrap", "connections_max_idle_ms", "reconnect_backoff_ms", "reconnect_backoff_max_ms"}
)
"""The options every policy reads: its bootstrap list, and the core's idle expiry and
reconnect back-off (:mod:`connmgr.core.execution`)."""


def options_of(cls: type[Policy]) -> frozenset[str]:
    """The policy options ``cls`` reads: :data:`COMMON_POLICY_OPTIONS`, each class's own
    ``extra_options`` along its MRO, and a recorded run's choices for a model that replays
    them (one that takes ``recorded``)."""
    found = set(COMMON_POLICY_OPTIONS)
    for klass in cls.__mro__:
        found.update(vars(klass).get("extra_options", ()))
    if "recorded" in inspect.signature(cls).parameters:
        found.update(s.name for s in RECORDED_OPTIONS)
    return frozenset(found)


def check_policy_options(
    scenario: str, policy: str | type[Policy], settings: Mapping[str, str]
) -> None:
    """Raise :class:`ConfigError` naming a policy option in ``settings`` (``--set`` strings)
    that ``policy`` does not read (:func:`options_of`), and the ones it does: an option set
    for another policy would otherwise be accepted and silently ignored."""
    cls = policy_class(policy) if isinstance(policy, str) else policy
    _, policy_settings = split_settings(scenario, settings)
    takes = options_of(cls)
    ignored = sorted(set(policy_settings) - takes)
    if ignored:
        raise ConfigError(
            f"policy {cls.name!r} does not take {', '.join(ignored)}; its options are "
            f"{', '.join(sorted(takes))}"
        )


def split_settings(
    scenario: str, settings: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Split ``--set`` settings into scenario parameters and policy options."""
    params = get_scenario(scenario).defaults
    scenario_settings: dict[str, str] = {}
    policy_settings: dict[str, str] = {}
    for name, value in settings.items():
        if name in params:
            scenario_settings[name] = value
        elif name in POLICY_OPTIONS:
            policy_settings[name] = value
        else:
            raise UnknownName(
                f"{name!r} is neither a parameter of scenario {scenario!r} "
                f"({', '.join(sorted(params))}) nor a policy option "
                f"({', '.join(sorted(POLICY_OPTIONS))})"
            )
    return scenario_settings, policy_settings


def prepare(
    scenario: str, settings: Mapping[str, str] | None = None
) -> tuple[ScenarioSpec, dict[str, str], int]:
    """The scenario spec, the policy settings and the seed for a run."""
    scenario_settings, policy_settings = split_settings(scenario, settings or {})
    sc = get_scenario(scenario)
    params = sc.params(scenario_settings)
    seed = params["seed"]
    assert isinstance(seed, int)
    return sc.build(params), policy_settings, seed


def simulate(
    scenario: str, policy: str | type[Policy], settings: Mapping[str, str] | None = None
) -> RunResult:
    """Run ``policy`` (a registered name, or a Policy class such as a test's deliberately
    broken variant) through ``scenario`` with ``settings`` (``--set`` strings)."""
    spec, policy_settings, seed = prepare(scenario, settings)
    result = run_spec(spec, policy, policy_settings, seed)
    result.scenario = scenario
    result.settings = dict(settings or {})
    return result


def run_spec(
    spec: ScenarioSpec,
    policy: str | type[Policy],
    policy_settings: Mapping[str, str],
    seed: int,
) -> RunResult:
    """Run ``policy`` through an already built scenario ``spec``."""
    result = build_simulator(spec, policy, policy_settings, seed).run()
    result.seed = seed
    return result


def build_simulator(
    spec: ScenarioSpec,
    policy: str | type[Policy],
    policy_settings: Mapping[str, str],
    seed: int,
) -> Simulator:
    """A simulator of ``spec`` with a fresh ``policy`` (seeded from ``seed``), not started:
    :meth:`Simulator.run` runs it to the end, or step it with its stepping methods."""
    settings, recorded = split_recorded(policy_settings)
    config = policy_config(spec, settings)
    rng = derive_rng(seed, "policy")
    cls = policy_class(policy) if isinstance(policy, str) else policy
    if not recorded:
        instance = cls(config, rng)
    elif "recorded" in inspect.signature(cls).parameters:
        instance = cls(config, rng, recorded=recorded)  # type: ignore[call-arg]
    else:
        raise ConfigError(
            f"policy {cls.name!r} replays no recorded choices (replay_*): only the models "
            "of today's clients do"
        )
    return Simulator(
        instance,
        spec.cluster,
        spec.make_client,
        client_kind=spec.client,
        duration_ms=spec.duration_ms,
        changes=spec.changes,
    )
