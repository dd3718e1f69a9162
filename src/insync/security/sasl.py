"""One connection's SASL authentication, as Kafka's `SaslServerAuthenticator`, sans-IO.

Until a connection on a SASL listener authenticates, only ApiVersions, SaslHandshake and (once a mechanism is
chosen) SaslAuthenticate are served; anything else closes the connection (`admit`), so nothing about the
cluster is revealed to a stranger. `handshake` answers the enabled mechanisms (UNSUPPORTED_SASL_MECHANISM
closes); `authenticate` answers the mechanism's tokens until it completes, a failure being
SASL_AUTHENTICATION_FAILED with Kafka's message, then a close. After SaslHandshake v0 the tokens come without
Kafka headers (`raw_tokens`), as from Kafka clients before 1.0. Re-authentication (KIP-368): with
`connections.max.reauth.ms` > 0 a session lasts that long (`session_lifetime_ms`, v1+); the client sends
SaslHandshake again on the same connection, same mechanism and principal, while its other requests are served,
and any other request after expiry closes the connection, as in Kafka. The mechanism servers raise
`SaslAuthenticationError`, which this class turns into Kafka's answer and a reason for the log.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from insync import errors
from insync.errors import KafkaError
from insync.security.plain import PLAIN, PlainServer
from insync.security.principal import KafkaPrincipal, user
from insync.security.sasl_errors import SaslAuthenticationError
from insync.security.scram import CredentialLookup, ScramMechanism, ScramServer

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
MECHANISMS = (PLAIN, *(m.mechanism_name for m in ScramMechanism))
# Kafka's sasl.server.max.receive.size: the largest frame an unauthenticated client may send.
SASL_RECEIVE_BYTES_MAX = 524288


class MechanismServer(Protocol):
    username: str  # who the client says it is, once its message is read; authenticated only when `complete`

    @property
    def complete(self) -> bool: ...

    def evaluate(self, token: bytes) -> bytes: ...


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """What a SASL listener accepts: its enabled mechanisms, PLAIN's users, the SCRAM credentials (the metadata
    image's, through a lookup), and `connections.max.reauth.ms` (0: sessions never expire)."""

    enabled_mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    scram_credentials: CredentialLookup
    reauth_ms: int = 0

    def __post_init__(self) -> None:
        assert set(self.enabled_mechanisms) <= set(MECHANISMS), self.enabled_mechanisms
        assert self.reauth_ms >= 0, self.reauth_ms


class State(enum.Enum):
    HANDSHAKE = enum.auto()  # waiting for ApiVersions or SaslHandshake
    AUTHENTICATE = enum.auto()  # a mechanism is chosen: tokens until it completes
    COMPLETE = enum.auto()
    FAILED = enum.auto()


@dataclass(frozen=True, slots=True)
class HandshakeResult:
    error: KafkaError
    mechanisms: tuple[str, ...]
    close_reason: str | None  # the connection closes after this answer, and why (for the log)


@dataclass(frozen=True, slots=True)
class AuthenticateResult:
    error: KafkaError
    error_message: str | None  # what the client is told
    token: bytes
    session_lifetime_ms: int
    close_reason: str | None  # the connection closes after this answer, and why (for the log)
    principal: KafkaPrincipal | None  # set when this answer completes an authentication
    username: str = ""  # who the client said it was (for the log), if it got that far


class SaslAuthenticator:
    def __init__(self, settings: SaslSettings, nonce: Callable[[], str]) -> None:
        self.settings = settings
        self._nonce = nonce
        self.state = State.HANDSHAKE
        self.principal: KafkaPrincipal | None = None  # the authenticated one; kept during a re-authentication
        self.mechanism: str | None = None
        self.raw_tokens = False
        self._server: MechanismServer | None = None
        self._session_expiry_ms: int | None = None
        self._supports_reauth = False

    @property
    def reauthenticating(self) -> bool:
        return self.principal is not None and self.state is not State.COMPLETE

    def admit(self, api_key: int, now_ms: int) -> str | None:
        """None when a request of `api_key` may be served now, else why the connection must close."""
        if api_key == SASL_HANDSHAKE and self.state in (State.HANDSHAKE, State.COMPLETE):
            return None
        if api_key == SASL_AUTHENTICATE and self.state is State.AUTHENTICATE and not self.raw_tokens:
            return None
        if self.principal is None:
            if api_key == API_VERSIONS and self.state is State.HANDSHAKE:
                return None
            return f"Unexpected Kafka request of type {api_key} during SASL {self.state.name.lower()}"
        if self._session_expiry_ms is not None and now_ms >= self._session_expiry_ms:
            return f"session of {self.principal} expired (connections.max.reauth.ms); it did not re-authenticate"
        return None

    def handshake(self, mechanism: str, version: int) -> HandshakeResult:
        assert self.state in (State.HANDSHAKE, State.COMPLETE), self.state
        enabled = self.settings.enabled_mechanisms
        if mechanism not in enabled:
            self.state = State.FAILED
            return HandshakeResult(errors.UNSUPPORTED_SASL_MECHANISM, enabled,
                                   f"Unsupported SASL mechanism {mechanism}")
        if self.principal is not None and mechanism != self.mechanism:
            self.state = State.FAILED
            return HandshakeResult(errors.UNSUPPORTED_SASL_MECHANISM, enabled,
                                   f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                   f"re-authentication of mechanism '{self.mechanism}'")
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._server = self._mechanism_server(mechanism)
        self.state = State.AUTHENTICATE
        return HandshakeResult(errors.NONE, enabled, None)

    def _mechanism_server(self, mechanism: str) -> MechanismServer:
        if mechanism == PLAIN:
            return PlainServer(self.settings.plain_users)
        scram = ScramMechanism.by_name(mechanism)
        assert scram is not None, mechanism
        return ScramServer(scram, self.settings.scram_credentials, self._nonce())

    def authenticate(self, token: bytes, version: int, now_ms: int) -> AuthenticateResult:
        """The answer to one client token (a SaslAuthenticate of `version`, or a raw token after handshake v0)."""
        assert self.state is State.AUTHENTICATE and self._server is not None and self.mechanism is not None
        self._supports_reauth = self._supports_reauth or version > 0
        try:
            answer = self._server.evaluate(token)
            if not self._server.complete:
                return AuthenticateResult(errors.NONE, None, answer, 0, None, None)
            principal = user(self._server.username)
            if self.principal is not None and principal != self.principal:
                raise SaslAuthenticationError(
                    f"Cannot change principals during re-authentication from {self.principal}: {principal}")
        except SaslAuthenticationError as failure:
            self.state = State.FAILED
            message = failure.client_message(self.mechanism, self.reauthenticating)
            return AuthenticateResult(errors.SASL_AUTHENTICATION_FAILED, message, b"", 0, failure.reason, None,
                                      self._server.username)
        self.principal, self.state, self._server = principal, State.COMPLETE, None
        lifetime_ms = self.settings.reauth_ms
        self._session_expiry_ms = now_ms + lifetime_ms if lifetime_ms > 0 else None
        told_ms = lifetime_ms if self._supports_reauth else 0
        return AuthenticateResult(errors.NONE, None, answer, told_ms, None, principal, principal.name)
