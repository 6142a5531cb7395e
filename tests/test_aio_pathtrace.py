"""The path trace's counts (connmgr.aio.pathtrace) on made-up call sequences, and real traces
on the embedded cluster (their counts are printed, never pinned: they are what the tool
measures; the drop-in page's table must equal them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connmgr.aio.pathtrace import (
    DOC_BLOCK,
    Call,
    chain_lines,
    doc_tables,
    layer_of,
    main,
    summarise,
)
from connmgr.docblocks import block


def test_layers_are_the_most_specific_prefix() -> None:
    assert layer_of("aiokafka.client") == "aiokafka"
    assert layer_of("connmgr.aio.driver") == "connmgr.aio"
    assert layer_of("connmgr.core") == "connmgr.core"
    assert layer_of("connmgr.policies.proposed") == "connmgr.policies"
    assert layer_of("connmgr.ledger") == "connmgr"
    assert layer_of("connmgrx") is None
    assert layer_of("asyncio.tasks") is None
    assert layer_of("connmgr.aio.pathtrace") is None  # the harness is not traced


def test_crossings_functions_and_passes_are_counted_as_defined() -> None:
    calls = [
        Call("aiokafka.producer", "AIOKafkaProducer.send", 0, None, task="main"),
        Call("connmgr.aio.client", "PolicyClient.send", 1, "aiokafka", task="main"),
        Call("asyncio.tasks", "wait_for", 2, "connmgr.aio", task="main"),
        Call("connmgr.aio.client", "PolicyClient.send", 1, "aiokafka", task="main"),
        Call("connmgr.core.policy", "Policy.handle", 2, "connmgr.aio", task="main"),
        Call("connmgr.policies.proposed", "ProposedPolicy.handle", 3, "connmgr.core", True),
        Call("connmgr.policies.proposed", "ProposedPolicy.place", 4, "connmgr.policies", True),
        Call("connmgr.core.policy", "Policy.handle", 2, "connmgr.aio", task="main"),
        Call("connmgr.aio.driver", "PolicyDriver._connect", 0, None, task="dial"),
    ]
    summary = summarise(calls)
    assert summary.functions == 6
    assert summary.calls == 8
    assert summary.outside_calls == 1
    # aiokafka -> aio twice, aio -> core twice, core -> policies once; the task's first
    # step and calls within one layer are no crossings.
    assert summary.crossings == 5
    assert dict(summary.crossings_by_pair) == {
        "aiokafka -> connmgr.aio": 2,
        "connmgr.aio -> connmgr.core": 2,
        "connmgr.core -> connmgr.policies": 1,
    }
    # A handle() inside handle() is the same pass.
    assert summary.policy_passes == 2
    assert summary.tasks == ("main", "dial")
    assert dict(summary.functions_by_layer) == {
        "aiokafka": 1,
        "connmgr.aio": 2,
        "connmgr.core": 1,
        "connmgr.policies": 2,
    }
    lines = chain_lines(calls)
    assert lines[0] == "[task main]"
    assert lines[1] == "  aiokafka.producer:AIOKafkaProducer.send"
    assert "asyncio.tasks:wait_for" not in "\n".join(lines)
    assert lines.count("      connmgr.core.policy:Policy.handle [policy pass]") == 2
    assert lines[-2:] == ["[task dial]", "  connmgr.aio.driver:PolicyDriver._connect"]


@pytest.mark.embedded
def test_the_tool_traces_a_first_send_to_a_socket_connect(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--chain"]) == 0
    out = capsys.readouterr().out
    assert "aiokafka.producer.producer:AIOKafkaProducer.send" in out
    assert "[policy pass]" in out
    assert "layer crossings:" in out


@pytest.mark.embedded
def test_the_drop_in_doc_table_is_what_the_tool_measures() -> None:
    page = Path(__file__).resolve().parent.parent / "docs" / "drop-in-clients.md"
    measured = doc_tables()[DOC_BLOCK]
    assert block(page.read_text(), DOC_BLOCK) == measured, (
        "docs/drop-in-clients.md's first-send table is stale: run "
        "python -m connmgr.aio.pathtrace --refresh-doc docs/drop-in-clients.md"
    )
