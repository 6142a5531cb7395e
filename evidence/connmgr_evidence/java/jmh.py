"""JMH benchmarks of kafka-clients' poll path: the released 4.3.1 against the project's patch.

The Maven module ``benchmarks/kafka-clients-jmh`` holds one benchmark class,
``NetworkClientPollBenchmark``, compiled against the released client's public API, so the same
benchmark jar runs over any kafka-clients jar put on its class path. This module builds that
jar and the patched clients (``benchmarks/kafka-clients-patch``, ``mvn package -DskipTests``,
once with every new configuration at its default and once with ``-Pswitches-on``), then runs
JMH once per variant and round, the variants interleaved round by round (``stock, off, on``,
then ``off, on, stock``, ...) so a change in the machine's load falls on every variant alike,
each run with the same JVM flags and one fork per benchmark and parameter set. The forks of
all rounds are pooled per case and written as ``results.json`` and ``index.md``.

Three measures per case: JMH's score (wall-clock ns/op), the worker thread's CPU time per
operation (``cpu.time.norm``, the project's ``WorkerCpuProfiler``: on a shared machine the wall
clock also counts time spent waiting for a core) and allocation (``gc.alloc.rate.norm``, B/op,
JMH's ``-prof gc``). Each is a mean over every measured iteration of every fork with a 99.9 %
confidence half-width (Student's t, as JMH states its own errors); a ratio to stock carries the
half-widths of both ends (first-order propagation of the relative errors).

CLI: ``python -m connmgr_evidence.java.jmh [--rounds 3] [--out reports/jmh]``; ``--help`` lists the
rest.
It is not part of the test suite: it takes minutes and its figures are the machine's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from connmgr_evidence.java.errors import JavaBuildError, JavaToolError, output_tail, strip_ansi
from connmgr_evidence.java.jmhresults import (
    BASE_VARIANTS,
    Samples,
    parse_jmh_json,
    render_index,
    results_document,
    summarize,
)
from connmgr_evidence.java.patched import (
    INPUTS_STAMP,
    KAFKA_VERSION,
    Variant,
    build_dir_for,
    default_module_dir,
    maven_command,
    module_fingerprint,
)
from connmgr_evidence.java.tools import JavaTools, find_tools, run_maven

__all__ = [
    "BENCHMARK_CLASS",
    "BenchmarkBuild",
    "RunSettings",
    "build_benchmarks",
    "build_patched_variant",
    "interleaved",
    "main",
    "run_jmh",
]

BENCHMARK_CLASS: Final = "org.apache.kafka.jmh.connmgr.NetworkClientPollBenchmark"
CPU_PROFILER: Final = "org.apache.kafka.jmh.connmgr.WorkerCpuProfiler"

JVM_ARGS: Final = ("-Xms512m", "-Xmx512m")
"""The same heap for every fork of every variant, so that GC work is comparable."""


# -- building -----------------------------------------------------------------------------------


def default_jmh_module_dir() -> Path:
    """``benchmarks/kafka-clients-jmh`` of the source tree this package runs from."""
    # jmh.py -> java -> connmgr_evidence -> evidence -> repository root
    return Path(__file__).resolve().parents[3] / "benchmarks" / "kafka-clients-jmh"


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "connmgr" / "kafka-clients-jmh"


def _jmh_fingerprint(module_dir: Path, tools: JavaTools) -> str:
    h = hashlib.sha256()
    for part in ("kafka-clients-jmh-v1", str(tools.java.resolve()), str(tools.mvn)):
        h.update(part.encode() + b"\0")
    files = [
        module_dir / "pom.xml",
        *sorted(p for p in (module_dir / "src").rglob("*") if p.is_file()),
    ]
    for path in files:
        h.update(str(path.relative_to(module_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class BenchmarkBuild:
    """The benchmark jar, its dependency jars (not kafka-clients) and the released client."""

    jar: Path
    libs: tuple[Path, ...]
    stock_client: Path


def build_benchmarks(tools: JavaTools, module_dir: Path, timeout_s: float) -> BenchmarkBuild:
    """Builds ``benchmarks/kafka-clients-jmh`` (``mvn package``) in the cache, unless the
    cached build's inputs are the same. Raises :class:`JavaBuildError` if Maven fails."""
    fingerprint = _jmh_fingerprint(module_dir, tools)
    with build_dir_for(_cache_root() / "bench" / "target", fingerprint, timeout_s) as target:
        jar = target / "kafka-clients-jmh.jar"
        # build_dir_for emptied the directory unless its stamp names these inputs
        if not ((target / INPUTS_STAMP).is_file() and jar.is_file()):
            command = [
                str(tools.mvn),
                "-B",
                "-T",
                "1",
                "-ntp",
                "-Dstyle.color=never",
                "-f",
                str(module_dir / "pom.xml"),
                f"-Djmh.build.dir={target}",
                "package",
            ]
            done = run_maven(tools, command, timeout_s=timeout_s, doing="building the benchmarks")
            if done.returncode != 0 or not jar.is_file():
                raise JavaBuildError(
                    f"Maven failed (exit {done.returncode}) building the benchmarks: "
                    f"{' '.join(command)}\n{output_tail(strip_ansi(done.stdout + done.stderr))}"
                )
        libs = tuple(sorted((target / "lib").glob("*.jar")))
        stock = target / "stock" / f"kafka-clients-{KAFKA_VERSION}.jar"
    return BenchmarkBuild(jar, libs, stock)


