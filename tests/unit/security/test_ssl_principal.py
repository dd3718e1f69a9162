from __future__ import annotations

import pytest

from insync.config import ConfigError
from insync.security.ssl_principal import NoRuleApplies, parse_rules

SUBJECT = "CN=alice,OU=ops,O=acme,C=GB"


def test_default_is_the_distinguished_name() -> None:
    assert parse_rules("DEFAULT").name_of(SUBJECT) == SUBJECT


def test_the_first_rule_that_matches_the_whole_name_gives_it_with_java_groups_and_case() -> None:
    mapper = parse_rules("RULE:^CN=([a-z]+),OU=sales,.*$/$1/, RULE:^CN=([a-z]+),OU=(.*?),.*$/$1@$2/U,DEFAULT")
    assert mapper.name_of(SUBJECT) == "ALICE@OPS"
    assert mapper.name_of("CN=bob,OU=sales,O=acme") == "bob"
    assert mapper.name_of("O=nobody") == "O=nobody"
    assert parse_rules("RULE:^CN=(.*?),.*$/$1/L").name_of("CN=Carol,O=x") == "carol"


def test_no_rule_applying_fails_naming_the_subject_and_rules() -> None:
    with pytest.raises(NoRuleApplies, match="No rules apply to O=x, rules RULE:"):
        parse_rules("RULE:^CN=(.*)$/$1/").name_of("O=x")


@pytest.mark.parametrize("text", ["", "RULE:no-slashes", "DEFAULT RULE:a/b/", "RULE:(/x/", "FOO"])
def test_malformed_rules_are_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
        parse_rules(text)
