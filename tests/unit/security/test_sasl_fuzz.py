"""Whatever a client sends, the SASL state machine answers or refuses: no exception but SaslAuthenticationError
from the mechanisms, and the authenticator always ends in a result (never an exception)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from insync import errors
from insync.security.plain import PlainServer
from insync.security.sasl import SaslAuthenticator, SaslSettings, State
from insync.security.sasl_errors import SaslAuthenticationError
from insync.security.scram import ScramMechanism, ScramServer, credential

SCRAM = ScramMechanism.SCRAM_SHA_256
ALICE = credential(SCRAM, "pw", b"salt", 4096)
TOKENS = st.one_of(st.binary(max_size=200), st.builds(
    lambda parts: b",".join(parts), st.lists(st.sampled_from(
        [b"n", b"y", b"a=alice", b"n=alice", b"n=al=2Cice", b"r=abc", b"r=abcsrv", b"c=biws", b"c=eSws", b"p=AAAA",
         b"p=", b"s=c2FsdA==", b"i=4096", b"x=1", b"", b"=", b"\xff"]), max_size=8)))


@settings(max_examples=300, deadline=None)
@given(first=TOKENS, final=TOKENS)
def test_scram_server_only_refuses(first: bytes, final: bytes) -> None:
    server = ScramServer(SCRAM, lambda _m, name: ALICE if name == "alice" else None, "srv")
    try:
        server.evaluate(first)
        server.evaluate(final)
    except SaslAuthenticationError:
        assert not server.complete


@settings(max_examples=300, deadline=None)
@given(token=st.one_of(st.binary(max_size=100), st.builds(lambda p: b"\0".join(p), st.lists(
    st.sampled_from([b"", b"alice", b"pw", b"bob", b"\xff"]), max_size=5))))
def test_plain_server_only_refuses(token: bytes) -> None:
    server = PlainServer({"alice": "pw"})
    try:
        server.evaluate(token)
        assert server.username == "alice"
    except SaslAuthenticationError:
        assert not server.complete


@settings(max_examples=200, deadline=None)
@given(mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "GSSAPI", ""]), tokens=st.lists(TOKENS, max_size=3),
       version=st.integers(0, 2))
def test_authenticator_always_answers(mechanism: str, tokens: list[bytes], version: int) -> None:
    auth = SaslAuthenticator(SaslSettings(("PLAIN", "SCRAM-SHA-256"), {"alice": "pw"},
                                          lambda _m, name: ALICE if name == "alice" else None), lambda: "srv")
    if auth.handshake(mechanism, 1).error is not errors.NONE:
        assert auth.state is State.FAILED
        return
    for token in tokens:
        if auth.state is not State.AUTHENTICATE:
            break
        result = auth.authenticate(token, version, 0)
        assert (result.error is errors.NONE) == (result.close_reason is None)
