"""The principal of a connection, as Kafka's `KafkaPrincipal`: a type and a name, written `type:name`.

Every connection has exactly one: `ANONYMOUS` on a PLAINTEXT listener (and on SSL without a client
certificate), `User:<mapped subject>` for a TLS client certificate, `User:<username>` after SASL. The listener
sets it; the authorizer and the logs read it. ACLs and `super.users` name principals in the same `type:name`
form, which `parse_principal` reads with Kafka's rule: the type is everything before the first colon, so a
name may itself contain colons (a certificate subject rarely does, a mapped one may).
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    type: str
    name: str

    def __post_init__(self) -> None:
        assert self.type, "a principal has a type"
        assert ":" not in self.type, self.type

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


# Kafka's KafkaPrincipal.ANONYMOUS: the principal of a connection that did not authenticate.
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    """The principal of an authenticated user (SASL username or mapped certificate subject)."""
    return KafkaPrincipal(USER_TYPE, name)


def parse_principal(text: str) -> KafkaPrincipal:
    """`User:alice` -> KafkaPrincipal("User", "alice"); ValueError naming the text when it has no type."""
    principal_type, colon, name = text.partition(":")
    if not colon or not principal_type or not name:
        raise ValueError(f"Expected a string in format principalType:principalName but got {text}")
    return KafkaPrincipal(principal_type, name)
