"""The SASL gate of one connection on a SASL listener: the listener's hook into `security.sasl`.

The listener hands every frame to `SaslGate.screen` before decoding it. The gate answers SaslHandshake and
SaslAuthenticate itself, closes the connection on anything the authenticator does not admit, and lets the rest
through (None). Until the connection has authenticated, frames are bounded by `sasl.server.max.receive.size`
(512 KiB), not `socket.request.max.bytes`, so a stranger cannot make the broker buffer 100 MB; after a
SaslHandshake v0 the tokens come without Kafka headers and are read raw. A completed exchange gives the
connection's `Session` its principal. Every failure costs that connection only: SASL_AUTHENTICATION_FAILED with
Kafka's message, then a close with one log line (address, claimed principal) and `failed_authentication_total`.
Settings as Kafka names them: `sasl.enabled.mechanisms` and `connections.max.reauth.ms` (also per listener),
PLAIN's users from the listener's JAAS config, SCRAM credentials from the metadata image. A node's own
credentials for other brokers and the controller are its listener's JAAS username and password for that
mechanism (`client_credentials`).
"""

from __future__ import annotations

import logging
import secrets
import struct
import time
from collections.abc import Callable

from insync.config import ConfigError
from insync.protocol.codec import (
    Buffer,
    MalformedRequest,
    SupportedVersions,
    UnsupportedRequest,
    decode_request,
    encode_response_parts,
    peek,
)
from insync.protocol.framing import MIN_REQUEST_BYTES, FrameDecoder, FrameError
from insync.security.plain import PLAIN, JaasConfig, JaasConfigError, parse_jaas_config
from insync.security.sasl import (
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SASL_RECEIVE_BYTES_MAX,
    AuthenticateResult,
    SaslAuthenticator,
    SaslSettings,
    State,
)
from insync.security.sasl_client import SaslCredentials
from insync.security.scram import CredentialLookup
from insync.security_config import SaslListenerSettings, jaas_key
from insync.server.listener import CloseAfter, GateFactory
from insync.server.session import Session
from insync.wire import sasl

log = logging.getLogger("insync.server")

_SIZE = struct.Struct(">i")
NONCE_BYTES = 24

# Outcomes the listener acts on: a response to write, a connection to close, or (None) a request to dispatch.
Screened = list[Buffer] | FrameError | None
# Counts an authentication: (listener name, whether it succeeded).
AuthenticationMeter = Callable[[str, bool], None]


