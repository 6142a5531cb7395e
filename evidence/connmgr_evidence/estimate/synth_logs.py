"""Synthetic Java client logs for sizing ``estimate logs``: ``python -m
connmgr_evidence.estimate.synth_logs --clients 10000 --out DIR``.

Each client gets a file of its own (``client-NNNNN.log``; every tenth gzipped), rendered with
:mod:`connmgr.javalog`'s line renderers in the layout of Kafka's own log4j config: a producer,
a classic group consumer (coordinator id ``2147483647 - B``), a 4.4 consumer (``+B``) or an
admin client, on a cluster of :data:`BROKERS` brokers with three bootstrap servers, through
its start (bootstrap dial, metadata, leaders, coordinator), ``--requests`` data requests per
leader, metadata refreshes, the bootstrap connection's idle close, and application lines
between them (the noise a real DEBUG log carries, which the estimate skips). Deterministic
for a ``--seed``.
"""

from __future__ import annotations

import argparse
import gzip
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from connmgr import javalog
from connmgr.core.identity import COORDINATOR_ID_BASE

BROKERS: Final = 6
BOOTSTRAP: Final = (0, 1, 2)
KINDS: Final = ("producer", "consumer", "consumer-44", "admin")
WEIGHTS: Final = (5, 3, 1, 1)


def host(broker: int) -> str:
    return f"b{broker}.kafka.internal"


def _noise(t: float, who: str, i: int) -> str:
    return (
        f"[{javalog.format_time(t)}] DEBUG [{who}] Fetch READ_UNCOMMITTED at offset {i} for "
        f"partition orders-{i % 12} returned fetch data (error=NONE, highWaterMark={i + 7}, "
        "lastStableOffset = -1, logStartOffset = 0) "
        "(org.apache.kafka.clients.consumer.internals.AbstractFetch)"
    )


def client_lines(index: int, requests: int, rng: random.Random) -> Iterator[str]:
    """One client's log lines (see the module docstring)."""
    kind = rng.choices(KINDS, WEIGHTS)[0]
    t = rng.uniform(0, 3_600_000)
    group = f"group-{index % 97}"
    if kind == "producer":
        who = f"Producer clientId=producer-{index}"
    elif kind == "admin":
        who = f"AdminClient clientId=adminclient-{index}"
    else:
        who = f"Consumer clientId=consumer-{group}-{index}, groupId={group}"
    correlation = 0

    def req(api: str, node: int | str) -> str:
        nonlocal correlation
        correlation += 1
        return javalog.request_line(t, who, api, node, correlation)

    boot = rng.choice(BOOTSTRAP)
    boot_id = -1 - BOOTSTRAP.index(boot)
    yield javalog.connect_line(t, who, host(boot), 9092, boot_id)
    t += rng.uniform(2, 20)
    yield req("API_VERSIONS", boot_id)
    yield javalog.metadata_line(t, who, host(boot), 9092, boot_id)
    leaders = sorted(rng.sample(range(BROKERS), rng.randint(1, 4)))
    coordinator = rng.randrange(BROKERS)
    coord_node: int | str = ""
    if kind.startswith("consumer"):
        t += rng.uniform(1, 10)
        yield req("FIND_COORDINATOR", boot_id)
        coord_node = (
            f"+{coordinator}" if kind == "consumer-44" else COORDINATOR_ID_BASE - coordinator
        )
        t += rng.uniform(1, 10)
        yield javalog.connect_line(t, who, host(coordinator), 9092, coord_node)
        yield req("API_VERSIONS", coord_node)
        for api in (
            ("JOIN_GROUP", "SYNC_GROUP") if kind == "consumer" else ("CONSUMER_GROUP_HEARTBEAT",)
        ):
            t += rng.uniform(1, 50)
            yield req(api, coord_node)
    if kind == "admin":
        t += rng.uniform(1, 10)
        yield req("DESCRIBE_CLUSTER", boot_id)
        leaders = leaders[:1]
    data_api = {"producer": "PRODUCE", "admin": "LIST_OFFSETS"}.get(kind, "FETCH")
    for leader in leaders:
        t += rng.uniform(1, 10)
        yield javalog.connect_line(t, who, host(leader), 9092, leader)
        yield req("API_VERSIONS", leader)
    idle_closed = False
    for i in range(requests):
        t += rng.uniform(50, 600)
        leader = leaders[i % len(leaders)]
        yield req(data_api, leader)
        yield _noise(t, who, i)
        if i % 3 == 0:
            yield _noise(t + 1, who, i + 1)
        if coord_node != "" and i % 10 == 9:
            yield req("HEARTBEAT" if kind == "consumer" else "CONSUMER_GROUP_HEARTBEAT", coord_node)
        if i % 200 == 199:
            yield req("METADATA", leaders[0])
        if not idle_closed and t > 540_000:
            idle_closed = True  # connections.max.idle.ms closes the quiet bootstrap socket
            yield javalog.close_line(t, who, boot_id, "idle")


def write_client(path: Path, index: int, requests: int, seed: int) -> int:
    """Write one client's log to ``path`` (gzipped if it ends in ``.gz``); its size."""
    rng = random.Random(seed * 1_000_003 + index)
    text = "\n".join(client_lines(index, requests, rng)) + "\n"
    data = text.encode()
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(data, compresslevel=1))
    else:
        path.write_bytes(data)
    return len(data)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m connmgr_evidence.estimate.synth_logs")
    p.add_argument("--clients", type=int, default=100)
    p.add_argument("--requests", type=int, default=300, help="data requests per client")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    total = 0
    for index in range(args.clients):
        name = f"client-{index:05d}.log" + (".gz" if index % 10 == 9 else "")
        total += write_client(args.out / name, index, args.requests, args.seed)
    sys.stdout.write(f"{args.clients} client logs, {total / 1e6:.1f} MB of text, in {args.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
