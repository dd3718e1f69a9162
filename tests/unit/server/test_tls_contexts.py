from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from insync.chaos import certs
from insync.config import BrokerConfig, ConfigError
from insync.security.principal import ANONYMOUS, user
from insync.server.tls import client_tls, server_tls
from insync.waiting import wait_until


class PeerCertificate:
    """What the listener reads from a handshake's ssl object: the client certificate in DER, or none."""

    def __init__(self, der: bytes | None) -> None:
        self.der = der

    def getpeercert(self, binary_form: bool) -> bytes | None:
        assert binary_form
        return self.der


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> certs.CertFiles:
    return certs.create(tmp_path_factory.mktemp("certs"), clients=("alice",))


def der_of(path: Path) -> bytes:
    return x509.load_pem_x509_certificate(path.read_bytes()).public_bytes(Encoding.DER)


def test_a_client_certificate_subject_is_the_principal_through_the_mapping_rules(files: certs.CertFiles) -> None:
    base = {"ssl.keystore.location": str(files.node), "ssl.truststore.location": str(files.ca),
            "ssl.client.auth": "required"}
    alice = PeerCertificate(der_of(files.client("alice")[0]))
    assert server_tls(BrokerConfig(base), "SSL").principal(alice) == user("CN=alice,O=insync")
    mapped = server_tls(BrokerConfig({**base, "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/U"}), "SSL")
    assert mapped.principal(alice) == user("ALICE")
    assert mapped.principal(PeerCertificate(None)) == ANONYMOUS
    assert mapped.context.verify_mode == ssl.CERT_REQUIRED and mapped.context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_a_listener_setting_overrides_the_general_one_for_that_listener_only(files: certs.CertFiles) -> None:
    config = BrokerConfig({"ssl.keystore.location": str(files.node), "ssl.truststore.location": str(files.ca),
                           "listener.name.external.ssl.client.auth": "requested",
                           "listener.name.external.ssl.enabled.protocols": "TLSv1.3"})
    assert config.tls("EXTERNAL").client_auth == "requested"
    assert config.tls("INTERNAL").client_auth == "none"
    assert server_tls(config, "EXTERNAL").context.verify_mode == ssl.CERT_OPTIONAL
    assert server_tls(config, "EXTERNAL").context.minimum_version == ssl.TLSVersion.TLSv1_3
    assert client_tls(config, "INTERNAL").check_hostname  # ssl.endpoint.identification.algorithm=https
    # KIP-684: on a SASL_SSL listener only the listener's own ssl.client.auth asks for a certificate
    required = BrokerConfig({"ssl.keystore.location": str(files.node), "ssl.truststore.location": str(files.ca),
                             "ssl.client.auth": "required"})
    assert server_tls(required, "SASL_SSL", sasl=True).context.verify_mode == ssl.CERT_NONE
    assert server_tls(required, "SSL").context.verify_mode == ssl.CERT_REQUIRED
    assert server_tls(config, "EXTERNAL", sasl=True).context.verify_mode == ssl.CERT_OPTIONAL


@pytest.mark.parametrize(("values", "message"), [
    ({}, "uses TLS but has no ssl.keystore.location"),
    ({"ssl.keystore.location": "/nonexistent.pem"}, "cannot load the keystore"),
    ({"ssl.client.auth": "required", "keystore": True}, "needs ssl.truststore.location"),
    ({"ssl.truststore.location": "/nonexistent.pem", "keystore": True}, "cannot load the truststore"),
    ({"ssl.keystore.key": "x", "keystore": True}, "either ssl.keystore.location or"),
    ({"ssl.keystore.key": "not a key", "ssl.keystore.certificate.chain": "nor a chain"}, "cannot load the keystore"),
])
def test_bad_tls_settings_fail_at_startup_naming_the_key(files: certs.CertFiles, values: dict[str, object],
                                                          message: str) -> None:
    raw = {k: v for k, v in values.items() if k != "keystore"}
    if values.get("keystore"):
        raw["ssl.keystore.location"] = str(files.node)
    with pytest.raises(ConfigError, match=message):
        server_tls(BrokerConfig(raw), "SSL")


def test_inline_pem_keystore_and_truststore_load(files: certs.CertFiles) -> None:
    pem = files.node.read_text()
    key_end = pem.index("-----END PRIVATE KEY-----") + len("-----END PRIVATE KEY-----")
    config = BrokerConfig({"ssl.keystore.key": pem[:key_end], "ssl.keystore.certificate.chain": pem[key_end:],
                           "ssl.truststore.certificates": files.ca.read_text(), "ssl.client.auth": "required"})
    assert server_tls(config, "SSL").context.verify_mode == ssl.CERT_REQUIRED


def test_per_listener_keys_are_validated_as_their_base_key() -> None:
    with pytest.raises(ConfigError, match="ssl.client.auth"):
        BrokerConfig({"listener.name.ssl.ssl.client.auth": "always"})
    with pytest.raises(ConfigError, match="unknown broker config key: listener.name.ssl.no.such.key"):
        BrokerConfig({"listener.name.ssl.no.such.key": "1"})


def test_a_tls_listener_logs_a_refused_handshake_as_failed_authentication_and_a_probe_quietly(
        files: certs.CertFiles, caplog: pytest.LogCaptureFixture) -> None:
    import asyncio
    import logging
    import socket

    from insync.server.listener import Listener

    class Nothing:
        def supported_versions(self) -> dict[int, tuple[int, int]]:
            return {}

    def both_logged() -> bool:
        messages = [r.getMessage() for r in caplog.records]
        return any("Failed authentication with /127.0.0.1:" in m for m in messages) and any(
            "closed during its TLS handshake" in m for m in messages)

    async def scenario() -> None:
        tls = server_tls(BrokerConfig({"ssl.keystore.location": str(files.node)}), "SSL")
        listener = Listener(Nothing(), "127.0.0.1", 0, 1024, name="SSL", security_protocol="SSL", tls=tls)  # type: ignore[arg-type]
        await listener.start()
        socket.create_connection(("127.0.0.1", listener.port)).close()  # a port probe
        with socket.create_connection(("127.0.0.1", listener.port)) as plaintext:
            plaintext.sendall(b"\x00\x00\x00\x0a" + bytes(10))  # a Kafka frame where a ClientHello belongs
            # Waited for in a thread: the listener serves both connections on this event loop meanwhile.
            await asyncio.to_thread(wait_until, both_logged, 10, "the probe and the plaintext client logged")
        await listener.stop(1.0)

    with caplog.at_level(logging.INFO, logger="insync.server"):
        asyncio.run(scenario())
    # The listener's own: a ZooKeeper client another test of this worker left retrying logs warnings too.
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("insync")]
    assert len(warnings) == 1 and "Failed authentication with /127.0.0.1:" in warnings[0], warnings
    assert "(listener SSL) (SSL handshake failed: " in warnings[0]
    assert any("closed during its TLS handshake" in r.getMessage() for r in caplog.records)
