"""Kafka requests and responses read off a relayed connection's bytes
(connmgr_evidence.realkafka.wire),
sans-IO: frames fed in pieces, ApiVersions v5's identity fields, the split of a client's
connections at its first Metadata answer, and bytes that are not Kafka."""

from __future__ import annotations

import struct

from connmgr_evidence.realkafka.wire import ConnectionTrace, parse_request, split_at_first_metadata


def _compact(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    return bytes([len(data) + 1]) + data


def _api_versions(correlation: int, cluster_id: str | None, node_id: int) -> bytes:
    """ApiVersions v5 as kafka-clients 4.4 sends it: header v2, then the body."""
    header = struct.pack(">hhih", 18, 5, correlation, 2) + b"c1" + b"\x00"
    body = (
        _compact("apache-kafka-java")
        + _compact("4.4.0")
        + _compact(cluster_id)
        + struct.pack(">i", node_id)
        + b"\x00"
    )
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def _request(key: int, version: int, correlation: int) -> bytes:
    frame = struct.pack(">hhih", key, version, correlation, 2) + b"c1" + b"\x00rest"
    return struct.pack(">i", len(frame)) + frame


def _response(correlation: int) -> bytes:
    frame = struct.pack(">i", correlation) + b"\x00body"
    return struct.pack(">i", len(frame)) + frame


def test_api_versions_v5_yields_its_cluster_id_and_node_id() -> None:
    request = parse_request(_api_versions(7, "abc", 2)[4:], at=1.0)
    assert (request.api_key, request.api_version, request.correlation_id) == (18, 5, 7)
    assert (request.client_id, request.cluster_id, request.node_id) == ("c1", "abc", 2)
    assert request.carries_identity
    bare = parse_request(_api_versions(8, None, -1)[4:], at=1.0)
    assert (bare.cluster_id, bare.node_id, bare.carries_identity) == (None, -1, False)


def test_frames_split_anywhere_across_chunks_decode_the_same() -> None:
    stream = _api_versions(1, "abc", 3) + _request(3, 12, 2) + _request(0, 11, 3)
    for cut in range(1, len(stream)):
        trace = ConnectionTrace(3, 0.0)
        trace.from_client(1.0, stream[:cut])
        trace.from_client(2.0, stream[cut:])
        keys = [(r.api_key, r.correlation_id) for r in trace.requests()]
        assert keys == [(18, 1), (3, 2), (0, 3)], cut
        assert trace.api_versions()[0].node_id == 3
        assert not trace.broken


def test_a_response_is_stamped_when_relayed_and_the_first_metadata_answer_splits() -> None:
    boot = ConnectionTrace(1, accepted_at=0.0)
    boot.from_client(0.1, _api_versions(0, None, -1) + _request(3, 12, 1))
    boot.from_broker(0.2, _response(0))
    assert boot.first_answer_at(3) is None
    boot.from_broker(0.5, _response(1))
    assert boot.first_answer_at(3) == 0.5
    second = ConnectionTrace(2, accepted_at=0.3)  # dialled before the answer: bootstrap too
    leader = ConnectionTrace(3, accepted_at=0.6)
    leader.from_client(0.7, _api_versions(0, "abc", 3))
    bootstrap, known = split_at_first_metadata([boot, second, leader])
    assert (bootstrap, known) == ([boot, second], [leader])
    assert split_at_first_metadata([second]) == ([second], [])


def test_bytes_that_are_not_kafka_stop_the_decoding_without_raising() -> None:
    trace = ConnectionTrace(1, 0.0)
    trace.from_client(0.1, b"\x16\x03\x01\x02\x00" + b"\x01" * 600)  # a TLS ClientHello
    trace.from_client(0.2, _request(3, 12, 1))
    assert trace.broken and trace.requests() == ()
    odd = ConnectionTrace(1, 0.0)
    odd.from_client(0.1, struct.pack(">i", 3) + b"abc")  # too short for a request header
    assert odd.broken