def build_patched_variant(
    tools: JavaTools, module_dir: Path, variant: Variant, timeout_s: float
) -> Path:
    """The patched client of ``variant`` (``mvn -DskipTests package``, with ``-Pswitches-on``
    for that variant), built in the cache unless the cached build's inputs are the same.
    Raises :class:`JavaBuildError` if Maven fails."""
    if variant is Variant.STOCK:
        raise ValueError("the stock client is the released jar, not a build")
    fingerprint = module_fingerprint(module_dir, tools) + variant.value
    root = _cache_root() / f"patched-{variant.value}" / "target"
    with build_dir_for(root, fingerprint, timeout_s) as target:
        jar = target / f"kafka-clients-patched-{KAFKA_VERSION}-{variant.value}.jar"
        if not ((target / INPUTS_STAMP).is_file() and jar.is_file()):
            profile = ["-Pswitches-on"] if variant is Variant.SWITCHES_ON else []
            command = maven_command(tools, module_dir, target, "-DskipTests", *profile, "package")
            done = run_maven(
                tools, command, timeout_s=timeout_s, doing=f"building the {variant.value} client"
            )
            if done.returncode != 0 or not jar.is_file():
                raise JavaBuildError(
                    f"Maven failed (exit {done.returncode}) building the {variant.value} client: "
                    f"{' '.join(command)}\n{output_tail(strip_ansi(done.stdout + done.stderr))}"
                )
    return jar


# -- running ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSettings:
    """How long JMH measures: per fork, ``warmup`` then ``iterations`` iterations of
    ``seconds`` each; ``rounds`` forks per case, one per round."""

    rounds: int = 3
    warmup: int = 5
    iterations: int = 5
    seconds: int = 1
    benchmarks: str = BENCHMARK_CLASS


def interleaved(variants: Sequence[str], rounds: int) -> list[tuple[int, str]]:
    """(round, variant) in run order: every round runs every variant once, each round starting
    one variant later than the one before, so no variant always runs first or last."""
    n = len(variants)
    return [(r, variants[(r + i) % n]) for r in range(rounds) for i in range(n)]


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return math.nan


def run_jmh(
    tools: JavaTools,
    build: BenchmarkBuild,
    jars: Mapping[str, Path],
    settings: RunSettings,
    workdir: Path,
    log: Any = sys.stderr,
) -> tuple[Samples, list[float]]:
    """Runs JMH for every (round, variant) of :func:`interleaved`, the variant's jar alone on
    the class path as kafka-clients, and pools the results. Returns the samples and the load
    averages read before and after each JMH run. Raises :class:`JavaToolError` if a run fails
    (a benchmark's setup refuses a jar that is not the variant it is labelled)."""
    samples: Samples = {}
    loads: list[float] = []
    for rnd, variant in interleaved(list(jars), settings.rounds):
        out = workdir / f"round{rnd + 1}-{variant}.json"
        classpath = os.pathsep.join(str(p) for p in (build.jar, *build.libs, jars[variant]))
        command = [
            str(tools.java),
            *JVM_ARGS,
            "-cp",
            classpath,
            "org.openjdk.jmh.Main",
            settings.benchmarks,
            "-f",
            "1",
            "-wi",
            str(settings.warmup),
            "-w",
            f"{settings.seconds}s",
            "-i",
            str(settings.iterations),
            "-r",
            f"{settings.seconds}s",
            "-jvmArgs",
            " ".join(JVM_ARGS),
            "-p",
            f"variant={variant}",
            "-prof",
            "gc",
            "-prof",
            CPU_PROFILER,
            "-rf",
            "json",
            "-rff",
            str(out),
        ]
        loads.append(_load())
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        loads.append(_load())
        print(
            f"round {rnd + 1}/{settings.rounds} {variant}: exit {done.returncode}, "
            f"{time.monotonic() - started:.0f} s, load {loads[-1]:.1f}",
            file=log,
            flush=True,
        )
        if done.returncode != 0 or not out.is_file():
            raise JavaToolError(
                f"JMH failed for {variant} (exit {done.returncode}):\n"
                f"{output_tail(done.stdout + done.stderr)}"
            )
        parse_jmh_json(out.read_text(encoding="utf-8"), samples)
    return samples, loads


