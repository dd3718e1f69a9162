from __future__ import annotations

import pytest

from insync.security.principal import ANONYMOUS, KafkaPrincipal, parse_principal, user


def test_principals_print_and_parse_as_kafka_writes_them() -> None:
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert str(user("alice")) == "User:alice"
    assert parse_principal("User:alice") == user("alice")
    assert parse_principal("Group:ops:east") == KafkaPrincipal("Group", "ops:east")
    assert parse_principal(str(ANONYMOUS)) == ANONYMOUS


@pytest.mark.parametrize("text", ["alice", ":alice", "User:", ""])
def test_a_principal_without_type_or_name_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="principalType:principalName"):
        parse_principal(text)
