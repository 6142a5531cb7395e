"""KIP-1242's identity check as real Kafka 4.4.0 brokers answer it, over PLAINTEXT and SASL_SSL.

``ApiVersions`` v5 carries ``ClusterId`` and ``NodeId``. The facts pinned, on each listener:
the right pair is error 0 with the full API list; another node's id (a real node of the
cluster, or none) or another cluster's id is error 129 ``REBOOTSTRAP_REQUIRED`` with an empty
list, and the broker leaves the connection open (a Metadata request on it is answered); only
one of the two set is error 42 ``INVALID_REQUEST`` (the connection open too); neither set is no
check. On PLAINTEXT a v5 as the first request of a fresh connection is answered the same
(exact bytes); on SASL_SSL a v5 sent before authentication is answered by the authenticator
unchecked, and the same request after SaslHandshake/SaslAuthenticate is rejected. A 4.3.1
broker lists ``ApiVersions`` only up to v4, so a client must not ask it (a v5 sent anyway is
error 35, never 129).

The checks after authentication go through aiokafka's ``create_conn`` (which authenticates)
and :mod:`connmgr.aio.identity`; only what aiokafka cannot send -- a v5 as a connection's
first request, and before SASL authentication -- is written by hand on a raw socket. The
cluster is this module's own (``security=True``, release 4.4.0 named, so that
``CONNMGR_KAFKA_VERSION=4.3.1`` does not point these tests at a broker without the check).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Final, TypeVar

import pytest
from aiokafka.conn import ScramAuthenticator, create_conn
from aiokafka.protocol.admin import SaslAuthenticateRequest, SaslHandShakeRequest
from aiokafka.protocol.api import Request
from aiokafka.protocol.metadata import MetadataRequest

from connmgr.aio.identity import (
    API_VERSIONS_KEY,
    INVALID_REQUEST,
    REBOOTSTRAP_REQUIRED,
    CheckAnswer,
    IdentityCheckRequest,
    IdentityRejected,
    answers_identity_check,
    check_identity,
    confirmed_conn,
)
from connmgr_evidence.realkafka import KafkaCluster
from connmgr_evidence.realkafka.adoption import (
    LOWER_BOUND,
    SCENARIOS,
    IdentityCensus,
    Start,
    measure,
)
from connmgr_evidence.realkafka.handshakes import await_sockets_closed
from connmgr_evidence.realkafka.process import random_cluster_id
from connmgr_evidence.realkafka.security import SCRAM_MECHANISM, Protocol

pytestmark = pytest.mark.real_kafka

PROTOCOLS: Final[tuple[Protocol, ...]] = ("PLAINTEXT", "SASL_SSL")
NO_SUCH_NODE: Final = 99
_TIMEOUT_S: Final = 30.0
_CLIENT_ID: Final = "connmgr-kip1242"
# ApiVersions v5's answer to a failed check, as the broker writes it: error 129 (int16), an
# empty compact array (length 0 + 1), throttle time 0 (int32), no tagged fields.
REJECTION_BODY: Final = bytes.fromhex("0081 01 00000000 00")
# The same shape for a check with only one of the two fields: error 42.
INVALID_BODY: Final = bytes.fromhex("002a 01 00000000 00")

_T = TypeVar("_T")


def _run(factory: Callable[[], Awaitable[_T]]) -> _T:
    async def bounded() -> _T:
        async with asyncio.timeout(_TIMEOUT_S):
            return await factory()

    return asyncio.run(bounded())


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    with KafkaCluster(brokers=3, security=True, version="4.4.0") as cluster:
        yield cluster


@contextlib.asynccontextmanager
async def _connected(cluster: KafkaCluster, protocol: Protocol, broker: int) -> AsyncIterator[Any]:
    """An aiokafka connection to ``broker`` over ``protocol``, authenticated on SASL_SSL."""
    access = cluster.access(protocol)
    host, port = dict(access.endpoints)[broker]
    conn = await create_conn(
        host, port, client_id=_CLIENT_ID, request_timeout_ms=10_000, **access.aiokafka_kwargs()
    )
    try:
        yield conn
    finally:
        conn.close()
        # aiokafka does not wait for TLS's close: let the socket go on this loop.
        await await_sockets_closed(access.addresses())


@pytest.fixture(scope="module")
def cluster_id(cluster: KafkaCluster) -> str:
    """The id a broker's Metadata answer names (the one its storage was formatted with)."""

    async def ask() -> str:
        async with _connected(cluster, "PLAINTEXT", 1) as conn:
            answer = await conn.send(MetadataRequest([]))
        return str(answer.cluster_id)

    found = _run(ask)
    assert found == cluster.cluster_id
    return found


