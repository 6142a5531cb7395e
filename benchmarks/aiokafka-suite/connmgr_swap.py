"""pytest plugin: run aiokafka v0.14.0's own integration tests against an already running
Kafka cluster, with stock aiokafka clients or with connmgr's drop-in ones swapped in.

Load it with ``-p connmgr_swap`` (this directory on ``PYTHONPATH``) and point pytest at an
aiokafka checkout's ``tests/`` (``run.py`` does all of this). Nothing of aiokafka's test code is
copied here; the plugin only changes what aiokafka's ``tests/conftest.py`` would otherwise do
with docker:

* ``--kafka-bootstrap HOST:PORT[,HOST:PORT...]``: the broker(s) the tests talk to. The
  conftest's docker fixtures (``docker``, ``kafka_image``, ``kafka_server``, ``ssl_folder``,
  ``acl_manager``, ``kafka_config``, ``kerberos_utils``) are replaced, in the conftest module
  itself, before pytest parses its fixtures, so no container is started. SSL, SASL, ACL and
  Kerberos need the docker image: what uses them is skipped (``-m "not ssl"`` deselects the
  SSL tests; the other helpers skip the test that touches them).
* ``--kafka-version X.Y.Z``: what aiokafka's ``@kafka_versions(...)`` checks compare against
  (the conftest reads it from ``--docker-image``; the plugin fills that option in).
* ``--clients stock|ours``: with ``ours``, before the conftest (and so ``tests/_testutil.py``
  and every test module) imports them, ``AIOKafkaProducer``/``AIOKafkaConsumer`` in
  ``aiokafka``, ``aiokafka.producer`` and ``aiokafka.consumer`` become
  ``connmgr.aio.ProposedProducer``/``ProposedConsumer``. After collection every loaded test
  module is checked to hold ours, and every construction is counted per test (a stock
  construction in an ``ours`` run is reported as a leak, and fails the session).
* ``--swap-report PATH``: a JSON file with, per test, its outcome, the failure's crash line and
  a traceback excerpt, its duration and the client classes it constructed.
"""

from __future__ import annotations

import functools
import json
import sys
import time
import types
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, ClassVar

import pytest

CLIENT_NAMES = ("AIOKafkaProducer", "AIOKafkaConsumer")
DOCKER_FIXTURES = (
    "docker",
    "kafka_image",
    "kafka_server",
    "ssl_folder",
    "acl_manager",
    "kafka_config",
    "kerberos_utils",
)


class _State:
    mode = "stock"
    stock: ClassVar[dict[str, type]] = {}
    ours: ClassVar[dict[str, type]] = {}
    current = "<collection>"
    constructions: ClassVar[dict[str, Counter[str]]] = defaultdict(Counter)
    reports: ClassVar[dict[str, dict[str, Any]]] = {}
    conftest_patched: ClassVar[list[str]] = []
    leaks: ClassVar[list[str]] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("connmgr-swap", "aiokafka's tests against connmgr clients")
    group.addoption("--clients", choices=("stock", "ours"), default="stock")
    group.addoption("--kafka-bootstrap", default=None, metavar="HOST:PORT[,HOST:PORT]")
    group.addoption("--kafka-version", default="4.4.0", metavar="X.Y.Z")
    group.addoption("--swap-report", default=None, metavar="PATH")


# --- the swap, before any conftest imports aiokafka's client classes -------------------------


