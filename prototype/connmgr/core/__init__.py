"""The sans-IO connection-policy core.

What lives here: values (endpoints, node identities, connection keys, metadata), the
connection state table, events in, actions out, configuration, metrics, and the policy base
class. What must not: asyncio, sockets, clocks, random number generators, aiokafka. A test
enforces that by importing these modules with those names blocked.
"""

from connmgr.core.actions import (
    Action,
    Adopt,
    CheckIdentity,
    Close,
    CloseReason,
    Connect,
    Lease,
    RefreshMetadata,
    Reject,
    RejectReason,
    WakeAt,
)
from connmgr.core.api import Api
from connmgr.core.config import ClientKind, PolicyConfig
from connmgr.core.connections import ConnectionView
from connmgr.core.coordinator import CoordinatorKind, CoordinatorRef
from connmgr.core.endpoint import DEFAULT_PORT, Endpoint, parse_bootstrap, parse_endpoint
from connmgr.core.events import (
    AddressesResolved,
    AnyNodeRequestNeeded,
    BootstrapRequested,
    BrokerRequestNeeded,
    ClientClosed,
    ConnectionClosedByPeer,
    ConnectionEstablished,
    ConnectionFailed,
    CoordinatorLost,
    CoordinatorRequestNeeded,
    Event,
    IdentityAnswer,
    IdentityChecked,
    InterestChanged,
    LookupOutcome,
    MetadataReceived,
    RequestFailed,
    RequestWithdrawn,
    ResponseReceived,
    TimePassed,
)
from connmgr.core.identity import (
    BootstrapNode,
    BrokerNode,
    ConnectionKey,
    CoordinatorNode,
    Purpose,
    Role,
)
from connmgr.core.metadata import BrokerInfo, ClusterMetadata, TopicPartition
from connmgr.core.policy import Policy
from connmgr.core.rng import RandomSource
from connmgr.core.state import TRANSITIONS, ConnState, Trigger

__all__ = [
    "DEFAULT_PORT",
    "TRANSITIONS",
    "Action",
    "AddressesResolved",
    "Adopt",
    "AnyNodeRequestNeeded",
    "Api",
    "BootstrapNode",
    "BootstrapRequested",
    "BrokerInfo",
    "BrokerNode",
    "BrokerRequestNeeded",
    "CheckIdentity",
    "ClientClosed",
    "ClientKind",
    "Close",
    "CloseReason",
    "ClusterMetadata",
    "ConnState",
    "Connect",
    "ConnectionClosedByPeer",
    "ConnectionEstablished",
    "ConnectionFailed",
    "ConnectionKey",
    "ConnectionView",
    "CoordinatorKind",
    "CoordinatorLost",
    "CoordinatorNode",
    "CoordinatorRef",
    "CoordinatorRequestNeeded",
    "Endpoint",
    "Event",
    "IdentityAnswer",
    "IdentityChecked",
    "InterestChanged",
    "Lease",
    "LookupOutcome",
    "MetadataReceived",
    "Policy",
    "PolicyConfig",
    "Purpose",
    "RandomSource",
    "RefreshMetadata",
    "Reject",
    "RejectReason",
    "RequestFailed",
    "RequestWithdrawn",
    "ResponseReceived",
    "Role",
    "TimePassed",
    "TopicPartition",
    "Trigger",
    "WakeAt",
    "parse_bootstrap",
    "parse_endpoint",
]