async def _ask(
    conn: Any, cluster_id: str | None, node_id: int | None
) -> tuple[int, dict[int, Any]]:
    """The error code and API list (key -> (min, max)) of a v5 check on ``conn``."""
    answer = await conn.send(IdentityCheckRequest(cluster_id, node_id))
    return answer.error_code, {key: (low, high) for key, low, high, _ in answer.api_keys}


# -- by hand: what aiokafka cannot send -----------------------------------------------------------


def _compact(text: str | None) -> bytes:
    """A (nullable) compact string of fewer than 127 bytes: length + 1 in one varint byte."""
    if text is None:
        return b"\x00"
    data = text.encode()
    assert len(data) < 127
    return bytes([len(data) + 1]) + data


def _api_versions_v5(correlation_id: int, cluster_id: str | None, node_id: int) -> bytes:
    """An ``ApiVersions`` v5 request written byte by byte (request header v2, then the body
    of ``ApiVersionsRequest.json``), independent of :mod:`connmgr.aio.identity`."""
    client = _CLIENT_ID.encode()
    header = struct.pack(">hhih", API_VERSIONS_KEY, 5, correlation_id, len(client)) + client
    header += b"\x00"  # no tagged fields
    body = _compact("connmgr-raw") + _compact("0.1.0") + _compact(cluster_id)
    body += struct.pack(">i", node_id) + b"\x00"
    return header + body


def _api_list(body: bytes) -> dict[int, tuple[int, int]]:
    """The API list of an ``ApiVersions`` v3+ answer body (error code first)."""
    assert body[2] < 0x80  # a one-byte varint: fewer than 127 APIs
    count = body[2] - 1
    entries = [struct.unpack_from(">hhhB", body, 3 + 7 * i) for i in range(count)]
    return {key: (low, high) for key, low, high, _ in entries}


class _RawConnection:
    """One TCP connection (TLS if given a context) spoken frame by frame: each request is
    answered before the next is sent, every answer has a v0 response header."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._next_id = 1

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls, host: str, port: int, context: ssl.SSLContext | None = None
    ) -> AsyncIterator[_RawConnection]:
        reader, writer = await asyncio.open_connection(host, port, ssl=context)
        try:
            yield cls(reader, writer)
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()

    async def exchange(self, build: Callable[[int], bytes]) -> bytes:
        """Send ``build(correlation_id)`` framed; the answer's body."""
        correlation_id, self._next_id = self._next_id, self._next_id + 1
        message = build(correlation_id)
        self._writer.write(struct.pack(">i", len(message)) + message)
        (size,) = struct.unpack(">i", await self._reader.readexactly(4))
        answer = await self._reader.readexactly(size)
        assert struct.unpack_from(">i", answer)[0] == correlation_id
        return answer[4:]

    async def check(self, cluster_id: str | None, node_id: int) -> bytes:
        return await self.exchange(lambda cid: _api_versions_v5(cid, cluster_id, node_id))

    async def send(self, request: Request[Any], versions: dict[int, tuple[int, int]]) -> Any:
        """``request`` encoded by aiokafka at the highest of ``versions``; its decoded answer."""
        struct_ = request.prepare(versions)

        def build(cid: int) -> bytes:
            header = struct_.build_request_header(correlation_id=cid, client_id=_CLIENT_ID)
            return bytes(header.encode() + struct_.encode())

        return struct_.RESPONSE_TYPE.decode(await self.exchange(build))

    async def authenticate(self, username: str, password: str) -> None:
        """SaslHandshake v1, then SCRAM (aiokafka's own client side) in SaslAuthenticate v1."""
        handshake = await self.send(SaslHandShakeRequest(SCRAM_MECHANISM), {17: (1, 1)})
        assert handshake.error_code == 0, handshake
        scram = ScramAuthenticator(
            loop=asyncio.get_running_loop(),
            sasl_plain_username=username,
            sasl_plain_password=password,
            sasl_mechanism=SCRAM_MECHANISM,
        )
        token = None
        while (step := await scram.step(token)) is not None:
            answer = await self.send(SaslAuthenticateRequest(step[0]), {36: (1, 1)})
            assert answer.error_code == 0, answer
            token = answer.sasl_auth_bytes


