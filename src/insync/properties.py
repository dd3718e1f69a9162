"""Java `.properties` files and `key=value` overrides, as Kafka reads its configs: text to pairs, before any key
is checked (config_validation.py checks them)."""

from __future__ import annotations

import re
from collections.abc import Iterable


class ConfigError(ValueError):
    """A configuration key or value is not acceptable; the message names the key and what is allowed.
    (insync.config exports it too: a properties file and a config key fail the same way.)"""

_PROPERTY_LINE = re.compile(r"^\s*([^=:\s]+)\s*[=:]?\s*(.*?)\s*$")


def parse_properties(text: str) -> list[tuple[str, str]]:
    """Java `.properties` syntax, the subset Kafka configs use. Raises ConfigError naming a bad line."""
    pairs: list[tuple[str, str]] = []
    logical: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            logical.append(stripped[:-1])
            continue
        logical.append(stripped)
        joined, logical = "".join(logical), []
        match = _PROPERTY_LINE.match(joined)
        if match is None:
            raise ConfigError(f"line {number}: cannot parse {line!r}")
        pairs.append((match.group(1), match.group(2)))
    if logical:
        raise ConfigError("file ends inside a line continuation")
    return pairs


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """`key=value` strings from the command line."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"expected key=value, got {item!r}")
        result[key.strip()] = value.strip()
    return result
