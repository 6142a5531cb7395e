"""The secure client listeners of a :class:`~connmgr_evidence.realkafka.KafkaCluster` started with
``security=True``: ``SSL`` and ``SASL_SSL`` (SCRAM-SHA-512), each reached through a delay
forwarder (:mod:`~connmgr_evidence.realkafka.delay`), and what a client needs to use them.

Per node, beside the untouched ``PLAINTEXT`` and ``CONTROLLER`` listeners:

* ``SSL://127.0.0.1:<ssl>`` and ``SASL_SSL://127.0.0.1:<sasl_ssl>``, on ports of their own,
  presenting the certificate of :mod:`~connmgr_evidence.realkafka.certificates`, and
  ``CLIENT://127.0.0.1:<client>``, a second PLAINTEXT listener for clients;
* three forwarders, one to each of them -- these are what the node *advertises* for ``SSL``,
  ``SASL_SSL`` and ``CLIENT``, so every connection a client opens over them (bootstrap, and
  the brokers Metadata names) is delayed and counted (:meth:`DelayNetwork.accepted`). The
  ``PLAINTEXT`` listener's behaviour and ports stay exactly as without security.

Inter-broker and controller traffic stays on ``PLAINTEXT`` / ``CONTROLLER``. The SCRAM user is
created when storage is formatted (``kafka-storage format --add-scram``), so it exists before
any broker serves.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from connmgr_evidence.realkafka.certificates import TlsFiles, make_certificates
from connmgr_evidence.realkafka.delay import DelayNetwork, RelayedConnection
from connmgr_evidence.realkafka.errors import RealKafkaError
from connmgr_evidence.realkafka.process import HOST, Node

__all__ = [
    "PROTOCOLS",
    "SCRAM_MECHANISM",
    "ListenerAccess",
    "Protocol",
    "SecurePorts",
    "SecureTier",
]

Protocol = Literal["PLAINTEXT", "SSL", "SASL_SSL"]
PROTOCOLS: Final[tuple[Protocol, ...]] = ("PLAINTEXT", "SSL", "SASL_SSL")
SCRAM_MECHANISM: Final = "SCRAM-SHA-512"
SCRAM_USER: Final = "connmgr"
SCRAM_PASSWORD: Final = "connmgr-secret"
_SCRAM_JAAS: Final = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


@dataclass(frozen=True, slots=True)
class SecurePorts:
    """One node's forwarded listener ports (``ssl``, ``sasl_ssl``, ``client``: where the
    broker binds) and its forwarders' ports (``*_proxy``: what it advertises for each)."""

    node_id: int
    ssl: int
    sasl_ssl: int
    client: int
    ssl_proxy: int
    sasl_ssl_proxy: int
    client_proxy: int

    @classmethod
    def forwarded(
        cls, network: DelayNetwork, node_id: int, ssl: int, sasl_ssl: int, client: int
    ) -> SecurePorts:
        """The ports of ``node_id``'s three listeners, each with a new forwarder."""
        return cls(
            node_id,
            ssl,
            sasl_ssl,
            client,
            network.forward(HOST, ssl),
            network.forward(HOST, sasl_ssl),
            network.forward(HOST, client),
        )

    @property
    def proxies(self) -> tuple[int, int, int]:
        return self.ssl_proxy, self.sasl_ssl_proxy, self.client_proxy


@dataclass(frozen=True, slots=True)
class ListenerAccess:
    """What a client needs to use one listener of the cluster.

    ``endpoints`` is broker id -> (host, port) the client dials, as pairs sorted by id;
    ``ca_file`` is the CA to trust (None for PLAINTEXT); ``username`` / ``password`` the SCRAM
    credentials (None unless SASL_SSL).
    """

    protocol: Protocol
    endpoints: tuple[tuple[int, tuple[str, int]], ...]
    ca_file: Path | None = None
    username: str | None = None
    password: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{host}:{port}" for _, (host, port) in self.endpoints)

    def addresses(self) -> list[tuple[str, int]]:
        """The (host, port) pairs a client dials here, by broker id (for socket counts)."""
        return [address for _, address in self.endpoints]

    def ssl_context(self) -> ssl.SSLContext | None:
        """A new client context trusting only the cluster's CA, checking hostnames (the
        certificate names 127.0.0.1 and localhost); None for PLAINTEXT."""
        if self.ca_file is None:
            return None
        return ssl.create_default_context(cafile=str(self.ca_file))

    def aiokafka_kwargs(self, *, password: str | None = None) -> dict[str, Any]:
        """Keyword arguments for an aiokafka producer, consumer or ``create_conn`` (without
        ``bootstrap_servers``: add it for a client). ``password`` overrides the right one
        (to see a wrong one refused)."""
        kwargs: dict[str, Any] = {"security_protocol": self.protocol}
        if self.ca_file is not None:
            kwargs["ssl_context"] = self.ssl_context()
        if self.username is not None:
            kwargs.update(
                sasl_mechanism=SCRAM_MECHANISM,
                sasl_plain_username=self.username,
                sasl_plain_password=self.password if password is None else password,
            )
        return kwargs

    def java_properties(self) -> dict[str, str]:
        """kafka-clients settings for this listener (the CA as a PEM truststore, Kafka 2.7+),
        ``bootstrap.servers`` excepted."""
        props: dict[str, str] = {"security.protocol": self.protocol}
        if self.ca_file is not None:
            props.update(
                {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_file)}
            )
        if self.username is not None:
            props.update(
                {
                    "sasl.mechanism": SCRAM_MECHANISM,
                    "sasl.jaas.config": (
                        "org.apache.kafka.common.security.scram.ScramLoginModule required "
                        f'username="{self.username}" password="{self.password}";'
                    ),
                }
            )
        return props


