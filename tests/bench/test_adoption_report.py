"""The adoption benchmark's report and command line, without a cluster: what counts as a
shortfall, the Java log census, the timing summaries, and bad arguments refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from connmgr_evidence.bench.adoption.cli import parser
from connmgr_evidence.bench.adoption.report import render, shortfalls
from connmgr_evidence.realkafka.adoption import (
    LOWER_BOUND,
    Start,
    first_ratio,
    identity_census,
    pairs_faster,
)

# Two lines as kafka-clients 4.4.0's NetworkClient logs them at DEBUG (abridged headers).
_SENT = (
    "Sending API_VERSIONS request with header RequestHeader(apiKey=API_VERSIONS, apiVersion=5)"
    " and timeout 30000 to node {node}: ApiVersionsRequestData(clientSoftwareName="
    "'apache-kafka-java', clientSoftwareVersion='4.4.0', clusterId={cluster}, nodeId={id})"
)


def start(client: str, round_: int, first_ms: float, **changes: object) -> Start:
    bound = LOWER_BOUND["seed-producer"]
    fields: dict[str, object] = {
        "protocol": "PLAINTEXT",
        "rtt_ms": 0.0,
        "scenario": "seed-producer",
        "client": client,
        "round": round_,
        "opened": bound if client == "proposed" else bound + 1,
        "steady": bound,
        "first_ms": first_ms,
        "records": 3,
        "through": 3,
        "dials": bound if client == "proposed" else None,
        "adopted": 1 if client == "proposed" else None,
        "rejected": 0 if client == "proposed" else None,
    }
    fields.update(changes)
    return Start(**fields)  # type: ignore[arg-type]


def test_a_clean_run_has_no_shortfall_and_each_kind_of_miss_is_named() -> None:
    clean = [start("aiokafka", 0, 10.0), start("proposed", 0, 8.0)]
    assert shortfalls(clean) == []
    assert shortfalls([start("proposed", 0, 8.0, opened=4, dials=4)]) == [
        "proposed seed-producer PLAINTEXT 0 ms round 0: opened 4, lower bound 3"
    ]
    assert shortfalls([start("proposed", 0, 8.0, dials=2)]) == [
        "proposed seed-producer PLAINTEXT 0 ms round 0: ledger dials 2, forwarders counted 3"
    ]
    assert shortfalls([start("aiokafka", 0, 8.0, through=2)]) == [
        "aiokafka seed-producer PLAINTEXT 0 ms round 0: 1 of 3 records not through"
    ]


def test_the_timing_summaries_pair_the_rounds() -> None:
    starts = [
        start("aiokafka", 0, 10.0),
        start("proposed", 0, 8.0),
        start("aiokafka", 1, 10.0),
        start("proposed", 1, 12.0),
        start("aiokafka", 2, 30.0),
        start("proposed", 2, 9.0),
    ]
    assert pairs_faster(starts, "PLAINTEXT", 0.0, "seed-producer") == (2, 3)
    assert first_ratio(starts, "PLAINTEXT", 0.0, "seed-producer") == pytest.approx(9.0 / 10.0)
    page = render(starts, [], kafka="4.4.0", took_s=60.0)
    assert "| PLAINTEXT | 0 | seed-producer | 10.0 | 9.0 | 0.90 | 2 of 3 | — |" in page
    assert "## Shortfalls\n\nNone." in page


def test_the_census_tells_checked_requests_from_bootstrap_ones(tmp_path: Path) -> None:
    log = tmp_path / "producer.log"
    lines = [
        _SENT.format(node="-1", cluster="null", id=-1),
        _SENT.format(node="2", cluster="'abc'", id=2),
        _SENT.format(node="+3", cluster="'abc'", id=3),
        "an unrelated line",
    ]
    log.write_text("\n".join(lines) + "\n")
    census = identity_census("java producer", log)
    assert (census.checked, census.unchecked) == (("2", "+3"), ("-1",))


@pytest.mark.parametrize(
    "argv",
    [
        ["--rounds", "0"],
        ["--rtts-ms", "five"],
        ["--rtts-ms", "-1"],
        ["--protocols", "SSL"],
        ["--scenarios", "big-producer"],
    ],
)
def test_bad_arguments_exit_2_saying_why(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(argv)
    assert exited.value.code == 2
    assert "error: argument" in capsys.readouterr().err
