"""Kafka's whole ``org.apache.kafka.clients`` test package against stock and patched 4.3.1.

CI runs Kafka's tests of the classes the patch touches
(:data:`connmgr_evidence.java.patch.KAFKA_TEST_CLASSES`). Most of those classes drive
``MockClient``,
which runs none of the new ``NetworkClient`` code, so this benchmark command (not CI: it takes
an hour or more) runs every test class of the package and its subpackages from the release's
test jar -- 161 classes -- on the three variants, stock first, and compares what failed: a
patched variant passes when the tests that failed in it are the same set as stock's (Kafka's
tests include a few that need files the test jar does not ship, which fail on stock as well).

CLI: ``python -m connmgr_evidence.bench.packagecounts [--out reports/kafka-clients-package]``:
writes
``counts.json`` (per variant: totals, per-class counts, failing tests) and ``index.md``; exit 0
when neither patched variant fails a test stock passes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from connmgr_evidence.bench.results.rows import git_commit
from connmgr_evidence.java.patch import (
    OWN_TEST_PATTERN,
    PatchRun,
    TestCounts,
    Variant,
    passed_again,
    read_reports,
    rerun_patterns,
    run_patch_tests,
)

__all__ = [
    "PACKAGE_PATTERN",
    "Comparison",
    "VariantCounts",
    "compare",
    "exit_status",
    "from_reports",
    "main",
    "render",
    "rerun",
]

PACKAGE_PATTERN: Final = "org/apache/kafka/clients/**/*Test"
"""Surefire's ``-Dtest`` pattern for every test class in the package and its subpackages."""

OWN_PREFIX: Final = OWN_TEST_PATTERN.split("*", 1)[0]
"""Simple-name prefix of the project's own test classes (in the package too; not Kafka's)."""


@dataclass(frozen=True, slots=True)
class VariantCounts:
    """One variant's whole-package run: Kafka's tests and the project's, counted apart."""

    variant: str
    seconds: float
    kafka: TestCounts
    own: TestCounts
    classes: int
    """Kafka test classes that reported at least one test."""
    failing: tuple[str, ...]
    """Kafka tests (``Class.method``) that failed or erred, sorted."""
    passed_on_rerun: tuple[str, ...] = ()
    """Of :attr:`failing`, those that passed when run again alone (see :func:`rerun`)."""

    @property
    def failing_twice(self) -> tuple[str, ...]:
        """:attr:`failing` less those that passed on a rerun: what the comparison holds."""
        again = set(self.passed_on_rerun)
        return tuple(t for t in self.failing if t not in again)

    @classmethod
    def of(cls, run: PatchRun) -> VariantCounts:
        kafka, own = TestCounts(0, 0, 0, 0), TestCounts(0, 0, 0, 0)
        classes = 0
        for name, counts in run.by_class.items():
            if name.rsplit(".", 1)[-1].startswith(OWN_PREFIX):
                own = own + counts
            else:
                kafka = kafka + counts
                classes += counts.tests > 0
        failing = tuple(sorted(kafka.failing))
        return cls(run.variant.value, run.seconds, kafka, own, classes, failing)


@dataclass(frozen=True, slots=True)
class Comparison:
    """A patched variant's failing Kafka tests set against stock's."""

    variant: str
    new_failures: tuple[str, ...]
    """Failed here, passed (or did not fail) on stock: must be empty."""
    fixed: tuple[str, ...]
    """Failed on stock, not here."""
    ran_difference: int
    """Kafka tests run here minus stock's (0 when both ran the same tests)."""


def compare(stock: VariantCounts, patched: VariantCounts) -> Comparison:
    """``patched``'s failures against ``stock``'s (tests that failed and failed again on a
    rerun: a test that passed when run again is a flake in either variant)."""
    before, after = set(stock.failing_twice), set(patched.failing_twice)
    return Comparison(
        patched.variant,
        tuple(sorted(after - before)),
        tuple(sorted(before - after)),
        patched.kafka.tests - stock.kafka.tests,
    )


