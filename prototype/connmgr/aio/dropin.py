"""Drop-in ``AIOKafkaProducer`` and ``AIOKafkaConsumer`` with the proposed connection policy.

Same constructor arguments as aiokafka's classes, plus the policy options
(:data:`~connmgr.aio.options.DROP_IN_OPTIONS`, listed in ``docs/drop-in-clients.md``). aiokafka
builds its client as usual; the constructor then upgrades that very client object to a
:class:`~connmgr.aio.client.PolicyClient`, so the sender, fetcher and group coordinator aiokafka
wired to it use the policy without any aiokafka code being copied.

**Why the client changes class rather than being built as a PolicyClient.** aiokafka 0.14.0's
constructors leave no seam to build the client of another class, and hand the client they
built to its collaborators before they return:

* ``AIOKafkaProducer.__init__`` calls ``AIOKafkaClient(...)`` by the name its module imported
  (``aiokafka.producer.producer``; no argument or class attribute picks the class), passes
  that client to the ``Sender`` (kept as ``Sender.client``) and its ``cluster`` to the
  ``MessageAccumulator``; the client's default ``client_id`` is derived from a class counter
  (``aiokafka-producer-N``).
* ``AIOKafkaConsumer.__init__`` does the same (``aiokafka.consumer.consumer``) and, given
  topics, calls ``client.set_topics(...)``, which arms a metadata update on that client;
  ``start()`` hands the client to the fetcher and the group coordinator.

A PolicyClient built beside aiokafka's would therefore have to be put back into each of those
places -- the producer's private ``_sender``, ``_metadata`` and accumulator, the consumer's
``_client`` and its armed update, the derived ``client_id`` -- and a holder a later aiokafka
adds would keep the stock client and dial past the policy without any error. Patching
``AIOKafkaClient`` in aiokafka's modules while the constructor runs would change the class of
every client built meanwhile, anywhere in the process; copying the constructors would copy
aiokafka's code. Changing the class of the object aiokafka built keeps every argument as
aiokafka parsed it and every reference aiokafka took, and fails loudly
(:meth:`PolicyClient.upgrade` accepts only an exact ``AIOKafkaClient``).
:func:`connmgr.aio.observe.observe_client` changes a stock client's class for the same
reasons.

Misuse raises what stock aiokafka 0.14 raises in the same case (or, where stock aiokafka
waits forever, a clear error): our own errors (:mod:`connmgr.aio.errors`) derive from
aiokafka's exception for the case and from :class:`~connmgr.errors.ClientMisuse`, and say
what to do (``tests/embedded/test_conformance.py`` runs the same assertions on both):

* producer ``send()`` / ``send_and_wait()`` / ``send_batch()`` after ``stop()``:
  :class:`~connmgr.aio.errors.ProducerStopped`, a ``ProducerClosed``. While ``stop()`` is
  flushing, aiokafka's own plain ``ProducerClosed``.
* producer ``send()`` / ``send_batch()`` / ``partitions_for()`` before ``start()``: plain
  ``ClientMisuse`` (stock aiokafka waits forever: its metadata task is not running).
* consumer ``getone()`` / ``getmany()`` / ``async for`` after ``stop()``:
  :class:`~connmgr.aio.errors.ConsumerStopped`, a ``ConsumerStoppedError`` (so an ``async for``
  that was running ends, as aiokafka's does); before ``start()``:
  :class:`~connmgr.aio.errors.ConsumerNotStarted`, an ``AttributeError`` like stock's.
* ``start()`` twice, after ``stop()`` or after a failed ``start()``:
  :class:`~connmgr.aio.errors.StartedTwice`, an ``AssertionError`` like stock consumer's.

The producer's checks cost a record nothing: an unknown topic is caught by
:meth:`PolicyClient._wait_on_metadata` (aiokafka's gate before every send), a known one by
aiokafka's accumulator, whose refusal after ``stop()`` gets our message (see
:class:`_StoppedAccumulator`).
"""

from __future__ import annotations

import inspect
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.producer.message_accumulator import MessageAccumulator

from connmgr.aio.client import PolicyClient
from connmgr.aio.errors import (
    ClientStopped,
    ConsumerNotStarted,
    ConsumerStopped,
    ProducerStopped,
    StartedTwice,
)
from connmgr.aio.options import DROP_IN_OPTIONS, POLICY_OPTION_NAMES, PolicyOptions
from connmgr.core.config import ClientKind
from connmgr.core.coordinator import CoordinatorRef
from connmgr.ledger import ConnectionLedger

