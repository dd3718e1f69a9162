"""`insync cluster up --security ...`: the configs a secured local cluster runs with, and the client settings to
reach it.

`ssl`: every listener speaks TLS (brokers `SSL://`, the controller `CONTROLLER://` mapped to SSL), so inter-broker
and broker-to-controller traffic is encrypted and authenticated too: every node presents the node certificate
(`CN=node`) and requires a client certificate signed by the cluster's CA (`ssl.client.auth=required`); the
principal of a certificate is its common name (`ssl.principal.mapping.rules`, so `User:node`, `User:admin`).
Certificates are made in `DIR/certs` (chaos/certs.py) unless already there. The operator's settings go to
`DIR/client.properties` in librdkafka's names (the `admin` client certificate), which confluent-kafka,
`kcat -F` and every insync command (`--command-config`) read.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from insync.chaos import certs
from insync.config import ConfigError

SECURITY_CHOICES = ("plaintext", "ssl")
OPERATOR = "admin"
CLIENT_PROPERTIES = "client.properties"
PRINCIPAL_RULES = "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"  # the common name alone: User:node, User:admin


def listener_name(security: str, is_controller: bool) -> str:
    if is_controller:
        return "CONTROLLER"
    return "PLAINTEXT" if security == "plaintext" else "SSL"


def node_properties(security: str, directory: str | Path, hosts: Sequence[str] = certs.DEFAULT_HOSTS
                    ) -> dict[str, str]:
    """What every node of a cluster secured so adds to its server.properties (nothing for plaintext); the node
    certificate is valid for `hosts` (the nodes' addresses)."""
    _check(security)
    if security == "plaintext":
        return {}
    files = certs.CertFiles(Path(directory) / "certs")
    if not all(path.exists() for path in (files.ca, files.node, *files.client(OPERATOR))):
        certs.create(files.directory, clients=(OPERATOR,), hosts=hosts)
    return {
        "listener.security.protocol.map": "SSL:SSL,CONTROLLER:SSL",
        "ssl.keystore.location": str(files.node),
        "ssl.truststore.location": str(files.ca),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": PRINCIPAL_RULES,
    }


def write_client_properties(security: str, directory: str | Path) -> Path | None:
    """`DIR/client.properties` for the operator, in librdkafka's names; None (and no file) for plaintext."""
    _check(security)
    if security == "plaintext":
        return None
    files = certs.CertFiles(Path(directory) / "certs")
    certificate, key = files.client(OPERATOR)
    path = Path(directory) / CLIENT_PROPERTIES
    path.write_text(f"security.protocol=SSL\nssl.ca.location={files.ca}\n"
                    f"ssl.certificate.location={certificate}\nssl.key.location={key}\n")
    return path


def _check(security: str) -> None:
    if security not in SECURITY_CHOICES:
        raise ConfigError(f"--security must be one of {', '.join(SECURITY_CHOICES)}, got {security!r}")
