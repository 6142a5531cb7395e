"""``estimate logs`` against what really happened: ``python -m connmgr_evidence.estimate.validate
--out reports/estimate-logs``.

On a 3-broker real cluster (:class:`~connmgr_evidence.realkafka.KafkaCluster`, ``security=True`` so
every
client connection passes through a counting forwarder, :mod:`connmgr_evidence.realkafka.delay`),
each
client of :data:`CLIENTS` -- kafka-clients 4.4.0 and 4.3.1, a producer, a classic group
consumer, a KIP-848 (``group.protocol=consumer``) consumer and an admin client -- runs once
through the Java probe (:func:`connmgr_evidence.java.run_probe`) with DEBUG ``NetworkClient``
logging,
one log file each, with ``connections.max.idle.ms`` short (:data:`IDLE_MS`) so that quiet
connections close while each client keeps working for :data:`SETTLE_MS`. Then
:func:`connmgr_evidence.estimate.logs.estimate` reads the logs, and per client:

* **opened** (the estimate's connections opened, all roles, whole log) must equal the
  connections the forwarders accepted from that client (the ledger outside the client);
* **held** (the estimate's ``open_at_end`` of the log cut at the end of the kernel sample --
  the probe's ``released_at``) must equal the sockets the kernel showed the JVM holding to the
  brokers at its steady point (:func:`connmgr_evidence.java.kernel_sampler`).

Equality is exact; a difference is reported, and :func:`mismatches` lists it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from connmgr import javalog
from connmgr_evidence.estimate.logs import analyse_lines, estimate

CLIENTS: Final = (
    ("4.4.0", "producer", None),
    ("4.4.0", "consumer", "classic"),
    ("4.4.0", "consumer", "consumer"),
    ("4.4.0", "admin", None),
    ("4.3.1", "producer", None),
    ("4.3.1", "consumer", "classic"),
    ("4.3.1", "consumer", "consumer"),
    ("4.3.1", "admin", None),
)
"""(kafka-clients version, probe client, group.protocol) of each client run."""
LEADERS: Final = (3, 1, 2)
RECORDS: Final = 3
IDLE_MS: Final = 2_000
"""``connections.max.idle.ms``: short, so connections close while the clients settle."""
SETTLE_MS: Final = 6_000
LIFE_EVERY_MS: Final = 300
"""Each client keeps working through the settle (a record, a commit, an admin call)."""


@dataclass(frozen=True, slots=True)
class Comparison:
    """One client: what the estimate read from its log against what was counted outside it."""

    name: str
    version: str
    client: str
    group_protocol: str | None
    log: str
    client_id: str
    group: str | None
    estimate_opened: dict[str, int]
    forwarders_accepted: int
    estimate_held_at_sample: int
    kernel_held: int
    estimate_peak: int
    estimate_never_used: int
    proposal: dict[str, Any]

    @property
    def exact(self) -> bool:
        return (
            sum(self.estimate_opened.values()) == self.forwarders_accepted
            and self.estimate_held_at_sample == self.kernel_held
        )


def mismatches(rows: list[Comparison]) -> list[str]:
    """The clients whose estimate differs from the counts, described."""
    return [
        f"{r.name}: opened {sum(r.estimate_opened.values())} vs forwarders "
        f"{r.forwarders_accepted}, held {r.estimate_held_at_sample} vs kernel {r.kernel_held}"
        for r in rows
        if not r.exact
    ]


def _held_at(log: Path, until: Any) -> int:
    """Open connections per the estimate on ``log``'s lines up to ``until`` (log time)."""
    lines = []
    for line in log.read_text(errors="replace").splitlines():
        stamp = line[1:24] if line.startswith("[") else ""
        try:
            if stamp and javalog.parse_log_time(stamp) > until:
                break
        except ValueError:
            pass
        lines.append(line)
    clients, _, _ = analyse_lines(lines, str(log))
    return sum(int(c["open_at_end"]) for c in clients)