__all__ = ["POLICY_OPTION_NAMES", "ProposedConsumer", "ProposedProducer"]


def drop_in_signature(stock: type) -> inspect.Signature:
    """The drop-in class's signature: ``stock``'s (aiokafka's class) parameters as they are --
    names, kinds, defaults, order -- then every drop-in keyword (:data:`DROP_IN_OPTIONS`),
    keyword-only with its default. Read from aiokafka at import, so it follows the installed
    aiokafka rather than a copy of it."""
    parameters = list(inspect.signature(stock).parameters.values())
    parameters += [
        inspect.Parameter(spec.keyword, inspect.Parameter.KEYWORD_ONLY, default=spec.default)
        for spec in DROP_IN_OPTIONS
    ]
    return inspect.Signature(parameters)


def _show_signature(cls: type, stock: type) -> None:
    """Give ``cls`` (a drop-in class taking ``*args, **kwargs``) :func:`drop_in_signature`,
    on the class and on its ``__init__`` (with ``self``), for ``inspect.signature``,
    ``help()`` and tools that read them."""
    signature = drop_in_signature(stock)
    cls.__signature__ = signature  # type: ignore[attr-defined]
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    init_signature = signature.replace(parameters=[this, *signature.parameters.values()])
    cls.__init__.__signature__ = init_signature  # type: ignore[misc]


class _Lifecycle:
    """Start/stop bookkeeping shared by both classes (aiokafka keeps none it checks: its
    consumer asserts on a second start, its producer starts again)."""

    _connmgr_state = "new"  # "starting", "running", "failed" (start raised), "stopped"

    def _starting(self) -> None:
        """Refuse a second ``start()`` with :class:`StartedTwice` (an ``AssertionError``, as
        stock ``AIOKafkaConsumer`` raises); else mark the client as starting."""
        state = self._connmgr_state
        if state != "new":
            name = type(self).__name__
            if state in ("starting", "running"):
                why = f"{name}.start() called twice (state: {state})"
            elif state == "failed":
                why = f"{name}.start() after a failed start()"
            else:
                why = f"{name}.start() after stop()"
            raise StartedTwice(f"{why}: create a new client to start again")
        self._connmgr_state = "starting"

    async def start(self) -> None:
        self._starting()
        try:
            await super().start()  # type: ignore[misc]
        except BaseException:
            # Release what the failed start opened (sockets, tasks) at once, rather than
            # leave it to the application's stop() as aiokafka does.
            await self.stop()
            self._connmgr_state = "failed"
            raise
        self._connmgr_state = "running"

    async def stop(self) -> None:
        self._connmgr_state = "stopped"
        await super().stop()  # type: ignore[misc]


class _StoppedAccumulator(MessageAccumulator):  # type: ignore[misc]  # aiokafka is untyped
    """The accumulator of a stopped :class:`ProposedProducer`: refuses every record as
    aiokafka's closed accumulator does (``ProducerClosed``), as :class:`ProducerStopped`
    with a message. The producer switches its accumulator to this class once ``stop()``
    returns, so a running producer's records never pay for the check."""

    async def add_message(self, *args: Any, **kwargs: Any) -> Any:
        raise ProducerStopped("send() after stop(): create and start a new producer")

    async def add_batch(self, *args: Any, **kwargs: Any) -> Any:
        raise ProducerStopped("send_batch() after stop(): create and start a new producer")


class ProposedProducer(_Lifecycle, AIOKafkaProducer):  # type: ignore[misc]
    """``AIOKafkaProducer`` whose connections the proposed policy manages.

    Takes ``AIOKafkaProducer``'s arguments, with aiokafka's meaning and defaults, then the
    drop-in keywords (``docs/drop-in-clients.md``); its signature says so
    (:func:`drop_in_signature`)."""

    client: PolicyClient

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        options = PolicyOptions.take(kwargs)
        super().__init__(*args, **kwargs)
        txn = kwargs.get("transactional_id")
        lookups = () if txn is None else (CoordinatorRef.transaction(str(txn)),)
        PolicyClient.upgrade(self.client, options, ClientKind.PRODUCER, lookups)

    async def stop(self) -> None:
        await super().stop()
        accumulator = self._message_accumulator
        if type(accumulator) is MessageAccumulator:
            # aiokafka's accumulator is closed now (stop() closed it first thing); records
            # sent from here on meet the same refusal, with a message.
            accumulator.__class__ = _StoppedAccumulator

    @property
    def ledger(self) -> ConnectionLedger:
        return self.client.ledger