def render(counts: Sequence[VariantCounts], meta: Mapping[str, Any]) -> str:
    """The report's ``index.md``: totals per variant, then each patched variant against stock."""
    lines = [
        "# Kafka's whole `org.apache.kafka.clients` test package: stock and patched 4.3.1",
        "",
        f"Commit {meta['commit']}, {meta['date']}, `{meta['pattern']}` from "
        "`kafka-clients-4.3.1-test.jar`; written by "
        "`python -m connmgr_evidence.bench.packagecounts`.",
        "",
        "| variant | Kafka test classes | Kafka tests run | failed | skipped | project's own tests "
        "(failed) | minutes |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in counts:
        lines.append(
            f"| {c.variant} | {c.classes} | {c.kafka.tests:,} | {c.kafka.failed} | "
            f"{c.kafka.skipped} | {c.own.tests} ({c.own.failed}) | {c.seconds / 60:.1f} |"
        )
    stock = next((c for c in counts if c.variant == Variant.STOCK.value), None)
    if stock is not None:
        lines += ["", "Failing on stock (the baseline; failed again when rerun alone):", ""]
        lines += [f"- `{t}`" for t in stock.failing_twice] or ["- none"]
        for patched in counts:
            if patched is stock:
                lines += [
                    f"- failed once, passed when rerun alone: `{t}`" for t in stock.passed_on_rerun
                ]
                continue
            cmp = compare(stock, patched)
            verdict = "the same set as stock's" if not cmp.new_failures else "NOT stock's set"
            lines += [
                "",
                f"**{patched.variant}**: failing tests are {verdict}; "
                f"{cmp.ran_difference:+d} Kafka tests run against stock.",
            ]
            lines += [f"- new failure: `{t}`" for t in cmp.new_failures]
            lines += [
                f"- failed once, passed when rerun alone: `{t}`" for t in patched.passed_on_rerun
            ]
            lines += [f"- passes here, fails on stock: `{t}`" for t in cmp.fixed]
    return "\n".join(lines) + "\n"


def _as_json(c: VariantCounts) -> dict[str, Any]:
    def totals(t: TestCounts) -> dict[str, int]:
        return {"tests": t.tests, "failed": t.failed, "skipped": t.skipped}

    return {
        "variant": c.variant,
        "seconds": round(c.seconds, 1),
        "classes": c.classes,
        "kafka": totals(c.kafka),
        "own": totals(c.own),
        "failing": list(c.failing),
        "passed_on_rerun": list(c.passed_on_rerun),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: run the package on each variant, write the report; exit 1 if a patched variant
    fails a Kafka test that passed on stock."""
    parser = argparse.ArgumentParser(
        prog="python -m connmgr_evidence.bench.packagecounts",
        description=(
            "Run Kafka's whole org.apache.kafka.clients test package (161 classes of the "
            "4.3.1 test jar) against stock, patched (defaults) and patched (switches on) "
            "kafka-clients 4.3.1, and compare the failing tests with stock's. Takes an hour or "
            "more; a benchmark, not CI."
        ),
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("reports/kafka-clients-package"),
        help="report directory (default: reports/kafka-clients-package)",
    )
    parser.add_argument(
        "--variants",
        default=",".join(v.value for v in Variant),
        help="comma-separated variants, stock first (default: stock,defaults,switches-on)",
    )
    parser.add_argument(
        "--reports",
        action="append",
        default=[],
        metavar="VARIANT=DIR",
        help=(
            "read VARIANT's counts from the surefire-reports directory of an earlier run of this "
            "command (same module state) instead of running it; its maven.log, if beside the "
            "reports, gives the time. Repeatable"
        ),
    )
    parser.add_argument(
        "--no-rerun",
        action="store_true",
        help="do not run each variant's failing tests again alone (default: run them once more)",
    )
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=4 * 3600.0,
        help="Maven time limit per variant in seconds (default: 14400)",
    )
    args = parser.parse_args(argv)
    try:
        variants = [Variant(v) for v in args.variants.split(",")]
    except ValueError as exc:
        parser.error(f"--variants: {exc}")
    if args.timeout_s <= 0:
        parser.error("--timeout-s must be positive")
    counts: list[VariantCounts] = []
    given: dict[Variant, Path] = {}
    for item in args.reports:
        name, sep, directory = item.partition("=")
        try:
            variant = Variant(name)
        except ValueError:
            parser.error(f"--reports {item}: expected VARIANT=DIR with VARIANT one of the variants")
        if not sep or not any(Path(directory).glob("TEST-*.xml")):
            parser.error(f"--reports {item}: no TEST-*.xml in {directory!r}")
        given[variant] = Path(directory)
    for variant in list(given) + [v for v in variants if v not in given]:
        if variant in given:
            done = from_reports(variant, given[variant])
        else:
            run = run_patch_tests(variant, [PACKAGE_PATTERN], timeout_s=args.timeout_s)
            done = VariantCounts.of(run)
        if not args.no_rerun:
            done = rerun(done, args.timeout_s)
        counts.append(done)
        print(
            f"{variant.value}: {done.kafka.tests} Kafka tests, {done.kafka.failed} failed, "
            f"{len(done.passed_on_rerun)} of them passed when rerun",
            file=sys.stderr,
        )
    counts.sort(key=lambda c: list(Variant).index(Variant(c.variant)))
    meta = {
        "commit": git_commit(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "pattern": PACKAGE_PATTERN,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "counts.json").write_text(
        json.dumps({"meta": meta, "variants": [_as_json(c) for c in counts]}, indent=2) + "\n",
        encoding="utf-8",
    )
    (args.out / "index.md").write_text(render(counts, meta), encoding="utf-8")
    return exit_status(counts)


def rerun(counts: VariantCounts, timeout_s: float) -> VariantCounts:
    """``counts`` with its failing tests run once more, alone, on the same variant (as
    Kafka's own CI retries a failed test): those that pass are recorded as such."""
    if not counts.failing:
        return counts
    again = run_patch_tests(
        Variant(counts.variant), rerun_patterns(counts.failing), timeout_s=timeout_s
    )
    return replace(counts, passed_on_rerun=passed_again(counts.failing, again.by_class))


def from_reports(variant: Variant, reports: Path) -> VariantCounts:
    """``variant``'s counts read from the surefire reports of an earlier run; its time from the
    ``Total time:  M:SS min`` line of a ``maven.log`` in the same directory (0 without one)."""
    seconds = 0.0
    log = reports / "maven.log"
    if log.is_file():
        found = re.search(r"Total time:\s+(?:(\d+):)?(\d+(?:\.\d+)?)\s*(min|s)", log.read_text())
        if found:
            minutes, secs, unit = found.groups()
            seconds = (int(minutes or 0) * 60 + float(secs)) if unit == "min" else float(secs)
    by_class = read_reports(reports)
    run = PatchRun(variant, by_class, seconds, True, log, reports)
    return VariantCounts.of(run)


def exit_status(counts: Sequence[VariantCounts]) -> int:
    """1 when a patched variant fails a Kafka test that stock did not fail, else 0 (also
    when stock was not run: there is nothing to hold the others against)."""
    stock = next((c for c in counts if c.variant == Variant.STOCK.value), None)
    if stock is None:
        return 0
    return 1 if any(compare(stock, c).new_failures for c in counts if c is not stock) else 0


if __name__ == "__main__":
    sys.exit(main())
