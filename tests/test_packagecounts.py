"""The whole-package comparison of :mod:`connmgr_evidence.bench.packagecounts`, on made-up counts
(the runs themselves take an hour: a benchmark command, not CI)."""

from __future__ import annotations

from pathlib import Path

from connmgr_evidence.bench.packagecounts import (
    VariantCounts,
    compare,
    exit_status,
    from_reports,
    render,
)
from connmgr_evidence.java.patch import TestCounts, Variant, passed_again, rerun_patterns

META = {"commit": "abc1234", "date": "2026-11-29 02:00 UTC", "pattern": "p"}


def _counts(variant: str, tests: int, failing: tuple[str, ...]) -> VariantCounts:
    kafka = TestCounts(tests, len(failing), 0, 3, failing=failing)
    return VariantCounts(variant, 60.0, kafka, TestCounts(0, 0, 0, 0), 161, failing)


STOCK = _counts("stock", 5000, ("a.ConfigTest.needsFile",))


def test_the_same_failures_as_stock_pass() -> None:
    patched = _counts("defaults", 5000, ("a.ConfigTest.needsFile",))
    cmp = compare(STOCK, patched)
    assert (cmp.new_failures, cmp.fixed, cmp.ran_difference) == ((), (), 0)
    assert exit_status([STOCK, patched]) == 0
    assert "the same set as stock's" in render([STOCK, patched], META)


def test_a_failure_stock_does_not_have_fails_the_run() -> None:
    patched = _counts("switches-on", 5002, ("b.NetworkClientTest.x",))
    cmp = compare(STOCK, patched)
    assert cmp.new_failures == ("b.NetworkClientTest.x",)
    assert cmp.fixed == ("a.ConfigTest.needsFile",)
    assert cmp.ran_difference == 2
    assert exit_status([STOCK, _counts("defaults", 5000, STOCK.failing), patched]) == 1
    text = render([STOCK, patched], META)
    assert "NOT stock's set" in text and "- new failure: `b.NetworkClientTest.x`" in text
    assert "| switches-on | 161 | 5,002 | 1 | 3 | 0 (0) | 1.0 |" in text


def test_without_stock_there_is_nothing_to_fail() -> None:
    assert exit_status([_counts("defaults", 10, ("x.T.y",))]) == 0


def test_stock_is_read_from_an_earlier_runs_reports(tmp_path: Path) -> None:
    (tmp_path / "TEST-org.apache.kafka.clients.producer.ProducerConfigTest.xml").write_text(
        '<testsuite name="org.apache.kafka.clients.producer.ProducerConfigTest" tests="4" '
        'failures="1" errors="0" skipped="1"><testcase classname="org.apache.kafka.clients.'
        'producer.ProducerConfigTest" name="needsFile"><failure/></testcase></testsuite>'
    )
    (tmp_path / "maven.log").write_text("[INFO] Total time:  41:37 min\n")
    stock = from_reports(Variant.STOCK, tmp_path)
    assert (stock.variant, stock.kafka.tests, stock.kafka.failed, stock.classes) == (
        "stock",
        4,
        1,
        1,
    )
    assert stock.failing == ("org.apache.kafka.clients.producer.ProducerConfigTest.needsFile",)
    assert stock.seconds == 41 * 60 + 37


STICKY = "org.apache.kafka.clients.consumer.StickyAssignorTest"


def test_a_failure_that_passes_when_rerun_is_a_flake_not_a_new_failure() -> None:
    flaky = f"{STICKY}.testLargeAssignment(boolean)[1]"
    broken = "org.apache.kafka.clients.NetworkClientTest.testClose"
    assert rerun_patterns([flaky, f"{STICKY}.testLargeAssignment(boolean)[2]", broken]) == [
        "StickyAssignorTest#testLargeAssignment",
        "NetworkClientTest#testClose",
    ]
    rerun = {
        STICKY: TestCounts(2, 0, 0, 0),
        "org.apache.kafka.clients.NetworkClientTest": TestCounts(1, 1, 0, 0, failing=(broken,)),
    }
    assert passed_again([flaky, broken], rerun) == (flaky,)
    # A test whose class did not run again is not counted as passing.
    assert passed_again([flaky], {}) == ()
    patched = _counts("defaults", 5000, (*STOCK.failing, flaky, broken))
    patched = VariantCounts(
        patched.variant, 60.0, patched.kafka, patched.own, 161, patched.failing, (flaky,)
    )
    assert compare(STOCK, patched).new_failures == (broken,)
    assert "- failed once, passed when rerun alone: `" + flaky in render([STOCK, patched], META)
