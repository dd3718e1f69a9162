"""The broker configuration keys of listeners, TLS and SASL, with Kafka's names and defaults.

`config.py` merges `SECURITY_CONFIGS` into `BROKER_CONFIGS`; they live here so that the security keys have one
place to grow (config.py is near its size limit). A key here may also be set for one listener only, as Kafka's
`listener.name.<listener>.<key>` (lower-case listener name): `listener_config_base` gives the key such a name
overrides, which config.py validates as that key. A SASL JAAS config is set per mechanism as well
(`listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config`), so its base drops the mechanism.

Departures from Kafka: the SASL mechanisms are PLAIN and SCRAM only (no GSSAPI or OAUTHBEARER), so
`sasl.enabled.mechanisms` defaults to the three and the inter-broker and controller mechanisms to PLAIN where
Kafka's default is GSSAPI. Keystores and truststores are PEM only (`ssl.keystore.type=PEM`, Kafka's PEM support,
KIP-651): Python's `ssl` reads no JKS or PKCS12 store. `ssl.handshake.timeout.ms` is insync's own: Kafka closes
a connection stalled in its TLS handshake only once `connections.max.idle.ms` (10 minutes) passes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's authorizer.class.name for KRaft's StandardAuthorizer: insync's standard authorizer answers to it.
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class SecurityKey(NamedTuple):
    """A ConfigDef's fields (config.py builds the ConfigDef; this module cannot import it)."""

    name: str
    type: str
    default: object
    doc: str
    allowed: tuple[str, ...] | None = None
    min: float | None = None


SECURITY_CONFIGS: tuple[SecurityKey, ...] = (
    # Authorization (security/authorizer.py); off unless authorizer.class.name is set
    SecurityKey("authorizer.class.name", "string", "", "The authorizer: empty for none (every request allowed), "
                f"or {STANDARD_AUTHORIZER} for Kafka's standard ACL authorizer.", ("", STANDARD_AUTHORIZER)),
    SecurityKey("super.users", "string", "", "Principals allowed everything, separated by semicolons "
                "(User:admin;User:broker)."),
    SecurityKey("allow.everyone.if.no.acl.found", "bool", False, "With the authorizer on, allow an action on a "
                "resource that has no ACL at all."),
    SecurityKey("listener.security.protocol.map", "list",
                ("PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"),
                "Listener name to security protocol, NAME:PROTOCOL,...; a controller listener not listed is "
                "PLAINTEXT."),
    SecurityKey("inter.broker.listener.name", "string", None,
                "The listener brokers use to reach each other (follower fetches); unset: the listener named as "
                "security.inter.broker.protocol."),
    SecurityKey("security.inter.broker.protocol", "string", "PLAINTEXT",
                "Names the inter-broker listener when inter.broker.listener.name is unset.", SECURITY_PROTOCOLS),
    SecurityKey("controller.listener.names", "list", None,
                "Listener names of the controller; a broker reaches the controller with the first one's protocol. "
                "Unset: CONTROLLER."),
    SecurityKey("ssl.keystore.type", "string", "PEM", "Only PEM (Python's ssl reads no JKS or PKCS12).", ("PEM",)),
    SecurityKey("ssl.keystore.location", "string", None,
                "A PEM file with this node's private key and certificate chain."),
    SecurityKey("ssl.keystore.certificate.chain", "string", None,
                "This node's certificate chain in PEM, in the config itself (instead of a keystore file)."),
    SecurityKey("ssl.keystore.key", "string", None, "This node's private key in PEM, with the certificate chain."),
    SecurityKey("ssl.key.password", "string", None, "Password of an encrypted private key."),
    SecurityKey("ssl.truststore.type", "string", "PEM", "Only PEM.", ("PEM",)),
    SecurityKey("ssl.truststore.location", "string", None, "A PEM file of the CA certificates to trust."),
    SecurityKey("ssl.truststore.certificates", "string", None, "The CA certificates to trust, in PEM, inline."),
    SecurityKey("ssl.client.auth", "string", "none",
                "Whether a TLS listener asks clients for a certificate: none, requested or required.",
                ("none", "requested", "required")),
    SecurityKey("ssl.principal.mapping.rules", "string", "DEFAULT",
                "Rules turning a client certificate's subject into a principal name (RULE:pattern/replacement/"
                "[LU],...,DEFAULT), as Kafka's."),
    SecurityKey("ssl.enabled.protocols", "list", ("TLSv1.2", "TLSv1.3"), "TLS versions accepted.",
                ("TLSv1.2", "TLSv1.3")),
    SecurityKey("ssl.endpoint.identification.algorithm", "string", "https",
                "https: a node checks the host name of the node it connects to against its certificate; empty "
                "turns the check off.", ("https", "")),
    SecurityKey("sasl.enabled.mechanisms", "list", SASL_MECHANISMS,
                "Mechanisms a SASL listener accepts (set per listener as listener.name.<l>.sasl.enabled.mechanisms).",
                SASL_MECHANISMS),
    SecurityKey("sasl.mechanism.inter.broker.protocol", "string", "PLAIN",
                "How a broker authenticates to other brokers on a SASL inter-broker listener.", SASL_MECHANISMS),
    SecurityKey("sasl.mechanism.controller.protocol", "string", "PLAIN",
                "How a broker authenticates to the controller on a SASL controller listener.", SASL_MECHANISMS),
    SecurityKey("sasl.jaas.config", "string", None,
                "Set per listener and mechanism, listener.name.<l>.<mechanism>.sasl.jaas.config: a login module with "
                "the node's own username and password, and for PLAIN its users as user_<name>=\"<password>\"."),
    SecurityKey("connections.max.reauth.ms", "long", 0,
                "KIP-368: a SASL session lasts this long, then the client must re-authenticate (0: forever).",
                None, 0),
    SecurityKey("ssl.handshake.timeout.ms", "int", 10000,
                "insync's own: a connection whose TLS handshake takes longer is closed.", None, 1),
)

