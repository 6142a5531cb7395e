"""``proposed``: the connection manager this project proposes.

Connections are keyed by (host, port, node id) plus purpose, and the policy holds exactly the
sockets the client needs. Each rule lives in one place, whose docstring opens with the rule's
text:

a. Deferred: nothing is dialled until a request needs it --
   :meth:`ProposedPolicy.bootstraps_at_start`.
b. One bootstrap attempt at a time, failing over through the list from a random start --
   :meth:`ProposedPolicy._dial_next_bootstrap`.
c. Confirm, then adopt or close a bootstrap connection (KIP-1242's check), with its safety
   note -- :class:`~connmgr.policies.proposed.adoption.Adoption`.
d. Any-node requests go to the least-loaded READY connection -- :meth:`ProposedPolicy._any_node`.
e. Data requests go to the leader's data connection, dialled on first need --
   :meth:`ProposedPolicy.place`.
f. Coordinators are plural, each with its own placement and entry among the needed
   connections -- :mod:`connmgr.policies.proposed.coordinators`.
g. Prompt close of what nothing needs, after ``connection_linger_ms``; a role lost with
   its connection (a broker restarting) is waited for first, up to ``connections.max.idle.ms``
   -- :class:`~connmgr.policies.proposed.prompt_close.PromptClose`.
h. Endpoint change: connections to a node's old host:port drain and close --
   :meth:`ProposedPolicy.retire_moved`.
h2. Stale address: a connection whose address DNS leaves out twice closes --
   :class:`~connmgr.policies.proposed.stale_address.StaleAddresses`.
i. Socket budget: ``max_connections`` is never exceeded --
   :class:`~connmgr.policies.proposed.budget.SocketBudget`.
j. Metrics by role, including the handshakes adoption saved -- :mod:`connmgr.core.metrics`
   (kept in the core: every policy counts by role, so that the comparisons can).

The rules decide; the policy base class (:mod:`connmgr.core.policy`) does what they decide.
"""

from connmgr.policies.proposed.policy import ProposedPolicy

__all__ = ["ProposedPolicy"]
