"""Run aiokafka v0.14.0's own integration tests with stock clients and with ours, and compare.

    python benchmarks/aiokafka-suite/run.py /path/to/aiokafka-checkout [--out DIR] ...

The checkout is an aiokafka v0.14.0 source tree (or just its ``tests/`` folder), e.g.::

    git clone --depth 1 --branch v0.14.0 https://github.com/aio-libs/aiokafka /tmp/aiokafka

For each client set (``stock``, then ``ours``) the runner starts a fresh real cluster with
``connmgr cluster --broker-config auto.create.topics.enable=true --broker-config
num.partitions=2`` (what aiokafka's docker image sets), runs pytest over the chosen test files
with the ``connmgr_swap`` plugin (next to this file) pointed at broker 1, and stops the
cluster. Then it writes ``summary.md`` in ``--out``: counts per file for both runs, and every
test whose outcome differs, with its failure. Nothing of aiokafka is copied here.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_FILES = (
    "test_producer.py",
    "test_consumer.py",
    "test_transactional_producer.py",
    "test_transactional_consumer.py",
    "test_coordinator.py",
    "test_pep492.py",
)
BROKER_CONFIG = ("auto.create.topics.enable=true", "num.partitions=2")
MODES = ("stock", "ours")


def tests_root(checkout: Path) -> Path:
    """The directory holding ``tests/`` (the checkout, or the parent of a bare tests/)."""
    checkout = checkout.resolve()
    for root in (checkout, checkout.parent if checkout.name == "tests" else None):
        if root is not None and (root / "tests" / "_testutil.py").is_file():
            return root
    raise SystemExit(f"run.py: no aiokafka tests/_testutil.py in {checkout}")


class Cluster:
    """A ``connmgr cluster`` subprocess held until :meth:`stop`."""

    def __init__(self, brokers: int, log: Path) -> None:
        exe = shutil.which("connmgr")
        command = [exe] if exe else [sys.executable, "-m", "connmgr_evidence.realkafka.cli"]
        if exe:
            command.append("cluster")
        command += ["--brokers", str(brokers)]
        for entry in BROKER_CONFIG:
            command += ["--broker-config", entry]
        self.command = command
        self.log = log
        self.bootstrap: list[str] = []
        self._process: subprocess.Popen[str] | None = None

    def start(self, timeout_s: float = 300.0) -> list[str]:
        self._process = subprocess.Popen(
            self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert self._process.stdout is not None
        lines: list[str] = []
        ready = threading.Event()

        def pump(stream: IO[str]) -> None:
            with self.log.open("w", encoding="utf-8") as out:
                for line in stream:
                    out.write(line)
                    out.flush()
                    lines.append(line)
                    if line.startswith("holding"):
                        ready.set()
            ready.set()

        threading.Thread(target=pump, args=(self._process.stdout,), daemon=True).start()
        ready.wait(timeout_s)
        for line in lines:
            if line.startswith("bootstrap servers:"):
                self.bootstrap = line.split(":", 1)[1].strip().split(",")
        if not any(line.startswith("holding") for line in lines):
            self.stop()
            raise SystemExit(
                f"run.py: the cluster did not start; see {self.log}:\n{''.join(lines)}"
            )
        return self.bootstrap

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)  # connmgr cluster tears down on SIGTERM
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def pin_connmgr(rev: str, out: Path) -> Path:
    """``prototype/`` of this repository at ``rev``, extracted under ``out`` (so edits made to
    the work tree while the suite runs do not change what is measured)."""
    sha = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    dest = out / f"connmgr-{sha[:12]}"
    if not (dest / "prototype" / "connmgr" / "__init__.py").is_file():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            # the broker's pom too: connmgr_evidence.realkafka finds it beside prototype/
            [
                "git",
                "-C",
                str(REPO),
                "archive",
                "--format=tar",
                sha,
                "prototype",
                "benchmarks/kafka-broker",
            ],
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(dest, filter="data")
    return dest / "prototype"


def describe_connmgr(src: Path | None) -> str:
    if src is not None:
        return f"{src} (git archive of {src.parent.name.removeprefix('connmgr-')})"
    dirty = _git("status", "--porcelain", "--", "prototype")
    state = "with uncommitted changes" if dirty else "clean"
    return f"{REPO / 'prototype'} work tree at {_git('rev-parse', 'HEAD')[:12]}, {state}"


def run_mode(mode: str, args: argparse.Namespace, root: Path, out: Path, src: Path | None) -> int:
    cluster = Cluster(args.brokers, out / f"cluster-{mode}.log")
    (out / f"{mode}.connmgr").write_text(describe_connmgr(src) + "\n", encoding="utf-8")
    began = time.monotonic()
    try:
        bootstrap = cluster.start()
        print(f"[{mode}] cluster up: {','.join(bootstrap)}", flush=True)
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(HERE / "pytest.ini"),
            "--rootdir",
            str(root),
            "-p",
            "connmgr_swap",
            "-p",
            "no:cacheprovider",
            "--clients",
            mode,
            "--kafka-bootstrap",
            bootstrap[0],
            "--swap-report",
            str(out / f"{mode}.json"),
            "-m",
            "not ssl",
            "-v",
            "-rfE",
            *(["-k", args.k] if args.k else []),
            *[f"tests/{name}" for name in args.files],
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            str(p) for p in (HERE, src, env.get("PYTHONPATH", "")) if p
        )
        (out / f"{mode}.command").write_text(" ".join(command) + "\n", encoding="utf-8")
        with (out / f"{mode}.log").open("w", encoding="utf-8") as log:
            status = subprocess.run(
                command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, check=False
            ).returncode
    finally:
        cluster.stop()
    print(f"[{mode}] pytest exit {status} in {time.monotonic() - began:.0f}s", flush=True)
    return status


# --- the comparison -------------------------------------------------------------------------


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1]


def _short(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1]


def summarize(out: Path, files: Sequence[str]) -> str:
    runs: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        path = out / f"{mode}.json"
        if path.is_file():
            runs[mode] = json.loads(path.read_text(encoding="utf-8"))
    lines = [
        f"# aiokafka v0.14.0 integration tests: stock vs ours ({time.strftime('%Y-%m-%d')})",
        "",
    ]
    for mode, run in runs.items():
        where = out / f"{mode}.connmgr"
        if where.is_file():
            lines.append(f"- {mode}: connmgr from {where.read_text(encoding='utf-8').strip()}")
        built = ", ".join(f"{k} x{v}" for k, v in sorted(run["constructed_total"].items()))
        lines.append(f"- {mode}: pytest exit {run['exitstatus']}, constructed {built}")
        if run.get("stock_constructions_in_ours_run"):
            lines.append(
                f"  - STOCK CLIENTS IN AN OURS RUN: {run['stock_constructions_in_ours_run']}"
            )
    lines += ["", "| file | " + " | ".join(f"{m} pass/fail/error/skip" for m in runs) + " |"]
    lines.append("|---|" + "---|" * len(runs))
    for name in files:
        cells = []
        for run in runs.values():
            c = Counter(
                t["outcome"] for nodeid, t in run["tests"].items() if _file_of(nodeid) == name
            )
            cells.append(f"{c['passed']}/{c['failed']}/{c['error']}/{c['skipped']}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if set(runs) == set(MODES):
        stock, ours = runs["stock"]["tests"], runs["ours"]["tests"]
        differ = [
            n
            for n in sorted(set(stock) | set(ours))
            if stock.get(n, {}).get("outcome") != ours.get(n, {}).get("outcome")
        ]
        regress = [n for n in differ if stock.get(n, {}).get("outcome") == "passed"]
        lines += ["", f"## Passes with stock, not with ours ({len(regress)})", ""]
        for nodeid in regress:
            t = ours.get(nodeid, {"outcome": "not run"})
            crash = (t.get("crash") or "").strip().replace("\n", " ")[:400]
            lines.append(f"- `{nodeid}`: {t['outcome']} ({t.get('when', '-')}): {crash}")
        other = [n for n in differ if n not in regress]
        lines += ["", f"## Other differences ({len(other)})", ""]
        for nodeid in other:
            s, o = stock.get(nodeid, {}), ours.get(nodeid, {})
            lines.append(
                f"- `{nodeid}`: stock {s.get('outcome', 'not run')}, "
                f"ours {o.get('outcome', 'not run')}: "
                f"{(s.get('crash') or o.get('crash') or '').strip()[:300]}"
            )
        untouched = sorted(n for n in ours if not ours[n].get("constructed"))
        lines += [
            "",
            f"## Tests that constructed no producer/consumer ({len(untouched)}; "
            "their outcome says nothing about ours)",
            "",
            ", ".join(f"`{_short(n)}`" for n in untouched) or "none",
        ]
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text, encoding="utf-8")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="aiokafka v0.14.0 checkout (or its tests/)")
    parser.add_argument("--out", type=Path, default=Path("aiokafka-suite-results"))
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--files", nargs="+", default=list(DEFAULT_FILES))
    parser.add_argument("-k", default=None, help="pytest -k expression")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument(
        "--connmgr-rev",
        default=None,
        metavar="REV",
        help="import connmgr from a git archive of this commit instead of the work tree",
    )
    parser.add_argument(
        "--summarize-only", action="store_true", help="rebuild summary.md from --out"
    )
    args = parser.parse_args(argv)
    root = tests_root(args.checkout)
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out.resolve()
    if not args.summarize_only:
        import aiokafka

        if aiokafka.__version__ != "0.14.0":
            print(f"run.py: warning: aiokafka {aiokafka.__version__} installed, not 0.14.0")
        try:
            import cramjam  # noqa: F401
        except ImportError:
            print("run.py: warning: cramjam is missing: the lz4/snappy/zstd tests fail in both")
        src = pin_connmgr(args.connmgr_rev, out) if args.connmgr_rev else None
        for mode in args.modes:
            run_mode(mode, args, root, out, src)
    print(summarize(out, args.files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
