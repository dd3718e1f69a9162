"""SaslHandshake (17, v0-1) and SaslAuthenticate (36, v0-2) responses.

On a SASL listener the connection's gate (`server.sasl_gate`) answers both. Anywhere else (a PLAINTEXT or SSL
listener, or SaslAuthenticate once a connection has authenticated) the broker answers ILLEGAL_SASL_STATE, with
the words Kafka's KafkaApis uses.
"""

from __future__ import annotations

import datetime
from typing import Any

from insync import errors
from insync.errors import KafkaError
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import build, code, response_class
from insync.wire.versions import SASL_AUTHENTICATE, SASL_HANDSHAKE


def handshake_response(version: int, error: KafkaError, mechanisms: tuple[str, ...]) -> Any:
    return build(response_class(SASL_HANDSHAKE, version), error_code=code(error), mechanisms=mechanisms)


def authenticate_response(version: int, error: KafkaError, message: str | None, token: bytes,
                          session_lifetime_ms: int) -> Any:
    """A success carries Kafka's default message, the empty string."""
    if message is None and error is errors.NONE:
        message = ""
    return build(response_class(SASL_AUTHENTICATE, version), error_code=code(error), error_message=message,
                 auth_bytes=token, session_lifetime=datetime.timedelta(milliseconds=session_lifetime_ms))


def illegal_state_response(request: DecodedRequest) -> Any:
    """What a broker answers a SASL request that no SASL exchange expects."""
    if request.api_key == SASL_HANDSHAKE:
        return handshake_response(request.api_version, errors.ILLEGAL_SASL_STATE, ())
    assert request.api_key == SASL_AUTHENTICATE, request.api_key
    return authenticate_response(request.api_version, errors.ILLEGAL_SASL_STATE,
                                 "SaslAuthenticate request received after successful authentication", b"", 0)
