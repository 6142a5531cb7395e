"""The one error the embedded mock cluster raises on purpose.

It derives from :class:`connmgr.errors.ConnMgrError`, so ``except ConnMgrError`` keeps catching
everything the package raises on purpose.
"""

from __future__ import annotations

from connmgr.errors import ConnMgrError


class EmbeddedClusterError(ConnMgrError):
    """The embedded librdkafka mock cluster could not be loaded, started or driven.

    Raised for: a shared library or symbol that cannot be found (the message names the path
    or symbol), a non-zero ``rd_kafka_resp_err_t`` from librdkafka (the message carries
    ``rd_kafka_err2str`` text and :attr:`code` holds the numeric code), invalid input (unknown
    broker id, bad partition index, ...), and any use of a cluster after ``close()``.
    """

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        """The librdkafka ``rd_kafka_resp_err_t`` value, or None when the error is ours."""
