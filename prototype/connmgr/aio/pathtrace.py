"""A counted trace of the path from ``ProposedProducer.send()`` to the first socket connect.

``python -m connmgr.aio.pathtrace`` starts the embedded cluster (librdkafka's mock cluster,
:mod:`connmgr.embedded`), builds a fresh drop-in producer (:mod:`connmgr.aio`), awaits its
``start()`` untraced (without ``warm_up`` it dials nothing: the first send bootstraps), and
then traces, with :func:`sys.setprofile`, every Python function that runs on the event loop's
thread from the call of ``send()`` until the first ``connect()`` on a socket (the first dial;
for a ``warm_up`` client that would be ``start()``'s, which is why the trace starts after it).
The profile hook sees every task of the loop, so the trace holds what the application's
``send()`` caused and whatever else ran meanwhile; the summary names the tasks.

The producer is given the cluster's first broker by host name (``localhost:<port>``), as
applications name their brokers; ``--literal`` gives it as ``127.0.0.1:<port>`` instead (a
literal address is never resolved, so that path skips the driver's name resolution).

What is counted (:func:`summarise`, which works on plain :class:`Call` records so a test can
feed it a made-up sequence):

* A *layer* is where a function's module lives: ``aiokafka``, ``connmgr.aio``,
  ``connmgr.core``, ``connmgr.policies``, or ``connmgr`` for the rest of the package (the
  ledger, seeding, errors). Everything else -- asyncio, the standard library -- is *outside*:
  its calls are counted apart, and its frames are transparent (aiokafka calling through
  asyncio into the drop-in is one aiokafka -> connmgr.aio crossing).
* *Functions*: the distinct ``module:qualname`` of layered calls (each call is listed once in
  the chain, with its depth: the number of layered frames above it on the stack).
  Comprehensions and generator expressions are part of the function they are written in;
  the methods ``dataclass`` generates (``__init__``, ``__hash__``) are functions.
* A *crossing* is a first entry into a layered function whose nearest layered caller on the
  stack is in another layer. A coroutine resumed by the event loop is no new entry; a task's
  first step has no layered caller, so it is no crossing either.
* A *policy pass* is one entry into a policy's ``handle()`` that is not inside another
  ``handle()`` (a subclass delegating to the base class is one pass).

``--refresh-doc docs/drop-in-clients.md`` writes the counts of both traces (by name and
literal) into that page's generated table (:func:`doc_tables`); a test fails when the page's
table differs from what the tool measures. Only the layered counts go there: the calls
outside the layers vary by a few from run to run (how often the loop polls).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Final

LAYERS: Final = ("aiokafka", "connmgr.aio", "connmgr.core", "connmgr.policies", "connmgr")
"""The layers, most specific prefix first (``connmgr`` holds the rest of the package)."""
POLICY_LAYERS: Final = frozenset({"connmgr.core", "connmgr.policies"})


def layer_of(module: str) -> str | None:
    """The layer of ``module`` (see the module docstring); None: outside every layer. This
    module, the harness, is outside: run with ``-m`` it is ``__main__``, imported it would
    count its own call of ``send()`` as a crossing."""
    if module == __name__:
        return None
    for layer in LAYERS:
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


@dataclass(frozen=True, slots=True)
class Call:
    """One first entry into a function, as the trace saw it."""

    module: str
    function: str
    """The qualified name (``Class.method``)."""
    depth: int
    """Layered frames above it on the stack (0: called from outside every layer)."""
    caller_layer: str | None
    """The layer of the nearest layered frame above it; None: none (a task's first step)."""
    in_handle: bool = False
    """Called while a policy's ``handle()`` is on the stack above it."""
    task: str = ""
    """The asyncio task it ran in ("" outside any task)."""

    @property
    def layer(self) -> str | None:
        return layer_of(self.module)

    @property
    def name(self) -> str:
        return f"{self.module}:{self.function}"


@dataclass(frozen=True, slots=True)
class PathSummary:
    """The counts of one trace (see the module docstring for their definitions)."""

    functions: int
    calls: int
    crossings: int
    policy_passes: int
    outside_calls: int
    crossings_by_pair: tuple[tuple[str, int], ...]
    functions_by_layer: tuple[tuple[str, int], ...]
    tasks: tuple[str, ...]

    def lines(self) -> list[str]:
        """The summary as text, one fact a line."""
        return [
            f"distinct functions (layered): {self.functions}",
            f"layered calls: {self.calls}",
            f"layer crossings: {self.crossings}",
            *(f"  {pair}: {n}" for pair, n in self.crossings_by_pair),
            f"full policy passes (handle()): {self.policy_passes}",
            "functions by layer: "
            + ", ".join(f"{layer} {n}" for layer, n in self.functions_by_layer),
            f"calls outside the layers (asyncio, stdlib): {self.outside_calls}",
            f"tasks: {', '.join(self.tasks) or '-'}",
        ]


def is_handle(call: Call) -> bool:
    return call.layer in POLICY_LAYERS and call.function.rsplit(".", 1)[-1] == "handle"


def summarise(calls: Iterable[Call]) -> PathSummary:
    """Count ``calls`` (first entries, in order; outside calls included)."""
    layered: list[Call] = []
    outside = 0
    for call in calls:
        if call.layer is None:
            outside += 1
        else:
            layered.append(call)
    pairs: Counter[str] = Counter()
    for call in layered:
        if call.caller_layer is not None and call.caller_layer != call.layer:
            pairs[f"{call.caller_layer} -> {call.layer}"] += 1
    names = {call.name: call.layer for call in layered}
    by_layer = Counter(layer for layer in names.values() if layer is not None)
    tasks = tuple(dict.fromkeys(call.task for call in layered if call.task))
    return PathSummary(
        functions=len(names),
        calls=len(layered),
        crossings=sum(pairs.values()),
        policy_passes=sum(1 for call in layered if is_handle(call) and not call.in_handle),
        outside_calls=outside,
        crossings_by_pair=tuple(sorted(pairs.items())),
        functions_by_layer=tuple((layer, by_layer[layer]) for layer in LAYERS if by_layer[layer]),
        tasks=tasks,
    )


def chain_lines(calls: Sequence[Call]) -> list[str]:
    """The layered calls as an indented chain, one a line, under the task they ran in."""
    lines: list[str] = []
    task: str | None = None
    for call in calls:
        if call.layer is None:
            continue
        if call.task != task:
            task = call.task
            lines.append(f"[task {task or '-'}]")
        mark = " [policy pass]" if is_handle(call) and not call.in_handle else ""
        lines.append(f"{'  ' * (call.depth + 1)}{call.name}{mark}")
    return lines


# --- the tracer ------------------------------------------------------------------------------


class PathTracer:
    """A :func:`sys.setprofile` hook recording first entries until a socket connects."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.reached_connect = False
        self._seen: set[FrameType] = set()

    def __enter__(self) -> PathTracer:
        # Frames that exist already (this stack, every task's suspended coroutines) are
        # resumed during the trace, not entered: they are no calls of the path.
        frame = sys._getframe(1)
        while frame is not None:
            self._seen.add(frame)
            frame = frame.f_back  # type: ignore[assignment]
        for task in asyncio.all_tasks():
            awaited: Any = task.get_coro()
            while awaited is not None:
                suspended = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
                if suspended is not None:
                    self._seen.add(suspended)
                awaited = getattr(awaited, "cr_await", None) or getattr(
                    awaited, "gi_yieldfrom", None
                )
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        self._seen.clear()

    def _hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.reached_connect:
            return
        if event == "c_call":
            if getattr(arg, "__name__", "") == "connect" and _is_socket(
                getattr(arg, "__self__", None)
            ):
                self.reached_connect = True
                sys.setprofile(None)
            return
        if event != "call" or frame in self._seen:
            return  # a return, or a coroutine resumed
        if frame.f_code.co_name in _COMPREHENSIONS:
            return  # part of the function it is written in
        self._seen.add(frame)  # held until the trace ends, so no frame id is reused
        self.calls.append(self._record(frame))

    def _record(self, frame: FrameType) -> Call:
        depth = 0
        caller_layer: str | None = None
        in_handle = False
        back = frame.f_back
        while back is not None:
            layer = layer_of(back.f_globals.get("__name__", ""))
            if layer is not None and back.f_code.co_name not in _COMPREHENSIONS:
                depth += 1
                if caller_layer is None:
                    caller_layer = layer
                if layer in POLICY_LAYERS and back.f_code.co_name == "handle":
                    in_handle = True
            back = back.f_back
        task = _current_task_name()
        return Call(
            frame.f_globals.get("__name__", "?"),
            frame.f_code.co_qualname,
            depth,
            caller_layer,
            in_handle,
            task,
        )


_COMPREHENSIONS: Final = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"})


def _is_socket(obj: object) -> bool:
    import socket

    return isinstance(obj, socket.socket)


def _current_task_name() -> str:
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return ""
    if task is None:
        return ""
    coro = task.get_coro()
    code = getattr(coro, "cr_code", None)
    return str(getattr(code, "co_qualname", task.get_name()))


async def trace_first_send(bootstrap_servers: str, topic: str) -> PathTracer:
    """Start a fresh :class:`~connmgr.aio.ProposedProducer` untraced, then trace its first
    ``send()`` up to the first socket connect; stop the producer."""
    from connmgr.aio import ProposedProducer

    producer = ProposedProducer(bootstrap_servers=bootstrap_servers)
    await producer.start()
    try:
        with PathTracer() as tracer:
            delivered = await producer.send(topic, b"x", partition=0)
        await delivered
    finally:
        await producer.stop()
    return tracer


DOC_BLOCK: Final = "first-send path"
"""The name of the generated table in ``docs/drop-in-clients.md``."""
TRACED: Final = {"by name (`localhost`)": False, "literal (`127.0.0.1`)": True}
"""The table's rows: how the broker is named, and whether that is ``--literal``."""


def trace_on_embedded_cluster(literal: bool) -> PathTracer:
    """Trace a fresh producer's first send on a 3-broker embedded cluster, its broker named
    ``localhost`` or (``literal``) ``127.0.0.1``."""
    from connmgr.embedded import MockCluster

    with MockCluster(3) as cluster:
        cluster.create_topic_with_leaders("t", [1, 2, 3])
        host, port = cluster.listeners()[min(cluster.broker_ids)]
        servers = f"{host if literal else 'localhost'}:{port}"
        return asyncio.run(trace_first_send(servers, "t"))


def doc_table(summaries: Mapping[str, PathSummary]) -> str:
    """The layered counts of each trace in ``summaries`` (by row label), as Markdown."""
    rows = [
        "| first `send()` to first `connect()` | functions | calls | crossings "
        "| aiokafka ⇄ `connmgr.aio` | policy passes | tasks |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, s in summaries.items():
        pairs = dict(s.crossings_by_pair)
        seams = (
            f"{pairs.get('aiokafka -> connmgr.aio', 0)} + {pairs.get('connmgr.aio -> aiokafka', 0)}"
        )
        rows.append(
            f"| {label} | {s.functions} | {s.calls} | {s.crossings} | {seams} "
            f"| {s.policy_passes} | {len(s.tasks)} |"
        )
    return "\n".join(rows)


def doc_tables() -> dict[str, str]:
    """The table ``docs/drop-in-clients.md`` embeds, measured now (two traces)."""
    summaries = {}
    for label, literal in TRACED.items():
        tracer = trace_on_embedded_cluster(literal)
        if not tracer.reached_connect:
            raise RuntimeError(f"the {label} trace never reached a socket connect")
        summaries[label] = summarise(tracer.calls)
    return {DOC_BLOCK: doc_table(summaries)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m connmgr.aio.pathtrace", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--chain", action="store_true", help="print the call chain too")
    parser.add_argument(
        "--literal", action="store_true", help="name the broker by its IP, not by 'localhost'"
    )
    parser.add_argument(
        "--refresh-doc",
        type=Path,
        metavar="PATH",
        help="write both traces' counts into PATH's generated table "
        "(docs/drop-in-clients.md) and print nothing else",
    )
    args = parser.parse_args(argv)
    if args.refresh_doc is not None:
        from connmgr.docblocks import refresh

        changed = refresh(args.refresh_doc, doc_tables())
        print(f"{args.refresh_doc}: {'refreshed' if changed else 'already current'}")
        return 0
    tracer = trace_on_embedded_cluster(args.literal)
    if not tracer.reached_connect:
        print("the trace never reached a socket connect", file=sys.stderr)
        return 1
    if args.chain:
        print("\n".join(chain_lines(tracer.calls)))
        print()
    print("\n".join(summarise(tracer.calls).lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
