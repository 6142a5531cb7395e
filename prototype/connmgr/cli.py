"""The ``connmgr`` command line.

connmgr policies                      the policies and what each models
connmgr scenarios                     the scenarios, their parameters and defaults
connmgr simulate SCENARIO --policy P  one simulated run; --json or --java-log to see it all
connmgr run SCENARIO --client C       a real client on a fresh embedded cluster
connmgr cluster [...]                 a real 3-node Apache Kafka (KRaft) cluster on loopback
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from connmgr import __version__, javalog
from connmgr.core.config import CONFIG_OPTIONS, DROP_IN_POLICY_OPTIONS
from connmgr.docblocks import options_help
from connmgr.errors import ConfigError, ConnMgrError
from connmgr.policies import POLICIES
from connmgr.policies.recorded import RECORDED_OPTIONS
from connmgr.sim.result import RunResult, java_log_events
from connmgr.sim.run import POLICY_OPTIONS, simulate
from connmgr.sim.scenarios import SCENARIOS
from connmgr_evidence.bench.runtime.spark import SparkJobFailed


def parse_settings(pairs: Sequence[str]) -> dict[str, str]:
    """``key=value`` strings to a dict; a malformed pair is a ConfigError naming it."""
    settings: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"--set {pair!r}: expected KEY=VALUE, e.g. --set brokers=100")
        settings[name] = value.strip()
    return settings


_RUN_POLICY_OPTIONS = frozenset(s.name for s in DROP_IN_POLICY_OPTIONS) | {
    "connections_max_idle_ms"
}
"""The policy options ``connmgr run`` takes: the drop-in clients' keywords, and aiokafka's own
idle timeout (see :func:`connmgr_evidence.realrun.run_real`)."""


def _paragraph(text: str) -> str:
    # The subcommands whose help lists options keep their line breaks; wrap the prose here.
    return textwrap.fill(text, width=100)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="connmgr",
        description=(
            "Connection management for Kafka clients: executable models of today's clients "
            "(java-described, java-today, aiokafka-today), the proposed policy, and a "
            "simulator that runs them through the same scenarios."
        ),
    )
    parser.add_argument("--version", action="version", version=f"connmgr {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("policies", help="list the connection policies")
    sub.add_parser(
        "cluster",
        help="start a real 3-node Apache Kafka (KRaft) cluster on loopback (see cluster --help)",
        add_help=False,
    )
    sub.add_parser("scenarios", help="list the scenarios and their parameters")
    sim = sub.add_parser(
        "simulate",
        help="run one policy through one scenario on the simulator",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_paragraph(
            "Run POLICY through SCENARIO on a virtual clock and report the connections it "
            "opened (total, peak, open at the end, by role and by broker). --set takes "
            "scenario parameters (see `connmgr scenarios`) and the policy options below."
        ),
        epilog="policy options (--set NAME=VALUE; default shown):\n"
        + options_help(tuple(s for s in CONFIG_OPTIONS if s.name in POLICY_OPTIONS))
        + "\nrecorded choices the models of today's clients replay (--set NAME=VALUE):\n"
        + options_help(RECORDED_OPTIONS),
    )
    sim.add_argument("scenario", metavar="SCENARIO", help="a name from `connmgr scenarios`")
    sim.add_argument(
        "--policy", required=True, metavar="POLICY", help="a name from `connmgr policies`"
    )
    sim.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario parameter or policy option (repeatable)",
    )
    out = sim.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="the whole run as JSON")
    out.add_argument("--java-log", action="store_true", help="the run as Java client log lines")
    run = sub.add_parser(
        "run",
        help="run a real client (aiokafka, Java or librdkafka) through a scenario on an "
        "embedded cluster",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="policy options of --client proposed (--set NAME=VALUE; default shown); the "
        "others take\nonly connections_max_idle_ms and bootstrap_offset:\n"
        + options_help(tuple(s for s in CONFIG_OPTIONS if s.name in _RUN_POLICY_OPTIONS)),
        description=_paragraph(
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
    bench = sub.add_parser(
        "bench",
        help="the main job: benchmark grid, real A/B runs, Spark comparison, report",
        description=(
            "Run the benchmark grid (benchmarks/grid.toml): every policy through the "
            "simulator, each run one simulated client-hour, churn scenarios included; stock "
            "aiokafka, the proposed client, the real Java client (kafka-clients 2.1.0 and "
            "4.x) and librdkafka (confluent-kafka) on the embedded cluster, with injected "
            "RTT; the proposed and stock producers' throughput A/B; the pytest-benchmark "
            "suites (decision cost, simulator events/s); the linger trade-off (the "
            "proposal's connection_linger_ms swept per scenario); the property suite as a "
            "measurement; "
            "the simulator inside Spark tasks over a large sweep of one-hour runs. Then a "
            "PySpark job pairs the proposal with each baseline and writes "
            "tables, plots and index.md into OUT/<run-id>/. Exits 0 when every difference "
            "is a stated cost of the proposal within its stated excess (connmgr.costs; the "
            "report's Stated costs), 1 if the proposal is worse than a baseline anywhere else "
            "(the report's Regressions) or the property suite failed, 2 on bad input, 3 if a "
            "Spark job failed on the cluster (one line: the task's error)."
        ),
    )
    bench.add_argument(
        "--quick",
        action="store_true",
        help="the grid's [quick] overrides: the same kinds of run, fewer, in under 5 minutes",
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
        help="do not refresh proposal/rfc.md; by default a run whose report lands in this "
        "checkout's reports/ rewrites the RFC's generated figures from it",
    )
    return parser


def _bench(args: argparse.Namespace) -> int:
    from connmgr_evidence.bench.grid import load_grid

    if args.report_only is not None:
        from connmgr_evidence.bench.job import regenerate_report

        comparison, problems = regenerate_report(args.report_only, master=args.master)
        print(f"report: {comparison.index}")
        _refresh_rfc(args.report_only, skip=args.no_rfc)
        return _bench_status(comparison.regressions, problems)

    grid = load_grid(args.grid, quick=args.quick)
    if args.list:
        from connmgr_evidence.bench.stages import stage_names

        print("stages: " + stage_names().replace("`", ""))
        print(grid.describe())
        for point in grid.sim_points:
            print(f"sim  {point.point}")
        for real in grid.real_points:
            print(f"real {real.point}")
        for skipped in grid.skipped:
            print(f"skip {skipped}")
        return 0
    from connmgr_evidence.bench.job import run_bench

    outcome = run_bench(grid, args.out, master=args.master, show=not args.no_progress)
    print(f"report: {outcome.report}")
    _refresh_rfc(outcome.run_dir, skip=args.no_rfc)
    return _bench_status(outcome.regressions, outcome.problems)


def _refresh_rfc(run_dir: Path, *, skip: bool) -> None:
    """Rewrite the RFC's generated figures from ``run_dir`` if it is a run in this
    checkout's ``reports/`` (a run elsewhere, e.g. a test's, leaves the RFC alone)."""
    from connmgr_evidence.bench import rfc

    if skip or not rfc.RFC.exists() or run_dir.resolve().parent != rfc.REPORTS.resolve():
        return
    changed = rfc.refresh(run_dir)
    print(f"{rfc.RFC}: {'figures refreshed' if changed else 'figures unchanged'} ({run_dir.name})")


def _bench_status(regressions: Sequence[object], problems: Sequence[str]) -> int:
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
    return 1 if regressions or problems else 0


def _summary(result: RunResult) -> str:
    lines = [
        f"{result.scenario} / {result.policy} (seed {result.seed}, "
        f"{result.duration_ms / 60_000:g} simulated min, {result.events} events, "
        f"{result.wall_s:.3f} s)",
        f"  opened {result.opened}  peak {result.peak}  steady {result.steady}  "
        f"failed dials {result.failed}  misrouted requests {result.misrouted}",
    ]
    for role, counts in result.by_role.items():
        lines.append(
            f"  {role:<13} opened {counts['opened']:>6}  closed {counts['closed']:>6}  "
            f"peak {counts['peak']:>4}  open at end {counts['open_at_end']:>4}  "
            f"handshakes avoided {counts['handshakes_avoided']}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["cluster"]:
        # Its own parser (it starts JVMs): `connmgr cluster --help` explains.
        from connmgr_evidence.realkafka.cli import cluster_command

        return cluster_command(argv[1:])
    args = _parser().parse_args(argv)
    try:
        if args.command == "policies":
            for name, cls in POLICIES.items():
                print(f"{name:<16} {cls.summary}")
        elif args.command == "scenarios":
            for name, scenario in SCENARIOS.items():
                print(f"{name:<21} {scenario.summary}")
                params = ", ".join(f"{k}={v}" for k, v in scenario.defaults.items())
                print(f"{'':<21} {params}")
        elif args.command == "simulate":
            result = simulate(args.scenario, args.policy, parse_settings(args.settings))
            if args.json:
                json.dump(result.as_json(), sys.stdout, indent=1)
                print()
            elif getattr(args, "java_log", False):
                client = "producer" if "producer" in args.scenario else "consumer"
                for line in javalog.render_events(client, java_log_events(result)):
                    print(line)
            else:
                print(_summary(result))
        elif args.command == "run":
            return _run(args)
        elif args.command == "bench":
            return _bench(args)
    except SparkJobFailed as exc:
        print(f"connmgr: error: {exc}", file=sys.stderr)
        return 3
    except ConnMgrError as exc:
        print(f"connmgr: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # piped into head: not an error
        return 0
    return 0


def _run(args: argparse.Namespace) -> int:
    import asyncio

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
        return 0
    if args.json:
        json.dump(data, sys.stdout, indent=1)
        print()
        return 0
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
