"""``python -m connmgr_evidence.estimate.jmx_validate``: ``estimate jmx`` against the brokers' own
JMX counts on the real tier.

It starts a 3-node KRaft cluster with remote JMX (:class:`connmgr_evidence.realkafka.KafkaCluster`,
``jmx=True``), polls every broker's ``socket-server-metrics`` with the project's
``BrokerJmx`` reader (:class:`connmgr_evidence.java.jmx.BrokerJmxPoller`, as the long run does), and
runs a few kafka-clients through the probe launcher the long run uses
(:func:`connmgr_evidence.java.probe.run_probe`): producers, a group consumer and an admin client,
started a few seconds apart so that the counts move. The readings are written as an export
CSV (:func:`.jmx.write_csv`), read back by ``estimate jmx``'s reader, and each broker's
connection count at each sample is compared with the sum of the ``connection-count`` of
every listener in the poller's reading of that broker at that sample: they must be equal,
sample by sample (and per listener). Mid-run broker 2 is stopped and started again, so the
report shows a restart and the storm around it as ``estimate jmx`` finds them. Writes
``reports/estimate-jmx/index.md`` and ``validation.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from .jmx import analyse, rows_from_readings, write_csv
from .jmx_export import read_export, samples

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_OUT: Final = ROOT / "reports" / "estimate-jmx"
TOPIC: Final = "estimate-jmx"
CLIENTS: Final = (
    ("producer", "producer-1"),
    ("producer", "producer-2"),
    ("consumer", "consumer-1"),
    ("admin", "admin-1"),
)


STORM_MIN_RATE: Final = 3.0
"""The storm floor of this run's report: four clients cannot reach the default 10/s."""


def run(
    *, seconds: float, every_s: float, version: str, stagger_s: float, restart_broker: bool
) -> dict[str, Any]:
    """Run the validation (see the module doc) and return what ``validation.json`` holds."""
    from connmgr_evidence.java.build import build_probe
    from connmgr_evidence.java.jmx import BrokerJmxPoller
    from connmgr_evidence.java.probe import run_probe
    from connmgr_evidence.realkafka import KafkaCluster

    build = build_probe(version)
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="connmgr-jmx-validate-") as scratch_dir:
        scratch = Path(scratch_dir)
        with KafkaCluster(3, jmx=True) as cluster:
            cluster.create_topic_with_leaders(TOPIC, (1, 2, 3))
            poller = BrokerJmxPoller(
                build, cluster.jmx_endpoints(), every_s, scratch / "jmx.stderr"
            )
            poller.start()
            time.sleep(3 * every_s)  # the idle cluster first

            def client(kind: str, name: str) -> None:
                try:
                    run_probe(
                        build,
                        client=kind,  # type: ignore[arg-type]
                        bootstrap=cluster.bootstrap_servers,
                        topic=TOPIC,
                        partitions=3,
                        records=0,
                        group="estimate-jmx" if kind == "consumer" else None,
                        settle_ms=round(seconds * 1000),
                        life_every_ms=1000,
                        log_path=scratch / f"{name}.log",
                        log_level="INFO",
                        timeout_s=seconds + 120.0,
                        sample=lambda pid: None,
                    )
                except Exception as exc:  # reported; the comparison still runs
                    errors.append(f"{name}: {type(exc).__name__}: {exc}")

            threads = []
            for kind, name in CLIENTS:
                t = threading.Thread(target=client, args=(kind, name), daemon=True)
                t.start()
                threads.append(t)
                time.sleep(stagger_s)
            restart: dict[str, float] = {}
            if restart_broker:
                # Mid-life, once every client runs: broker 2 down and back, as a rolling
                # restart does it; its clients re-dial it (and the others) when it returns.
                time.sleep(max(0.0, seconds / 2 - stagger_s))
                restart["down"] = time.time()
                cluster.stop_broker(2)
                time.sleep(3.0)
                cluster.start_broker(2)
                restart["back"] = time.time()
                cluster.restore_preferred_leaders()
            for t in threads:
                t.join(seconds + 180.0)
            time.sleep(3 * every_s)  # and after the clients closed
            readings = poller.stop()
            kafka_version = cluster.version
        export = scratch / "export.csv"
        write_csv(rows_from_readings(readings), export)
        rows = read_export(export)
        estimated = samples(rows)
        per_listener = {name: samples(rows, name) for name in {r.listener for r in rows} if name}
        report = analyse(rows, min_rate=STORM_MIN_RATE)
    compared = []
    starting = 0
    for r in readings:
        if not r.up:
            continue
        if not any("connection-count" in v for v in r.listeners.values()):
            starting += 1  # its JVM answers, its socket server is not up: no count to compare
            continue
        own = sum(v.get("connection-count", 0.0) for v in r.listeners.values())
        match = [s for s in estimated.get(r.broker, []) if s.t_s == r.t_ms / 1000.0]
        got = match[0].connections if match else None
        compared.append(
            {"t_ms": r.t_ms, "broker": r.broker, "jmx": own, "estimate": got, "equal": got == own}
        )
    listener_pairs = listener_equal = 0
    for r in readings:
        for name, values in r.listeners.items():
            if not r.up or "connection-count" not in values:
                continue
            counts = [
                s.connections
                for s in per_listener.get(name, {}).get(r.broker, [])
                if s.t_s == r.t_ms / 1000.0
            ]
            listener_pairs += 1
            listener_equal += counts == [values["connection-count"]]
    listeners = sorted({name for r in readings for name in r.listeners})
    return {
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "kafka": kafka_version,
        "kafka_clients": version,
        "clients": [name for _, name in CLIENTS],
        "seconds": seconds,
        "every_s": every_s,
        "listeners": listeners,
        "samples": len(compared),
        "equal": sum(c["equal"] for c in compared),
        "starting_samples": starting,
        "listener_samples": listener_pairs,
        "listener_equal": listener_equal,
        "restart": {"broker": 2, **restart} if restart else None,
        "storm_min_rate": STORM_MIN_RATE,
        "client_errors": errors,
        "peaks": {"brokers": report["brokers"], "cluster": report["cluster"]},
        "restarts": report["restarts"],
        "storms": report["storms"],
        "compared": compared,
    }


