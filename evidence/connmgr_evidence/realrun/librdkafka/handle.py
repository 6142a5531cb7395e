"""Silencing a confluent-kafka client's log before it is closed: the one thing done to the
client that confluent-kafka has no call for.

Why: while a librdkafka handle is destroyed, each broker thread logs a ``TERMINATE`` debug
line on every turn of its loop until the handle lets it go. With ``debug=broker`` and a
Python ``logger`` those lines go to one queue (confluent-kafka sets ``log.queue``), and at
1,000 brokers a thousand threads contend for that queue's lock: ``Consumer.close()`` took
0.5 s to over ten minutes on 2 cores (measured; gdb showed ~600 broker threads waiting in
``rd_kafka_q_enq1`` under ``rd_kafka_log0``). Without the logger it takes 50 ms. Setting the
handle's log level to 0 just before ``close()`` brings it back to 50 ms, and loses nothing:
no line logged during close can be served to the application any more (the accounting
closes what is open then as "client close").

How: confluent-kafka's ``Handle`` struct starts with its ``rd_kafka_t *rk`` right after the
Python object header (``PyObject_HEAD rd_kafka_t *rk;`` in ``confluent_kafka.h``), so on
CPython the pointer is read at ``id(client) + object.__basicsize__``. It is used only if the
librdkafka loaded here is the version confluent-kafka runs and ``rd_kafka_name`` of it is the
name the client logs under; otherwise nothing is done (close is then only slower).
"""

from __future__ import annotations

import ctypes
import sys

import confluent_kafka

from connmgr.embedded import EmbeddedClusterError, LibRdKafka, load_librdkafka
from connmgr.embedded.librdkafka import RdKafkaPtr

__all__ = ["silence_before_close"]


def _library() -> LibRdKafka | None:
    try:
        lib = load_librdkafka()
    except EmbeddedClusterError:
        return None
    same = lib.version == confluent_kafka.libversion()[0]
    usable = lib.has("rd_kafka_name") and lib.has("rd_kafka_set_log_level")
    return lib if same and usable else None


def silence_before_close(client: object, name: str) -> bool:
    """Set the log level of confluent-kafka ``client`` (a Producer or Consumer not closed
    yet) to 0, if its handle can be found and is the one named ``name`` (the name its log
    lines carry). Returns whether it was done."""
    # The pointer is read from the object's memory: only from an object with that layout.
    clients = (confluent_kafka.Producer, confluent_kafka.Consumer)
    if sys.implementation.name != "cpython" or not isinstance(client, clients) or not name:
        return False
    lib = _library()
    if lib is None:
        return False
    address = ctypes.c_void_p.from_address(id(client) + object.__basicsize__).value
    if not address:
        return False
    rk = RdKafkaPtr(address)
    if lib.name(rk) != name:
        return False
    lib.set_log_level(rk, 0)
    return True
