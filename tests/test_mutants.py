"""Deliberately broken policies: the checks of issue 2 must catch each of them."""

from __future__ import annotations

from connmgr.sim import simulate
from connmgr.testing.mutants import MergeByHostPort, NeverClose


def test_merging_by_host_port_misroutes_behind_a_shared_endpoint() -> None:
    misrouted = [
        simulate("shared-endpoint", MergeByHostPort, {"seed": str(seed)}).misrouted
        for seed in range(8)
    ]
    assert any(misrouted), "the shared-endpoint scenario cannot detect misrouting"
    assert all(
        simulate("shared-endpoint", "proposed", {"seed": str(s)}).misrouted == 0 for s in range(8)
    )


def test_a_policy_without_prompt_close_leaves_orphans() -> None:
    # The adopted bootstrap connection is broker 1's, which leads nothing: an orphan unless
    # prompt close retires it.
    adopt = {"adopt_unverified": "true"}
    broken = simulate("idle-disabled", NeverClose, adopt)
    proposed = simulate("idle-disabled", "proposed", adopt)
    assert broken.steady > proposed.steady == 3