# -- 4.3.1: no check to ask for (first: its 1-node cluster is up before this module's own) ------


def test_a_4_3_1_broker_lists_api_versions_only_up_to_v4() -> None:
    """So :func:`answers_identity_check` is False there; and a v5 sent anyway is refused as
    an unknown version (35, in the v0 layout every broker can answer), never as a 129."""
    with KafkaCluster(brokers=1, version="4.3.1") as old:
        host, port = old.endpoints()[1]
        assert old.cluster_id is not None

        async def main() -> tuple[tuple[int, int], bool, bytes]:
            async with _connected(old, "PLAINTEXT", 1) as conn:
                span, answers = conn._versions[API_VERSIONS_KEY], answers_identity_check(conn)
            async with _RawConnection.open(host, port) as raw:
                # The right cluster, another node: a 4.4 broker would reject it.
                return span, answers, await raw.check(old.cluster_id, 2)

        span, answers, refused = _run(main)
    assert span == (0, 4)
    assert answers is False
    # UNSUPPORTED_VERSION (int16 35), an int32-counted array of one: ApiVersions 0..4.
    assert refused == bytes.fromhex("0023 00000001 0012 0000 0004")


# -- after authentication: aiokafka's connection and connmgr.aio.identity ------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_right_node_of_the_right_cluster_is_confirmed_with_the_full_api_list(
    cluster: KafkaCluster, cluster_id: str, protocol: Protocol
) -> None:
    async def main() -> None:
        for broker in cluster.broker_ids:
            async with _connected(cluster, protocol, broker) as conn:
                assert answers_identity_check(conn)
                assert conn._versions[API_VERSIONS_KEY] == (0, 5)
                error, listed = await _ask(conn, cluster_id, broker)
                assert error == 0
                assert listed == conn._versions  # what the connection's own handshake got
                assert await check_identity(conn, cluster_id, broker) is CheckAnswer.CONFIRMED
                metadata = await conn.send(MetadataRequest([]))  # the socket still serves
                assert len(metadata.brokers) == 3

    _run(main)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_another_nodes_id_is_rejected_with_129_and_an_empty_list(
    cluster: KafkaCluster, cluster_id: str, protocol: Protocol
) -> None:
    """Each broker asked whether it is each other node of the cluster, and a node that
    does not exist."""

    async def main() -> None:
        for broker in cluster.broker_ids:
            others = [b for b in cluster.broker_ids if b != broker] + [NO_SUCH_NODE]
            async with _connected(cluster, protocol, broker) as conn:
                for other in others:
                    assert await _ask(conn, cluster_id, other) == (REBOOTSTRAP_REQUIRED, {})
                    answer = await check_identity(conn, cluster_id, other)
                    assert answer is CheckAnswer.REJECTED, (broker, other)

    _run(main)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_another_clusters_id_is_rejected_with_129(
    cluster: KafkaCluster, cluster_id: str, protocol: Protocol
) -> None:
    stranger = random_cluster_id()
    assert stranger != cluster_id

    async def main() -> None:
        async with _connected(cluster, protocol, 2) as conn:
            assert await _ask(conn, stranger, 2) == (REBOOTSTRAP_REQUIRED, {})
            assert await check_identity(conn, stranger, 2) is CheckAnswer.REJECTED

    _run(main)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_one_field_without_the_other_is_an_invalid_request(
    cluster: KafkaCluster, cluster_id: str, protocol: Protocol
) -> None:
    async def main() -> None:
        async with _connected(cluster, protocol, 3) as conn:
            assert await _ask(conn, cluster_id, None) == (INVALID_REQUEST, {})
            assert await _ask(conn, None, 3) == (INVALID_REQUEST, {})
            # NodeId -1 is "not set": check_identity reports the broker's 42 as a failure.
            assert await check_identity(conn, cluster_id, -1) is CheckAnswer.FAILED
            # Like a rejection, an invalid check leaves the connection open and serving.
            metadata = await conn.send(MetadataRequest([]))
            assert metadata.cluster_id == cluster_id

    _run(main)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_neither_field_is_no_check(
    cluster: KafkaCluster, cluster_id: str, protocol: Protocol
) -> None:
    async def main() -> None:
        async with _connected(cluster, protocol, 1) as conn:
            error, listed = await _ask(conn, None, None)
            assert error == 0 and listed == conn._versions

    _run(main)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_broker_leaves_the_connection_open_after_a_rejection(
    cluster: KafkaCluster, cluster_id: str, protocol: Protocol
) -> None:
    async def main() -> None:
        async with _connected(cluster, protocol, 1) as conn:
            assert await _ask(conn, cluster_id, 2) == (REBOOTSTRAP_REQUIRED, {})
            assert conn.connected()
            metadata = await conn.send(MetadataRequest([]))  # answered on the same socket
            assert metadata.cluster_id == cluster_id
            assert sorted(b[0] for b in metadata.brokers) == [1, 2, 3]
            assert (await _ask(conn, cluster_id, 1))[0] == 0

    _run(main)