def _jvm_description(tools: JavaTools) -> str:
    done = subprocess.run(
        [str(tools.java), "-XshowSettings:properties", "-version"],
        capture_output=True,
        text=True,
        check=False,
    )
    props = {}
    for line in done.stderr.splitlines():
        if "=" in line:
            k, _, v = line.strip().partition("=")
            props[k.strip()] = v.strip()
    return (
        f"{props.get('java.vm.name', 'java')} {props.get('java.runtime.version', '?')} "
        f"({props.get('java.vm.vendor', '?')})"
    )


def _parse_extra(specs: Iterable[str]) -> dict[str, Path]:
    extra: dict[str, Path] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        kind = name.split("-", 1)[0]
        if not sep or kind not in BASE_VARIANTS or name in BASE_VARIANTS:
            raise SystemExit(
                f"--extra {spec!r}: want NAME=JAR with NAME a variant kind and a suffix, "
                "e.g. off-0013=/path/to/kafka-clients-patched.jar"
            )
        if not Path(path).is_file():
            raise SystemExit(f"--extra {spec!r}: no such file")
        extra[name] = Path(path).resolve()
    return extra


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: build, run, write ``index.md`` and ``results.json``; print the index."""
    parser = argparse.ArgumentParser(
        prog="python -m connmgr_evidence.java.jmh",
        description=(
            "Measure NetworkClient.poll with JMH: kafka-clients 4.3.1 as released (stock), "
            "patched with every switch off (off) and on (on), interleaved, and write "
            "index.md + results.json."
        ),
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parents[3] / "reports" / "jmh",
        help="where index.md and results.json go (default: reports/jmh of this tree)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="forks per case (default 3)")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up iterations (default 5)")
    parser.add_argument(
        "--iterations", type=int, default=5, help="measured iterations per fork (default 5)"
    )
    parser.add_argument("--seconds", type=int, default=1, help="seconds per iteration (default 1)")
    parser.add_argument(
        "--benchmarks",
        default=BENCHMARK_CLASS,
        help="JMH's benchmark selection regexp (default: the poll benchmark class)",
    )
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="NAME=JAR",
        help="one more client jar to run beside the three, named by its kind and a suffix "
        "(off-0013=..., on-0013=...): e.g. a build of an earlier patch series",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds a Maven build may take"
    )
    args = parser.parse_args(argv)
    if args.rounds < 2 or args.iterations < 2:
        parser.error("an error bar needs --rounds >= 2 and --iterations >= 2")
    extra = _parse_extra(args.extra)

    tools = find_tools()
    patch_dir = default_module_dir()
    build = build_benchmarks(tools, default_jmh_module_dir(), args.timeout)
    jars: dict[str, Path] = {
        "stock": build.stock_client,
        "off": build_patched_variant(tools, patch_dir, Variant.DEFAULTS, args.timeout),
        "on": build_patched_variant(tools, patch_dir, Variant.SWITCHES_ON, args.timeout),
        **extra,
    }
    settings = RunSettings(args.rounds, args.warmup, args.iterations, args.seconds, args.benchmarks)
    with tempfile.TemporaryDirectory(prefix="connmgr-jmh-") as tmp:
        samples, loads = run_jmh(tools, build, jars, settings, Path(tmp))
    rows = summarize(samples)
    finite = [x for x in loads if math.isfinite(x)]
    descriptions = {
        "stock": f"kafka-clients {KAFKA_VERSION} as released",
        "off": "the patch (patches/*.diff), every new configuration at its default",
        "on": "the patch with switches-on/*.diff: every new configuration defaulted on "
        "(linger 0 with the producer's needs published, DNS refresh 10 ms, retire, "
        "bootstrap close, role metrics)",
    }
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "jvm": _jvm_description(tools),
        "jvm_args": list(JVM_ARGS),
        "rounds": settings.rounds,
        "warmup_iterations": settings.warmup,
        "iterations": settings.iterations,
        "iteration_s": settings.seconds,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} "
        f"{platform.release()}",
        "load_min": round(min(finite), 2) if finite else None,
        "load_max": round(max(finite), 2) if finite else None,
        "loads": [round(x, 2) for x in loads],
        "variants": {
            name: descriptions.get(name, f"`{jar.name}` (given with `--extra`)")
            for name, jar in jars.items()
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(
        json.dumps(results_document(rows, meta), indent=2) + "\n", encoding="utf-8"
    )
    index = render_index(rows, meta)
    (args.out / "index.md").write_text(index, encoding="utf-8")
    print(index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
