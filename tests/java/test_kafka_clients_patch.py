"""kafka-clients 4.3.1 with the project's patch passes Kafka's own tests and the project's.

Builds ``benchmarks/kafka-clients-patch`` (:mod:`connmgr_evidence.java.patch`) with the new
configurations at their defaults and again with every one defaulted on, and runs the fast
test classes of the code the patch touches, from Kafka's 4.3.1 test jar, plus the project's
own ``Connmgr*Test`` classes. The counts per Kafka class are those the unpatched release gives
(measured, docs/kafka-clients-patch.md): the patch neither loses nor adds a Kafka test, and
none fails. The slower classes (KafkaAdminClientTest, KafkaProducerTest, KafkaConsumerTest,
RecordAccumulatorTest, EagerConsumerCoordinatorTest, CooperativeConsumerCoordinatorTest,
AsyncKafkaConsumerTest) run in
``python -m connmgr_evidence.java.patch``, not here.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final

import pytest

from connmgr_evidence.java import patch
from connmgr_evidence.java.patch import (
    KNOWN_FLAKY,
    OWN_TEST_PATTERN,
    PatchRun,
    TestCounts,
    Variant,
    read_reports,
    run_patch_tests,
)
from connmgr_evidence.java.patched import INPUTS_STAMP, build_dir_for, module_fingerprint
from connmgr_evidence.java.tools import JavaTools

STOCK_COUNTS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "org.apache.kafka.clients.NetworkClientTest": 41,
        "org.apache.kafka.clients.ClusterConnectionStatesTest": 15,
        "org.apache.kafka.clients.MetadataTest": 29,
        "org.apache.kafka.clients.producer.internals.SenderTest": 77,
        "org.apache.kafka.clients.consumer.internals.ConsumerNetworkClientTest": 19,
        "org.apache.kafka.clients.consumer.internals.NetworkClientDelegateTest": 14,
        "org.apache.kafka.clients.consumer.internals.CoordinatorRequestManagerTest": 10,
        "org.apache.kafka.clients.admin.internals.AdminMetadataManagerTest": 7,
        "org.apache.kafka.clients.consumer.internals.AbstractCoordinatorTest": 53,
        "org.apache.kafka.clients.producer.internals.TransactionManagerTest": 160,
        "org.apache.kafka.clients.consumer.internals.FetcherTest": 89,
        "org.apache.kafka.clients.consumer.internals.FetchRequestManagerTest": 99,
        "org.apache.kafka.clients.consumer.internals.RequestManagersTest": 2,
    }
)
"""Tests each Kafka class runs against the unpatched 4.3.1 (all pass there)."""

OWN_COUNTS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "org.apache.kafka.clients.ConnmgrBootstrapConnectionCloseTest": 9,
        "org.apache.kafka.clients.ConnmgrBootstrapSecondDialTest": 12,
        "org.apache.kafka.clients.ConnmgrConnectionRoleMetricsTest": 6,
        "org.apache.kafka.clients.ConnmgrDnsRefreshTest": 11,
        "org.apache.kafka.clients.ConnmgrEndpointChangeRetireTest": 14,
        "org.apache.kafka.clients.ConnmgrConnectionCloseReasonTest": 10,
        "org.apache.kafka.clients.ConnmgrCoordinatorIdsTest": 7,
        "org.apache.kafka.clients.ConnmgrConnectionsLingerTest": 20,
        "org.apache.kafka.clients.ConnmgrInternalDialsTest": 7,
        "org.apache.kafka.clients.ConnmgrConnectionManagementOptionsTest": 5,
        "org.apache.kafka.clients.admin.ConnmgrAdminConnectionNeedsTest": 2,
        "org.apache.kafka.clients.consumer.internals.ConnmgrCoordinatorEndpointChangeTest": 12,
        "org.apache.kafka.clients.producer.internals.ConnmgrTransactionCoordinatorEndpointTest": 3,
        "org.apache.kafka.clients.producer.internals.ConnmgrProducerConnectionNeedsTest": 4,
        "org.apache.kafka.clients.consumer.internals.ConnmgrConsumerConnectionNeedsTest": 8,
        "org.apache.kafka.clients.ConnmgrOptionsOffTest": 4,
        "org.apache.kafka.clients.producer.internals.ConnmgrProducerOptionsOffTest": 1,
        "org.apache.kafka.clients.consumer.internals.ConnmgrConsumerOptionsOffTest": 2,
        "org.apache.kafka.clients.ConnmgrPollPathCostsTest": 7,
    }
)
"""The project's own test classes and their test counts."""