# -- by hand: a v5 first on a PLAINTEXT connection, and before SASL authentication ----------------


def test_a_v5_first_on_a_fresh_plaintext_connection_is_checked_the_same(
    cluster: KafkaCluster, cluster_id: str
) -> None:
    host, port = cluster.endpoints()[1]

    async def first(cluster_id_: str | None, node_id: int) -> bytes:
        async with _RawConnection.open(host, port) as raw:
            return await raw.check(cluster_id_, node_id)

    async def main() -> None:
        confirmed = await first(cluster_id, 1)
        assert confirmed[:2] == b"\x00\x00"
        assert _api_list(confirmed)[API_VERSIONS_KEY] == (0, 5)
        assert await first(cluster_id, 2) == REJECTION_BODY
        assert await first(cluster_id, NO_SUCH_NODE) == REJECTION_BODY
        assert await first(random_cluster_id(), 1) == REJECTION_BODY
        assert await first(cluster_id, -1) == INVALID_BODY
        assert await first(None, 1) == INVALID_BODY
        # Rejected first, the connection still serves: the right question is confirmed.
        async with _RawConnection.open(host, port) as raw:
            assert await raw.check(cluster_id, 3) == REJECTION_BODY
            assert (await raw.check(cluster_id, 1))[:2] == b"\x00\x00"

    _run(main)


def test_on_sasl_ssl_a_v5_before_authentication_is_not_checked_and_after_it_is(
    cluster: KafkaCluster, cluster_id: str
) -> None:
    access = cluster.access("SASL_SSL")
    host, port = dict(access.endpoints)[1]
    assert access.username is not None and access.password is not None
    username, password = access.username, access.password

    async def main() -> None:
        for wrong in [(cluster_id, 2), (random_cluster_id(), 1)]:
            async with _RawConnection.open(host, port, access.ssl_context()) as raw:
                before = await raw.check(*wrong)
                assert before[:2] == b"\x00\x00", wrong  # the authenticator answers
                assert _api_list(before)[API_VERSIONS_KEY] == (0, 5)
                await raw.authenticate(username, password)
                assert await raw.check(*wrong) == REJECTION_BODY
        await await_sockets_closed(access.addresses())

    _run(main)


