"""The policy registry: every policy by its command-line name."""

from __future__ import annotations

from connmgr.core.config import PolicyConfig
from connmgr.core.policy import Policy
from connmgr.core.rng import RandomSource
from connmgr.errors import UnknownName
from connmgr.policies.aiokafka_today import AiokafkaTodayPolicy
from connmgr.policies.java_44 import Java44Policy
from connmgr.policies.java_described import JavaDescribedPolicy
from connmgr.policies.java_patched import JavaB0Policy, JavaLingerPolicy, JavaPatchedPolicy
from connmgr.policies.java_today import JavaTodayPolicy
from connmgr.policies.proposed import ProposedPolicy

POLICIES: dict[str, type[Policy]] = {
    cls.name: cls
    for cls in (
        JavaDescribedPolicy,
        JavaTodayPolicy,
        JavaPatchedPolicy,
        Java44Policy,
        JavaB0Policy,
        JavaLingerPolicy,
        AiokafkaTodayPolicy,
        ProposedPolicy,
    )
}
BASELINES: tuple[str, ...] = ("java-described", "java-today", "aiokafka-today")


def policy_class(name: str) -> type[Policy]:
    try:
        return POLICIES[name]
    except KeyError:
        raise UnknownName(
            f"unknown policy {name!r}; known policies: {', '.join(POLICIES)}"
        ) from None


def make_policy(name: str, config: PolicyConfig, rng: RandomSource) -> Policy:
    """A fresh policy ``name`` for one client."""
    return policy_class(name)(config, rng)


__all__ = [
    "BASELINES",
    "POLICIES",
    "AiokafkaTodayPolicy",
    "Java44Policy",
    "JavaB0Policy",
    "JavaDescribedPolicy",
    "JavaLingerPolicy",
    "JavaPatchedPolicy",
    "JavaTodayPolicy",
    "ProposedPolicy",
    "make_policy",
    "policy_class",
]
