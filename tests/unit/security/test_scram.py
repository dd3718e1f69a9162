"""SCRAM server: RFC 7677's SCRAM-SHA-256 exchange byte for byte, SHA-512 against an independent client, and
every way a client can get it wrong."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from scram_vectors import (
    RFC_CLIENT_FINAL,
    RFC_CLIENT_FIRST,
    RFC_SALT,
    RFC_SERVER_FINAL,
    RFC_SERVER_FIRST,
    RFC_SERVER_NONCE,
)

from insync.security.sasl_errors import SaslAuthenticationError
from insync.security.scram import (
    ScramCredential,
    ScramMechanism,
    ScramServer,
    credential,
    credential_from_salted,
    salted_password,
    username,
)


def rfc_server(users: dict[str, ScramCredential] | None = None) -> ScramServer:
    store = users if users is not None else {
        "user": credential(ScramMechanism.SCRAM_SHA_256, "pencil", RFC_SALT, 4096)}
    return ScramServer(ScramMechanism.SCRAM_SHA_256, lambda _m, name: store.get(name), RFC_SERVER_NONCE)


def test_rfc7677_exchange() -> None:
    server = rfc_server()
    assert server.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.complete
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.username == "user"


def client_final(mechanism: ScramMechanism, password: str, client_first_bare: bytes, server_first: bytes,
                 gs2: bytes = b"n,,", nonce_prefix: bytes = b"") -> bytes:
    """An independent SCRAM client (RFC 5802 3), from hashlib and hmac only."""
    fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", mechanism.hash_name).digest()
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    without_proof = b"c=" + base64.b64encode(gs2) + b",r=" + nonce_prefix + fields["r"].encode()
    auth_message = client_first_bare + b"," + server_first + b"," + without_proof
    signature = hmac.new(stored_key, auth_message, mechanism.hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return without_proof + b",p=" + base64.b64encode(proof)


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_independent_client_authenticates(mechanism: ScramMechanism) -> None:
    store = {"alice": credential(mechanism, "alice-secret", b"salty", 4096)}
    server = ScramServer(mechanism, lambda m, name: store.get(name) if m is mechanism else None, "srv")
    server_first = server.evaluate(b"n,,n=alice,r=abc")
    answer = server.evaluate(client_final(mechanism, "alice-secret", b"n=alice,r=abc", server_first))
    assert answer.startswith(b"v=") and server.complete


def test_wrong_password_fails_without_telling_the_client() -> None:
    server = rfc_server()
    server_first = server.evaluate(b"n,,n=user,r=abc")
    with pytest.raises(SaslAuthenticationError) as failure:
        server.evaluate(client_final(ScramMechanism.SCRAM_SHA_256, "wrong", b"n=user,r=abc", server_first))
    assert not failure.value.to_client and "Invalid client credentials" in failure.value.reason
    assert "SCRAM-SHA-256" in failure.value.client_message("SCRAM-SHA-256", False)
    with pytest.raises(SaslAuthenticationError, match="Unexpected challenge"):
        server.evaluate(b"anything")


def test_unknown_user_fails_on_the_first_message() -> None:
    with pytest.raises(SaslAuthenticationError, match="Invalid user credentials") as failure:
        rfc_server().evaluate(b"n,,n=mallory,r=abc")
    assert not failure.value.to_client


@pytest.mark.parametrize("message, match", [
    (b"y,,n=user,r=abc", "client first message format"),
    (b"n,,n=user", "client first message format"),
    (b"\xff\xfe", "not UTF-8"),
    (b"n,,n=us=er,r=abc", "Invalid username"),
])
def test_malformed_client_first(message: bytes, match: str) -> None:
    with pytest.raises(SaslAuthenticationError, match=match):
        rfc_server().evaluate(message)


def test_authzid_must_be_the_username() -> None:
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different") as failure:
        rfc_server().evaluate(b"n,a=admin,n=user,r=abc")
    assert failure.value.to_client


def test_too_few_iterations_refused() -> None:
    weak = {"user": credential(ScramMechanism.SCRAM_SHA_256, "pencil", RFC_SALT, 1000)}
    with pytest.raises(SaslAuthenticationError, match="less than the minimum 4096"):
        rfc_server(weak).evaluate(RFC_CLIENT_FIRST)


@pytest.mark.parametrize("final, match", [
    (b"c=biws,r=someone-else,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "nonce"),
    (b"c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
     "channel binding"),
    (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA", "wrong length"),
    (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=!!!!", "final message format"),
    (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=abc", "not base64"),
])
def test_malformed_client_final(final: bytes, match: str) -> None:
    server = rfc_server()
    server.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationError, match=match):
        server.evaluate(final)
    assert not server.complete


def test_saslname_escapes() -> None:
    assert username("a=2Cb=3Dc") == "a,b=c"


def test_credential_from_the_salted_password_matches_the_password_form() -> None:
    mechanism = ScramMechanism.SCRAM_SHA_512
    salted = salted_password(mechanism, "pw", b"salt", 4096)
    assert credential_from_salted(mechanism, b"salt", salted, 4096) == credential(mechanism, "pw", b"salt", 4096)
    assert ScramMechanism.by_type(2) is mechanism and ScramMechanism.by_name("SCRAM-SHA-512") is mechanism
    assert ScramMechanism.by_type(9) is None


def test_librdkafkas_doubled_client_nonce_is_accepted() -> None:
    """librdkafka < 2.6.1 puts its own nonce in front of the server's (librdkafka#4895)."""
    mechanism = ScramMechanism.SCRAM_SHA_256
    server = rfc_server()
    server_first = server.evaluate(b"n,,n=user,r=abc")
    final = client_final(mechanism, "pencil", b"n=user,r=abc", server_first, nonce_prefix=b"abc")
    assert server.evaluate(final).startswith(b"v=") and server.complete
