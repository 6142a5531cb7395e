"""Talking to the brokers: one short-lived aiokafka connection per question, and the one
request aiokafka lacks (ElectLeaders), hand-written.

Each helper dials, asks and closes before it returns, so that a test's kernel-socket check
sees only the sockets of the client under test. The cluster's public API is synchronous;
:func:`run_sync` runs these coroutines from any thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from typing import Any, Final, TypeVar

import aiokafka.errors as kafka_errors
from aiokafka.conn import create_conn
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.protocol.types import Array, Int8, Int16, Int32, Schema, String

from connmgr_evidence.realkafka.process import HOST

__all__ = [
    "ELECTION_NOT_NEEDED",
    "POLL_S",
    "PROBE_ERRORS",
    "RETRIABLE_COORDINATOR_ERRORS",
    "ElectLeadersRequest",
    "connection",
    "error_name",
    "metadata",
    "partition_leaders",
    "partition_replicas",
    "run_sync",
]

POLL_S: Final = 0.25
"""How often a wait for the cluster to reach a state asks again."""
_PROBE_TIMEOUT_MS: Final = 3_000

# Kafka error codes the helpers wait out rather than report (aiokafka.errors has the names).
_COORDINATOR_NOT_AVAILABLE: Final = 15
_COORDINATOR_LOAD_IN_PROGRESS: Final = 14
_NOT_COORDINATOR: Final = 16
ELECTION_NOT_NEEDED: Final = 84
RETRIABLE_COORDINATOR_ERRORS: Final = frozenset(
    {_COORDINATOR_NOT_AVAILABLE, _COORDINATOR_LOAD_IN_PROGRESS, _NOT_COORDINATOR}
)

_T = TypeVar("_T")


# -- Kafka protocol helpers ----------------------------------------------------------------------
# aiokafka 0.14 has no ElectLeaders request; version 1 (the first with an election type) is
# enough: 4.x brokers accept versions 0-2. Field layout from ElectLeadersRequest.json.


class _ElectLeadersResponseV1(Response):  # type: ignore[misc]
    API_KEY = 43
    API_VERSION = 1
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        (
            "replica_election_results",
            Array(
                ("topic", String("utf-8")),
                (
                    "partition_result",
                    Array(
                        ("partition_id", Int32),
                        ("error_code", Int16),
                        ("error_message", String("utf-8")),
                    ),
                ),
            ),
        ),
    )


class _ElectLeadersRequestV1(RequestStruct):  # type: ignore[misc]
    API_KEY = 43
    API_VERSION = 1
    RESPONSE_TYPE = _ElectLeadersResponseV1
    SCHEMA = Schema(
        ("election_type", Int8),
        ("topic_partitions", Array(("topic", String("utf-8")), ("partitions", Array(Int32)))),
        ("timeout_ms", Int32),
    )


class ElectLeadersRequest(Request[_ElectLeadersRequestV1]):  # type: ignore[misc]
    API_KEY = 43
    PREFERRED = 0

    def __init__(self, topic: str, partitions: Sequence[int], timeout_ms: int) -> None:
        self._topic = topic
        self._partitions = list(partitions)
        self._timeout_ms = timeout_ms

    def build(self, request_struct_class: type[Any]) -> Any:
        return request_struct_class(
            self.PREFERRED, [(self._topic, self._partitions)], self._timeout_ms
        )


def error_name(code: int) -> str:
    return f"{kafka_errors.for_code(code).__name__}({code})"


@contextlib.asynccontextmanager
async def connection(port: int, timeout_ms: int = _PROBE_TIMEOUT_MS) -> AsyncIterator[Any]:
    """One aiokafka connection to the broker at ``HOST:port``, closed (socket gone) on exit."""
    conn = await create_conn(
        HOST, port, request_timeout_ms=timeout_ms, client_id="connmgr-realkafka"
    )
    try:
        yield conn
    finally:
        conn.close()
        # The transport releases its socket from a loop callback: let it run before returning,
        # so a caller's kernel-socket check right after never sees it.
        await asyncio.sleep(0)
        await asyncio.sleep(0)


async def metadata(port: int, topics: list[str] | None) -> dict[str, Any]:
    async with connection(port) as conn:
        response = await conn.send(MetadataRequest(topics, allow_auto_topic_creation=False))
    result: dict[str, Any] = response.to_object()
    return result


PROBE_ERRORS: Final = (OSError, asyncio.TimeoutError, kafka_errors.KafkaError)


def run_sync(factory: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run the coroutine ``factory()`` to completion from synchronous code, in any thread.

    In a thread without a running loop this is :func:`asyncio.run`; in a thread that runs a
    loop (a direct call from a coroutine) the coroutine runs on a helper thread's own loop,
    since a loop cannot be re-entered.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="realkafka") as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


def partition_replicas(metadata: Mapping[str, Any]) -> dict[str, dict[int, list[int]]]:
    """Topic -> partition -> replica ids (preferred leader first) from a Metadata response."""
    result: dict[str, dict[int, list[int]]] = {}
    for topic in metadata["topics"]:
        if topic["error_code"]:
            continue
        result[topic["topic"]] = {
            int(p["partition"]): [int(r) for r in p["replicas"]] for p in topic["partitions"]
        }
    return result


def partition_leaders(metadata: Mapping[str, Any]) -> dict[str, dict[int, int]]:
    """Topic -> partition -> leader id from a Metadata response (topics with errors omitted)."""
    result: dict[str, dict[int, int]] = {}
    for topic in metadata["topics"]:
        if topic["error_code"]:
            continue
        result[topic["topic"]] = {
            int(p["partition"]): int(p["leader"]) for p in topic["partitions"]
        }
    return result
