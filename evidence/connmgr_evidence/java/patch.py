"""kafka-clients 4.3.1 with the project's patch: build it and run Kafka's own tests against it.

The Maven module ``benchmarks/kafka-clients-patch`` (see its README) unpacks the release's
sources jar, applies the project's diffs (``patches/*.diff``; ``switches-on/*.diff`` on top
flips every new configuration's default to on), compiles the touched files over the released
classes and runs Kafka's compiled tests from the release's test jar, and the project's own
tests, against the result. This module runs that build for one :class:`Variant` and reads
surefire's reports into :class:`TestCounts`, so tests and CI can assert on them::

    run = run_patch_tests(Variant.SWITCHES_ON, tests=("NetworkClientTest", "Connmgr*Test"))
    assert run.total.failed == 0

CLI: ``python -m connmgr_evidence.java.patch [--variant all] [--tests A,B] [--json]``.

Nothing goes into the repository: Maven keeps artifacts in ``~/.m2`` and each variant builds
in :func:`build_dir` (``$XDG_CACHE_HOME`` or ``~/.cache``, then
``connmgr/kafka-clients-patch/<variant>/target``). Maven runs on every call (the tests are
the point); a warm run only skips the downloads and the unpacking, and only when the module's
inputs are those the directory was built from (:func:`build_dir_for` empties it otherwise and
keeps two processes out of one variant's directory).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final

from connmgr_evidence.java.errors import JavaBuildError, JavaToolError, output_tail, strip_ansi
from connmgr_evidence.java.patched import (
    KAFKA_VERSION,
    PATCHED_SUFFIX,
    SWITCHES,
    Variant,
    build_dir,
    build_dir_for,
    build_patched_client,
    default_module_dir,
    maven_command,
    module_fingerprint,
)
from connmgr_evidence.java.tools import JavaTools, find_tools, run_maven

__all__ = [
    "KAFKA_TEST_CLASSES",
    "KAFKA_VERSION",
    "KNOWN_FLAKY",
    "OWN_TEST_PATTERN",
    "PATCHED_SUFFIX",
    "SWITCHES",
    "PatchRun",
    "TestCounts",
    "Variant",
    "build_dir",
    "build_patched_client",
    "default_module_dir",
    "main",
    "passed_again",
    "read_reports",
    "rerun_patterns",
    "run_patch_tests",
]


KAFKA_TEST_CLASSES: Final = (
    "NetworkClientTest",
    "ClusterConnectionStatesTest",
    "MetadataTest",
    "SenderTest",
    "RecordAccumulatorTest",
    "ConsumerNetworkClientTest",
    "NetworkClientDelegateTest",
    "CoordinatorRequestManagerTest",
    "KafkaAdminClientTest",
    "AdminMetadataManagerTest",
    "KafkaProducerTest",
    "KafkaConsumerTest",
    "AbstractCoordinatorTest",
    "EagerConsumerCoordinatorTest",
    "CooperativeConsumerCoordinatorTest",
    "TransactionManagerTest",
    "FetcherTest",
    "FetchRequestManagerTest",
    "RequestManagersTest",
    "AsyncKafkaConsumerTest",
)
"""Kafka's test classes of the code the patch touches (the pom's default ``kafka.tests``).
``ConsumerCoordinatorTest`` is abstract: its two concrete subclasses run it."""

OWN_TEST_PATTERN: Final = "Connmgr*Test"
"""The project's own tests (``src/test/java``); none exist in the stock variant."""

_PROFILES: Final[Mapping[Variant, str | None]] = MappingProxyType(
    {Variant.STOCK: "stock", Variant.DEFAULTS: None, Variant.SWITCHES_ON: "switches-on"}
)


@dataclass(frozen=True, slots=True)
class TestCounts:
    """Surefire's counts for one test class, or summed over several."""

    __test__ = False  # not a pytest class

    tests: int
    failures: int
    errors: int
    skipped: int
    flaky: tuple[str, ...] = ()
    """Tests (``Class.method``) that failed once and passed when run again."""
    failing: tuple[str, ...] = ()
    """Tests (``Class.method``) that failed or erred in this run."""

    @property
    def failed(self) -> int:
        """Failures plus errors: what must be 0."""
        return self.failures + self.errors

    def __add__(self, other: TestCounts) -> TestCounts:
        return TestCounts(
            self.tests + other.tests,
            self.failures + other.failures,
            self.errors + other.errors,
            self.skipped + other.skipped,
            self.flaky + other.flaky,
            self.failing + other.failing,
        )

    def passed_again(self, tests: frozenset[str]) -> TestCounts:
        """These counts with those of ``tests`` that failed here counted as flakes: they
        failed once and passed when run again."""
        again = tuple(t for t in self.failing if t in tests)
        if not again:
            return self
        # ``failing`` does not say which of a failure or an error each was: failures go
        # first; the total (what must be 0) is exact either way.
        from_failures = min(len(again), self.failures)
        failures = self.failures - from_failures
        errors = self.errors - (len(again) - from_failures)
        rest = tuple(t for t in self.failing if t not in tests)
        return TestCounts(self.tests, failures, errors, self.skipped, self.flaky + again, rest)


