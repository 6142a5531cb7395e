"""Certificates made at test time: a private CA and one broker certificate it signs, as PEM.

Every broker of a cluster presents the same certificate (SAN ``IP:127.0.0.1`` and
``DNS:localhost``: every broker listens there), so a client that trusts the CA and checks
hostnames accepts each of them. The broker reads its key and chain from one PEM file
(``ssl.keystore.type=PEM``, Kafka 2.7+, KIP-651), clients read the CA file; no JKS or PKCS#12
store and no ``keytool`` run is needed.

Keys are RSA 2048, what a deployment typically has, because the broker's CPU per handshake is
one of the things measured; the CA and the broker key are made once per cluster (~0.1 s).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["KEY_BITS", "TlsFiles", "make_certificates"]

KEY_BITS: Final = 2048
_VALID_FOR: Final = datetime.timedelta(days=2)
"""Long enough for any test session; short, since the key sits unencrypted in a temp dir."""
_BACKDATE: Final = datetime.timedelta(minutes=5)
"""Slack for a clock that differs between the JVM and us (same machine: none expected)."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """Where the PEM files are: ``ca_file`` (the CA certificate: what clients trust) and
    ``keystore_file`` (the broker's unencrypted PKCS#8 key, then its certificate, then the
    CA's: what ``ssl.keystore.location`` names with ``ssl.keystore.type=PEM``)."""

    ca_file: Path
    keystore_file: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "connmgr test"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)


def make_certificates(directory: Path) -> TlsFiles:
    """Write a new CA and a broker certificate it signs into ``directory`` (created if
    missing); returns the two files. Nothing is reused between calls: each cluster has its own
    CA, so no client of one cluster trusts another's brokers by accident."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - _BACKDATE
    ca_key = _new_key()
    ca_name = _name("connmgr test CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    broker_key = _new_key()
    broker_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca_name)
        .public_key(broker_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALID_FOR)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    ca_file = directory / "ca.pem"
    ca_file.write_bytes(ca_pem)
    keystore_file = directory / "broker-keystore.pem"
    # The broker's key and chain in one file; Kafka's PEM store wants PKCS#8, and no
    # ssl.key.password when the key is not encrypted.
    key_pem = broker_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    keystore_file.write_bytes(
        key_pem + broker_cert.public_bytes(serialization.Encoding.PEM) + ca_pem
    )
    keystore_file.chmod(0o600)
    return TlsFiles(ca_file=ca_file, keystore_file=keystore_file)
