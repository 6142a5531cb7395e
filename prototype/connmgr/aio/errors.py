"""Misuse errors of the drop-in clients that are also aiokafka's own exception types.

A drop-in client must fail where stock aiokafka fails *with an exception the same handlers
catch*: every class here derives from the exception stock aiokafka 0.14 raises in that case
(measured on the embedded cluster, see ``tests/embedded/test_conformance.py``) and from
:class:`~connmgr.errors.ClientMisuse`, which adds a message that says what to do. So
``except ProducerClosed``, ``except ConsumerStoppedError``, ``except KafkaError`` and
``except ClientMisuse`` all keep working, whichever client raised.

One difference remains by construction: ``ClientMisuse`` is a ``RuntimeError``, so
``except RuntimeError`` also catches :class:`ConsumerStopped` (aiokafka's
``ConsumerStoppedError`` is a plain ``Exception``) and :class:`ConsumerNotStarted`.
"""

from __future__ import annotations

from aiokafka.errors import ConsumerStoppedError, KafkaError, ProducerClosed

from connmgr.errors import ClientMisuse


class ProducerStopped(ProducerClosed, ClientMisuse):  # type: ignore[misc]  # aiokafka is untyped
    """``send()``, ``send_and_wait()`` or ``send_batch()`` after ``stop()``: aiokafka raises
    ``ProducerClosed`` (a ``KafkaError``). Also raised where stock aiokafka would wait forever
    instead: ``send()`` / ``partitions_for()`` of a topic missing from metadata after
    ``stop()`` (aiokafka's metadata task is gone, so nothing would ever answer)."""


class ConsumerStopped(ConsumerStoppedError, ClientMisuse):  # type: ignore[misc]
    """``getone()``, ``getmany()`` or ``async for`` after ``stop()``: aiokafka raises
    ``ConsumerStoppedError``, and its async iterator ends (``StopAsyncIteration``) when the
    consumer stops between two records; ours does the same because this *is* that error."""


class ConsumerNotStarted(ClientMisuse, AttributeError):
    """``getone()``, ``getmany()`` or ``async for`` before ``start()``: stock aiokafka fails
    with an ``AttributeError`` (its group coordinator does not exist yet), so ours is one too
    and says what to do instead of naming a ``NoneType``."""


class StartedTwice(ClientMisuse, AssertionError):
    """``start()`` on a client that is running, starting, stopped or failed to start. Stock
    ``AIOKafkaConsumer`` asserts (``AssertionError: Did you call `start` twice?``), so ours is
    an ``AssertionError`` too; stock ``AIOKafkaProducer`` silently starts a second time (a
    stopped producer then still refuses every record), where ours refuses at once."""


class ClientStopped(KafkaError, ClientMisuse):  # type: ignore[misc]
    """A request (``commit()``, ``committed()``, ``end_offsets()``, ...) made after
    ``stop()``. Stock aiokafka dials again and answers (leaking a socket the stopped client
    never closes); a drop-in client has closed its connection manager, so it refuses, with a
    *non-retriable* ``KafkaError``: a retriable one made aiokafka's commit loop retry forever."""

    retriable = False
