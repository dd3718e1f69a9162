"""SASL/PLAIN (RFC 4616) and the JAAS-style configuration its users come from.

`PlainServer` is Kafka's `PlainSaslServer` with `PlainServerCallbackHandler`: one message,
`authzid NUL username NUL password`, checked against the users of the listener's
`listener.name.<listener>.plain.sasl.jaas.config`, written as Kafka's:

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

`user_<name>="<password>"` entries are the users this broker accepts; `username`/`password` are what the broker
itself sends when it connects to other brokers and to the controller (as in a SCRAM JAAS config). Messages sent
to the client are Kafka's; a password is never logged.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from insync.security.sasl_errors import SaslAuthenticationError

PLAIN = "PLAIN"

# One login module: a class name, a control flag, then key="value" options, and a semicolon.
_MODULE = re.compile(r"\s*(?P<module>[A-Za-z_$][\w$.]*)\s+(?P<flag>required|requisite|sufficient|optional)"
                     r"(?P<options>(?:\s+[\w.-]+\s*=\s*\"[^\"]*\")*)\s*;\s*")
_OPTION = re.compile(r"([\w.-]+)\s*=\s*\"([^\"]*)\"")


class JaasConfigError(ValueError):
    """A sasl.jaas.config value that does not parse; the message says what was expected."""


@dataclass(frozen=True, slots=True)
class JaasConfig:
    """The options of a `sasl.jaas.config` value: the users it accepts and the broker's own credentials."""

    module: str
    options: Mapping[str, str] = field(default_factory=dict)

    @property
    def users(self) -> Mapping[str, str]:
        return {key[len("user_"):]: value for key, value in self.options.items() if key.startswith("user_")}

    @property
    def username(self) -> str | None:
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        return self.options.get("password")


def parse_jaas_config(text: str) -> JaasConfig:
    """Kafka's JaasConfig for a `sasl.jaas.config` value: exactly one login module entry."""
    match = _MODULE.fullmatch(text)
    if match is None:
        raise JaasConfigError(f"invalid sasl.jaas.config {_redacted(text)!r}: expected one login module, e.g. "
                              'org.apache.kafka.common.security.plain.PlainLoginModule required '
                              'username="admin" password="secret";')
    options = dict(_OPTION.findall(match["options"]))
    return JaasConfig(match["module"], options)


def _redacted(text: str) -> str:
    """The value with every quoted string hidden: a config error must not print passwords."""
    return re.sub(r"\"[^\"]*\"", '"***"', text)


class PlainServer:
    """One PLAIN exchange: a single client message, an empty answer."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.username = ""

    def evaluate(self, token: bytes) -> bytes:
        assert not self.complete, "PLAIN is one message"
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8", to_client=False) from None
        tokens = text.split("\0")
        if len(tokens) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}",
                                          to_client=False)
        authzid, name, password = tokens
        self.username = name  # who tried, for the log; `complete` says whether it worked
        if not name:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(name)
        # compare_digest against a stand-in when the user is unknown, so timing does not tell users apart
        if not hmac.compare_digest((expected or "\0").encode(), password.encode()) or expected is None:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != name:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.complete = True
        return b""