class SaslGate:
    def __init__(self, settings: SaslSettings, supported: SupportedVersions, session: Session, decoder: FrameDecoder,
                 meter: AuthenticationMeter) -> None:
        # Letters and digits only, as Kafka's (ScramFormatter.secureRandomString): librdkafka 2.0 mangles a server
        # nonce with '-' or '_' in its final message.
        self.authenticator = SaslAuthenticator(settings, lambda: secrets.token_hex(NONCE_BYTES))
        self._supported = supported
        self._session = session
        self._decoder = decoder
        self._request_bytes_max = decoder.max_frame_bytes
        self._meter = meter
        decoder.max_frame_bytes = min(decoder.max_frame_bytes, SASL_RECEIVE_BYTES_MAX)
        # Kafka's words: a client of another protocol (TLS, HTTP) on a SASL port sends what reads as a huge size
        decoder.max_frame_setting = ("sasl.server.max.receive.size before authentication: the client may be "
                                     "configured with the wrong security protocol")

    def screen(self, payload: bytes) -> Screened:
        auth = self.authenticator
        now_ms = int(time.monotonic() * 1000)
        if auth.raw_tokens and auth.state is State.AUTHENTICATE:
            result = auth.authenticate(payload, 0, now_ms)
            return self._after(result, [_SIZE.pack(len(result.token)) + result.token])
        try:
            api_key, _, correlation_id = peek(payload)
        except MalformedRequest as exc:
            return self._closing(f"malformed request: {exc}")
        refusal = auth.admit(api_key, now_ms)
        if refusal is not None:
            return self._closing(f"{refusal} (correlation id {correlation_id})")
        if api_key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            return None
        try:
            request = decode_request(payload, self._supported)
        except (UnsupportedRequest, MalformedRequest) as exc:
            return self._closing(f"malformed SASL request: {exc}")
        if api_key == SASL_HANDSHAKE:
            return self._handshake(request.body.mechanism, request.api_version, request.correlation_id)
        result = auth.authenticate(request.body.auth_bytes, request.api_version, now_ms)
        body = sasl.authenticate_response(request.api_version, result.error, result.error_message, result.token,
                                          result.session_lifetime_ms)
        return self._after(result, encode_response_parts(SASL_AUTHENTICATE, request.api_version,
                                                         request.correlation_id, body))

    def _handshake(self, mechanism: str, version: int, correlation_id: int) -> Screened:
        result = self.authenticator.handshake(mechanism, version)
        body = sasl.handshake_response(version, result.error, result.mechanisms)
        parts = encode_response_parts(SASL_HANDSHAKE, version, correlation_id, body)
        if result.close_reason is not None:
            self._fail(result.close_reason, "")
            return CloseAfter(f"SASL handshake from {self._session.peer} refused: {result.close_reason}", parts)
        if self.authenticator.raw_tokens:
            self._decoder.min_frame_bytes = 0  # a raw token may be shorter than a request header
        return parts

    def _after(self, result: AuthenticateResult, parts: list[Buffer]) -> Screened:
        if result.close_reason is not None:
            self._fail(result.close_reason, result.username)
            return CloseAfter(f"Failed authentication with {self._session.peer}", parts)
        if result.principal is not None:
            self._decoder.max_frame_bytes = self._request_bytes_max
            self._decoder.max_frame_setting = "socket.request.max.bytes"
            self._decoder.min_frame_bytes = MIN_REQUEST_BYTES
            self._session.principal = result.principal
            self._meter(self._session.listener.name, True)
            log.info("Authenticated /%s as %s with %s on listener %s", self._session.peer, result.principal,
                     self.authenticator.mechanism, self._session.listener.name)
        return parts

    def _closing(self, reason: str) -> FrameError:
        """Close without an answer, as Kafka does for a request out of turn (the listener logs the reason);
        before authentication it counts as a failed one."""
        if self.authenticator.principal is None:
            self._meter(self._session.listener.name, False)
        return FrameError(f"{reason} from {self._session.peer} on SASL listener {self._session.listener.name}")

    def _fail(self, reason: str, username: str) -> None:
        self._meter(self._session.listener.name, False)
        claimed = f"User:{username}" if username else "no principal yet"
        log.warning("Failed authentication with /%s (%s, mechanism %s, listener %s): %s", self._session.peer,
                    claimed, self.authenticator.mechanism or "none", self._session.listener.name, reason)


def jaas_config(sasl: SaslListenerSettings, mechanism: str) -> JaasConfig | None:
    """The listener's JAAS configuration for `mechanism`, parsed; None when it is not set."""
    text = sasl.jaas_configs.get(mechanism.upper())
    if text is None:
        return None
    try:
        return parse_jaas_config(text)
    except JaasConfigError as exc:
        raise ConfigError(f"{jaas_key(sasl.listener, mechanism)}: {exc}") from None


def client_credentials(sasl: SaslListenerSettings, mechanism: str, mechanism_key: str) -> SaslCredentials:
    """What this node sends to authenticate on the listener with `mechanism` (the value of `mechanism_key`): the
    username and password of that listener's JAAS config for it. ConfigError naming the keys when they are missing."""
    jaas = jaas_config(sasl, mechanism)
    if jaas is None or not jaas.username or jaas.password is None:
        raise ConfigError(f"{mechanism_key}={mechanism} on SASL listener {sasl.listener} needs username and password "
                          f"in {jaas_key(sasl.listener, mechanism)}")
    return SaslCredentials(mechanism, jaas.username, jaas.password)


def gate_factory(sasl: SaslListenerSettings, supported: SupportedVersions, credentials: CredentialLookup,
                 meter: AuthenticationMeter) -> GateFactory:
    """A `SaslGate` for each connection of the SASL listener `sasl` describes."""
    mechanisms = sasl.enabled_mechanisms
    plain = jaas_config(sasl, PLAIN) if PLAIN in mechanisms else None
    if PLAIN in mechanisms and (plain is None or not plain.users):
        log.warning("SASL listener %s enables PLAIN without users (%s user_<name>=\"<password>\"): no PLAIN client "
                    "can authenticate", sasl.listener, jaas_key(sasl.listener, PLAIN))
    settings = SaslSettings(mechanisms, plain.users if plain is not None else {}, credentials, sasl.reauth_ms)

    def gate(session: Session, decoder: FrameDecoder) -> SaslGate:
        return SaslGate(settings, supported, session, decoder, meter)

    return gate
