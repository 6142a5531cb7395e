"""The serverless report's figures, without a cluster: per-second bins and the peak window,
the nearest-rank p99, concurrent connections, attempts attributed to starts, what fails a run,
the table, and bad arguments refused."""

from __future__ import annotations

import pytest

from connmgr_evidence.bench.serverless.cli import parser
from connmgr_evidence.bench.serverless.figures import (
    attributed,
    figures,
    peak_concurrent,
    peak_window,
    per_second,
    percentile,
    problems,
)
from connmgr_evidence.bench.serverless.report import as_json, render
from connmgr_evidence.realkafka.serverless import ServerlessRun, ServerlessStart, VariantRun


def test_per_second_bins_are_half_open_from_the_start_and_cover_the_span() -> None:
    # Bins [10, 11), [11, 12), [12, 12.5]: 11.0 is the second bin's, the end the last one's.
    assert per_second([10.0, 10.99, 11.0, 12.5], 10.0, 12.5) == [2, 1, 1]
    assert per_second([], 0.0, 0.0) == [0]  # an empty span still has its one second
    assert per_second([0.2], 0.0, 0.4) == [1]
    with pytest.raises(ValueError, match="outside the span"):
        per_second([9.9], 10.0, 11.0)
    with pytest.raises(ValueError, match="ends before"):
        per_second([], 2.0, 1.0)


def test_the_peak_window_slides_across_bin_boundaries() -> None:
    times = [0.6, 0.9, 1.1, 1.4]
    assert per_second(times, 0.0, 2.0) == [2, 2]  # fixed bins see two a second
    assert peak_window(times) == 4  # [0.6, 1.6) holds all four
    assert peak_window([0.0, 1.0, 2.0]) == 1  # half-open: 1.0 is not in [0.0, 1.0)
    assert peak_window([]) == 0
    assert peak_window([5.0, 0.0, 0.5]) == 2  # order does not matter
    with pytest.raises(ValueError):
        peak_window([1.0], width_s=0)


def test_p99_is_the_nearest_rank() -> None:
    assert percentile(list(range(1, 101)), 99) == 99
    assert percentile([0] * 99 + [10], 99) == 0  # one busy second in a hundred is the p100
    assert percentile([0] * 98 + [5, 10], 99) == 5
    assert percentile([3, 1, 2], 99) == 3  # few bins: the p99 is the max
    assert percentile([4, 8], 50) == 4
    with pytest.raises(ValueError):
        percentile([], 99)
    with pytest.raises(ValueError):
        percentile([1], 0)


def test_peak_concurrent_counts_overlaps_not_back_to_back_connections() -> None:
    assert peak_concurrent([(0.0, 1.0), (1.0, 2.0)]) == 1
    assert peak_concurrent([(0.0, 3.0), (1.0, 2.0), (1.5, 4.0)]) == 3
    assert peak_concurrent([(0.0, None), (5.0, 6.0)]) == 2  # never closed: open for ever
    assert peak_concurrent([]) == 0
    with pytest.raises(ValueError):
        peak_concurrent([(2.0, 1.0)])


def test_accepts_are_attributed_to_the_start_they_fall_in() -> None:
    counts, stray = attributed([0.1, 0.2, 1.0, 1.5, 3.2], [(0.0, 1.0), (1.2, 2.0), (3.0, 4.0)])
    assert counts == [3, 1, 1]  # 1.0 is the first start's last instant
    assert stray == 0
    assert attributed([1.1], [(0.0, 1.0), (1.2, 2.0)]) == ([0, 0], 1)


def _start(index: int, attempts: tuple[int, ...], **changes: object) -> ServerlessStart:
    fields: dict[str, object] = {
        "variant": "proposed",
        "index": index,
        "began_s": float(index),
        "ended_s": index + 0.5,
        "attempts": attempts,
        "counted": sum(attempts),
        "own": sum(attempts),
        "held": 3,
        "relayed": 3,
        "adopted": 1,
        "sent": 3,
        "acked": 3,
        "first_ms": 10.0 * (index + 1),
    }
    fields.update(changes)
    return ServerlessStart(**fields)  # type: ignore[arg-type]


def _variant(starts: list[ServerlessStart], **changes: object) -> VariantRun:
    # Each start's accepts at its own instants, broker by broker.
    connections = tuple(
        tuple(
            (s.began_s + 0.01 * (k + 1), s.began_s + 0.4)
            for s in starts
            for k in range(s.attempts[b])
        )
        for b in range(3)
    )
    fields: dict[str, object] = {
        "variant": "proposed",
        "client": "aiokafka 0.14.0 + connmgr drop-in",
        "topic": "t",
        "began_s": starts[0].began_s,
        "ended_s": starts[-1].ended_s,
        "starts": tuple(starts),
        "connections": connections,
        "read_back": sum(s.sent for s in starts),
        "duplicated": 0,
        "unexpected": 0,
        "in_topic": sum(s.sent for s in starts),
    }
    fields.update(changes)
    return VariantRun(**fields)  # type: ignore[arg-type]


