"""The patched kafka-clients: which release, which switches, where each variant builds, and
the patched jar itself as a client (:func:`build_patched_client`). What the probe build
(:mod:`connmgr_evidence.java.build`) and the test runner (:mod:`connmgr_evidence.java.patch`, a
program) both
need, in a module that runs nothing.
"""

from __future__ import annotations

import enum
import hashlib
import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Final

from connmgr_evidence.java.errors import JavaBuildError, JavaToolError, output_tail, strip_ansi
from connmgr_evidence.java.tools import JavaTools, file_lock, find_tools, run_maven

__all__ = [
    "INPUTS_STAMP",
    "KAFKA_VERSION",
    "PATCHED_SUFFIX",
    "SETTLE_MS",
    "SWITCHES",
    "Variant",
    "build_dir",
    "build_dir_for",
    "build_patched_client",
    "default_module_dir",
    "maven_command",
    "module_fingerprint",
]

KAFKA_VERSION: Final = "4.3.1"
"""The release the patch applies to (the pom's ``kafka.version``)."""

PATCHED_SUFFIX: Final = "-patched"
"""A kafka-clients version ending so (``4.3.1-patched``) names the patched client, run by the
Java probe with :data:`SWITCHES` on (:func:`connmgr_evidence.java.build.build_probe`)."""

SWITCHES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "bootstrap.connection.close.enable": "true",
        "connection.role.metrics.enable": "true",
        "endpoint.change.retire.enable": "true",
        "connections.linger.ms": "3000",
    }
)
"""The configurations the patch adds, switched on: how the probe runs the patched client (each
defaults to today's behaviour: ``false``, and ``-1`` for the linger). The linger is KIP (b)'s
recommended ``3000``. Left at its default: ``client.dns.refresh.ms`` (KIP (a) rule 3), which acts
only when a held connection's host name resolves to other addresses; the clients here dial IP
literals, so it would start a resolver thread and change nothing."""

SETTLE_MS: Final = 4_500
"""How long a short run of the patched client settles before its steady count: longer than
the linger of :data:`SWITCHES` plus a margin, so a connection the linger closes after the last
record is closed by then, in the client and in its model alike (at 1,500 ms the count fell
inside the linger and hung on tens of milliseconds of timing)."""


class Variant(enum.Enum):
    """Which client the tests run against (the pom's profile of the same name)."""

    STOCK = "stock"
    """kafka-clients 4.3.1 as released: nothing patched, none of the project's tests."""
    DEFAULTS = "defaults"
    """The patch with every new configuration at its default, which is today's behaviour."""
    SWITCHES_ON = "switches-on"
    """The patch with every new configuration defaulted on."""


def default_module_dir() -> Path:
    """``benchmarks/kafka-clients-patch`` of the source tree this package runs from."""
    # patch.py -> java -> connmgr_evidence -> evidence -> repository root
    return Path(__file__).resolve().parents[3] / "benchmarks" / "kafka-clients-patch"


