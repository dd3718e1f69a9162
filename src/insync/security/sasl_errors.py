"""The one error of a failed SASL exchange, with what the client may be told.

Kafka tells a client why its authentication failed only when the reason reveals nothing (a `SaslAuthenticationException`:
"Authentication failed: Invalid username or password" for PLAIN); for anything else (a `SaslException`: an
unknown SCRAM user, a bad proof, a malformed message) the client gets one fixed sentence, so a stranger cannot
learn which users exist. The detailed reason always goes to the broker's log.
"""

from __future__ import annotations


class SaslAuthenticationError(Exception):
    """`reason` is for the log; `to_client` says whether the client may see it too (else `client_message` is
    Kafka's generic sentence, filled in by the authenticator that knows the mechanism)."""

    def __init__(self, reason: str, *, to_client: bool = True) -> None:
        assert reason
        super().__init__(reason)
        self.reason = reason
        self.to_client = to_client

    def client_message(self, mechanism: str, reauthenticating: bool) -> str:
        if self.to_client:
            return self.reason
        during = "re-authentication" if reauthenticating else "authentication"
        return f"Authentication failed during {during} due to invalid credentials with SASL mechanism {mechanism}"