def _count_constructions(cls: type) -> None:
    original = cls.__init__  # type: ignore[misc]

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        # One record per construction: ours call this through super().__init__().
        _State.constructions[_State.current][type(self).__name__] += 1
        original(self, *args, **kwargs)

    cls.__init__ = __init__  # type: ignore[misc]


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    import aiokafka
    import aiokafka.consumer
    import aiokafka.producer

    options = early_config.known_args_namespace
    _State.mode = options.clients
    _State.stock = {
        "AIOKafkaProducer": aiokafka.producer.AIOKafkaProducer,
        "AIOKafkaConsumer": aiokafka.consumer.AIOKafkaConsumer,
    }
    for cls in _State.stock.values():
        _count_constructions(cls)  # in both modes, so both runs carry the same wrapper
    if _State.mode != "ours":
        return
    from connmgr.aio import ProposedConsumer, ProposedProducer

    _State.ours = {"AIOKafkaProducer": ProposedProducer, "AIOKafkaConsumer": ProposedConsumer}
    for name, cls in _State.ours.items():
        assert issubclass(cls, _State.stock[name])
        for module in (aiokafka, aiokafka.producer, aiokafka.consumer):
            if hasattr(module, name):
                setattr(module, name, cls)


# --- docker fixtures replaced in aiokafka's conftest ------------------------------------------


class _Unavailable:
    """Stands in for a docker-only helper; a test that touches it is skipped."""

    def __init__(self, what: str) -> None:
        self._what = what

    def _skip(self) -> Any:
        pytest.skip(f"{self._what} needs aiokafka's docker image (not available on this cluster)")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._skip()

    def __truediv__(self, other: Any) -> Any:
        return self._skip()

    def __fspath__(self) -> str:
        return self._skip()  # type: ignore[no-any-return]


class _Server:
    """What aiokafka's ``KafkaServer`` offers the tests, for an existing cluster."""

    def __init__(self, bootstrap: str) -> None:
        self.hosts = [part.strip() for part in bootstrap.split(",") if part.strip()]
        host, _, port = self.hosts[0].rpartition(":")
        self.host = host
        self.port = int(port)
        self.ssl_port = self.sasl_plain_port = self.sasl_ssl_port = None
        self.container = _Unavailable("the kafka container")


def _replacement_fixtures() -> dict[str, Any]:
    @pytest.fixture(scope="session", name="docker")
    def docker() -> None:
        return None

    @pytest.fixture(scope="session", name="kafka_image")
    def kafka_image(request: pytest.FixtureRequest) -> str:
        return str(request.config.getoption("--docker-image"))

    @pytest.fixture(scope="session", name="kafka_server")
    def kafka_server(request: pytest.FixtureRequest) -> _Server:
        bootstrap = request.config.getoption("--kafka-bootstrap")
        if not bootstrap:
            pytest.exit("connmgr_swap: --kafka-bootstrap HOST:PORT is required", returncode=4)
        return _Server(bootstrap)

    @pytest.fixture(scope="session", name="ssl_folder")
    def ssl_folder() -> _Unavailable:
        return _Unavailable("ssl_folder")

    @pytest.fixture(scope="class", name="acl_manager")
    def acl_manager() -> _Unavailable:
        return _Unavailable("acl_manager")

    @pytest.fixture(scope="class", name="kafka_config")
    def kafka_config() -> _Unavailable:
        return _Unavailable("kafka_config")

    @pytest.fixture(scope="class", name="kerberos_utils")
    def kerberos_utils() -> _Unavailable:
        return _Unavailable("kerberos_utils")

    found = dict(locals())
    return {name: found[name] for name in DOCKER_FIXTURES}


@pytest.hookimpl(tryfirst=True)
def pytest_plugin_registered(plugin: Any, plugin_name: str) -> None:
    # pytest parses a conftest's fixtures when its directory is collected, after this.
    if (
        isinstance(plugin, types.ModuleType)
        and str(plugin_name).endswith("conftest.py")
        and hasattr(plugin, "kafka_server")
        and hasattr(plugin, "setup_test_class")
    ):
        for name, fixture in _replacement_fixtures().items():
            setattr(plugin, name, fixture)
        _State.conftest_patched.append(str(plugin_name))


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "docker_image", "absent") is None:
        # The conftest derives kafka_version from the image tag's last "_" part.
        config.option.docker_image = f"connmgr-cluster:2.13_{config.getoption('--kafka-version')}"