def build_dir(variant: Variant) -> Path:
    """The variant's Maven build directory (not created here)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "connmgr" / "kafka-clients-patch" / variant.value / "target"


def module_fingerprint(module_dir: Path, tools: JavaTools) -> str:
    """Hash of everything a build of the module depends on: the pom, the diffs (both series)
    and the script that applies them, the project's own classes and tests, and the JDK/Maven
    used."""
    h = hashlib.sha256()
    for part in ("kafka-clients-patched-v2", str(tools.java.resolve()), str(tools.mvn)):
        h.update(part.encode() + b"\0")
    files = [module_dir / "pom.xml", module_dir / "apply-patches.sh"]
    for tree in ("patches", "switches-on", "src"):
        files += sorted(p for p in (module_dir / tree).rglob("*") if p.is_file())
    for path in files:
        h.update(str(path.relative_to(module_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


INPUTS_STAMP: Final = ".connmgr-inputs"
"""File in a build directory naming the :func:`module_fingerprint` its contents were built
from (written once Maven has run)."""


@contextmanager
def build_dir_for(target: Path, fingerprint: str, timeout_s: float) -> Iterator[Path]:
    """Hold ``target`` (a variant's build directory) for one build of inputs ``fingerprint``:
    under an exclusive lock (another process building the variant, say from another checkout,
    waits up to ``timeout_s``), emptied first unless its stamp names the same inputs, and
    stamped once the body has run.

    Why emptied: the build unpacks the released classes once and compiles only the files the
    diffs touch over them, so a series that touches fewer files than the one built before
    would leave the earlier series' classes (and its tests in ``test-classes``) in place, a
    client that is neither. Kafka's Mockito-based tests fail on such a mix.
    """
    with file_lock(target.parent / ".lock", timeout_s):
        stamp = target / INPUTS_STAMP
        if not stamp.is_file() or stamp.read_text(encoding="utf-8") != fingerprint:
            shutil.rmtree(target, ignore_errors=True)
        yield target
        target.mkdir(parents=True, exist_ok=True)
        stamp.write_text(fingerprint, encoding="utf-8")


def maven_command(tools: JavaTools, module_dir: Path, target: Path, *args: str) -> list[str]:
    """``mvn`` on the module, batch mode, one thread, no transfer progress or colours,
    building in ``target``, then ``args``."""
    common = ["-B", "-T", "1", "-ntp", "-Dstyle.color=never", "-f", str(module_dir / "pom.xml")]
    return [str(tools.mvn), *common, f"-Dpatch.build.dir={target}", *args]


def build_patched_client(
    *,
    module_dir: Path | None = None,
    tools: JavaTools | None = None,
    timeout_s: float = 900.0,
) -> Path:
    """The patched kafka-clients jar, every new configuration at its default (a client turns
    them on in its own configuration: :data:`SWITCHES`), to run as a client.

    Built with ``mvn -B -T 1 package -DskipTests`` in a directory of its own (not a test
    variant's, which a concurrent test run rewrites) held as the variants' are
    (:func:`build_dir_for`: one process at a time, emptied when the inputs changed), then
    copied to a file named by the fingerprint of its inputs (:func:`module_fingerprint`): a
    later call with the same inputs returns that file without running Maven. Raises
    :class:`JavaBuildError` with the tail of Maven's output if the build fails or exceeds
    ``timeout_s``.
    """
    tools = tools or find_tools()
    module_dir = module_dir or default_module_dir()
    if not (module_dir / "pom.xml").is_file():
        raise JavaToolError(f"no pom.xml in {module_dir} (expected the kafka-clients-patch module)")
    home = build_dir(Variant.DEFAULTS).parent.parent / "client"
    fingerprint = module_fingerprint(module_dir, tools)
    jar = home / f"kafka-clients-{KAFKA_VERSION}{PATCHED_SUFFIX}-{fingerprint[:16]}.jar"
    if jar.is_file():
        return jar
    with build_dir_for(home / "target", fingerprint, timeout_s) as target:
        if jar.is_file():
            return jar  # built by another process while this one waited for the directory
        command = maven_command(tools, module_dir, target, "-DskipTests", "package")
        done = run_maven(tools, command, timeout_s=timeout_s, doing="building the patched client")
        output = strip_ansi(done.stdout + done.stderr)
        (home / "maven.log").write_text(output, encoding="utf-8")
        built = target / f"kafka-clients-patched-{KAFKA_VERSION}-{Variant.DEFAULTS.value}.jar"
        if done.returncode != 0 or not built.is_file():
            raise JavaBuildError(
                f"Maven failed (exit {done.returncode}) building the patched client: "
                f"{' '.join(command)}\n{output_tail(output)}"
            )
        for old in home.glob(f"kafka-clients-{KAFKA_VERSION}{PATCHED_SUFFIX}-*.jar"):
            old.unlink()  # an older patch's jar: nothing runs it any more
        tmp = jar.with_suffix(".tmp")
        shutil.copyfile(built, tmp)
        tmp.replace(jar)  # atomic: a crashed copy never passes for a build
    return jar
