"""The client's side of a SASL authentication on the wire, sans-IO: SaslHandshake v1, then SaslAuthenticate v2
with each token of the mechanism (`security.sasl_client`).

`exchange(credentials)` is a generator of request bodies: the caller sends each body it yields and sends the
response back into it (`generator.send(response)`), until the generator returns the session lifetime the broker
granted (KIP-368; 0 for none). A refusal (mechanism not enabled, bad credentials, a server whose SCRAM messages do
not check out, too many rounds) raises `SaslRefused` naming what happened. The three clients that authenticate
(a node's `KafkaConnection`, the tools' `admin_requests`, the Spark source's reader) drive it with their own I/O.
"""

from __future__ import annotations

import secrets
from collections.abc import Generator
from typing import Any

from insync.protocol.kio import build, error_of, request_class
from insync.security.sasl_client import SaslClientError, SaslCredentials, tokens
from insync.wire.versions import SASL_AUTHENTICATE, SASL_HANDSHAKE

SASL_ROUNDS_MAX = 4  # PLAIN takes one SaslAuthenticate, SCRAM two

Exchange = Generator[Any, Any, float]


class SaslRefused(Exception):
    """The broker refused the authentication, or the exchange could not complete; the message says why."""


def exchange(credentials: SaslCredentials) -> Exchange:
    """Yields each request body, is sent each response; returns the granted session lifetime in seconds."""
    handshake = yield build(request_class(SASL_HANDSHAKE, 1), mechanism=credentials.mechanism)
    error = error_of(handshake.error_code)
    if error.code != 0:
        raise SaslRefused(f"refused SASL mechanism {credentials.mechanism}: {error.name} (enabled: "
                          f"{list(handshake.mechanisms)})")
    client = tokens(credentials, secrets.token_urlsafe(24))
    lifetime_s = 0.0
    try:
        token = next(client)
        for _ in range(SASL_ROUNDS_MAX):  # bounded: SCRAM takes two rounds
            answer = yield build(request_class(SASL_AUTHENTICATE, 2), auth_bytes=token)
            if error_of(answer.error_code).code != 0:
                raise SaslRefused(f"refused authentication as {credentials.username} with {credentials.mechanism}: "
                                  f"{answer.error_message}")
            lifetime_s = answer.session_lifetime.total_seconds()
            token = client.send(answer.auth_bytes)
    except StopIteration:
        return lifetime_s
    except SaslClientError as exc:
        raise SaslRefused(f"SASL: {exc}") from None
    raise SaslRefused(f"SASL did not complete in {SASL_ROUNDS_MAX} rounds")


def run(credentials: SaslCredentials, request: Any) -> float:
    """Drive `exchange` with a blocking `request(body) -> response`; the granted session lifetime."""
    steps = exchange(credentials)
    body = next(steps)
    for _ in range(SASL_ROUNDS_MAX + 1):  # bounded: the handshake and the rounds
        try:
            body = steps.send(request(body))
        except StopIteration as done:
            return float(done.value)
    raise AssertionError("exchange bounds its own rounds")
