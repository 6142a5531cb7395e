"""The serverless measurement on a real secure cluster, a handful of starts per variant: the
forwarders' log accounts for every accept, each client's own count agrees with it, the drop-in
opens one connection per leader and adopts its bootstrap connection where stock aiokafka opens
one more, and every record is read back once.

The patched kafka-clients 4.3.1 (switches on) opens one bootstrap connection and the three
leaders' where kafka-clients 4.4.0 opens two bootstrap connections (patch 0012: the
``InitProducerId`` pick and the metadata updater's scan the bootstrap servers from one offset).
The cluster is this module's own (``security=True``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connmgr_evidence.bench.serverless.figures import figures, problems
from connmgr_evidence.realkafka import KafkaCluster
from connmgr_evidence.realkafka.serverless import ServerlessRun, measure

pytestmark = pytest.mark.real_kafka

STARTS = 3


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerlessRun]:
    logs: Path = tmp_path_factory.mktemp("serverless-logs")
    with KafkaCluster(brokers=3, security=True) as cluster:
        yield measure(
            cluster,
            variants=("aiokafka", "proposed", "java-4.4.0", "java-4.3.1-patched"),
            starts=STARTS,
            logs=logs,
        )


def test_every_record_is_read_back_once_and_every_count_agrees(run: ServerlessRun) -> None:
    assert problems(run) == []
    for variant in run.variants:
        assert len(variant.starts) == STARTS
        assert (variant.sent, variant.acked, variant.read_back, variant.in_topic) == (9, 9, 9, 9)


def test_the_drop_in_opens_one_per_leader_where_stock_aiokafka_opens_one_more(
    run: ServerlessRun,
) -> None:
    stock, ours, java, _ = run.variants
    assert [s.attempts for s in ours.starts] == [(1, 1, 1)] * STARTS
    assert [s.adopted for s in ours.starts] == [1] * STARTS
    assert [s.total for s in stock.starts] == [4] * STARTS
    # kafka-clients keeps its own count, and it opens at least the three leaders and a
    # bootstrap connection.
    assert all(s.own == s.total >= 4 for s in java.starts)
    assert figures(ours).peak_open == (1, 1, 1)


def test_the_patched_client_dials_one_bootstrap_server_per_start(run: ServerlessRun) -> None:
    *_, java, patched = run.variants
    # 4.4.0: two bootstrap servers and the three leaders; patched: one and the three leaders,
    # counted by the forwarders and by the client itself.
    assert [s.total for s in java.starts] == [5] * STARTS
    assert [(s.own, s.total) for s in patched.starts] == [(4, 4)] * STARTS
