"""The SASL gate of a connection, without sockets: frames in, answers out, the session's principal, the frame
bounds before and after authentication, the metric; and the settings it reads from the broker config."""

from __future__ import annotations

import struct

import pytest

from insync.config import BrokerConfig, ConfigError
from insync.protocol.codec import decode_response, encode_request
from insync.protocol.framing import MIN_REQUEST_BYTES, FrameDecoder, FrameError
from insync.protocol.kio import build, request_class
from insync.security.listeners import Endpoint
from insync.security.principal import ANONYMOUS, user
from insync.security.sasl import SASL_RECEIVE_BYTES_MAX
from insync.server.listener import CloseAfter
from insync.server.sasl_gate import SaslGate, client_credentials, gate_factory
from insync.server.session import Session
from insync.wire import versions

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="pw" '
        'user_alice="alice-pw";')
CONFIG = BrokerConfig({"listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                       "sasl.enabled.mechanisms": "PLAIN"})


def gate(seen: list[tuple[str, bool]]) -> tuple[SaslGate, Session, FrameDecoder]:
    session = Session("127.0.0.1:5000", Endpoint("SASL_PLAINTEXT", "127.0.0.1", 9094, "SASL_PLAINTEXT"))
    decoder = FrameDecoder(100 * 1024 * 1024)
    factory = gate_factory(CONFIG.sasl("SASL_PLAINTEXT"), versions.BROKER_API_VERSIONS, lambda m, u: None,
                           lambda listener, ok: seen.append((listener, ok)))
    made = factory(session, decoder)
    assert isinstance(made, SaslGate)
    return made, session, decoder


def frame(body: object, correlation_id: int = 1) -> bytes:
    return encode_request(body, correlation_id)[4:]  # the listener hands over frames without their size


def answer(parts: object, api_key: int, version: int) -> object:
    assert isinstance(parts, list)
    return decode_response(api_key, version, b"".join(parts)[4:])[1]


def test_plain_exchange_sets_the_principal_and_lifts_the_frame_bound() -> None:
    seen: list[tuple[str, bool]] = []
    sasl, session, decoder = gate(seen)
    assert decoder.max_frame_bytes == SASL_RECEIVE_BYTES_MAX and session.principal is ANONYMOUS
    handshake = answer(sasl.screen(frame(build(request_class(17, 1), mechanism="PLAIN"))), 17, 1)
    assert handshake.error_code == 0 and list(handshake.mechanisms) == ["PLAIN"]
    done = answer(sasl.screen(frame(build(request_class(36, 2), auth_bytes=b"\0alice\0alice-pw"))), 36, 2)
    assert done.error_code == 0 and session.principal == user("alice")
    assert decoder.max_frame_bytes == 100 * 1024 * 1024 and seen == [("SASL_PLAINTEXT", True)]
    assert decoder.max_frame_setting == "socket.request.max.bytes"
    metadata = frame(build(request_class(3, 12), topics=None, allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False))
    assert sasl.screen(metadata) is None  # for the broker to answer


def test_failures_close_and_count() -> None:
    seen: list[tuple[str, bool]] = []
    sasl, session, _ = gate(seen)
    sasl.screen(frame(build(request_class(17, 1), mechanism="PLAIN")))
    refused = sasl.screen(frame(build(request_class(36, 2), auth_bytes=b"\0alice\0nope")))
    assert isinstance(refused, CloseAfter) and answer(refused.parts, 36, 2).error_code == 58
    assert session.principal is ANONYMOUS and seen == [("SASL_PLAINTEXT", False)]
    other, _, _ = gate(seen)
    assert isinstance(other.screen(b"\x00\x03"), FrameError)  # not even a request header
    assert isinstance(other.screen(frame(build(request_class(36, 2), auth_bytes=b"x"))), FrameError)
    assert seen[1:] == [("SASL_PLAINTEXT", False)] * 2


def test_raw_tokens_after_handshake_v0() -> None:
    sasl, session, decoder = gate([])
    sasl.screen(frame(build(request_class(17, 0), mechanism="PLAIN")))
    assert decoder.min_frame_bytes == 0
    assert sasl.screen(b"\0alice\0alice-pw") == [struct.pack(">i", 0)]
    assert session.principal == user("alice") and decoder.min_frame_bytes == MIN_REQUEST_BYTES


def test_settings_errors_name_the_key() -> None:
    key = "sasl.mechanism.inter.broker.protocol"
    with pytest.raises(ConfigError, match="listener.name.sasl_plaintext.plain.sasl.jaas.config"):
        client_credentials(BrokerConfig({"listener.name.sasl_plaintext.plain.sasl.jaas.config": "nonsense"}).sasl(
            "SASL_PLAINTEXT"), "PLAIN", key)
    with pytest.raises(ConfigError, match="needs username and password in listener.name.x.plain"):
        client_credentials(BrokerConfig().sasl("X"), "PLAIN", key)
    own = client_credentials(CONFIG.sasl("SASL_PLAINTEXT"), *CONFIG.sasl_mechanisms.of(to_controller=False))
    assert (own.mechanism, own.username, own.password) == ("PLAIN", "admin", "pw")
