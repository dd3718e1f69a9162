"""Certificates for a local TLS cluster (`insync certs create --dir DIR`), with the `cryptography` package.

One run makes a certificate authority and, signed by it, a node certificate (subject `CN=node`, valid for the
host names and addresses given, localhost and 127.0.0.1 by default, so that endpoint identification passes) and
one client certificate per client name (`CN=<name>`). Files, all PEM (what Kafka's PEM keystores, librdkafka,
kafka-python, aiokafka and kcat read): `ca.pem` (every truststore), `ca-key.pem` (to sign more later; keep it
private), `node.pem` (the node's key then its certificate: `ssl.keystore.location`), and `<name>.pem` with
`<name>-key.pem` (`ssl.certificate.location`, `ssl.key.location`).

Keys are ECDSA P-256 (fast to make and to handshake with); private keys are written unencrypted with mode 0600,
as for a local test cluster. A directory that already holds a CA keeps it and its node certificate: running
`insync certs create --dir DIR/certs --client bob` on a cluster's directory adds a user the cluster trusts.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from insync.config import ConfigError

NODE_NAME = "node"
CLIENT_NAMES_MAX = 100
DEFAULT_HOSTS = ("localhost", "127.0.0.1")


@dataclass(frozen=True, slots=True)
class CertFiles:
    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca-key.pem"

    @property
    def node(self) -> Path:
        return self.directory / f"{NODE_NAME}.pem"

    def client(self, name: str) -> tuple[Path, Path]:
        """A client's certificate and key files."""
        return self.directory / f"{name}.pem", self.directory / f"{name}-key.pem"


def create(directory: str | Path, clients: Sequence[str] = ("client",), hosts: Sequence[str] = DEFAULT_HOSTS,
           days: int = 365) -> CertFiles:
    """Make the CA, the node certificate and the client certificates in `directory` (created if needed). A
    directory that already has a CA keeps it, and its node certificate: only the clients are made, signed by that
    CA (a new user of a running cluster)."""
    _check(clients, hosts, days)
    files = CertFiles(Path(directory))
    files.directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = _existing_ca(files) or _new_ca(files, days)
    if not files.node.exists():
        node_key, node = _leaf(NODE_NAME, ca, ca_key, days, hosts)
        _write_private(files.node, _key_pem(node_key) + node.public_bytes(serialization.Encoding.PEM))
    for name in clients:
        key, certificate = _leaf(name, ca, ca_key, days, ())
        certificate_path, key_path = files.client(name)
        certificate_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        _write_private(key_path, _key_pem(key))
    return files


def _existing_ca(files: CertFiles) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    if not files.ca.exists() or not files.ca_key.exists():
        return None
    key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ConfigError(f"{files.ca_key} is not an ECDSA key made by insync certs create")
    return x509.load_pem_x509_certificate(files.ca.read_bytes()), key


def _new_ca(files: CertFiles, days: int) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "insync"),
                         x509.NameAttribute(NameOID.COMMON_NAME, "insync local CA")])
    ca = (_builder(ca_name, ca_name, ca_key.public_key(), days)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    _write_private(files.ca_key, _key_pem(ca_key))
    return ca, ca_key


def _check(clients: Sequence[str], hosts: Sequence[str], days: int) -> None:
    if not 1 <= days <= 36500:
        raise ConfigError(f"--days must be between 1 and 36500, got {days}")
    if not hosts:
        raise ConfigError("at least one --host is needed for the node certificate")
    if len(clients) > CLIENT_NAMES_MAX:
        raise ConfigError(f"at most {CLIENT_NAMES_MAX} clients, got {len(clients)}")
    for name in clients:
        if not name or not all(c.isalnum() or c in "-_." for c in name) or name in (NODE_NAME, "ca", "ca-key"):
            raise ConfigError(f"client name {name!r} must be letters, digits, '-', '_' or '.', and not "
                              f"{NODE_NAME} or ca")


def _leaf(name: str, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, days: int,
          hosts: Sequence[str]) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A certificate for `name` signed by the CA, for TLS servers and clients alike (a node is both)."""
    key = ec.generate_private_key(ec.SECP256R1())
    # The most general attribute first, as certificates order them: the subject prints CN=<name>,O=insync
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "insync"),
                         x509.NameAttribute(NameOID.COMMON_NAME, name)])
    builder = (_builder(subject, ca.subject, key.public_key(), days)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                     ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey,
             days: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days)))


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write_private(path: Path, data: bytes) -> None:
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_bytes(data)
