"""`insync cluster up --security ...`: the configs a secured local cluster runs with, and the client settings to
reach it.

- `ssl`: every listener speaks TLS, inter-broker and controller traffic included; every node presents the node
  certificate (`CN=node`) and requires a client certificate signed by the cluster's CA; a certificate's
  principal is its common name (`User:node`, `User:admin`).
- `sasl_ssl`: SASL over TLS (server certificates only); `sasl_plaintext`: SASL without TLS. The PLAIN users are
  `node` (what brokers authenticate as) and the operator `admin`, each with a random password; SCRAM users are
  added on the running cluster (`insync users`).
Either way `node` and `admin` are `super.users`, so turning ACLs on leaves the cluster and its operator working.
Certificates are made in `DIR/certs` (chaos/certs.py) unless already there. The operator's settings go to
`DIR/client.properties` in librdkafka's names, which confluent-kafka, `kcat -F` and every insync command
(`--command-config`) read; it holds passwords, so it is readable by its owner only.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from pathlib import Path

from insync.chaos import certs
from insync.config import ConfigError

SECURITY_CHOICES = ("plaintext", "ssl", "sasl_ssl", "sasl_plaintext")
OPERATOR = "admin"
NODE_USER = "node"
CLIENT_PROPERTIES = "client.properties"
PRINCIPAL_RULES = "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"  # the common name alone: User:node, User:admin
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule required"


def listener_name(security: str, is_controller: bool) -> str:
    _check(security)
    return "CONTROLLER" if is_controller else security.upper()


def prepare(security: str, directory: str | Path, hosts: Sequence[str] = certs.DEFAULT_HOSTS) -> dict[str, str]:
    """Make what a cluster secured so needs in `directory` (certificates for `hosts`, the nodes' addresses;
    passwords; `client.properties`) and return what every node adds to its server.properties (nothing for
    plaintext)."""
    _check(security)
    if security == "plaintext":
        return {}
    protocol = security.upper()
    properties = {"listener.security.protocol.map": f"{protocol}:{protocol},CONTROLLER:{protocol}",
                  # the nodes and the operator may do anything once ACLs are on (authorizer.class.name)
                  "super.users": f"User:{NODE_USER};User:{OPERATOR}"}
    client = {"security.protocol": protocol}
    if protocol.endswith("SSL"):
        files = certs.CertFiles(Path(directory) / "certs")
        if not all(path.exists() for path in (files.ca, files.node, *files.client(OPERATOR))):
            certs.create(files.directory, clients=(OPERATOR,), hosts=hosts)
        properties.update({"ssl.keystore.location": str(files.node), "ssl.truststore.location": str(files.ca)})
        client["ssl.ca.location"] = str(files.ca)
    if protocol == "SSL":
        properties.update({"ssl.client.auth": "required", "ssl.principal.mapping.rules": PRINCIPAL_RULES})
        certificate, key = files.client(OPERATOR)
        client.update({"ssl.certificate.location": str(certificate), "ssl.key.location": str(key)})
    else:
        node_password, operator_password = secrets.token_urlsafe(18), secrets.token_urlsafe(18)
        jaas = (f'{PLAIN_MODULE} username="{NODE_USER}" password="{node_password}" '
                f'user_{NODE_USER}="{node_password}" user_{OPERATOR}="{operator_password}";')
        for listener in (protocol, "CONTROLLER"):
            properties[f"listener.name.{listener.lower()}.plain.sasl.jaas.config"] = jaas
        client.update({"sasl.mechanism": "PLAIN", "sasl.username": OPERATOR, "sasl.password": operator_password})
    path = Path(directory) / CLIENT_PROPERTIES
    path.touch(mode=0o600)
    path.write_text("".join(f"{key}={value}\n" for key, value in client.items()))
    return properties


def _check(security: str) -> None:
    if security not in SECURITY_CHOICES:
        raise ConfigError(f"--security must be one of {', '.join(SECURITY_CHOICES)}, got {security!r}")
