"""`ssl.principal.mapping.rules`: a TLS client certificate's subject to a principal name, as Kafka's
`SslPrincipalMapper`.

The rules are a comma-separated list read left to right; the first that applies gives the name:
- `DEFAULT`: the subject's distinguished name itself (RFC 2253 form, `CN=alice,OU=ops,O=acme`);
- `RULE:pattern/replacement/[L|U]`: applies when the regular expression matches the whole name, which becomes
  the replacement (`$1` names a group, as in Java), lower- or upper-cased by the optional flag.
When no rule applies the connection cannot be given a principal: `NoRuleApplies`, which fails its
authentication, as in Kafka. Rules are parsed once, at startup, where a malformed list is a ConfigError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from insync.config import ConfigError

# Kafka's RULE_PARSER: DEFAULT, or RULE:pattern/replacement/ with an optional L or U.
_RULE = re.compile(r"(DEFAULT)|RULE:([^/]*)/([^/]*)/([LU])?")
_JAVA_GROUP = re.compile(r"\$(\d)")
RULES_MAX = 100


class NoRuleApplies(ValueError):
    """No mapping rule matches a certificate subject; the message names it and the rules."""


@dataclass(frozen=True, slots=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str
    case: str  # "", "L" or "U"

    def apply(self, distinguished_name: str) -> str | None:
        if self.pattern is None:
            return distinguished_name
        if self.pattern.fullmatch(distinguished_name) is None:
            return None
        name = self.pattern.sub(self.replacement, distinguished_name)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


@dataclass(frozen=True, slots=True)
class PrincipalMapper:
    rules: tuple[MappingRule, ...]
    text: str

    def name_of(self, distinguished_name: str) -> str:
        for rule in self.rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        raise NoRuleApplies(f"No rules apply to {distinguished_name}, rules {self.text}")


def parse_rules(text: str) -> PrincipalMapper:
    """`ssl.principal.mapping.rules` as written; ConfigError naming the part that is not a rule."""
    rules: list[MappingRule] = []
    rest = text.strip()
    while rest and len(rules) < RULES_MAX:
        match = _RULE.match(rest)
        after = rest[match.end():].lstrip() if match else ""
        if match is None or (after and not after.startswith(",")):
            raise ConfigError(f"invalid value {text!r} for ssl.principal.mapping.rules: {rest!r} does not start "
                              "with DEFAULT or RULE:pattern/replacement/[LU] followed by a comma or the end")
        rules.append(_rule(match, text))
        rest = after[1:].lstrip()
    if not rules or rest:
        raise ConfigError(f"invalid value {text!r} for ssl.principal.mapping.rules: expected DEFAULT or "
                          f"RULE:pattern/replacement/[LU] (at most {RULES_MAX}), comma-separated")
    return PrincipalMapper(tuple(rules), text)


def _rule(match: re.Match[str], text: str) -> MappingRule:
    if match.group(1):
        return MappingRule(None, "", "")
    try:
        pattern = re.compile(match.group(2))
    except re.error as exc:
        raise ConfigError(f"invalid value {text!r} for ssl.principal.mapping.rules: bad pattern "
                          f"{match.group(2)!r}: {exc}") from None
    return MappingRule(pattern, _JAVA_GROUP.sub(r"\\g<\1>", match.group(3)), match.group(4) or "")
