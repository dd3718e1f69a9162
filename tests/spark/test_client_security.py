"""The Java client's security settings, as Spark's Kafka source takes them, in librdkafka's names."""

from __future__ import annotations

import pytest

from insync.spark.source.client_security import ReaderSecurity, librdkafka_names

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="pw";'


def test_java_settings_become_librdkafkas() -> None:
    conf = librdkafka_names({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL",
                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": JAAS,
                             "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem",
                             "ssl.keystore.location": "/me.pem", "ssl.endpoint.identification.algorithm": ""})
    assert conf == {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                    "sasl.username": "alice", "sasl.password": "pw", "ssl.ca.location": "/ca.pem",
                    "ssl.certificate.location": "/me.pem", "ssl.key.location": "/me.pem",
                    "ssl.endpoint.identification.algorithm": "none"}


def test_librdkafka_names_pass_and_plaintext_is_untouched() -> None:
    mine = {"bootstrap.servers": "h:1", "security.protocol": "sasl_plaintext", "sasl.mechanisms": "PLAIN",
            "sasl.username": "a", "sasl.password": "b"}
    assert librdkafka_names(mine) == mine
    assert librdkafka_names({"bootstrap.servers": "h:1"}) == {"bootstrap.servers": "h:1"}


def test_reader_security() -> None:
    plain = ReaderSecurity.of({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                               "sasl.username": "a", "sasl.password": "b"})
    assert plain.tls is None and plain.sasl is not None and plain.sasl.username == "a"
    assert ReaderSecurity.of({}) == ReaderSecurity()
    unchecked = ReaderSecurity.of({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none"})
    assert unchecked.tls is not None and not unchecked.tls.check_hostname and unchecked.sasl is None


def test_a_jaas_config_without_a_password_is_refused() -> None:
    with pytest.raises(ValueError, match="needs username"):
        librdkafka_names({"sasl.jaas.config": 'x.PlainLoginModule required username="a";'})
