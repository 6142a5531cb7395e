"""asyncio drivers: the policy core inside real aiokafka clients."""

from connmgr.aio.dropin import ProposedConsumer, ProposedProducer
from connmgr.aio.options import PolicyOptions

__all__ = ["PolicyOptions", "ProposedConsumer", "ProposedProducer"]
