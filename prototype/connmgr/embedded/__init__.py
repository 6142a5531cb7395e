"""An embedded, multi-broker Kafka-protocol cluster for tests: librdkafka's mock cluster.

Quick start::

    from connmgr.embedded import MockCluster

    with MockCluster(3, group_initial_rebalance_delay_ms=0) as cluster:
        cluster.create_topic_with_leaders("events", leaders=[2, 3, 1])
        cluster.set_coordinator("group", "my-group", 1)
        ...  # point any Kafka client at cluster.bootstrap_servers

See :mod:`connmgr.embedded.mock_cluster` for what the mock does and does not model.
"""

from connmgr.embedded.errors import EmbeddedClusterError
from connmgr.embedded.librdkafka import LibRdKafka, find_librdkafka, load_librdkafka
from connmgr.embedded.mock_cluster import ApiKey, CoordinatorKeyType, MockCluster, MockRequest

__all__ = [
    "ApiKey",
    "CoordinatorKeyType",
    "EmbeddedClusterError",
    "LibRdKafka",
    "MockCluster",
    "MockRequest",
    "find_librdkafka",
    "load_librdkafka",
]