# --- honesty checks ---------------------------------------------------------------------------


def _tests_modules(session: pytest.Session) -> list[types.ModuleType]:
    files = {Path(str(item.path)).resolve() for item in session.items}
    roots = {f.parent for f in files}
    found = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and Path(path).resolve().parent in roots:
            found.append(module)
    return found


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.items and not _State.conftest_patched:
        pytest.exit("connmgr_swap: aiokafka's tests/conftest.py was not found to patch", 4)
    if _State.mode != "ours":
        return
    import aiokafka
    import aiokafka.consumer
    import aiokafka.producer

    wrong = []
    for module in [aiokafka, aiokafka.producer, aiokafka.consumer, *_tests_modules(session)]:
        for name in CLIENT_NAMES:
            bound = getattr(module, name, None)
            if bound is not None and bound is not _State.ours[name]:
                wrong.append(f"{module.__name__}.{name} is {bound!r}")
    if wrong:
        pytest.exit("connmgr_swap: the swap did not reach: " + "; ".join(wrong), returncode=4)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Any:
    _State.current = item.nodeid
    try:
        return (yield)
    finally:
        _State.current = "<between tests>"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = _State.reports.setdefault(
        report.nodeid, {"outcome": "passed", "phases": {}, "duration": 0.0}
    )
    entry["phases"][report.when] = report.outcome
    entry["duration"] += report.duration
    if report.failed:
        if entry["outcome"] not in ("failed", "error"):  # the first failing phase names it
            entry["outcome"] = "failed" if report.when == "call" else "error"
            crash = getattr(report.longrepr, "reprcrash", None)
            entry["crash"] = getattr(crash, "message", None) or str(report.longrepr)[-500:]
            entry["traceback_tail"] = "\n".join(report.longreprtext.splitlines()[-60:])
            entry["when"] = report.when
        else:
            entry.setdefault("also_failed", []).append(report.when)
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
        entry["crash"] = str(report.longrepr)[-300:]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    stock_names = {cls.__name__ for cls in _State.stock.values()}
    ours_names = {cls.__name__ for cls in _State.ours.values()}
    totals: Counter[str] = Counter()
    for nodeid, counts in _State.constructions.items():
        totals.update(counts)
        if _State.mode == "ours" and stock_names & set(counts):
            _State.leaks.append(nodeid)
    tests = {}
    for nodeid, entry in _State.reports.items():
        entry["constructed"] = dict(_State.constructions.get(nodeid, {}))
        tests[nodeid] = entry
    import connmgr

    summary = {
        "mode": _State.mode,
        "connmgr": str(Path(connmgr.__file__).resolve().parent),
        "kafka_bootstrap": session.config.getoption("--kafka-bootstrap"),
        "kafka_version": session.config.getoption("--kafka-version"),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "exitstatus": int(exitstatus),
        "constructed_total": dict(totals),
        "stock_constructions_in_ours_run": _State.leaks,
        "tests_constructing_ours": sorted(
            n for n, c in _State.constructions.items() if ours_names & set(c)
        ),
        "tests": tests,
    }
    path = session.config.getoption("--swap-report")
    if path:
        Path(path).write_text(json.dumps(summary, indent=1, sort_keys=True), encoding="utf-8")
    if _State.mode == "ours" and (_State.leaks or (tests and not totals)):
        session.exitstatus = 4


def pytest_terminal_summary(terminalreporter: Any) -> None:
    totals: Counter[str] = Counter()
    for counts in _State.constructions.values():
        totals.update(counts)
    line = ", ".join(f"{name} x{n}" for name, n in sorted(totals.items())) or "none"
    terminalreporter.write_sep("-", f"connmgr_swap: clients={_State.mode}")
    terminalreporter.write_line(f"constructed: {line}")
    if _State.leaks:
        terminalreporter.write_line(f"STOCK CLIENTS CONSTRUCTED IN AN OURS RUN: {_State.leaks}")
