"""The two bug reports' reproducers (``python -m connmgr_evidence.realkafka.repro``) at a small size
on
a real secure 3-node cluster of this module's own (``security=True``; the session cluster has
no forwarders): ``docs/bug-double-bootstrap.md`` and ``docs/bug-admin-cluster-id.md``.

Each test runs the reproducer's measurement and its verdict on kafka-clients 4.4.0, and pins
the counts the report states: it fails if 4.4.0 stops dialling a second bootstrap server, if
switching the causes off stops removing it, or if the admin client starts sending its identity.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connmgr_evidence.realkafka import KafkaCluster, admin_identity, bootstrap_dials
from connmgr_evidence.realkafka.repro import admin_reproduced, double_bootstrap_reproduced

pytestmark = pytest.mark.real_kafka


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    with KafkaCluster(brokers=3, security=True) as running:
        yield running


def test_kafka_clients_4_4_dials_two_bootstrap_servers_and_one_with_the_causes_off(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    counts = bootstrap_dials.measure(
        cluster,
        variants=(
            "producer-440",
            "producer-440-both-off",
            "consumer-440",
            "consumer-440-push-off",
        ),
        starts=2,
        logs=tmp_path,
    )
    by = {
        name: [(c.bootstrap, c.known) for c in counts if c.variant == name]
        for name in dict.fromkeys(c.variant for c in counts)
    }
    # Two bootstrap servers, then the three leaders (and the coordinator's connection);
    # with idempotence and metrics push off (producer), metrics push off (consumer): one.
    assert by == {
        "producer-440": [(2, 3)] * 2,
        "producer-440-both-off": [(1, 3)] * 2,
        "consumer-440": [(2, 4)] * 2,
        "consumer-440-push-off": [(1, 4)] * 2,
    }
    # The client's own count agrees with the forwarders', and KIP-1242 agrees with the split:
    # 4.4.0 sends ClusterId/NodeId on every known-node connection and on no bootstrap one.
    assert all(c.own == c.total and c.undecoded == 0 for c in counts)
    assert all(c.checked == c.known and c.bootstrap_checked == 0 for c in counts)
    assert double_bootstrap_reproduced(counts)[0]


def test_kafka_clients_4_4_admin_sends_no_cluster_id_to_known_nodes_where_the_producer_does(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    starts = admin_identity.measure(cluster, starts=2, logs=tmp_path)
    admins = [s for s in starts if s.client == "admin"]
    producers = [s for s in starts if s.client == "producer"]
    assert len(admins) == len(producers) == 2
    for s in admins:
        assert s.known, "the admin client asked a node it knows from metadata"
        assert all(c.api_version == 5 for c in s.connections)
        assert not any(c.carries_identity for c in s.connections)
        # Its own log says the same: no request with the fields, a known node among those
        # without (a non-negative id).
        assert s.census.checked == ()
        assert any(not n.startswith("-") for n in s.census.unchecked)
    for s in producers:
        assert len(s.known) == 3
        assert all(c.carries_identity and c.node_id == c.broker for c in s.known)
        assert not any(c.carries_identity for c in s.bootstrap)
        assert sorted(s.census.checked) == ["1", "2", "3"]
    assert admin_reproduced(starts)[0]