# Values DescribeConfigs never shows (Kafka's PASSWORD type).
SENSITIVE_CONFIGS = frozenset({"ssl.key.password", "ssl.keystore.key", "sasl.jaas.config"})

_LISTENER_PREFIX = re.compile(r"^listener\.name\.([a-z0-9_]+)\.(.+)$")


def listener_config_base(key: str) -> tuple[str, str] | None:
    """`listener.name.ssl.ssl.client.auth` -> ("ssl", "ssl.client.auth"): the listener (lower case) and the key it
    overrides; a mechanism's JAAS config drops the mechanism. None when `key` is not per listener."""
    match = _LISTENER_PREFIX.match(key)
    if match is None:
        return None
    listener, base = match.groups()
    if base.endswith(".sasl.jaas.config"):
        base = "sasl.jaas.config"
    return listener, base


def is_sensitive(key: str) -> bool:
    """A password or private key (Kafka's PASSWORD type), for one listener or all: never shown."""
    prefixed = listener_config_base(key)
    return (prefixed[1] if prefixed else key) in SENSITIVE_CONFIGS


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """One listener's `ssl.*` settings, each its `listener.name.<listener>.` override where set (Kafka's rule):
    what `server.tls` builds a listener's or a client's context from."""

    keystore_location: str | None
    keystore_certificate_chain: str | None
    keystore_key: str | None
    key_password: str | None
    truststore_location: str | None
    truststore_certificates: str | None
    client_auth: str  # none | requested | required
    # KIP-684: set as the listener's own `ssl.client.auth`, which alone asks for a certificate on SASL_SSL
    client_auth_for_listener: bool
    principal_mapping_rules: str
    enabled_protocols: tuple[str, ...]
    endpoint_identification_algorithm: str  # https, or empty for no host name check
    handshake_timeout_ms: int


def tls_settings(get: Callable[[str], object], client_auth_for_listener: bool) -> TlsSettings:
    """The TLS settings `get(key)` gives, a listener's override or the general value of each `ssl.*` key."""
    def optional(key: str) -> str | None:
        value = get(key)
        return None if value is None else str(value)

    enabled, timeout_ms = get("ssl.enabled.protocols"), get("ssl.handshake.timeout.ms")
    assert isinstance(enabled, tuple) and isinstance(timeout_ms, int), (enabled, timeout_ms)
    return TlsSettings(
        keystore_location=optional("ssl.keystore.location"),
        keystore_certificate_chain=optional("ssl.keystore.certificate.chain"),
        keystore_key=optional("ssl.keystore.key"),
        key_password=optional("ssl.key.password"),
        truststore_location=optional("ssl.truststore.location"),
        truststore_certificates=optional("ssl.truststore.certificates"),
        client_auth=str(get("ssl.client.auth")),
        client_auth_for_listener=client_auth_for_listener,
        principal_mapping_rules=str(get("ssl.principal.mapping.rules")),
        enabled_protocols=tuple(str(name) for name in enabled),
        endpoint_identification_algorithm=optional("ssl.endpoint.identification.algorithm") or "",
        handshake_timeout_ms=timeout_ms,
    )


# The mechanisms a listener's JAAS configurations are looked up for (`listener.name.<l>.<mechanism>.sasl.jaas.config`).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def jaas_key(listener: str, mechanism: str) -> str:
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


@dataclass(frozen=True, slots=True)
class SaslListenerSettings:
    """One listener's SASL settings, each its `listener.name.<listener>.` override where set: the mechanisms it
    enables, its re-authentication period, and the JAAS configuration text set for each mechanism."""

    listener: str
    enabled_mechanisms: tuple[str, ...]
    reauth_ms: int
    jaas_configs: Mapping[str, str]  # mechanism -> its JAAS configuration, where set


def sasl_listener_settings(listener: str, get: Callable[[str], object],
                           jaas_configs: Mapping[str, str]) -> SaslListenerSettings:
    """`get(key)` gives the listener's override or the general value of a `sasl.*` key."""
    enabled, reauth_ms = get("sasl.enabled.mechanisms"), get("connections.max.reauth.ms")
    assert isinstance(enabled, tuple) and isinstance(reauth_ms, int), (enabled, reauth_ms)
    return SaslListenerSettings(listener, tuple(str(m) for m in enabled), reauth_ms, dict(jaas_configs))


@dataclass(frozen=True, slots=True)
class SaslClientMechanisms:
    """The mechanisms this node authenticates with: to its peers (`sasl.mechanism.inter.broker.protocol`) and to
    the controllers (`sasl.mechanism.controller.protocol`)."""

    inter_broker: str
    controller: str

    def of(self, to_controller: bool) -> tuple[str, str]:
        """(the mechanism, the key that sets it) for connections to the controllers or to the other brokers."""
        if to_controller:
            return self.controller, "sasl.mechanism.controller.protocol"
        return self.inter_broker, "sasl.mechanism.inter.broker.protocol"
