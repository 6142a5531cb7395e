"""The ``connmgr`` command line.

connmgr policies                      the policies and what each models
connmgr scenarios                     the scenarios, their parameters and defaults
connmgr simulate SCENARIO --policy P  one simulated run; --json or --java-log to see it all

The evidence's commands (``bench``, ``run``, ``cluster``, ``adoption``, ``longrun``, and
``estimate``) belong to kafka-connmgr-evidence: it declares them in the ``connmgr.commands``
entry-point group (``NAME = module:function``, ``function(argv) -> int``), and ``connmgr
NAME ...`` calls the one installed. This package never imports the evidence.

Exit statuses, for every command:

0  done (bench: every difference is a stated cost of the proposal)
1  bench: the proposal is worse than a baseline beyond its stated costs, or the property
   suite failed; adoption, longrun: a problem found (listed on stderr)
2  bad input (one ``connmgr: error: ...`` line)
3  bench: a Spark job failed (one line: the task's error)
4  a missing dependency: the evidence, a Python module or a tool (Java, Maven) a command
   needs is not installed (one line: what to install)
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable, Sequence
from importlib.metadata import EntryPoint, entry_points

from connmgr import __version__, javalog
from connmgr.core.config import CONFIG_OPTIONS
from connmgr.docblocks import options_help
from connmgr.errors import ConfigError, ConnMgrError
from connmgr.policies import POLICIES
from connmgr.policies.recorded import RECORDED_OPTIONS
from connmgr.sim.result import RunResult, java_log_events
from connmgr.sim.run import POLICY_OPTIONS, check_policy_options, simulate
from connmgr.sim.scenarios import SCENARIOS

EXIT_OK = 0
EXIT_REGRESSED = 1
EXIT_BAD_INPUT = 2
EXIT_SPARK = 3
EXIT_MISSING = 4
"""The exit statuses (the module docstring says when each is used)."""

COMMAND_GROUP = "connmgr.commands"
"""The entry-point group other distributions declare ``connmgr`` commands in."""

EVIDENCE = "kafka-connmgr-evidence"
EVIDENCE_COMMANDS: dict[str, str] = {
    "bench": "the main job: benchmark grid, real A/B runs, Spark comparison, report",
    "run": "run a real client (aiokafka, Java or librdkafka) through a scenario on an "
    "embedded cluster",
    "cluster": "start a real 3-node Apache Kafka (KRaft) cluster on loopback",
    "adoption": "client starts on Kafka 4.4 (KIP-1242's check on the bootstrap socket)",
    "longrun": "stock and patched kafka-clients for an hour through a restart and a move",
    "estimate": "estimate a fleet's connections from its logs and metrics",
}
"""The commands :data:`EVIDENCE` provides, with their help line (``estimate`` only in a
version that has it: it is listed when installed, not before)."""

PRODUCT_COMMANDS = ("policies", "scenarios", "simulate")


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


def paragraph(text: str) -> str:
    """``text`` wrapped for a help page whose options keep their own line breaks."""
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
    sub.add_parser("scenarios", help="list the scenarios and their parameters")
    sim = sub.add_parser(
        "simulate",
        help="run one policy through one scenario on the simulator",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=paragraph(
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
    loaded = {name for name, point in external_commands().items() if _load(point) is not None}
    for name in sorted(loaded | (EVIDENCE_COMMANDS.keys() - {"estimate"})):
        where = "" if name in loaded else f" [needs {EVIDENCE}]"
        sub.add_parser(name, help=EVIDENCE_COMMANDS.get(name, "") + where, add_help=False)
    return parser


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


def external_commands() -> dict[str, EntryPoint]:
    """The installed commands of :data:`COMMAND_GROUP` by name, those this module defines
    left out (its own win). An entry point that does not load (a command its distribution
    registers only when its module is there) is left out too."""
    found: dict[str, EntryPoint] = {}
    for point in entry_points(group=COMMAND_GROUP):
        if point.name not in PRODUCT_COMMANDS:
            found.setdefault(point.name, point)
    return found


def _load(point: EntryPoint) -> Callable[[Sequence[str]], int] | None:
    try:
        command = point.load()
    except (ImportError, AttributeError):
        return None
    return command if callable(command) else None


def run_external(name: str, argv: Sequence[str]) -> int:
    """``connmgr NAME ARGV`` for a command another distribution provides: its exit status, or
    :data:`EXIT_MISSING` with one line when it is not installed."""
    point = external_commands().get(name)
    if point is None:
        print(
            f"connmgr {name}: install {EVIDENCE} to run it "
            f"(from a checkout: pip install -e ./evidence)",
            file=sys.stderr,
        )
        return EXIT_MISSING
    command = _load(point)
    if command is None:
        dist = point.dist.name if point.dist is not None else EVIDENCE
        print(f"connmgr {name}: not in this install of {dist} ({point.value})", file=sys.stderr)
        return EXIT_MISSING
    return int(command(list(argv)))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    name = argv[0] if argv else ""
    if name not in PRODUCT_COMMANDS and (name in EVIDENCE_COMMANDS or name in external_commands()):
        return run_external(name, argv[1:])
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
            settings = parse_settings(args.settings)
            check_policy_options(args.scenario, args.policy, settings)
            result = simulate(args.scenario, args.policy, settings)
            if args.json:
                json.dump(result.as_json(), sys.stdout, indent=1)
                print()
            elif getattr(args, "java_log", False):
                client = "producer" if "producer" in args.scenario else "consumer"
                for line in javalog.render_events(client, java_log_events(result)):
                    print(line)
            else:
                print(_summary(result))
    except ConnMgrError as exc:
        print(f"connmgr: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # piped into head: not an error
        return EXIT_OK
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