# --- the drop-in on the check ---------------------------------------------------------------
# What the project does with the facts above: a dial for a known node confirms it in its set-up
# (connmgr.aio.identity.confirmed_conn), and the drop-in confirms its bootstrap socket's broker
# and adopts it (connmgr_evidence.realkafka.adoption measures it; the committed run is
# reports/adoption).


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_dial_for_a_known_node_confirms_it_or_fails(
    cluster: KafkaCluster, cluster_id: str, protocol: Protocol
) -> None:
    access = cluster.secure.access(protocol)
    host, port = dict(access.endpoints)[1]
    settings = {"client_id": _CLIENT_ID, "request_timeout_ms": 10_000, **access.aiokafka_kwargs()}

    async def main() -> None:
        conn = await confirmed_conn(host, port, cluster_id, 1, **settings)
        try:
            assert conn._versions[API_VERSIONS_KEY] == (0, 5)
            assert [b[0] for b in (await conn.send(MetadataRequest([]))).brokers] == [1, 2, 3]
        finally:
            conn.close()
        with pytest.raises(IdentityRejected, match="is not node 2"):
            await confirmed_conn(host, port, cluster_id, 2, **settings)
        assert await await_sockets_closed(access.addresses()) == 0

    _run(main)


@pytest.fixture(scope="module")
def adoption_run(
    cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[Start], list[IdentityCensus]]:
    """One round of the adoption measurement at RTT 0 on both listeners, and one Java
    producer start (PLAINTEXT) with the admin client's census."""
    logs = tmp_path_factory.mktemp("java-logs")
    starts, _ = measure(
        cluster, protocols=PROTOCOLS, rtts_ms=(0.0,), rounds=1, java_rounds=0, logs=logs
    )
    _, census = measure(
        cluster,
        protocols=("PLAINTEXT",),
        rtts_ms=(0.0,),
        scenarios=("seed-producer",),
        rounds=1,
        java_rounds=1,
        logs=logs,
    )
    return starts, census


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_drop_in_opens_the_lower_bound_where_stock_aiokafka_opens_one_more(
    adoption_run: tuple[list[Start], list[IdentityCensus]], protocol: str, scenario: str
) -> None:
    starts, _ = adoption_run
    (ours,) = [
        s for s in starts if (s.protocol, s.scenario, s.client) == (protocol, scenario, "proposed")
    ]
    (stock,) = [
        s for s in starts if (s.protocol, s.scenario, s.client) == (protocol, scenario, "aiokafka")
    ]
    bound = LOWER_BOUND[scenario]
    assert (ours.opened, ours.dials, ours.adopted, ours.rejected, ours.lost) == (
        bound,
        bound,
        1,
        0,
        0,
    )
    assert (stock.opened, stock.lost) == (bound + 1, 0)
    assert ours.steady == stock.steady == bound  # the same sockets held, one handshake fewer


def test_kafka_clients_4_4_never_confirms_a_bootstrap_connection_and_its_admin_asks_nothing(
    adoption_run: tuple[list[Start], list[IdentityCensus]],
) -> None:
    _, census = adoption_run
    admin, producer = census
    assert admin.client.startswith("java admin") and producer.client.startswith(
        "java seed-producer"
    )
    # Known nodes (broker ids) are asked; bootstrap connections (-1, -2, ...) never are.
    assert sorted(producer.checked) == ["1", "2", "3"]
    assert producer.unchecked and all(n.startswith("-") for n in producer.unchecked)
    # The admin client sends neither field, even to a broker it learnt from metadata.
    assert admin.checked == ()
    assert any(n.isdigit() for n in admin.unchecked)
