"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials and the server side of the exchange.

A credential is what the metadata log keeps for a user and a mechanism: the salt, the iteration count, and the
`StoredKey` and `ServerKey` derived from the salted password, never the password. AlterUserScramCredentials
carries the salted password, which the controller turns into a credential (`credential_from_salted`) and forgets.
`ScramServer` is Kafka's `ScramSaslServer` as a sans-IO state machine: `evaluate(client_first)` answers the
server-first message, `evaluate(client_final)` checks the client's proof and answers the server's signature;
anything wrong raises `SaslAuthenticationError`. The client-final nonce must be the server's, or, departing from
Kafka 4, the client nonce followed by it: librdkafka before 2.6.1 (kcat's 2.0.2 among them) sends that
(librdkafka#4895). The server nonce is still in it and the proof covers the message as sent, so no replay gets
through. The server nonce comes from the caller, so tests replay RFC 7677's exchange byte for byte; the
credential lookup is a callable, answered from the broker's metadata image, which this layer does not import.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass

from insync.security.sasl_errors import SaslAuthenticationError


class ScramMechanism(enum.Enum):
    """Kafka's `ScramMechanism`: the mechanism name, its hash, and its type byte in the admin APIs."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256", 1)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512", 2)

    @property
    def mechanism_name(self) -> str:
        return self.value[0]

    @property
    def hash_name(self) -> str:
        return self.value[1]

    @property
    def type(self) -> int:
        return self.value[2]

    @classmethod
    def by_name(cls, name: str) -> ScramMechanism | None:
        return next((m for m in cls if m.mechanism_name == name), None)

    @classmethod
    def by_type(cls, type_: int) -> ScramMechanism | None:
        return next((m for m in cls if m.type == type_), None)


# Kafka's ScramMechanism.minIterations, and the ceiling AlterUserScramCredentials enforces (ScramCredentialUtils).
ITERATIONS_MIN = 4096
ITERATIONS_MAX = 16384


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __post_init__(self) -> None:
        assert self.salt and self.stored_key and self.server_key, "a credential has a salt and keys"
        assert self.iterations > 0, self.iterations


def _hmac(mechanism: ScramMechanism, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, mechanism.hash_name).digest()


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(Normalize(password), salt, i), i.e. PBKDF2 with the mechanism's HMAC (passwords are taken
    as UTF-8 without SASLprep, as Kafka's ScramFormatter does)."""
    assert iterations > 0 and salt
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted(mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    client_key = _hmac(mechanism, salted, b"Client Key")
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    return ScramCredential(salt, stored_key, _hmac(mechanism, salted, b"Server Key"), iterations)


def credential(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> ScramCredential:
    return credential_from_salted(mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)


# Kafka's ScramMessages patterns. gs2 header: only "n" (no channel binding), an optional authzid; the bare
# client-first message: saslname, nonce, then optional extensions (key=value, e.g. tokenauth).
_CLIENT_FIRST = re.compile(r"n,(?:a=(?P<authzid>[^,]*))?,(?P<bare>n=(?P<saslname>[^,]*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
                           r"(?P<extensions>(?:,[A-Za-z]+=[^,]*)*))")
_CLIENT_FINAL = re.compile(r"(?P<without_proof>c=(?P<channel>[A-Za-z0-9+/=]+),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
                           r"(?:,[A-Za-z]+=[^,]*)*),p=(?P<proof>[A-Za-z0-9+/=]+)")
_SASLNAME_ESCAPE = re.compile(r"=(?!2C|3D)")


def username(saslname: str) -> str:
    """RFC 5802 5.1: '=2C' is ',' and '=3D' is '='; any other '=' is not a valid saslname."""
    if _SASLNAME_ESCAPE.search(saslname):
        raise SaslAuthenticationError(f"Invalid username: {saslname}", to_client=False)
    return saslname.replace("=2C", ",").replace("=3D", "=")


CredentialLookup = Callable[[ScramMechanism, str], ScramCredential | None]


class _State(enum.Enum):
    RECEIVE_CLIENT_FIRST_MESSAGE = enum.auto()
    RECEIVE_CLIENT_FINAL_MESSAGE = enum.auto()
    COMPLETE = enum.auto()
    FAILED = enum.auto()


class ScramServer:
    """One SCRAM exchange on one connection: two client messages in, two server messages out."""

    def __init__(self, mechanism: ScramMechanism, lookup: CredentialLookup, server_nonce: str) -> None:
        assert server_nonce and "," not in server_nonce, server_nonce
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = server_nonce
        self._state = _State.RECEIVE_CLIENT_FIRST_MESSAGE
        self._credential: ScramCredential | None = None
        self._auth_message_start = b""
        self._nonce = ""
        self._client_nonce = ""
        self._gs2_header = ""
        self.username = ""

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next message; SaslAuthenticationError (and a FAILED server) otherwise."""
        try:
            if self._state is _State.RECEIVE_CLIENT_FIRST_MESSAGE:
                return self._client_first(token)
            if self._state is _State.RECEIVE_CLIENT_FINAL_MESSAGE:
                return self._client_final(token)
            raise SaslAuthenticationError(f"Unexpected challenge in Sasl server state {self._state.name}",
                                          to_client=False)
        except SaslAuthenticationError:
            self._state = _State.FAILED
            self._credential = None
            raise

    def _client_first(self, token: bytes) -> bytes:
        match = _CLIENT_FIRST.fullmatch(_text(token, "client first"))
        if match is None:
            raise SaslAuthenticationError("Invalid SCRAM client first message format", to_client=False)
        name = self.username = username(match["saslname"])  # who tried, for the log
        found = self._lookup(self.mechanism, name)
        if found is None:
            raise SaslAuthenticationError(f"Authentication failed: Invalid user credentials (user {name!r})",
                                          to_client=False)
        authzid = match["authzid"] or ""
        if authzid and authzid != name:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        if found.iterations < ITERATIONS_MIN:
            raise SaslAuthenticationError(f"Iterations {found.iterations} is less than the minimum {ITERATIONS_MIN} "
                                          f"for {self.mechanism.mechanism_name}", to_client=False)
        self._credential = found
        self._client_nonce = match["nonce"]
        self._nonce = self._client_nonce + self._server_nonce
        self._gs2_header = token.decode()[: match.start("bare")]
        server_first = f"r={self._nonce},s={base64.b64encode(found.salt).decode()},i={found.iterations}".encode()
        self._auth_message_start = match["bare"].encode() + b"," + server_first
        self._state = _State.RECEIVE_CLIENT_FINAL_MESSAGE
        return server_first

    def _client_final(self, token: bytes) -> bytes:
        match = _CLIENT_FINAL.fullmatch(_text(token, "client final"))
        if match is None:
            raise SaslAuthenticationError("Invalid SCRAM client final message format", to_client=False)
        if match["nonce"] not in (self._nonce, self._client_nonce + self._nonce):
            raise SaslAuthenticationError("Invalid client nonce in the final client message.", to_client=False)
        if _b64(match["channel"], "channel binding") != self._gs2_header.encode():
            raise SaslAuthenticationError("Invalid channel binding in the final client message.", to_client=False)
        found = self._credential
        assert found is not None and self._auth_message_start
        auth_message = self._auth_message_start + b"," + match["without_proof"].encode()
        client_signature = _hmac(self.mechanism, found.stored_key, auth_message)
        proof = _b64(match["proof"], "proof")
        if len(proof) != len(client_signature):
            raise SaslAuthenticationError("Invalid client credentials (proof of the wrong length)", to_client=False)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.mechanism.hash_name, client_key).digest(), found.stored_key):
            raise SaslAuthenticationError(f"Invalid client credentials (user {self.username!r})", to_client=False)
        server_signature = _hmac(self.mechanism, found.server_key, auth_message)
        self._credential = None
        self._state = _State.COMPLETE
        return b"v=" + base64.b64encode(server_signature)


def _text(token: bytes, what: str) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationError(f"Invalid SCRAM {what} message: not UTF-8", to_client=False) from None


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise SaslAuthenticationError(f"Invalid SCRAM {what}: not base64", to_client=False) from None