class ProposedConsumer(_Lifecycle, AIOKafkaConsumer):  # type: ignore[misc]
    """``AIOKafkaConsumer`` whose connections the proposed policy manages.

    Takes ``AIOKafkaConsumer``'s arguments, with aiokafka's meaning and defaults, then the
    drop-in keywords (``docs/drop-in-clients.md``); its signature says so
    (:func:`drop_in_signature`)."""

    _client: PolicyClient

    def __init__(self, *topics: str, **kwargs: Any) -> None:
        options = PolicyOptions.take(kwargs)
        super().__init__(*topics, **kwargs)
        group = kwargs.get("group_id")
        lookups = () if group is None else (CoordinatorRef.group(str(group)),)
        client = PolicyClient.upgrade(self._client, options, ClientKind.CONSUMER, lookups)
        client.follow_assignment(self._subscription)

    @property
    def ledger(self) -> ConnectionLedger:
        return self._client.ledger

    @property
    def client(self) -> PolicyClient:
        return self._client

    def _require_running(self, what: str) -> None:
        """Raise what stock aiokafka raises for ``what`` before ``start()``
        (:class:`ConsumerNotStarted`, an ``AttributeError``) or after ``stop()``
        (:class:`ConsumerStopped`, a ``ConsumerStoppedError``), with what to do instead."""
        state = self._connmgr_state
        if state in ("stopped", "failed"):
            raise ConsumerStopped(f"{what} after stop(): create and start a new consumer")
        if state == "new":
            raise ConsumerNotStarted(f"{what} before start(): await start() first")

    async def getone(self, *partitions: Any) -> Any:
        """aiokafka's ``getone()``. Its ``async for`` calls this one, so a consumer stopped
        between two records ends the loop (``ConsumerStopped`` is ``ConsumerStoppedError``)."""
        self._require_running("getone()")
        return await super().getone(*partitions)

    async def getmany(self, *partitions: Any, **kwargs: Any) -> Any:
        """aiokafka's ``getmany()``, with the errors of :meth:`_require_running`."""
        self._require_running("getmany()")
        return await super().getmany(*partitions, **kwargs)

    # Requests after stop(): stock aiokafka dials again and answers, leaving a socket the
    # stopped consumer never closes; ours refuses with ClientStopped, a non-retriable
    # KafkaError (checked here, before aiokafka marks its coordinator dead on the refusal and
    # then waits forever for a coordinator a stopped consumer never looks up).

    def _refuse_after_stop(self, what: str) -> None:
        if self._connmgr_state == "stopped":
            raise ClientStopped(f"{what} after stop(): create and start a new consumer")

    async def commit(self, offsets: Any = None) -> None:
        self._refuse_after_stop("commit()")
        await super().commit(offsets)

    async def committed(self, partition: Any) -> Any:
        self._refuse_after_stop("committed()")
        return await super().committed(partition)

    async def beginning_offsets(self, partitions: Any) -> Any:
        self._refuse_after_stop("beginning_offsets()")
        return await super().beginning_offsets(partitions)

    async def end_offsets(self, partitions: Any) -> Any:
        self._refuse_after_stop("end_offsets()")
        return await super().end_offsets(partitions)

    async def offsets_for_times(self, timestamps: Any) -> Any:
        self._refuse_after_stop("offsets_for_times()")
        return await super().offsets_for_times(timestamps)

    async def topics(self) -> Any:
        self._refuse_after_stop("topics()")
        return await super().topics()

    def __aiter__(self) -> ProposedConsumer:
        """As aiokafka's: ``async for`` over a stopped consumer raises at once (ours:
        :class:`ConsumerStopped`); before ``start()`` the first record raises."""
        if self._connmgr_state in ("stopped", "failed"):
            raise ConsumerStopped("async for after stop(): create and start a new consumer")
        iterator: ProposedConsumer = super().__aiter__()
        return iterator


_show_signature(ProposedProducer, AIOKafkaProducer)
_show_signature(ProposedConsumer, AIOKafkaConsumer)
