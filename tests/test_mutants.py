"""Deliberately broken policies: the checks of issue 2 must catch each of them."""

from __future__ import annotations

from connmgr.core.identity import BrokerNode, ConnectionKey, Purpose, Role
from connmgr.core.metadata import ClusterMetadata
from connmgr.core.policy import Connection
from connmgr.policies import ProposedPolicy
from connmgr.sim import simulate


class MergeByHostPort(ProposedPolicy):
    """Adopts a bootstrap connection whenever any broker lists its host:port (the behaviour
    librdkafka removed in 2.10)."""

    def on_metadata(self, old: ClusterMetadata | None, via: Connection | None) -> None:
        md = self.metadata
        assert md is not None
        for conn in self.records():
            ids = md.ids_by_endpoint.get(conn.key.endpoint)
            if conn.role is Role.BOOTSTRAP and ids:
                key = ConnectionKey(conn.key.endpoint, BrokerNode(min(ids)), Purpose.DATA)
                if self.live(key) is None:
                    self.adopt(conn, key)


class NeverClose(ProposedPolicy):
    """Forgets prompt close: unneeded connections stay open."""

    def maintain(self) -> None:
        self.expire_idle()


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