def _run(*variants: VariantRun) -> ServerlessRun:
    return ServerlessRun("SASL_SSL", 0.0, "4.4.0", (1, 2, 3), 3, 0.0, tuple(variants))


def test_figures_of_a_variant() -> None:
    starts = [_start(0, (1, 1, 1)), _start(1, (2, 1, 1)), _start(2, (1, 1, 2), own=3)]
    f = figures(_variant(starts))
    assert (f.starts, f.attempts_median, f.attempts_min, f.attempts_max) == (3, 4, 3, 4)
    assert f.per_broker_mean == pytest.approx((4 / 3, 1.0, 4 / 3))
    # Starts 1 s apart, all of a start's accepts within 0.03 s: one start per window.
    assert f.peak_per_s == (2, 1, 2)
    assert f.p99_per_s == (2, 1, 2)
    # A start's connections to one broker all open until began + 0.4.
    assert f.peak_open == (2, 1, 2)
    assert (f.own_agrees, f.kernel_agrees, f.adopted) == (2, 3, 3)
    assert (f.sent, f.acked, f.read_back, f.lost, f.duplicated) == (9, 9, 9, 0, 0)
    assert f.first_ms_median == 20.0
    assert f.seconds == pytest.approx(2.5)


def test_a_clean_run_has_no_problem_and_each_kind_of_miss_is_named() -> None:
    starts = [_start(0, (1, 1, 1)), _start(1, (1, 1, 1))]
    assert problems(_run(_variant(starts))) == []
    lost = _variant(starts, read_back=5, in_topic=5)
    assert problems(_run(lost)) == ["drop-in (adoption): 1 of 6 records not read back"]
    duplicated = _variant(starts, duplicated=1, in_topic=7)
    assert problems(_run(duplicated)) == ["drop-in (adoption): 1 duplicated records read back"]
    unacked = _variant([_start(0, (1, 1, 1), acked=2), starts[1]])
    assert problems(_run(unacked)) == ["drop-in (adoption): 1 of 6 records not acknowledged"]
    offsets = _variant(starts, in_topic=8)
    assert problems(_run(offsets)) == [
        "drop-in (adoption): the topic's offsets hold 8 records, 6 were read"
    ]
    counted = _variant([_start(0, (1, 1, 1), counted=4), starts[1]])
    assert problems(_run(counted)) == ["drop-in (adoption) start 0: forwarders' counters 4, log 3"]
    own = _variant([_start(0, (1, 1, 1), own=4), starts[1]])
    assert problems(_run(own)) == ["drop-in (adoption) start 0: client counted 4, forwarders 3"]
    stray = _variant(starts)
    rows = list(stray.connections)
    rows[1] = (*rows[1], (0.7, 0.8))  # between the two starts
    assert problems(_run(_variant(starts, connections=tuple(rows)))) == [
        "drop-in (adoption): 1 accepts at broker 2 in no start"
    ]


def test_the_report_has_a_row_per_variant_and_the_json_the_raw_starts() -> None:
    starts = [_start(0, (1, 1, 1)), _start(1, (2, 1, 1))]
    stock = _variant(
        [_start(i, (2, 1, 1), variant="aiokafka", own=None, adopted=None) for i in range(2)],
        variant="aiokafka",
        client="aiokafka 0.14.0",
    )
    run = _run(stock, _variant(starts))
    page = render(run, took_s=90.0)
    assert (
        "| drop-in (adoption) | 2 | 3.5 (3-4) | 1.50 / 1.00 / 1.00 | 2 / 1 / 1 | 2 / 1 / 1 "
        "| 2 / 1 / 1 | 6 / 6 / 6 |" in page
    )
    assert "| stock aiokafka | 2 | 4 (4-4) | 2.00 / 1.00 / 1.00 |" in page
    assert "| stock aiokafka | aiokafka 0.14.0 | 0 | 0 | — (keeps none) |" in page
    assert "## Shortfalls\n\nNone." in page
    raw = as_json(run, took_s=90.0)
    assert [s["attempts"] for s in raw["run"]["variants"][1]["starts"]] == [(1, 1, 1), (2, 1, 1)]
    assert raw["problems"] == []


@pytest.mark.parametrize(
    "argv",
    [
        ["--starts", "0"],
        ["--starts", "many"],
        ["--records", "0"],
        ["--variants", "confluent"],
        ["--variants", "aiokafka,aiokafka"],
        ["--rtt-ms", "-1"],
        ["--protocol", "SASL_PLAINTEXT"],
    ],
)
def test_bad_arguments_exit_2_saying_why(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(argv)
    assert exited.value.code == 2
    assert "error: argument" in capsys.readouterr().err


def test_the_defaults_are_200_starts_into_reports_serverless() -> None:
    args = parser().parse_args([])
    assert (args.starts, str(args.out), args.protocol, args.rtt_ms) == (
        200,
        "reports/serverless",
        "SASL_SSL",
        0.0,
    )
    assert args.variants == ("aiokafka", "proposed", "java-4.4.0", "java-4.3.1-patched")