class SecureTier:
    """The certificates, ports and forwarders of a secure cluster (built by the cluster while
    it launches; its :meth:`close` belongs to the cluster's release)."""

    def __init__(self, files: TlsFiles, ports: Sequence[SecurePorts], network: DelayNetwork):
        self.files = files
        self.ports: tuple[SecurePorts, ...] = tuple(ports)
        self.network = network

    @classmethod
    def create(
        cls, directory: Path, nodes: Sequence[Node], listen_ports: Sequence[int]
    ) -> SecureTier:
        """Certificates in ``directory``, and forwarders for ``nodes`` whose forwarded
        listeners will bind ``listen_ports`` (three per node: SSL ports, then SASL_SSL ports,
        then CLIENT ports, by node)."""
        n = len(nodes)
        if len(listen_ports) != 3 * n:
            raise RealKafkaError(f"{n} nodes need {3 * n} forwarded listener ports")
        files = make_certificates(directory)
        network = DelayNetwork().start()
        try:
            ports = [
                SecurePorts.forwarded(
                    network,
                    node.node_id,
                    listen_ports[i],
                    listen_ports[n + i],
                    listen_ports[2 * n + i],
                )
                for i, node in enumerate(nodes)
            ]
        except BaseException:
            network.close()
            raise
        return cls(files, ports, network)

    def close(self) -> None:
        """Stop the forwarders (every relayed connection is closed)."""
        self.network.close()

    def accepted(self, access: ListenerAccess) -> int:
        """Connections the forwarders of ``access`` (one of :meth:`access`'s) have accepted
        so far: every TCP connection a client made to that listener."""
        return sum(self.network.accepted(port) for _, (_, port) in access.endpoints)

    def connections(self, access: ListenerAccess) -> dict[int, tuple[RelayedConnection, ...]]:
        """Broker id -> every connection its forwarder of ``access`` (one of :meth:`access`'s)
        has accepted so far, with accept and close instants
        (:meth:`DelayNetwork.connections`)."""
        return {broker: self.network.connections(port) for broker, (_, port) in access.endpoints}

    def _of(self, node: Node) -> SecurePorts:
        for ports in self.ports:
            if ports.node_id == node.node_id:
                return ports
        raise RealKafkaError(f"no secure ports for node {node.node_id}")

    def relocate(
        self, node: Node, ssl_port: int, sasl_ssl_port: int, client_port: int
    ) -> SecurePorts:
        """Move ``node``'s forwarded listeners to ``ssl_port``, ``sasl_ssl_port`` and
        ``client_port``: three new forwarders replace the node's old ones, which are closed
        with every connection they relay, so a dial of an old address is refused from then
        on. Returns the new ports; :meth:`properties` and :meth:`access` give the new ones
        from now on."""
        old = self._of(node)
        moved = SecurePorts.forwarded(
            self.network, node.node_id, ssl_port, sasl_ssl_port, client_port
        )
        for port in old.proxies:
            self.network.unforward(port)
        self.ports = tuple(moved if p.node_id == node.node_id else p for p in self.ports)
        return moved

    def properties(self, node: Node) -> dict[str, str]:
        """``server.properties`` entries adding ``node``'s secure listeners to the
        PLAINTEXT and CONTROLLER ones :func:`~connmgr_evidence.realkafka.process.server_properties`
        writes (repeated here, unchanged, since a listener list is one property)."""
        p = self._of(node)
        return {
            "listeners": (
                f"PLAINTEXT://{HOST}:{node.port},CONTROLLER://{HOST}:{node.controller_port},"
                f"SSL://{HOST}:{p.ssl},SASL_SSL://{HOST}:{p.sasl_ssl},CLIENT://{HOST}:{p.client}"
            ),
            "advertised.listeners": (
                f"PLAINTEXT://{HOST}:{node.port},SSL://{HOST}:{p.ssl_proxy},"
                f"SASL_SSL://{HOST}:{p.sasl_ssl_proxy},CLIENT://{HOST}:{p.client_proxy}"
            ),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,"
                "CLIENT:PLAINTEXT"
            ),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.files.keystore_file),
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": SCRAM_MECHANISM,
            f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": _SCRAM_JAAS,
        }

    @staticmethod
    def format_args() -> list[str]:
        """Extra ``kafka.tools.StorageTool format`` arguments: the SCRAM user."""
        return ["--add-scram", f"{SCRAM_MECHANISM}=[name={SCRAM_USER},password={SCRAM_PASSWORD}]"]

    def access(self, protocol: Protocol) -> ListenerAccess:
        """How a client reaches ``protocol`` through the advertised forwarders (PLAINTEXT:
        the ``CLIENT`` listener's), so that every connection it makes is delayed and
        counted."""
        if protocol == "PLAINTEXT":
            plain = tuple((p.node_id, (HOST, p.client_proxy)) for p in self.ports)
            return ListenerAccess("PLAINTEXT", plain)
        if protocol == "SSL":
            ssl_endpoints = tuple((p.node_id, (HOST, p.ssl_proxy)) for p in self.ports)
            return ListenerAccess("SSL", ssl_endpoints, self.files.ca_file)
        if protocol == "SASL_SSL":
            sasl_endpoints = tuple((p.node_id, (HOST, p.sasl_ssl_proxy)) for p in self.ports)
            return ListenerAccess(
                "SASL_SSL", sasl_endpoints, self.files.ca_file, SCRAM_USER, SCRAM_PASSWORD
            )
        raise RealKafkaError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
