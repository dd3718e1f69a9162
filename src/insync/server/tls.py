"""TLS for listeners and for insync's own connections, from Kafka's PEM `ssl.*` configs (Python's `ssl`).

A listener's settings (`BrokerConfig.tls`, typed) are `listener.name.<listener>.<key>` where set, else `<key>`
(Kafka's rule). The server side loads the node's key and certificate chain (`ssl.keystore.location`, a PEM file
holding both, or the inline `ssl.keystore.certificate.chain` + `ssl.keystore.key`, with `ssl.key.password` for an
encrypted key), trusts `ssl.truststore.location` / `ssl.truststore.certificates`, asks for client certificates as
`ssl.client.auth` says (none | requested | required) and speaks only `ssl.enabled.protocols`. A client certificate's
subject (RFC 4514 form, as Java's X500Principal prints it) is mapped to the connection's principal by
`ssl.principal.mapping.rules`; a connection without one is ANONYMOUS. The client side (follower fetches,
broker-to-controller, insync's tools) verifies the server against the truststore, and its host name when
`ssl.endpoint.identification.algorithm=https`, and presents the node's own certificate when it has one. Bad files or
PEM are a ConfigError naming the key, raised when the node starts, not at the first connection.
"""

from __future__ import annotations

import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from insync.config import BrokerConfig, ConfigError, TlsSettings
from insync.security.principal import ANONYMOUS, KafkaPrincipal, user
from insync.security.ssl_principal import PrincipalMapper, parse_rules

VERIFY_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True, slots=True)
class TlsServer:
    """What a TLS listener needs: the context, how long a handshake may take, how subjects become principals."""

    context: ssl.SSLContext
    handshake_timeout_s: float
    mapper: PrincipalMapper

    def principal(self, ssl_object: ssl.SSLObject | None) -> KafkaPrincipal:
        """The principal of a connection whose handshake completed; NoRuleApplies when no rule maps its subject."""
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:
            return ANONYMOUS
        subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()
        return user(self.mapper.name_of(subject))


def server_tls(config: BrokerConfig, listener: str, sasl: bool = False) -> TlsServer:
    """A TLS listener's context. On a SASL_SSL listener (`sasl`) SASL says who the client is, and, as in Kafka
    (KIP-684), only `listener.name.<l>.ssl.client.auth` asks for a client certificate there, not the general key."""
    settings = config.tls(listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(context, settings)
    if not _load_keystore(context, settings):
        raise ConfigError(f"listener {listener} uses TLS but has no ssl.keystore.location or "
                          "ssl.keystore.certificate.chain and ssl.keystore.key")
    client_auth = settings.client_auth
    if sasl and not settings.client_auth_for_listener:
        client_auth = "none"
    if not _load_truststore(context, settings) and client_auth != "none":
        raise ConfigError(f"ssl.client.auth={client_auth} on listener {listener} needs ssl.truststore.location or "
                          "ssl.truststore.certificates to verify client certificates")
    context.verify_mode = VERIFY_MODES[client_auth]
    return TlsServer(context, settings.handshake_timeout_ms / 1000, parse_rules(settings.principal_mapping_rules))


def client_tls(config: BrokerConfig, listener: str | None) -> ssl.SSLContext:
    """For connecting to a TLS listener: verify the server (and its host name with endpoint identification on);
    present this node's certificate when it has one (a listener requiring client certificates)."""
    settings = config.tls(listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(context, settings)
    _load_keystore(context, settings)
    if not _load_truststore(context, settings):
        context.load_default_certs()
    context.check_hostname = settings.endpoint_identification_algorithm == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _versions(context: ssl.SSLContext, settings: TlsSettings) -> None:
    if not settings.enabled_protocols:
        raise ConfigError("ssl.enabled.protocols is empty: enable TLSv1.2, TLSv1.3 or both")
    chosen = sorted(TLS_VERSIONS[name] for name in settings.enabled_protocols)
    context.minimum_version, context.maximum_version = chosen[0], chosen[-1]


def _load_keystore(context: ssl.SSLContext, settings: TlsSettings) -> bool:
    """The node's key and certificate chain, from a PEM file or inline PEM; False when none is configured."""
    password = settings.key_password
    location, chain, key = settings.keystore_location, settings.keystore_certificate_chain, settings.keystore_key
    if location is None and chain is None and key is None:
        return False
    if location is not None and (chain is not None or key is not None):
        raise ConfigError("set either ssl.keystore.location or ssl.keystore.certificate.chain and ssl.keystore.key")
    try:
        if location is not None:
            context.load_cert_chain(location, password=password)
            return True
        if chain is None or key is None:
            raise ConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
        with tempfile.TemporaryDirectory() as scratch:  # ssl loads chains from files only; the file goes at once
            pem = Path(scratch) / "keystore.pem"
            pem.write_text(f"{key}\n{chain}\n")
            pem.chmod(0o600)
            context.load_cert_chain(str(pem), password=password)
        return True
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the keystore ({location or 'ssl.keystore.certificate.chain'}): "
                          f"{exc}") from None


def _load_truststore(context: ssl.SSLContext, settings: TlsSettings) -> bool:
    location, certificates = settings.truststore_location, settings.truststore_certificates
    if location is None and certificates is None:
        return False
    try:
        if location is not None:
            context.load_verify_locations(cafile=location)
        if certificates is not None:
            context.load_verify_locations(cadata=certificates)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the truststore ({location or 'ssl.truststore.certificates'}): "
                          f"{exc}") from None
    return True