@dataclass(frozen=True, slots=True)
class PatchRun:
    """One Maven run of the module: the counts per test class (fully qualified name), how
    long the whole command took, whether Maven exited 0, and where its log and jar are."""

    variant: Variant
    by_class: Mapping[str, TestCounts]
    seconds: float
    succeeded: bool
    log: Path
    jar: Path

    @property
    def unexpected_flakes(self) -> tuple[str, ...]:
        """Flakes of tests not in :data:`KNOWN_FLAKY` (the project's own tests never are)."""
        return tuple(t for t in self.total.flaky if t not in KNOWN_FLAKY)

    @property
    def total(self) -> TestCounts:
        """The counts summed over every class that ran."""
        total = TestCounts(0, 0, 0, 0)
        for counts in self.by_class.values():
            total = total + counts
        return total


KNOWN_FLAKY: Final[Mapping[str, str]] = MappingProxyType(
    {
        "org.apache.kafka.clients.consumer.internals.ConsumerNetworkClientTest"
        ".testFutureCompletionOutsidePoll": (
            "KAFKA-17554: three threads race on MockClient's wakeup (apache/kafka#17217, "
            "#18138 disabled it for a while, #18298); uses MockClient only, none of the "
            "patched code. Here it failed in 2 whole-suite CI runs (switches-on both times) "
            "and in none of 9 runs of its class alone, 5 of them on a loaded machine."
        ),
    }
)
"""Kafka tests known upstream to fail now and then whatever the code under test: a flake of
one of these is accepted: when only known flakes failed, :func:`run_patch_tests` runs them once
more, and those that pass count as flakes, not failures. Any other failure is never rerun."""


def read_reports(reports: Path) -> dict[str, TestCounts]:
    """Surefire's ``TEST-*.xml`` files in ``reports``: counts per test class, and the tests
    that failed or erred."""
    counts: dict[str, TestCounts] = {}
    for path in sorted(reports.glob("TEST-*.xml")):
        suite = ET.parse(path).getroot()
        name = suite.get("name", path.stem[5:])
        failing = tuple(
            f"{case.get('classname', name)}.{case.get('name')}"
            for case in suite.iter("testcase")
            if case.find("failure") is not None or case.find("error") is not None
        )
        counts[name] = TestCounts(
            int(suite.get("tests", "0")),
            int(suite.get("failures", "0")),
            int(suite.get("errors", "0")),
            int(suite.get("skipped", "0")),
            failing=failing,
        )
    return counts


def run_patch_tests(
    variant: Variant,
    tests: Sequence[str] | None = None,
    *,
    module_dir: Path | None = None,
    tools: JavaTools | None = None,
    timeout_s: float = 1800.0,
) -> PatchRun:
    """Build ``variant`` and run ``tests`` (surefire ``-Dtest`` patterns: simple class names
    or globs; default :data:`KAFKA_TEST_CLASSES` plus :data:`OWN_TEST_PATTERN`, the latter
    dropped for :attr:`Variant.STOCK`) with ``mvn -B -T 1 verify``.

    Test failures do not raise: they are in the returned counts (``succeeded`` is False).
    Raises :class:`JavaToolError` if java/mvn are missing and :class:`JavaBuildError` if
    Maven fails without running any test (a diff that no longer applies, a compile error)
    or exceeds ``timeout_s``.
    """
    tools = tools or find_tools()
    module_dir = module_dir or default_module_dir()
    if not (module_dir / "pom.xml").is_file():
        raise JavaToolError(f"no pom.xml in {module_dir} (expected the kafka-clients-patch module)")
    selected = list(tests) if tests is not None else list(KAFKA_TEST_CLASSES)
    if tests is None and variant is not Variant.STOCK:
        selected.append(OWN_TEST_PATTERN)
    fingerprint = module_fingerprint(module_dir, tools)
    started = time.monotonic()
    with build_dir_for(build_dir(variant), fingerprint, timeout_s) as target:
        return _run_in(tools, module_dir, variant, target, selected, timeout_s, started)


