"""The package's error hierarchy: one module, so callers can catch by kind.

Misuse (bad configuration, bad input, events out of order) raises at once with a message that
says what to do. Network and broker failures are *not* errors here: they reach a policy as
events (``ConnectionFailed``, ``ConnectionClosedByPeer``).

The drop-in aiokafka clients' misuse errors, which are also aiokafka's own exception types
(``ProducerClosed``, ``ConsumerStoppedError``, ...), are in :mod:`connmgr.aio.errors`: they
subclass :class:`ClientMisuse`, and this module imports nothing.
"""

from __future__ import annotations


class ConnMgrError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(ConnMgrError, ValueError):
    """A configuration value is malformed, out of range, or impossible in combination."""


class BootstrapParseError(ConfigError):
    """A bootstrap server string could not be parsed into host:port endpoints."""


class InvalidTransition(ConnMgrError):
    """A connection was asked to make a state change its transition table does not allow."""


class PolicyMisuse(ConnMgrError):
    """A policy received an event that cannot happen in its current state."""


class UnknownName(ConnMgrError, LookupError):
    """A scenario, policy or parameter name is not known; the message lists the known ones."""


class ClientMisuse(ConnMgrError, RuntimeError):
    """A client was used out of order (started twice, used after stop)."""
