"""The client side of SASL/PLAIN and SCRAM-SHA-256/512, sans-IO: what a broker sends to authenticate to other
brokers and to the controller, and what the Spark source's readers send to brokers.

`SaslClient.tokens()` is the exchange as a generator: it yields each token to send in a SaslAuthenticate
request and is sent back the server's answer (`generator.send(answer)`), until it returns. PLAIN is one token;
SCRAM is client-first, then client-final built from the server-first message, then the server's final message,
whose signature is checked so that a client never trusts a server that does not know its key. A server that
answers nonsense raises `SaslClientError`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Generator
from dataclasses import dataclass

from insync.security.plain import PLAIN
from insync.security.scram import ITERATIONS_MIN, ScramMechanism, salted_password


class SaslClientError(Exception):
    """The server's side of the exchange is wrong (bad nonce, bad signature, malformed message)."""


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    """A mechanism and who to be: `sasl.mechanism`, `sasl.username`, `sasl.password` in librdkafka's names."""

    mechanism: str
    username: str
    password: str

    def __post_init__(self) -> None:
        assert self.mechanism == PLAIN or ScramMechanism.by_name(self.mechanism), self.mechanism
        assert self.username, "a SASL client has a username"


Exchange = Generator[bytes, bytes, None]


def tokens(credentials: SaslCredentials, nonce: str) -> Exchange:
    """Yield each token to send; receive each server answer. `nonce` is the SCRAM client nonce (random, printable,
    no comma)."""
    if credentials.mechanism == PLAIN:
        yield f"\0{credentials.username}\0{credentials.password}".encode()
        return
    mechanism = ScramMechanism.by_name(credentials.mechanism)
    assert mechanism is not None and nonce and "," not in nonce, (credentials.mechanism, nonce)
    name = credentials.username.replace("=", "=3D").replace(",", "=2C")
    first_bare = f"n={name},r={nonce}"
    server_first = yield f"n,,{first_bare}".encode()
    fields = _fields(server_first)
    if not fields.get("r", "").startswith(nonce) or len(fields["r"]) == len(nonce):
        raise SaslClientError("Invalid server nonce: it does not start with the client nonce")
    iterations = _int(fields.get("i", ""))
    if iterations < ITERATIONS_MIN:
        raise SaslClientError(f"Requested iterations {iterations} is less than the minimum {ITERATIONS_MIN}")
    salted = salted_password(mechanism, credentials.password, _b64(fields.get("s", "")), iterations)
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first.decode()},{without_proof}".encode()
    client_key = hmac.new(salted, b"Client Key", mechanism.hash_name).digest()
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    signature = hmac.new(stored_key, auth_message, mechanism.hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_final = yield f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    final = _fields(server_final)
    if "e" in final:
        raise SaslClientError(f"Sasl authentication using {mechanism.mechanism_name} failed with error: {final['e']}")
    server_key = hmac.new(salted, b"Server Key", mechanism.hash_name).digest()
    expected = hmac.new(server_key, auth_message, mechanism.hash_name).digest()
    if not hmac.compare_digest(_b64(final.get("v", "")), expected):
        raise SaslClientError("Invalid server signature in server final message")


def _fields(message: bytes) -> dict[str, str]:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslClientError("SCRAM server message is not UTF-8") from None
    pairs = [item.split("=", 1) for item in text.split(",")]
    if any(len(pair) != 2 for pair in pairs):
        raise SaslClientError(f"Invalid SCRAM server message {text!r}")
    return dict((key, value) for key, value in pairs)


def _int(text: str) -> int:
    if not text.isdigit():
        raise SaslClientError(f"Invalid SCRAM iteration count {text!r}")
    return int(text)


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise SaslClientError(f"Invalid base64 in SCRAM server message: {text!r}") from None