def run(out: Path, clients: tuple[tuple[str, str, str | None], ...] = CLIENTS) -> list[Comparison]:
    """Start a cluster, run ``clients`` (producers first: each writes :data:`RECORDS`
    records, which every consumer then reads, so ``clients`` needs a producer if it has a
    consumer), compare; write ``out``/logs/ (the client logs)."""
    from connmgr_evidence.java import build_probe, kernel_sampler, run_probe
    from connmgr_evidence.realkafka import KafkaCluster

    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    rows: list[Comparison] = []
    stamp = time.time_ns()
    with KafkaCluster(3, security=True) as cluster:
        access = cluster.secure.access("PLAINTEXT")
        topic = f"estimate-{stamp}"
        cluster.create_topic_with_leaders(topic, list(LEADERS))
        ordered = sorted(clients, key=lambda c: c[1] != "producer")  # records first
        for index, (version, client, protocol) in enumerate(ordered):
            name = f"{version}-{client}" + (f"-{protocol}" if protocol else "")
            log = logs / f"{name}.log"
            extra = dict(access.java_properties())
            # Quiet connections (the bootstrap ones) close during the settle, so the log's
            # closes are read too and what is held differs from what was opened.
            extra["connections.max.idle.ms"] = str(IDLE_MS)
            if protocol is not None:
                extra["group.protocol"] = protocol
            before = cluster.secure.accepted(access)
            probe = run_probe(
                build_probe(version),
                client=client,  # type: ignore[arg-type]
                bootstrap=access.bootstrap_servers,
                topic=topic,
                partitions=len(LEADERS),
                records=RECORDS if client != "admin" else 0,
                group=f"estimate-{stamp}-{index}" if client == "consumer" else None,
                settle_ms=SETTLE_MS,
                life_every_ms=LIFE_EVERY_MS,
                extra=extra,
                sample=kernel_sampler(access.addresses()),
                log_path=log,
                log_level="DEBUG",
            )
            accepted = cluster.secure.accepted(access) - before
            document = estimate([str(log)], engine="local")
            (record,) = document["clients"]
            rows.append(
                Comparison(
                    name,
                    version,
                    client,
                    protocol,
                    log.name,
                    record["client_id"],
                    record["group"],
                    record["opened"],
                    accepted,
                    _held_at(log, probe.released_at),
                    probe.sample.count,
                    record["peak"],
                    record["never_used"],
                    record["proposal"],
                )
            )
    return rows


def write_report(rows: list[Comparison], out: Path) -> None:
    """``out``/comparison.json and ``out``/index.md."""
    out.mkdir(parents=True, exist_ok=True)
    data = {
        "clients": [asdict(r) | {"exact": r.exact} for r in rows],
        "all_exact": all(r.exact for r in rows),
    }
    (out / "comparison.json").write_text(json.dumps(data, indent=1) + "\n")
    lines = [
        "# `estimate logs` against the real tier",
        "",
        "Written by `python -m connmgr_evidence.estimate.validate --out reports/estimate-logs`: "
        "each "
        "kafka-clients run below went through the Java probe against a 3-broker Kafka "
        "cluster with DEBUG `NetworkClient` logging. **opened** is what `estimate logs` read "
        "from the client's log (bootstrap/coordinator/broker) against the connections the "
        "cluster's forwarders accepted from it; **held** is the estimate's open connections at "
        "the end of the kernel sample against the sockets the kernel showed the JVM holding. Each "
        "client's log is cut there for *held* (what the client's close did after it is not "
        "held at the sample). Peak, never used and the proposal's replay are the estimate's "
        "own figures, for context: the comparison is opened and held.",
        "",
        "| client | client_id | opened (b/c/k) | forwarders | held | kernel | exact "
        "| peak | never used | proposal opened | proposal held |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        o = r.estimate_opened
        lines.append(
            f"| {r.name} | `{r.client_id}` | "
            f"{sum(o.values())} ({o['bootstrap']}/{o['coordinator']}/{o['broker']}) | "
            f"{r.forwarders_accepted} | {r.estimate_held_at_sample} | {r.kernel_held} | "
            f"{'yes' if r.exact else '**no**'} | {r.estimate_peak} | {r.estimate_never_used} | "
            f"{sum(r.proposal['opened'].values())} | {r.proposal['open_at_end']} |"
        )
    lines += [
        "",
        f"All exact: {'yes' if data['all_exact'] else 'no'} ({len(rows)} clients).",
        "",
    ]
    (out / "index.md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m connmgr_evidence.estimate.validate")
    p.add_argument("--out", type=Path, default=Path("reports/estimate-logs"))
    p.add_argument("--keep-logs", action="store_true", help="keep the client logs under OUT/logs")
    args = p.parse_args(argv)
    # The probes run in their own working directory: their log paths must not be relative.
    args.out = args.out.resolve()
    rows = run(args.out)
    write_report(rows, args.out)
    if not args.keep_logs:
        for log in (args.out / "logs").glob("*"):
            log.unlink()
        (args.out / "logs").rmdir()
    for problem in mismatches(rows):
        sys.stderr.write(f"mismatch: {problem}\n")
    return 0 if all(r.exact for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