TESTS: Final = (*(name.rsplit(".", 1)[-1] for name in STOCK_COUNTS), OWN_TEST_PATTERN)


@pytest.mark.java
@pytest.mark.parametrize("variant", [Variant.DEFAULTS, Variant.SWITCHES_ON], ids=lambda v: v.value)
def test_patched_client_passes_kafkas_tests_and_ours(variant: Variant) -> None:
    run: PatchRun = run_patch_tests(variant, TESTS)
    print(f"\n{variant.value}: {run.total} in {run.seconds:.1f} s")
    failing = {name: c for name, c in run.by_class.items() if c.failed}
    assert not failing, f"failing classes: {failing}; Maven log: {run.log}"
    # A test that passed only when run again must be a flake Kafka knows of.
    assert run.unexpected_flakes == (), f"flaky: {run.unexpected_flakes}; Maven log: {run.log}"
    assert {name: c.tests for name, c in run.by_class.items()} == {**STOCK_COUNTS, **OWN_COUNTS}
    assert run.total.skipped == 0
    assert run.succeeded
    assert run.jar.is_file()


def test_read_reports_counts_each_suite(tmp_path: Path) -> None:
    (tmp_path / "TEST-a.B.xml").write_text(
        '<?xml version="1.0"?><testsuite name="a.B" tests="5" failures="1" errors="2" '
        'skipped="1"><testcase name="x"/></testsuite>',
        encoding="utf-8",
    )
    (tmp_path / "TEST-a.C.xml").write_text(
        '<testsuite name="a.C" tests="3" failures="0" errors="0" skipped="0"/>', encoding="utf-8"
    )
    (tmp_path / "a.B.txt").write_text("not a report", encoding="utf-8")
    (tmp_path / "TEST-a.D.xml").write_text(
        '<testsuite name="a.D" tests="3" failures="1" errors="1" skipped="0">'
        '<testcase classname="a.D" name="once"><failure message="x"/></testcase>'
        '<testcase classname="a.D" name="twice"><error message="y"/></testcase>'
        '<testcase classname="a.D" name="fine"/></testsuite>',
        encoding="utf-8",
    )
    counts = read_reports(tmp_path)
    assert counts["a.B"] == TestCounts(5, 1, 2, 1)
    assert counts["a.C"] == TestCounts(3, 0, 0, 0)
    assert counts["a.D"] == TestCounts(3, 1, 1, 0, failing=("a.D.once", "a.D.twice"))
    assert counts["a.B"].failed == 3
    assert (counts["a.B"] + counts["a.C"]).tests == 8
    # Passing when run again makes a failure a flake; the other failure stays.
    once = counts["a.D"].passed_again(frozenset({"a.D.once"}))
    assert once == TestCounts(3, 0, 1, 0, ("a.D.once",), ("a.D.twice",))
    assert once.failed == 1
    both = counts["a.D"].passed_again(frozenset({"a.D.once", "a.D.twice"}))
    assert both.failed == 0 and both.flaky == ("a.D.once", "a.D.twice")


def test_only_a_known_kafka_flake_is_accepted(tmp_path: Path) -> None:
    known = next(iter(KNOWN_FLAKY))
    cls = known.rsplit(".", 1)[0]

    def run(*flaky: str) -> PatchRun:
        counts = TestCounts(19, 0, 0, 0, flaky)
        return PatchRun(Variant.SWITCHES_ON, {cls: counts}, 1.0, True, tmp_path, tmp_path)

    assert run(known).unexpected_flakes == ()
    other = f"{cls}.testDisconnectWakesUpPoll"
    assert run(known, other).unexpected_flakes == (other,)


def _fake_verify(
    monkeypatch: pytest.MonkeyPatch, runs: list[dict[str, TestCounts]]
) -> list[list[str]]:
    """Replace the Maven step by ``runs`` in order; return the tests each call asked for."""
    asked: list[list[str]] = []

    def verify(*args: object) -> tuple[object, str, dict[str, TestCounts]]:
        asked.append(list(args[4]))  # type: ignore[call-overload]
        return subprocess.CompletedProcess([], 0), "", runs[len(asked) - 1]

    monkeypatch.setattr(patch, "_verify", verify)
    return asked


