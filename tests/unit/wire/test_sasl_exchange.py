from __future__ import annotations

import datetime
from typing import Any

import pytest

from insync.protocol.kio import build, response_class
from insync.security.sasl_client import SaslCredentials
from insync.wire import sasl_exchange
from insync.wire.versions import SASL_AUTHENTICATE, SASL_HANDSHAKE


def handshake(error_code: int = 0) -> Any:
    return build(response_class(SASL_HANDSHAKE, 1), error_code=error_code, mechanisms=("PLAIN",))


def authenticated(error_code: int = 0, message: str | None = None, lifetime_ms: int = 0) -> Any:
    return build(response_class(SASL_AUTHENTICATE, 2), error_code=error_code, error_message=message,
                 auth_bytes=b"", session_lifetime=datetime.timedelta(milliseconds=lifetime_ms))


def test_plain_is_a_handshake_and_one_token_and_returns_the_session_lifetime() -> None:
    sent: list[Any] = []
    answers = iter([handshake(), authenticated(lifetime_ms=60_000)])

    def request(body: Any) -> Any:
        sent.append(body)
        return next(answers)

    assert sasl_exchange.run(SaslCredentials("PLAIN", "alice", "secret"), request) == 60.0
    assert sent[0].mechanism == "PLAIN" and sent[1].auth_bytes == b"\0alice\0secret"


@pytest.mark.parametrize(("answers", "message"), [
    ([handshake(33)], "refused SASL mechanism PLAIN: UNSUPPORTED_SASL_MECHANISM"),
    ([handshake(), authenticated(58, "Authentication failed: Invalid username or password")],
     "refused authentication as alice with PLAIN: Authentication failed: Invalid username or password"),
])
def test_a_refusal_names_what_was_refused(answers: list[Any], message: str) -> None:
    replies = iter(answers)
    with pytest.raises(sasl_exchange.SaslRefused, match=message):
        sasl_exchange.run(SaslCredentials("PLAIN", "alice", "secret"), lambda _body: next(replies))


def test_a_successful_authentication_carries_kafkas_empty_message() -> None:
    from insync import errors
    from insync.wire import sasl

    assert sasl.authenticate_response(2, errors.NONE, None, b"", 0).error_message == ""
    assert sasl.authenticate_response(2, errors.SASL_AUTHENTICATION_FAILED, "bad", b"", 0).error_message == "bad"
