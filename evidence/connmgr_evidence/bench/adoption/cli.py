"""``python -m connmgr_evidence.bench.adoption``: start a 3-broker KRaft cluster with TLS and SASL,
measure client starts (:func:`connmgr_evidence.realkafka.adoption.measure`) and write the report.

A benchmark, not a test. Exit status: 0 when every drop-in start opened the lower bound and
every start got all its records through; 1 otherwise (the report is written either way and
says which start did not); 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tqdm import tqdm

from connmgr_evidence.bench.adoption.report import render, shortfalls
from connmgr_evidence.realkafka import KafkaCluster
from connmgr_evidence.realkafka.adoption import SCENARIOS, Start, as_json, measure

__all__ = ["main", "parser"]

PROTOCOLS = ("PLAINTEXT", "SASL_SSL")


def _floats(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: comma-separated numbers, e.g. 0,5,20"
        ) from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: at least one RTT, none negative")
    return values


def _names(allowed: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(n.strip() for n in text.split(",") if n.strip())
        unknown = [n for n in names if n not in allowed]
        if not names or unknown:
            raise argparse.ArgumentTypeError(
                f"{text!r}: comma-separated names from {', '.join(allowed)}"
            )
        return names

    return parse


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be >= 1")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="connmgr adoption",
        description=(
            "Client starts on a real 3-broker Kafka 4.4 cluster (KRaft, TLS and SASL_SSL "
            "listeners, RTT injected by forwarders): stock aiokafka and the drop-in, which "
            "confirms its bootstrap connection's broker with ApiVersions v5 (KIP-1242) and "
            "adopts it, interleaved, plus kafka-clients 4.4.0 through the Java probe. Per "
            "start: connections opened (counted by the forwarders), sockets held, time to the "
            "first record through. Writes index.md and starts.json to --out. Exit 1 if a "
            "drop-in start opened more than the lower bound or a record did not get through."
        ),
    )
    p.add_argument(
        "--rounds", type=_positive, default=10, help="pairs of Python starts per point (default 10)"
    )
    p.add_argument(
        "--java-rounds", type=int, default=1, help="Java starts per point (default 1; 0: none)"
    )
    p.add_argument(
        "--rtts-ms", type=_floats, default=(0.0, 5.0, 20.0), help="injected RTTs (default 0,5,20)"
    )
    p.add_argument(
        "--protocols",
        type=_names(PROTOCOLS),
        default=PROTOCOLS,
        help="listeners (default PLAINTEXT,SASL_SSL)",
    )
    p.add_argument(
        "--scenarios",
        type=_names(SCENARIOS),
        default=SCENARIOS,
        help="scenarios (default seed-producer,seed-consumer)",
    )
    p.add_argument(
        "--java-logs",
        type=Path,
        default=None,
        help="keep the Java clients' NetworkClient logs here (default: a temporary directory)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("reports/adoption"),
        help="report directory (default reports/adoption)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.java_rounds < 0:
        parser().error("--java-rounds must be >= 0")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    logs: Path = args.java_logs or Path(tempfile.mkdtemp(prefix="connmgr-adoption-"))
    logs.mkdir(parents=True, exist_ok=True)
    per_point = 2 * args.rounds + args.java_rounds
    total = per_point * len(args.protocols) * len(args.rtts_ms) * len(args.scenarios)
    began = time.monotonic()
    with KafkaCluster(brokers=3, security=True) as cluster, tqdm(total=total, unit="start") as bar:

        def progress(start: Start) -> None:
            bar.set_postfix_str(
                f"{start.protocol} {start.rtt_ms:g}ms {start.scenario} {start.client}"
            )
            bar.update()

        starts, census = measure(
            cluster,
            protocols=args.protocols,
            rtts_ms=args.rtts_ms,
            scenarios=args.scenarios,
            rounds=args.rounds,
            java_rounds=args.java_rounds,
            logs=logs,
            progress=progress,
        )
        version = cluster.version
    took = time.monotonic() - began
    (out / "starts.json").write_text(json.dumps(as_json(starts, census), indent=1) + "\n")
    (out / "index.md").write_text(render(starts, census, kafka=version, took_s=took))
    problems = shortfalls(starts)
    for problem in problems:
        print(f"adoption: {problem}", file=sys.stderr)
    print(f"adoption: {len(starts)} starts in {took:.0f} s; report in {out}/index.md")
    return 1 if problems else 0
