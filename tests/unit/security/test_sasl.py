"""The per-connection SASL state machine: what is served before authentication, handshake, authenticate,
failures with Kafka's messages, and re-authentication (KIP-368)."""

from __future__ import annotations

from insync import errors
from insync.security.principal import user
from insync.security.sasl import (
    API_VERSIONS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SaslAuthenticator,
    SaslSettings,
    State,
)
from insync.security.scram import ScramMechanism, credential

METADATA = 3
PRODUCE = 0
SCRAM = ScramMechanism.SCRAM_SHA_512
CREDENTIALS = {"alice": credential(SCRAM, "alice-secret", b"salt", 4096)}


def authenticator(reauth_ms: int = 0, mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-512")) -> SaslAuthenticator:
    settings = SaslSettings(mechanisms, {"alice": "pw", "bob": "pw"},
                            lambda m, name: CREDENTIALS.get(name) if m is SCRAM else None, reauth_ms)
    return SaslAuthenticator(settings, lambda: "nonce")


def test_only_versions_and_handshake_before_authentication() -> None:
    auth = authenticator()
    assert auth.admit(API_VERSIONS, 0) is None and auth.admit(SASL_HANDSHAKE, 0) is None
    assert "Unexpected Kafka request of type 3 during SASL handshake" in (auth.admit(METADATA, 0) or "")
    assert auth.admit(SASL_AUTHENTICATE, 0) is not None  # no mechanism chosen yet
    assert auth.handshake("PLAIN", 1).error is errors.NONE
    assert auth.admit(SASL_AUTHENTICATE, 0) is None
    assert auth.admit(PRODUCE, 0) is not None and auth.admit(API_VERSIONS, 0) is not None


def test_plain_authentication_completes_with_the_principal() -> None:
    auth = authenticator()
    handshake = auth.handshake("PLAIN", 1)
    assert handshake.mechanisms == ("PLAIN", "SCRAM-SHA-512") and handshake.close_reason is None
    result = auth.authenticate(b"\0alice\0pw", 2, 10)
    assert result.error is errors.NONE and result.principal == user("alice") and result.session_lifetime_ms == 0
    assert auth.state is State.COMPLETE and auth.admit(PRODUCE, 10**12) is None


def test_unknown_mechanism_closes() -> None:
    auth = authenticator()
    result = auth.handshake("GSSAPI", 1)
    assert result.error is errors.UNSUPPORTED_SASL_MECHANISM and result.close_reason == "Unsupported SASL mechanism GSSAPI"
    assert auth.state is State.FAILED and auth.admit(SASL_HANDSHAKE, 0) is not None


def test_bad_password_gets_kafkas_message_and_closes() -> None:
    auth = authenticator()
    auth.handshake("PLAIN", 1)
    result = auth.authenticate(b"\0alice\0nope", 2, 0)
    assert result.error is errors.SASL_AUTHENTICATION_FAILED
    assert result.error_message == "Authentication failed: Invalid username or password"
    assert result.close_reason == result.error_message and result.principal is None and result.username == "alice"
    assert auth.state is State.FAILED


def test_scram_failure_hides_the_reason_from_the_client() -> None:
    auth = authenticator()
    auth.handshake("SCRAM-SHA-512", 1)
    result = auth.authenticate(b"n,,n=mallory,r=abc", 1, 0)
    assert result.error_message == ("Authentication failed during authentication due to invalid credentials with "
                                    "SASL mechanism SCRAM-SHA-512")
    assert "mallory" in (result.close_reason or "")


def test_scram_first_answer_keeps_authenticating() -> None:
    auth = authenticator()
    auth.handshake("SCRAM-SHA-512", 1)
    result = auth.authenticate(b"n,,n=alice,r=abc", 1, 0)
    assert result.error is errors.NONE and result.token.startswith(b"r=abcnonce,") and result.principal is None
    assert auth.state is State.AUTHENTICATE


def test_handshake_v0_means_raw_tokens() -> None:
    auth = authenticator()
    auth.handshake("PLAIN", 0)
    assert auth.raw_tokens and auth.admit(SASL_AUTHENTICATE, 0) is not None
    assert auth.authenticate(b"\0alice\0pw", 0, 0).principal == user("alice")


def test_session_expires_without_reauthentication() -> None:
    auth = authenticator(reauth_ms=1000)
    auth.handshake("PLAIN", 1)
    assert auth.authenticate(b"\0alice\0pw", 2, 5000).session_lifetime_ms == 1000
    assert auth.admit(PRODUCE, 5999) is None
    assert "expired" in (auth.admit(PRODUCE, 6000) or "")
    assert auth.admit(SASL_HANDSHAKE, 6000) is None  # but it may still re-authenticate


def test_v0_client_is_told_no_lifetime_but_still_expires() -> None:
    auth = authenticator(reauth_ms=1000)
    auth.handshake("PLAIN", 1)
    assert auth.authenticate(b"\0alice\0pw", 0, 0).session_lifetime_ms == 0
    assert auth.admit(PRODUCE, 1000) is not None


def test_reauthentication_keeps_serving_and_renews_the_session() -> None:
    auth = authenticator(reauth_ms=1000)
    auth.handshake("PLAIN", 1)
    auth.authenticate(b"\0alice\0pw", 2, 0)
    assert auth.handshake("PLAIN", 1).error is errors.NONE
    assert auth.reauthenticating and auth.admit(PRODUCE, 500) is None
    assert auth.authenticate(b"\0alice\0pw", 2, 900).principal == user("alice")
    assert auth.admit(PRODUCE, 1800) is None and auth.admit(PRODUCE, 1900) is not None


def test_reauthentication_cannot_change_principal_or_mechanism() -> None:
    auth = authenticator()
    auth.handshake("PLAIN", 1)
    auth.authenticate(b"\0alice\0pw", 2, 0)
    auth.handshake("PLAIN", 1)
    result = auth.authenticate(b"\0bob\0pw", 2, 0)
    assert result.error is errors.SASL_AUTHENTICATION_FAILED
    assert result.error_message == "Cannot change principals during re-authentication from User:alice: User:bob"
    other = authenticator()
    other.handshake("PLAIN", 1)
    other.authenticate(b"\0alice\0pw", 2, 0)
    changed = other.handshake("SCRAM-SHA-512", 1)
    assert changed.error is errors.UNSUPPORTED_SASL_MECHANISM and "re-authentication" in (changed.close_reason or "")
