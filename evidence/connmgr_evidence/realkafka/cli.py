"""``connmgr cluster``: start a real Kafka cluster on 127.0.0.1, shape it, hold it, tear it down.

Standalone-callable (:func:`cluster_command` has its own parser), so the main ``connmgr`` CLI
only has to hand it the arguments after ``cluster``; ``python -m connmgr_evidence.realkafka`` runs
it too.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import NoReturn, TextIO

from connmgr_evidence.realkafka import (
    KAFKA_VERSION,
    KAFKA_VERSION_ENV,
    KAFKA_VERSIONS,
    KafkaCluster,
    RealKafkaError,
)

__all__ = ["cluster_command", "parse_broker_config", "parse_topic_spec"]

_HOLD_POLL_S = 0.5


class _UsageError(Exception):
    """An argument error: argparse's message, reported as ``connmgr: error: ...``."""


class _Parser(argparse.ArgumentParser):
    # argparse would print its own usage line and sys.exit(2); the contract here is one
    # ``connmgr: error:`` line and a returned 2.
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


class _Terminated(Exception):
    """SIGTERM while the cluster runs: tear down as for Ctrl-C."""


def parse_topic_spec(spec: str, broker_ids: Sequence[int]) -> tuple[str, list[int]]:
    """``NAME=LEADER,LEADER,...`` -> (name, leaders); a ValueError says what is wrong."""
    name, sep, leaders_text = spec.partition("=")
    name = name.strip()
    if not sep or not name or not leaders_text.strip():
        raise ValueError(f"--topic {spec!r}: expected NAME=LEADER,LEADER,... e.g. t=2,3,1")
    leaders: list[int] = []
    for part in leaders_text.split(","):
        try:
            leader = int(part.strip())
        except ValueError:
            raise ValueError(f"--topic {spec!r}: {part.strip()!r} is not a broker id") from None
        if leader not in broker_ids:
            raise ValueError(
                f"--topic {spec!r}: no broker {leader}; the brokers are {list(broker_ids)}"
            )
        leaders.append(leader)
    return name, leaders


