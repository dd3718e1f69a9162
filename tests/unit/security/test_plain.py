"""SASL/PLAIN and the JAAS config its users come from."""

from __future__ import annotations

import pytest

from insync.security.plain import JaasConfigError, PlainServer, parse_jaas_config
from insync.security.sasl_errors import SaslAuthenticationError

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def test_jaas_config_users_and_own_credentials() -> None:
    config = parse_jaas_config(JAAS)
    assert config.module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert config.users == {"admin": "admin-secret", "alice": "alice-secret"}
    assert (config.username, config.password) == ("admin", "admin-secret")


@pytest.mark.parametrize("text", ['PlainLoginModule username="a";', 'PlainLoginModule required user_a="x"',
                                  'PlainLoginModule required user_a=x;'])
def test_bad_jaas_config_named_without_its_passwords(text: str) -> None:
    with pytest.raises(JaasConfigError, match="expected one login module") as failure:
        parse_jaas_config(text)
    assert '"x"' not in str(failure.value)


def test_plain_accepts_a_known_user() -> None:
    server = PlainServer(parse_jaas_config(JAAS).users)
    assert server.evaluate(b"\0alice\0alice-secret") == b""
    assert server.complete and server.username == "alice"


def test_plain_accepts_an_authzid_equal_to_the_username() -> None:
    server = PlainServer({"alice": "pw"})
    server.evaluate(b"alice\0alice\0pw")
    assert server.complete


@pytest.mark.parametrize("token, message, to_client", [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password", True),
    (b"\0mallory\0pw", "Authentication failed: Invalid username or password", True),
    (b"\0\0pw", "Authentication failed: username not specified", True),
    (b"\0alice\0", "Authentication failed: password not specified", True),
    (b"bob\0alice\0pw", "Authentication failed: Client requested an authorization id that is different from "
                        "username", True),
    (b"alice\0pw", "Invalid SASL/PLAIN response: expected 3 tokens, got 2", False),
    (b"\xff\0a\0b", "Invalid SASL/PLAIN response: not UTF-8", False),
])
def test_plain_refusals(token: bytes, message: str, to_client: bool) -> None:
    server = PlainServer({"alice": "pw"})
    with pytest.raises(SaslAuthenticationError) as failure:
        server.evaluate(token)
    assert failure.value.reason == message and failure.value.to_client is to_client
    assert not server.complete