def render(result: dict[str, Any]) -> str:
    """``index.md`` from ``validation.json``'s content."""
    verdict = "exact" if result["equal"] == result["samples"] else "NOT exact"
    origin = min((c["t_ms"] for c in result["compared"]), default=0) / 1000.0
    lines = [
        "# `estimate jmx` against the brokers' own JMX counts",
        "",
        "Written by `python -m connmgr_evidence.estimate.jmx_validate` "
        f"({result['when']}): a 3-node KRaft cluster (Kafka {result['kafka']}) with remote JMX, "
        f"{len(result['clients'])} kafka-clients {result['kafka_clients']} "
        f"({', '.join(result['clients'])}) started a few seconds apart and living "
        f"{result['seconds']:g} s, every broker's `socket-server-metrics` read every "
        f"{result['every_s']:g} s over JMX (listeners: {', '.join(result['listeners'])}).",
        "",
        "The readings were written as an export CSV, read back by `estimate jmx`, and each "
        "broker's connection count at each sample compared with the sum of the listeners' "
        "`connection-count` in the brokers' own reading at that sample.",
        "",
        f"**{result['equal']} of {result['samples']} samples equal: {verdict}** (per "
        f"listener: {result['listener_equal']} of {result['listener_samples']}).",
        "",
        "| broker | peak connections (estimate jmx) | peak in the JMX readings |",
        "|---|---:|---:|",
    ]
    for b, p in sorted(result["peaks"]["brokers"].items(), key=lambda kv: int(kv[0])):
        own = max((c["jmx"] for c in result["compared"] if str(c["broker"]) == str(b)), default=0)
        lines.append(f"| {b} | {p['peak_connections']:g} | {own:g} |")
    lines += [
        f"| cluster | {result['peaks']['cluster']['peak_connections']:g} | |",
        "",
    ]
    if result["restart"]:
        r = result["restart"]
        lines.append(
            f"Broker 2 was stopped and started again mid-run ({r['back'] - r['down']:.1f} s "
            "down, then leadership given back)."
        )
    lines += [
        "",
        f"Restarts `estimate jmx` saw: {len(result['restarts'])}"
        + "".join(
            f"; broker {x['broker']} down {x['down_s'] - origin:.0f} s, back "
            f"{x['back_s'] - origin:.0f} s"
            for x in result["restarts"]
        )
        + f". Storms (floor {result['storm_min_rate']:g}/s, as four clients cannot reach "
        f"the default 10/s): {len(result['storms'])}"
        + "".join(
            f"; broker {x['broker']} {x['start_s'] - origin:.0f}-{x['end_s'] - origin:.0f} s, "
            f"peak {x['peak_rate']:.1f}/s, {x['created']:.0f} created"
            + (f", meeting broker {x['restart']['broker']}'s restart" if x["restart"] else "")
            for x in result["storms"]
        )
        + " (times from the first sample).",
    ]
    if result["client_errors"]:
        lines += ["", "Client errors: " + "; ".join(result["client_errors"])]
    lines += [
        "",
        f"{result['starting_samples']} readings of a broker whose JVM answered JMX before its "
        "socket server had registered its metrics (broker 2 starting again) have no count to "
        "compare; `estimate jmx`'s export writes them as `up=false` (the broker serves no "
        "connection then). Every compared sample is in `validation.json` (`compared`).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m connmgr_evidence.estimate.jmx_validate",
        description="Start the real tier with JMX, run a few kafka-clients, export the "
        "brokers' JMX over the run and check that estimate jmx reads every broker's "
        "connection count at every sample exactly. Writes OUT/index.md and "
        "OUT/validation.json. Exit 0 when every sample is equal, 1 otherwise.",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seconds", type=float, default=20.0, help="each client's life")
    parser.add_argument("--every", type=float, default=1.0, help="seconds per JMX sample")
    parser.add_argument("--stagger", type=float, default=3.0, help="seconds between starts")
    parser.add_argument("--kafka-clients", default="4.3.1")
    parser.add_argument("--no-restart", action="store_true", help="leave broker 2 running")
    args = parser.parse_args(argv)
    result = run(
        seconds=args.seconds,
        every_s=args.every,
        version=args.kafka_clients,
        stagger_s=args.stagger,
        restart_broker=not args.no_restart,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "validation.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "index.md").write_text(render(result))
    print(f"{result['equal']} of {result['samples']} samples equal; {args.out / 'index.md'}")
    exact = result["equal"] == result["samples"] > 0
    return 0 if exact and result["listener_equal"] == result["listener_samples"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
