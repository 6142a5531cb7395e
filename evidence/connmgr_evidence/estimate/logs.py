"""``estimate logs``: what a fleet's Java clients opened and held, read from their
``NetworkClient`` logs, and what the proposal would have opened and held for the same needs.

One log file is analysed on its own (:func:`analyse_file`): its lines are read in order, each
client (the log prefix's ``clientId``, with its ``groupId`` where present) gets its own
account, and nothing is shared between files, so the files can be spread over Spark's
executors (:func:`estimate`) and the result does not depend on where they ran. The same
client id in two files is two clients (two JVMs each call their producer ``producer-1``).

Per client, from the connection lines :mod:`connmgr.javalog` reads:

* **opened** by role: the connection id printed says which -- negative: a bootstrap
  connection; ``2147483647 - B`` or 4.4's ``+B``: a group coordinator's connection; any other:
  a broker's;
* **never_used**: connections on which no request but the ``ApiVersions`` handshake was sent
  while they were open (this needs the request lines: DEBUG in 3.x/4.x, TRACE in 2.x; a 2.x
  log at DEBUG shows only metadata requests, so ``requests`` says how many were seen);
* **bootstrap_lived_ms**: each bootstrap connection's life, from its ``Initiating connection``
  line to its close (null: still open when the log ends);
* **peak**: the most connections open at once; **open_at_end**: those still open at the last
  line (a client's close closes them without a line each).

**The proposal** (:func:`replay_proposal`) is the ``proposed`` policy itself
(:mod:`connmgr.policies.proposed`), driven through the driver contract by the requests the
client sent, in order, to whom they went, and the addresses its connections show
(:mod:`connmgr_evidence.estimate.logs_replay`): what it reports as opened, peak and open at
the end is what the policy told the replay's driver to dial, close and adopt. No rule of the
proposal is written here.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import statistics
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from connmgr import javalog
from connmgr_evidence.estimate.logs_replay import COORDINATOR_FLOOR, replay_log
from connmgr_evidence.estimate.logs_replay import ROLES as ROLES  # the record's roles

HANDSHAKE_APIS: Final = frozenset({"API_VERSIONS", "SASL_HANDSHAKE", "SASL_AUTHENTICATE"})
"""Requests every connection sends for itself: they do not make a connection used."""
BINARY_PROBE: Final = 8192
"""Bytes read from the start of a file to tell text from binary (a NUL byte among them)."""


def role_of(node_id: int) -> str:
    """The role of a connection id as the Java client prints it (see the module docstring)."""
    if node_id < 0:
        return "bootstrap"
    if node_id >= COORDINATOR_FLOOR:
        return "coordinator"
    return "broker"


def _ms(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds() * 1000.0


@dataclass
class _Open:
    role: str
    at: datetime
    used: bool = False


@dataclass
class ClientAccount:
    """One client's connections as its log shows them (built line by line)."""

    client_id: str
    group: str | None
    kind: str
    source: str
    opened: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))
    never_used: int = 0
    failed: int = 0
    bootstrap_lived_ms: list[float | None] = field(default_factory=list)
    peak: int = 0
    requests: int = 0
    needs: list[tuple[datetime, str, int]] = field(default_factory=list)
    addresses: dict[int, tuple[str, int]] = field(default_factory=dict)
    first: datetime | None = None
    last: datetime | None = None
    brokers_check_identity: bool = True
    """Whether the proposal's replay takes the brokers for 4.4+ ones that answer KIP-1242's
    identity check (see :func:`replay_proposal`)."""
    _open: dict[int, _Open] = field(default_factory=dict)

    def _seen(self, at: datetime) -> None:
        self.first = at if self.first is None else min(self.first, at)
        self.last = at if self.last is None else max(self.last, at)

    def _close(self, node_id: int, at: datetime) -> None:
        conn = self._open.pop(node_id, None)
        if conn is None:
            return
        if not conn.used:
            self.never_used += 1
        if conn.role == "bootstrap":
            self.bootstrap_lived_ms.append(_ms(conn.at, at))

    def event(self, event: javalog.LoggedConnectionEvent) -> None:
        """Account for one connection event of this client."""
        self._seen(event.timestamp)
        node_id = javalog.node_id_of(event.node)
        if event.kind == "connect":
            self._close(node_id, event.timestamp)  # a dial replaces whatever was left
            role = role_of(node_id)
            self.opened[role] += 1
            self._open[node_id] = _Open(role, event.timestamp)
            self.addresses.setdefault(node_id, (event.host, event.port))
            self.peak = max(self.peak, len(self._open))
        elif event.kind == "connect_error":
            self.failed += 1
            self._close(node_id, event.timestamp)
        elif event.kind == "disconnect":
            self._close(node_id, event.timestamp)

    def request(self, at: datetime, api: str, node_id: int) -> None:
        """Account for one request sent to ``node_id``."""
        self._seen(at)
        if api in HANDSHAKE_APIS:
            return
        self.requests += 1
        self.needs.append((at, api, node_id))
        conn = self._open.get(node_id)
        if conn is not None:
            conn.used = True

    def finish(self) -> dict[str, Any]:
        """The client's record (the ``--json`` shape, see ``docs/estimate.md``)."""
        open_at_end = len(self._open)
        never_used = self.never_used + sum(1 for c in self._open.values() if not c.used)
        lived: list[float | None] = list(self.bootstrap_lived_ms)
        lived += [None for c in self._open.values() if c.role == "bootstrap"]
        return {
            "client_id": self.client_id,
            "group": self.group,
            "kind": self.kind,
            "source": self.source,
            "opened": dict(self.opened),
            "peak": self.peak,
            "open_at_end": open_at_end,
            "never_used": never_used,
            "failed": self.failed,
            "bootstrap_lived_ms": lived,
            "requests": self.requests,
            "proposal": replay_proposal(
                self.kind,
                self.needs,
                self.addresses,
                self.last,
                group=self.group,
                client_id=self.client_id,
                brokers_check_identity=self.brokers_check_identity,
            ),
        }


