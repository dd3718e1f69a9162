"""The SASL client: RFC 7677's client messages byte for byte, each mechanism against insync's own server, and a
server that cannot prove it knows the key."""

from __future__ import annotations

import pytest
from scram_vectors import RFC_CLIENT_FINAL, RFC_CLIENT_FIRST, RFC_SERVER_FINAL, RFC_SERVER_FIRST

from insync.security.plain import PlainServer
from insync.security.sasl_client import SaslClientError, SaslCredentials, tokens
from insync.security.scram import ScramMechanism, ScramServer, credential


def test_rfc7677_client_messages() -> None:
    exchange = tokens(SaslCredentials("SCRAM-SHA-256", "user", "pencil"), "rOprNGfwEbeRWgbNEkqO")
    assert next(exchange) == RFC_CLIENT_FIRST
    assert exchange.send(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    with pytest.raises(StopIteration):
        exchange.send(RFC_SERVER_FINAL)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_and_server_agree(mechanism: str) -> None:
    scram = ScramMechanism.by_name(mechanism)
    server = PlainServer({"a,b=c": "pw"}) if scram is None else ScramServer(
        scram, lambda m, name: credential(m, "pw", b"salt", 4096) if name == "a,b=c" else None, "srv")
    exchange = tokens(SaslCredentials(mechanism, "a,b=c", "pw"), "cli")
    token = next(exchange)
    for _ in range(3):  # bounded: PLAIN is one round, SCRAM two
        answer = server.evaluate(token)
        try:
            token = exchange.send(answer)
        except StopIteration:
            break
    assert server.complete and server.username == "a,b=c"


@pytest.mark.parametrize("server_first, match", [
    (b"r=other,s=c2FsdA==,i=4096", "nonce"),
    (b"r=cli,s=c2FsdA==,i=4096", "nonce"),
    (b"r=clisrv,s=c2FsdA==,i=10", "less than the minimum"),
    (b"r=clisrv,s=c2FsdA==,i=x", "iteration count"),
    (b"garbage", "Invalid SCRAM server message"),
    (b"r=clisrv,s=!!,i=4096", "base64"),
])
def test_bad_server_first(server_first: bytes, match: str) -> None:
    exchange = tokens(SaslCredentials("SCRAM-SHA-512", "u", "pw"), "cli")
    next(exchange)
    with pytest.raises(SaslClientError, match=match):
        exchange.send(server_first)


@pytest.mark.parametrize("server_final, match", [(b"v=AAAA", "server signature"), (b"e=invalid-proof", "invalid-proof")])
def test_bad_server_final(server_final: bytes, match: str) -> None:
    exchange = tokens(SaslCredentials("SCRAM-SHA-256", "user", "pencil"), "rOprNGfwEbeRWgbNEkqO")
    next(exchange)
    exchange.send(RFC_SERVER_FIRST)
    with pytest.raises(SaslClientError, match=match):
        exchange.send(server_final)