def _run_in(
    tools: JavaTools,
    module_dir: Path,
    variant: Variant,
    target: Path,
    selected: Sequence[str],
    timeout_s: float,
    started: float,
) -> PatchRun:
    """:func:`run_patch_tests` in a build directory it holds."""
    done, output, by_class = _verify(tools, module_dir, variant, target, selected, timeout_s)
    log = target.parent / "maven.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(output, encoding="utf-8")
    if not by_class:
        raise JavaBuildError(
            f"Maven (exit {done.returncode}) ran no test for the {variant.value} variant "
            f"(tests {selected})\n{output_tail(output)}"
        )
    failing = [t for c in by_class.values() for t in c.failing]
    if failing and all(t in KNOWN_FLAKY for t in failing):
        # Only known flakes failed: run just them once more (as Kafka's CI retries); those
        # that pass are flakes, the counts otherwise those of the first run.
        again = rerun_patterns(failing)
        _, rerun_output, rerun = _verify(tools, module_dir, variant, target, again, timeout_s)
        (target.parent / "maven-rerun.log").write_text(rerun_output, encoding="utf-8")
        passed = frozenset(passed_again(failing, rerun))
        by_class = {name: c.passed_again(passed) for name, c in by_class.items()}
    seconds = time.monotonic() - started
    jar = target / f"kafka-clients-patched-{KAFKA_VERSION}-{variant.value}.jar"
    failed = sum(c.failed for c in by_class.values())
    return PatchRun(
        variant=variant,
        by_class=MappingProxyType(by_class),
        seconds=seconds,
        # Only known flakes are ever rerun, so a flake here is one of them.
        succeeded=done.returncode == 0 and failed == 0,
        log=log,
        jar=jar,
    )


def rerun_patterns(failing: Sequence[str]) -> list[str]:
    """Surefire ``-Dtest`` patterns (``SimpleClass#method``) that run ``failing`` again: a
    parameterized test's invocation suffix (``(boolean)[1]``) is dropped, so every invocation
    of that method runs."""
    patterns: dict[str, None] = {}
    for test in failing:
        bare = test.split("(", 1)[0]
        cls, method = bare.rsplit(".", 1)
        patterns[f"{cls.rsplit('.', 1)[-1]}#{method}"] = None
    return list(patterns)


def passed_again(failing: Sequence[str], rerun: Mapping[str, TestCounts]) -> tuple[str, ...]:
    """Of ``failing``, those whose method ran in ``rerun`` (per-class counts of the rerun)
    and did not fail there."""
    still = {t.split("(", 1)[0] for c in rerun.values() for t in c.failing}
    return tuple(
        t
        for t in failing
        if t.split("(", 1)[0] not in still and rerun.get(t.split("(", 1)[0].rsplit(".", 1)[0])
    )


def _verify(
    tools: JavaTools,
    module_dir: Path,
    variant: Variant,
    target: Path,
    tests: Sequence[str],
    timeout_s: float,
) -> tuple[subprocess.CompletedProcess[str], str, dict[str, TestCounts]]:
    """``mvn verify`` of ``variant`` running ``tests``: Maven's result, its output, and the
    surefire counts of this run alone."""
    reports = target / "surefire-reports"
    # Reports of an earlier run with other classes would be counted as this run's.
    shutil.rmtree(reports, ignore_errors=True)
    command = maven_command(
        tools,
        module_dir,
        target,
        f"-Dtest={','.join(tests)}",
        "-Dmaven.test.failure.ignore=true",
    )
    profile = _PROFILES[variant]
    if profile is not None:
        command.append(f"-P{profile}")
    command.append("verify")
    done = run_maven(tools, command, timeout_s=timeout_s, doing=f"the {variant.value} build")
    target.mkdir(parents=True, exist_ok=True)
    return done, strip_ansi(done.stdout + done.stderr), read_reports(reports)


def _table(run: PatchRun) -> str:
    lines = [f"{run.variant.value}: {run.seconds:.1f} s, log {run.log}"]
    for name, c in sorted(run.by_class.items()):
        short = name.rsplit(".", 1)[-1]
        lines.append(f"  {short:<40} {c.tests:>5} run {c.failed:>3} failed {c.skipped:>3} skipped")
    t = run.total
    lines.append(f"  {'total':<40} {t.tests:>5} run {t.failed:>3} failed {t.skipped:>3} skipped")
    lines += [
        f"  flaky (passed on the rerun): {test}"
        + ("" if test in KNOWN_FLAKY else " -- NOT a known Kafka flake")
        for test in t.flaky
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: run the variants, print their counts (or JSON); exit 1 if any test failed."""
    parser = argparse.ArgumentParser(
        prog="python -m connmgr_evidence.java.patch",
        description="Build kafka-clients 4.3.1 with the project's patch and run Kafka's tests.",
    )
    parser.add_argument(
        "--variant",
        choices=[v.value for v in Variant] + ["all"],
        default="all",
        help="which client to test (default: all three, stock first)",
    )
    parser.add_argument(
        "--tests", help="comma-separated surefire test patterns (default: the touched classes)"
    )
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)
    variants = list(Variant) if args.variant == "all" else [Variant(args.variant)]
    tests = args.tests.split(",") if args.tests else None
    runs = [run_patch_tests(v, tests) for v in variants]
    if args.json:
        out = [
            {
                "variant": r.variant.value,
                "seconds": round(r.seconds, 1),
                "succeeded": r.succeeded,
                "total": asdict(r.total),
                "by_class": {k: asdict(v) for k, v in sorted(r.by_class.items())},
            }
            for r in runs
        ]
        print(json.dumps(out, indent=2))
    else:
        print("\n".join(_table(r) for r in runs))
    return 0 if all(r.succeeded for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
