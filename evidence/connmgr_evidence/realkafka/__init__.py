"""A real Apache Kafka cluster (KRaft, combined broker+controller nodes) on 127.0.0.1, for tests.

The broker is ``org.apache.kafka:kafka_2.13`` at one of :data:`KAFKA_VERSIONS`: by default
:data:`KAFKA_VERSION` (4.4.0, which answers KIP-1242's identity check); 4.3.1 stays runnable for
comparison, chosen with ``KafkaCluster(version=...)``, ``connmgr cluster --kafka-version`` or
the environment variable ``CONNMGR_KAFKA_VERSION`` (read by :func:`kafka_version` only). It is
fetched by Maven through the tiny module ``benchmarks/kafka-broker/pom.xml``: the jars live in
Maven's local repository (``~/.m2``), and the resolved classpath is cached per release and pom
content under ``$XDG_CACHE_HOME/connmgr/kafka-broker/<version>/`` (default ``~/.cache/...``).
Nothing is downloaded into the source tree.

:class:`KafkaCluster` formats one temporary data directory per node with Kafka's own
``kafka.tools.StorageTool`` (static quorum: every node lists all controllers in
``controller.quorum.voters``, so ``format`` takes no ``--standalone``/``--initial-controllers``
flag), starts ``kafka.Kafka server.properties`` per node, and waits until *every* broker's
Metadata lists *all* brokers. Node ids are ``1..N`` like :class:`connmgr.embedded.MockCluster`,
and the API mirrors it where it can: ``bootstrap_servers``, ``endpoints()``, ``listeners()``,
``broker_ids``, ``create_topic_with_leaders``; a mock's ``set_coordinator`` becomes
:meth:`KafkaCluster.group_for_coordinator`, which *finds* a group name the real broker places
on the wanted coordinator (and :meth:`KafkaCluster.move_coordinator`, which moves one).

Talking to the cluster: the helpers here speak the Kafka protocol through aiokafka's own
connection and request classes (one short-lived connection per question, closed before the
call returns), so that a test's kernel-socket check sees only the sockets of the client under
test. The public API is synchronous; from asyncio code call it via ``asyncio.to_thread`` (a
direct call also works -- it runs on a helper thread -- but blocks the caller's loop).

Lifecycle: ``stop()`` sends SIGTERM to every node, waits, SIGKILLs what is left, and removes
the temporary directory. It is idempotent and also runs at interpreter exit (and when the
object is garbage-collected). A cluster left behind by a process that died without running
its exit hooks (SIGKILL, a CI timeout) is reaped by the next :meth:`KafkaCluster.start`.

The rooms, each importing only those above it:

* :mod:`~connmgr_evidence.realkafka.errors` -- the error types;
* :mod:`~connmgr_evidence.realkafka.classpath` -- Maven, the broker's classpath, ``java``;
* :mod:`~connmgr_evidence.realkafka.placement` -- the broker's rule placing coordinators (pure);
* :mod:`~connmgr_evidence.realkafka.process` -- node processes: ports, configuration, start, stop,
  reap;
* :mod:`~connmgr_evidence.realkafka.certificates`, :mod:`~connmgr_evidence.realkafka.delay`,
  :mod:`~connmgr_evidence.realkafka.security` -- the secure listeners of ``security=True``:
  certificates,
  user-space RTT forwarders, and what a client needs (``docs/tls.md``);
* :mod:`~connmgr_evidence.realkafka.protocol` -- one-question connections, ElectLeaders by hand;
* :mod:`~connmgr_evidence.realkafka.topics`, :mod:`~connmgr_evidence.realkafka.coordinators` --
  administration;
* :mod:`~connmgr_evidence.realkafka.restart`, :mod:`~connmgr_evidence.realkafka.move` -- restarting
  brokers,
  and moving one to new client ports (:meth:`KafkaCluster.move_broker`);
* :mod:`~connmgr_evidence.realkafka.cluster` -- :class:`KafkaCluster`, composing them;
* :mod:`~connmgr_evidence.realkafka.handshakes` -- what TLS and SASL cost (imported only by
  callers);
* :mod:`~connmgr_evidence.realkafka.cli` -- ``connmgr cluster`` (imported only by the CLI; also
  ``python -m connmgr_evidence.realkafka``).
"""

from connmgr_evidence.realkafka.classpath import (
    KAFKA_VERSION,
    KAFKA_VERSION_ENV,
    KAFKA_VERSIONS,
    broker_cache_dir,
    default_pom,
    kafka_version,
    resolve_broker_classpath,
)
from connmgr_evidence.realkafka.cluster import KafkaCluster
from connmgr_evidence.realkafka.errors import MissingTool, RealKafkaError
from connmgr_evidence.realkafka.move import BrokerMove
from connmgr_evidence.realkafka.placement import (
    TRANSACTION_STATE_TOPIC,
    CoordinatorKind,
    java_string_hash,
    offsets_partition_for,
)

__all__ = [
    "KAFKA_VERSION",
    "KAFKA_VERSIONS",
    "KAFKA_VERSION_ENV",
    "TRANSACTION_STATE_TOPIC",
    "BrokerMove",
    "CoordinatorKind",
    "KafkaCluster",
    "MissingTool",
    "RealKafkaError",
    "broker_cache_dir",
    "default_pom",
    "java_string_hash",
    "kafka_version",
    "offsets_partition_for",
    "resolve_broker_classpath",
]