def test_only_known_flakes_are_run_again_and_a_pass_makes_them_flakes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _module(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tools = JavaTools(tmp_path / "java", tmp_path / "mvn", 17)
    known = next(iter(KNOWN_FLAKY))
    cls, method = known.rsplit(".", 1)
    first = {cls: TestCounts(19, 1, 0, 0, failing=(known,)), "x.Own": TestCounts(7, 0, 0, 0)}

    asked = _fake_verify(monkeypatch, [first, {cls: TestCounts(1, 0, 0, 0)}])
    run = run_patch_tests(Variant.SWITCHES_ON, ("A",), module_dir=tmp_path, tools=tools)
    assert asked == [["A"], [f"{cls.rsplit('.', 1)[-1]}#{method}"]]
    assert run.succeeded and run.total.failed == 0 and run.total.tests == 26
    assert run.total.flaky == (known,) and run.unexpected_flakes == ()

    # Failing again is a failure.
    asked = _fake_verify(monkeypatch, [first, {cls: TestCounts(1, 1, 0, 0, failing=(known,))}])
    run = run_patch_tests(Variant.SWITCHES_ON, ("A",), module_dir=tmp_path, tools=tools)
    assert len(asked) == 2 and not run.succeeded and run.total.failed == 1

    # Another test failing beside it: nothing is run again.
    other = f"{cls}.testDisconnectWakesUpPoll"
    both = {cls: TestCounts(19, 2, 0, 0, failing=(known, other))}
    asked = _fake_verify(monkeypatch, [both])
    run = run_patch_tests(Variant.SWITCHES_ON, ("A",), module_dir=tmp_path, tools=tools)
    assert len(asked) == 1 and not run.succeeded and run.total.failed == 2


def _module(root: Path) -> Path:
    """A minimal stand-in for the module: what :func:`module_fingerprint` reads."""
    for name, text in {
        "pom.xml": "<project/>",
        "apply-patches.sh": "#!/bin/sh\n",
        "patches/0001-a.diff": "--- a\n",
        "patches/0002-b.diff": "--- b\n",
        "switches-on/0001-on.diff": "--- on\n",
        "src/test/java/OwnTest.java": "class OwnTest {}\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_a_build_directory_from_other_inputs_is_emptied_first(tmp_path: Path) -> None:
    """A series that touches fewer files must not build over the last series' classes: the
    variant's directory is emptied when the module's inputs changed, kept when they did not."""
    tools = JavaTools(java=Path("/usr/bin/java"), mvn=Path("/usr/bin/mvn"), java_version=17)
    module = _module(tmp_path / "module")
    target = tmp_path / "cache" / "defaults" / "target"
    first = module_fingerprint(module, tools)
    with build_dir_for(target, first, timeout_s=5) as held:
        (held / "classes").mkdir(parents=True)
        (held / "classes" / "FromTheLongerSeries.class").write_bytes(b"\xca\xfe")
    with build_dir_for(target, module_fingerprint(module, tools), timeout_s=5) as held:
        assert (held / "classes" / "FromTheLongerSeries.class").is_file()
    (module / "patches" / "0002-b.diff").unlink()
    second = module_fingerprint(module, tools)
    assert second != first
    with build_dir_for(target, second, timeout_s=5) as held:
        assert not (held / "classes").exists()
    assert (target / INPUTS_STAMP).read_text(encoding="utf-8") == second


@pytest.mark.parametrize(
    "changed",
    ["pom.xml", "patches/0001-a.diff", "switches-on/0001-on.diff", "src/test/java/OwnTest.java"],
)
def test_every_input_of_the_module_moves_its_fingerprint(tmp_path: Path, changed: str) -> None:
    tools = JavaTools(java=Path("/usr/bin/java"), mvn=Path("/usr/bin/mvn"), java_version=17)
    module = _module(tmp_path)
    before = module_fingerprint(module, tools)
    (module / changed).write_text("changed\n", encoding="utf-8")
    assert module_fingerprint(module, tools) != before


def test_a_second_process_waits_for_the_variant_directory(tmp_path: Path) -> None:
    """Two checkouts building one variant at once would mix their classes: the second waits."""
    target = tmp_path / "defaults" / "target"
    with build_dir_for(target, "a", timeout_s=5):
        waiter = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path\n"
                "from connmgr_evidence.java.patched import build_dir_for\n"
                "with build_dir_for(Path(sys.argv[1]), 'b', timeout_s=0.3): pass",
                str(target),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    assert waiter.returncode != 0
    assert "waiting for the build lock" in waiter.stderr
