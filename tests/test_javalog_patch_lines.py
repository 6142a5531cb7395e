"""The NetworkClient lines the project's patched kafka-clients 4.3.1 adds are read as closes.

The Java probe's accounting (log, client metrics, kernel) must agree; a close the log reader
does not know leaves a socket "open" in the log while the metrics count it closed (seen with
``connections.linger.ms=0`` before this reader knew its line)."""

from __future__ import annotations

import pytest

from connmgr.javalog import parse_connection_event

WHO = "[Consumer clientId=consumer-test-1, groupId=test]"


@pytest.mark.parametrize(
    ("message", "node", "reason"),
    [
        (
            "Closing connection to bootstrap node -1: metadata has replaced the bootstrap cluster",
            "-1",
            "bootstrap replaced",
        ),
        (
            "Closing connection to node 3: nothing has needed it for connections.linger.ms (0 ms)",
            "3",
            "unneeded",
        ),
        (
            "Closing connection to node 2147483644: nothing has needed it for "
            "connections.linger.ms (3000 ms)",
            "2147483644",
            "unneeded",
        ),
    ],
)
def test_a_patch_close_line_is_a_disconnect_with_its_reason(
    message: str, node: str, reason: str
) -> None:
    where = "(org.apache.kafka.clients.NetworkClient:1720)"
    line = f"[2026-11-27 14:18:08,781] DEBUG {WHO} {message} {where}\n"
    event = parse_connection_event(line)
    assert event is not None
    assert (event.kind, event.node, event.reason) == ("disconnect", node, reason)


def test_a_line_that_only_mentions_the_option_is_no_close() -> None:
    where = "(org.apache.kafka.clients.consumer.ConsumerConfig:370)"
    line = f"[2026-11-27 14:18:08,781] INFO {WHO} connections.linger.ms = 0 {where}\n"
    assert parse_connection_event(line) is None
