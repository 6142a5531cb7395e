"""The evidence's ``connmgr`` commands: ``bench``, ``run``, ``cluster``, ``adoption``,
``longrun`` (and ``estimate`` when :mod:`connmgr_evidence.estimate.cli` is there).

Each is ``NAME(argv) -> int``, an exit status, and reaches ``connmgr NAME`` through the
``connmgr.commands`` entry-point group this distribution declares (``evidence/pyproject.toml``;
:mod:`connmgr.cli` finds them). :func:`main` dispatches the same names without an install
(``python -m connmgr_evidence bench --list``). The exit statuses are :mod:`connmgr.cli`'s.

Imports are deferred to the command that needs them: ``connmgr bench --help`` and ``--list``
run without Hypothesis, Spark or a JDK, and a module a command needs that is not installed
ends it with one line and :data:`~connmgr.cli.EXIT_MISSING`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from connmgr.cli import (
    EXIT_BAD_INPUT,
    EXIT_MISSING,
    EXIT_OK,
    EXIT_REGRESSED,
    EXIT_SPARK,
    paragraph,
    parse_settings,
)
from connmgr.core.config import CONFIG_OPTIONS, DROP_IN_POLICY_OPTIONS
from connmgr.docblocks import options_help
from connmgr.errors import ConnMgrError

RUN_POLICY_OPTIONS = frozenset(s.name for s in DROP_IN_POLICY_OPTIONS) | {"connections_max_idle_ms"}
"""The policy options ``connmgr run`` takes: the drop-in clients' keywords, and aiokafka's own
idle timeout (see :func:`connmgr_evidence.realrun.run_real`)."""

_OWN = frozenset({"connmgr", "connmgr_evidence"})


def _missing(command: str, exc: ModuleNotFoundError) -> int | None:
    """One line and :data:`EXIT_MISSING` for a module outside this project that is not
    installed; None for anything else (a bug: let it raise)."""
    top = (exc.name or "").partition(".")[0]
    if not top or top in _OWN:
        return None
    hint = 'pip install -e "./evidence[dev]"' if top == "hypothesis" else f"pip install {top}"
    print(
        f"connmgr {command}: missing dependency: the Python module {top!r} is not "
        f"installed ({hint})",
        file=sys.stderr,
    )
    return EXIT_MISSING


def _guarded(command: str, work: Callable[[], int]) -> int:
    """Run ``work`` with the exit statuses of :mod:`connmgr.cli`: a failed Spark job 3, a
    missing module or tool (Java, Maven, a Spark that cannot start) 4, another ConnMgrError
    2, each as one line on stderr."""
    from connmgr_evidence.bench.runtime.spark import SparkJobFailed, SparkUnavailable
    from connmgr_evidence.realkafka.errors import MissingTool

    try:
        return work()
    except ModuleNotFoundError as exc:
        status = _missing(command, exc)
        if status is None:
            raise
        return status
    except (MissingTool, SparkUnavailable) as exc:
        print(f"connmgr {command}: missing dependency: {exc}", file=sys.stderr)
        return EXIT_MISSING
    except SparkJobFailed as exc:
        print(f"connmgr: error: {exc}", file=sys.stderr)
        return EXIT_SPARK
    except ConnMgrError as exc:
        print(f"connmgr: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # piped into head: not an error
        return EXIT_OK


# --- bench ----------------------------------------------------------------------------------


def bench_parser() -> argparse.ArgumentParser:
    bench = argparse.ArgumentParser(
        prog="connmgr bench",
        description=paragraph(
            "Run the benchmark grid (benchmarks/grid.toml): every policy through the "
            "simulator, each run one simulated client-hour, churn scenarios included; stock "
            "aiokafka, the proposed client, the real Java client (kafka-clients 2.1.0 and "
            "4.x) and librdkafka (confluent-kafka) on the embedded cluster, with injected "
            "RTT; the proposed and stock producers' throughput A/B; the pytest-benchmark "
            "suites (decision cost, simulator events/s); the linger trade-off (the "
            "proposal's connection_linger_ms swept per scenario); the property suite as a "
            "measurement; the simulator inside Spark tasks over a large sweep of one-hour "
            "runs. Then a PySpark job pairs the proposal with each baseline and writes "
            "tables, plots and index.md into OUT/<run-id>/. Exits 0 when every difference "
            "is a stated cost of the proposal within its stated excess (connmgr.costs; the "
            "report's Stated costs), 1 if the proposal is worse than a baseline anywhere else "
            "(the report's Regressions) or the property suite failed, 2 on bad input, 3 if a "
            "Spark job failed on the cluster (one line: the task's error), 4 if a module or "
            "tool it needs is not installed (one line: what to install)."
        ),
    )
    bench.add_argument(
        "--quick",
        action="store_true",
        help="the grid's [quick] overrides: the same kinds of run, fewer; never refreshes "
        "the RFC (a quick grid's figures are not the RFC's)",
    )
    bench.add_argument(
        "--stages",
        metavar="A,B",
        help="run only these stages (names from --list), writing their raw results under "
        "OUT/<run-id>/raw without the comparison or a report",
    )
    bench.add_argument(
        "--master",
        metavar="URL",
        help="Spark master, e.g. spark://host:7077 (default: local[*], in this process)",
    )
    bench.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        default=Path("reports"),
        help="where the run's folder OUT/<run-id>/ goes (default: reports)",
    )
    bench.add_argument(
        "--grid",
        metavar="FILE",
        type=Path,
        help="the grid file (default: benchmarks/grid.toml of this checkout)",
    )
    bench.add_argument(
        "--list",
        action="store_true",
        help="print the stages in run order and the grid's points, and exit without running",
    )
    bench.add_argument("--no-progress", action="store_true", help="no progress bars")
    bench.add_argument(
        "--report-only",
        metavar="RUN_DIR",
        type=Path,
        help="rebuild the report of an earlier run (OUT/<run-id>) from its raw/ results, "
        "without running anything",
    )
    bench.add_argument(
        "--no-rfc",
        action="store_true",
        help="do not refresh proposal/rfc.md; by default a full run whose report lands in "
        "this checkout's reports/ rewrites the RFC's generated figures from it",
    )
    return bench


def chosen_stages(text: str | None, known: Sequence[str]) -> tuple[str, ...] | None:
    """The stage names of ``--stages A,B`` (None: every stage); a ConfigError naming an
    unknown one and the known ones."""
    from connmgr.errors import ConfigError

    if text is None:
        return None
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        raise ConfigError(
            f"--stages {text!r}: unknown stage {', '.join(unknown) or '(none given)'}; "
            f"the stages are {', '.join(known)}"
        )
    return names


def bench(argv: Sequence[str]) -> int:
    """``connmgr bench ARGV``."""
    args = bench_parser().parse_args(list(argv))
    return _guarded("bench", lambda: _bench(args))


def _bench(args: argparse.Namespace) -> int:
    from connmgr_evidence.bench.grid import load_grid

    if args.report_only is not None:
        from connmgr_evidence.bench.job import regenerate_report

        comparison, problems = regenerate_report(args.report_only, master=args.master)
        print(f"report: {comparison.index}")
        refresh_rfc(args.report_only, skip=args.no_rfc)
        return bench_status(comparison.regressions, problems)

    grid = load_grid(args.grid, quick=args.quick)
    from connmgr_evidence.bench.stages import stage_names, stages

    only = chosen_stages(args.stages, [s.name for s in stages()])
    if args.list:
        print("stages: " + stage_names().replace("`", ""))
        print(grid.describe())
        for point in grid.sim_points:
            print(f"sim  {point.point}")
        for real in grid.real_points:
            print(f"real {real.point}")
        for skipped in grid.skipped:
            print(f"skip {skipped}")
        return EXIT_OK
    from connmgr_evidence.bench.job import run_bench

    outcome = run_bench(grid, args.out, master=args.master, show=not args.no_progress, only=only)
    if outcome.partial:
        print(f"raw results: {outcome.run_dir / 'raw'} (stages {', '.join(only or ())}; no report)")
        return EXIT_OK
    print(f"report: {outcome.report}")
    refresh_rfc(outcome.run_dir, skip=args.no_rfc or args.quick)
    return bench_status(outcome.regressions, outcome.problems)


def refresh_rfc(run_dir: Path, *, skip: bool) -> None:
    """Rewrite the RFC's generated figures from ``run_dir`` if it is a run in this
    checkout's ``reports/`` (a run elsewhere, e.g. a test's, leaves the RFC alone)."""
    from connmgr_evidence.bench import rfc

    if skip or not rfc.RFC.exists() or run_dir.resolve().parent != rfc.REPORTS.resolve():
        return
    changed = rfc.refresh(run_dir)
    print(f"{rfc.RFC}: {'figures refreshed' if changed else 'figures unchanged'} ({run_dir.name})")


def bench_status(regressions: Sequence[object], problems: Sequence[str]) -> int:
    """1 if the proposal is worse than a baseline anywhere beyond its stated costs
    (``regressions``: the flagged differences no stated cost covers) or the property stage
    failed (``problems``); else 0."""
    if regressions:
        print(
            f"connmgr bench: the proposal is worse than a baseline in "
            f"{len(regressions)} comparisons beyond its stated costs (listed in the report "
            f"under Regressions)",
            file=sys.stderr,
        )
    for problem in problems:
        print(f"connmgr bench: {problem}", file=sys.stderr)
    return EXIT_REGRESSED if regressions or problems else EXIT_OK


# --- run ------------------------------------------------------------------------------------


def run_parser() -> argparse.ArgumentParser:
    run = argparse.ArgumentParser(
        prog="connmgr run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="policy options of --client proposed (--set NAME=VALUE; default shown); the "
        "others take\nonly connections_max_idle_ms and bootstrap_offset:\n"
        + options_help(tuple(s for s in CONFIG_OPTIONS if s.name in RUN_POLICY_OPTIONS)),
        description=paragraph(
            "Start a fresh embedded multi-broker cluster (librdkafka's mock cluster) shaped "
            "like SCENARIO, run a real aiokafka producer or group consumer through it, and "
            "report its connections (from the client's own hooks, checked against the "
            "kernel's socket table) with the same fields as `connmgr simulate`, plus "
            "records_sent, records_acked and records_consumed. --client aiokafka is stock "
            "aiokafka; --client proposed has the proposed policy inside; --client java runs "
            "the real Java client (--kafka-clients VERSION) in a JVM, accounted from its "
            "NetworkClient log, its own metrics and the kernel; --client librdkafka runs "
            "confluent-kafka's Producer or Consumer, accounted from librdkafka's broker debug "
            "log, its statistics and the kernel. Run-only --set keys: "
            "records (300), settle_ms (4000: wait before measuring the steady state), "
            "idempotent (0/1)."
        ),
    )
    run.add_argument("scenario", metavar="SCENARIO")
    run.add_argument(
        "--client", required=True, choices=["aiokafka", "proposed", "java", "librdkafka"]
    )
    run.add_argument(
        "--kafka-clients",
        metavar="VERSION",
        help="with --client java: the org.apache.kafka:kafka-clients release to run, e.g. "
        "2.1.0 or 4.4.0 (built with Maven on first use, cached outside the project)",
    )
    run.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE")
    run_out = run.add_mutually_exclusive_group()
    run_out.add_argument("--json", action="store_true", help="the whole run as JSON")
    run_out.add_argument(
        "--java-log",
        action="store_true",
        help="the run's connection lines in the Java client's log format (for --client java, "
        "its own NetworkClient lines)",
    )
    return run


def run(argv: Sequence[str]) -> int:
    """``connmgr run ARGV``: a real client through a scenario on an embedded cluster."""
    args = run_parser().parse_args(list(argv))
    return _guarded("run", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    import asyncio

    from connmgr import javalog
    from connmgr_evidence.realrun import run_real  # imports aiokafka: only when needed

    real = asyncio.run(
        run_real(
            args.scenario,
            args.client,
            parse_settings(args.settings),
            kafka_clients=args.kafka_clients,
        )
    )
    data = real.as_json()
    if args.java_log:
        if real.java_log is not None:
            with open(real.java_log) as log:
                for line in log:
                    if javalog.parse_connection_event(line) is not None:
                        print(line.rstrip("\n"))
        else:
            kind = "producer" if real.spec.client.value == "producer" else "consumer"
            for line in javalog.render_events(kind, real.ledger.java_log_rows()):
                print(line)
        return EXIT_OK
    if args.json:
        json.dump(data, sys.stdout, indent=1)
        print()
        return EXIT_OK
    print(
        f"{real.scenario} / real {real.client} on {len(real.idmap)} embedded brokers "
        f"({real.wall_s:.1f} s)\n"
        f"  opened {data['opened']}  peak {data['peak']}  steady {data['steady']}  "
        f"failed dials {data['failed']}\n"
        f"  records sent {real.records_sent}  acked {real.records_acked}  "
        f"consumed {real.records_consumed}"
    )
    for role, counts in data["by_role"].items():
        print(
            f"  {role:<13} opened {counts['opened']:>6}  closed {counts['closed']:>6}  "
            f"peak {counts['peak']:>4}  open at end {counts['open_at_end']:>4}"
        )
    return EXIT_OK


# --- the others -----------------------------------------------------------------------------


def cluster(argv: Sequence[str]) -> int:
    """``connmgr cluster ARGV``: a real 3-node Apache Kafka (KRaft) cluster on loopback (its
    own parser: ``connmgr cluster --help``)."""

    def work() -> int:
        from connmgr_evidence.realkafka.cli import cluster_command

        return cluster_command(argv)

    return _guarded("cluster", work)


def adoption(argv: Sequence[str]) -> int:
    """``connmgr adoption ARGV``: client starts on Kafka 4.4 (``connmgr adoption --help``)."""

    def work() -> int:
        from connmgr_evidence.bench.adoption.cli import main as adoption_main

        return adoption_main(argv)

    return _guarded("adoption", work)


def longrun(argv: Sequence[str]) -> int:
    """``connmgr longrun ARGV``: stock and patched kafka-clients for an hour
    (``connmgr longrun --help``)."""

    def work() -> int:
        from connmgr_evidence.bench.longrun.cli import main as longrun_main

        return longrun_main(argv)

    return _guarded("longrun", work)


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # its package is not there either
        return False


COMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "bench": bench,
    "run": run,
    "cluster": cluster,
    "adoption": adoption,
    "longrun": longrun,
}
"""Every command of this module by its ``connmgr`` name (``estimate`` when it exists)."""

if _has_module("connmgr_evidence.estimate.cli"):

    def estimate(argv: Sequence[str]) -> int:
        """``connmgr estimate ARGV`` (:mod:`connmgr_evidence.estimate.cli`)."""

        def work() -> int:
            from connmgr_evidence.estimate.cli import main as estimate_main  # type: ignore[import-not-found,unused-ignore]

            return int(estimate_main(list(argv)))

        return _guarded("estimate", work)

    COMMANDS["estimate"] = estimate


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m connmgr_evidence COMMAND ARGS``: the commands of :data:`COMMANDS` without
    the entry points of an install (``connmgr COMMAND ARGS`` is the same)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        print(
            f"usage: python -m connmgr_evidence {{{','.join(COMMANDS)}}} ...",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    return COMMANDS[argv[0]](argv[1:])