def replay_proposal(
    kind: str,
    needs: Sequence[tuple[datetime, str, int]],
    addresses: dict[int, tuple[str, int]],
    end: datetime | None,
    *,
    linger_ms: int | None = None,
    share_coordinator: bool = False,
    group: str | None = None,
    client_id: str = "",
    brokers_check_identity: bool = True,
) -> dict[str, Any]:
    """What the proposal opens and holds for ``needs`` ((time, API, connection id) of each
    request, in order): the ``proposed`` policy itself, driven by them
    (:func:`~connmgr_evidence.estimate.logs_replay.replay_log`); ``addresses`` are the
    host:port of each connection id the log shows, ``end`` the log's last instant;
    ``linger_ms`` and ``share_coordinator`` set the policy's options of those names (None,
    False: its defaults); ``group`` and ``client_id`` name the client's group and
    transaction coordinators. ``brokers_check_identity``: the brokers answer KIP-1242's
    identity check (Kafka 4.4+), so the policy may adopt the bootstrap connection as the
    broker's at its host:port; False: older brokers, the bootstrap connection is a stand-in
    until the first broker dial."""
    settings = {"share_coordinator": str(share_coordinator).lower()}
    if linger_ms is not None:
        settings["connection_linger_ms"] = str(linger_ms)
    return replay_log(
        kind,
        needs,
        addresses,
        end,
        group=group,
        client_id=client_id,
        settings=settings,
        brokers_check_identity=brokers_check_identity,
    )


@dataclass
class FileResult:
    """One file's clients (records as :meth:`ClientAccount.finish` returns them), the lines
    skipped as not connection lines, and the error that stopped reading it (None: read
    whole)."""

    path: str
    clients: list[dict[str, Any]]
    skipped_lines: int
    lines: int
    error: str | None = None


class UnreadableFile(Exception):
    """A file that is binary or cannot be read."""


def _open_text(path: Path) -> Iterator[str]:
    opener: Callable[..., Any] = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        head = f.read(BINARY_PROBE)
        if b"\0" in head:
            raise UnreadableFile(f"{path}: binary data (a NUL byte in its first bytes)")
        rest = head + f.read()
    yield from rest.decode("utf-8", errors="replace").splitlines()


def analyse_lines(
    lines: Iterable[str], source: str, *, brokers_check_identity: bool = True
) -> tuple[list[dict[str, Any]], int, int]:
    """Every client's record in ``lines`` (one log), the count of lines that are not
    connection or request lines of a client, and the count of lines;
    ``brokers_check_identity`` as :func:`replay_proposal` takes it."""
    accounts: dict[tuple[str, str | None], ClientAccount] = {}
    skipped = count = 0
    for line in lines:
        count += 1
        event = javalog.parse_connection_event(line)
        sent = None if event is not None else javalog.parse_sent_request(line)
        if event is None and sent is None:
            skipped += 1
            continue
        who = javalog.client_of(line)
        if who is None:
            skipped += 1
            continue
        key = (who.client_id, who.group)
        account = accounts.get(key)
        if account is None:
            account = accounts[key] = ClientAccount(
                who.client_id,
                who.group,
                who.kind,
                source,
                brokers_check_identity=brokers_check_identity,
            )
        if event is not None:
            if event.kind != "unreachable":
                account.event(event)
        elif sent is not None:
            account.request(*sent)
    return [a.finish() for a in accounts.values()], skipped, count