def parse_broker_config(specs: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings -> ``server.properties`` entries; a ValueError says what is wrong.

    A key given twice keeps its last value, as in a properties file.
    """
    config: dict[str, str] = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        key = key.strip()
        if not sep or not key or any(c.isspace() for c in key):
            raise ValueError(
                f"--broker-config {spec!r}: expected KEY=VALUE, e.g. auto.create.topics.enable=true"
            )
        config[key] = value.strip()
    return config


def _parser() -> _Parser:
    parser = _Parser(
        prog="connmgr cluster",
        description=(
            "Start a real Apache Kafka cluster (KRaft, combined "
            "broker+controller nodes with ids 1..N) on 127.0.0.1, create the topics asked for "
            "with the partition leaders asked for, print the bootstrap servers and how long "
            "start-up took, hold it for --hold seconds (or until Ctrl-C), then stop every "
            "node and delete its data. Needs java (17+) and mvn: the broker jars come from "
            "Maven Central into ~/.m2 on first use."
        ),
        epilog="example: connmgr cluster --brokers 3 --topic t=2,3,1 --hold 600",
    )
    parser.add_argument(
        "--brokers", type=int, default=3, metavar="N", help="number of nodes, 1..9 (default 3)"
    )
    parser.add_argument(
        "--topic",
        dest="topics",
        action="append",
        default=[],
        metavar="NAME=LEADER,LEADER,...",
        help=(
            "create topic NAME with one partition per LEADER, partition i led by the i-th "
            "broker id listed (repeatable)"
        ),
    )
    parser.add_argument(
        "--broker-config",
        dest="broker_config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=(
            "set a server.properties entry on every node, applied after the defaults "
            "(repeatable), e.g. --broker-config num.partitions=2"
        ),
    )
    parser.add_argument(
        "--kafka-version",
        dest="kafka_version",
        default=None,
        metavar="X.Y.Z",
        help=(
            f"the Kafka broker release, one of {', '.join(KAFKA_VERSIONS)} (default: "
            f"${KAFKA_VERSION_ENV} if set, else {KAFKA_VERSION}; 4.4.0 answers KIP-1242's "
            "identity check, 4.3.1 is kept for comparison)"
        ),
    )
    parser.add_argument(
        "--hold",
        type=float,
        default=None,
        metavar="SECONDS",
        help="keep the cluster up this long, then tear down (default: until Ctrl-C; 0: at once)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="give up starting after this long (default 120; Maven's first download not counted)",
    )
    return parser


@contextlib.contextmanager
def _sigterm_as_exception() -> Iterator[None]:
    """Turn SIGTERM into :class:`_Terminated` so the nodes are stopped, not orphaned."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; leave signals alone elsewhere
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _say(out: TextIO, text: str) -> None:
    print(text, file=out, flush=True)  # flushed: a script may be waiting for the line


def _hold(cluster: KafkaCluster, seconds: float | None) -> None:
    """Sleep until ``seconds`` pass (forever if None), checking that no node has died."""
    end = None if seconds is None else time.monotonic() + seconds
    while end is None or time.monotonic() < end:
        cluster.check_alive()
        left = _HOLD_POLL_S if end is None else min(_HOLD_POLL_S, end - time.monotonic())
        if left > 0:
            time.sleep(left)


def cluster_command(args: Sequence[str], *, out: TextIO | None = None) -> int:
    """Run ``connmgr cluster ARGS``; the exit status.

    0 after a clean tear-down (the hold ran out, or Ctrl-C/SIGTERM while holding); 2 with one
    ``connmgr: error: ...`` line on stderr for bad arguments or a cluster that failed (its
    message includes the node's log tail); 130 when interrupted during start-up. ``--help``
    prints the help and returns 0. Every started node is stopped before returning.
    """
    out = out if out is not None else sys.stdout
    parser = _parser()
    try:
        options = parser.parse_args(list(args))
    except _UsageError as exc:
        return _fail(str(exc))
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    if options.hold is not None and options.hold < 0:
        return _fail(f"--hold must be >= 0, got {options.hold}")
    if options.timeout <= 0:
        return _fail(f"--timeout must be > 0, got {options.timeout}")
    try:
        properties = parse_broker_config(options.broker_config)
        cluster = KafkaCluster(
            options.brokers, properties=properties, version=options.kafka_version
        )
        topics = [parse_topic_spec(spec, cluster.broker_ids) for spec in options.topics]
    except (RealKafkaError, ValueError) as exc:
        return _fail(str(exc))

    with _sigterm_as_exception():
        try:
            cluster.start(timeout_s=options.timeout)
        except (KeyboardInterrupt, _Terminated):
            cluster.stop()
            print("connmgr: interrupted during start-up", file=sys.stderr)
            return 130
        except RealKafkaError as exc:
            cluster.stop()  # start() already cleaned up; stop() is idempotent
            return _fail(str(exc))
        status = 0
        try:
            _report_start(out, cluster)
            for name, leaders in topics:
                cluster.create_topic_with_leaders(name, leaders)
                _say(out, f"topic {name}: partition leaders {cluster.leaders(name)}")
            hint = ", ".join(f"{b}={cluster.group_for_coordinator(b)}" for b in cluster.broker_ids)
            _say(out, f"a group coordinated by each broker: {hint}")
            how_long = "until Ctrl-C" if options.hold is None else f"for {options.hold:g}s"
            _say(out, f"holding {how_long}")
            _hold(cluster, options.hold)
        except (KeyboardInterrupt, _Terminated):
            _say(out, "interrupted: stopping")
        except RealKafkaError as exc:
            status = _fail(str(exc))
        finally:
            t = time.monotonic()
            cluster.stop()
            _say(out, f"stopped in {time.monotonic() - t:.1f}s")
    return status


def _report_start(out: TextIO, cluster: KafkaCluster) -> None:
    phases = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in cluster.timings.items())
    _say(out, f"bootstrap servers: {cluster.bootstrap_servers}")
    _say(
        out,
        f"started {len(cluster.broker_ids)} Kafka {cluster.version} brokers in "
        f"{cluster.start_seconds or 0.0:.1f}s ({phases})",
    )
    for broker, (host, port) in cluster.endpoints().items():
        _say(out, f"broker {broker}: {host}:{port}")


def _fail(message: str) -> int:
    print(f"connmgr: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(cluster_command(sys.argv[1:]))