def analyse_file(path: str) -> FileResult:
    """:func:`analyse_lines` over one file (``.gz`` decompressed); a binary or unreadable
    file gives a result with ``error`` set and no clients."""
    try:
        clients, skipped, count = analyse_lines(_open_text(Path(path)), path)
    except UnreadableFile as e:
        return FileResult(path, [], 0, 0, str(e))
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        return FileResult(path, [], 0, 0, f"{path}: cannot be read ({e})")
    return FileResult(path, clients, skipped, count)


def collect_files(paths: Iterable[str | Path]) -> tuple[list[str], list[str]]:
    """The files under ``paths`` (directories recursively, sorted), and the errors for paths
    that do not exist."""
    files: list[str] = []
    errors: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for root, dirs, names in os.walk(path):
                dirs.sort()
                files += [os.path.join(root, n) for n in sorted(names) if not n.startswith(".")]
        elif path.exists():
            files.append(str(path))
        else:
            errors.append(f"{path}: no such file or directory")
    return files, errors


def _totals(clients: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def sums(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
        rows = list(records)
        return {
            "opened": {r: sum(c["opened"][r] for c in rows) for r in ROLES},
            "peak": sum(c["peak"] for c in rows),
            "open_at_end": sum(c["open_at_end"] for c in rows),
        }

    today = sums(clients)
    lives = [life for c in clients for life in c["bootstrap_lived_ms"]]
    closed = sorted(life for life in lives if life is not None)
    return {
        "clients": len(clients),
        **today,
        "never_used": sum(c["never_used"] for c in clients),
        "bootstrap_lived_ms": {
            "closed": len(closed),
            "median": statistics.median(closed) if closed else None,
            "max": closed[-1] if closed else None,
            "open_at_end": len(lives) - len(closed),
        },
        "proposal": sums(c["proposal"] for c in clients),
    }


def combine(results: Iterable[FileResult]) -> dict[str, Any]:
    """The ``--json`` document of the files' results, clients sorted by (source, client id,
    group), so the order does not depend on how the files were spread."""
    clients: list[dict[str, Any]] = []
    skipped = lines = 0
    errors: list[str] = []
    files = 0
    for result in results:
        files += 1
        clients += result.clients
        skipped += result.skipped_lines
        lines += result.lines
        if result.error is not None:
            errors.append(result.error)
    clients.sort(key=lambda c: (c["source"], c["client_id"], c["group"] or ""))
    return {
        "clients": clients,
        "totals": _totals(clients),
        "skipped_lines": skipped,
        "lines": lines,
        "files": files,
        "errors": sorted(errors),
    }


SPARK_THRESHOLD_BYTES: Final = 64 * 1024 * 1024
"""With ``engine="auto"``, inputs at least this large (on disk) run on Spark; smaller ones
in this process. One process read 61 MB of logs in 20 s on a loaded 2-core machine (see
``docs/estimate.md``); a local Spark session takes ~15 s to start, so below this size Spark
cannot win back its start."""


def input_bytes(files: Iterable[str]) -> int:
    """The files' total size on disk (unreadable ones count 0)."""
    total = 0
    for f in files:
        with contextlib.suppress(OSError):
            total += os.path.getsize(f)
    return total


def estimate(
    files: Sequence[str],
    *,
    engine: str = "auto",
    master: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """The ``--json`` document for ``files``: in this process (``engine="local"``), on Spark
    (``"spark"``, ``master`` or ``local[*]``), or by size (``"auto"``, see
    :data:`SPARK_THRESHOLD_BYTES`). Both engines give the same document."""
    use_spark = engine == "spark" or (
        engine == "auto" and input_bytes(files) >= SPARK_THRESHOLD_BYTES
    )
    bar = _bar(len(files), progress)
    try:
        if use_spark:
            results = _on_spark(files, master, bar)
        else:
            results = []
            for f in files:
                results.append(analyse_file(f))
                bar(1)
    finally:
        bar(0)
    document = combine(results)
    document["engine"] = "spark" if use_spark else "local"
    return document


def _bar(total: int, show: bool) -> Callable[[int], None]:
    """A progress callback: ``n > 0`` advances by n, 0 closes."""
    if not show:
        return lambda n: None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="file", desc="estimate logs", leave=False)

    def step(n: int) -> None:
        if n:
            bar.update(n)
        else:
            bar.close()

    return step


def _on_spark(
    files: Sequence[str], master: str | None, bar: Callable[[int], None]
) -> list[FileResult]:
    from connmgr_evidence.bench.runtime.spark import spark_session

    session = spark_session(master, app="connmgr-estimate-logs")
    context = session.sparkContext
    if not files:
        return []
    # Many small partitions: the bar moves as each arrives, and executors stay busy.
    slices = max(1, min(len(files), max(4 * context.defaultParallelism, len(files) // 50)))
    rdd = context.parallelize(list(files), slices).map(analyse_file)
    results: list[FileResult] = []
    for result in rdd.toLocalIterator(prefetchPartitions=True):
        results.append(result)
        bar(1)
    return results
