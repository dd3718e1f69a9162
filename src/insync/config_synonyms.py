"""Broker configs that several keys set, and the synonyms DescribeConfigs lists for a key, as Kafka has them.

Kafka sets a few broker configs by more than one key, the most precise first (its
`DynamicBrokerConfig.brokerConfigSynonyms`): `log.retention.ms`, else `log.retention.minutes`, else
`log.retention.hours`; `log.roll.ms`, else `log.roll.hours`; `log.flush.interval.ms`, else
`log.flush.scheduler.interval.ms`. A key set for one listener (`listener.name.<l>.<key>`) has its base key as a
synonym. `resolved` is the value a group's first key stands for, in that key's unit.

`config_synonyms` lists a key's synonyms as Kafka's ConfigHelper does: layer by layer, most specific first
(DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, a default only when
not null), each key of the group in its order, then without the entries before the first one of the key asked
about. So, as in Kafka, a topic's `retention.ms` lists no broker synonym (and reads DEFAULT_CONFIG) when only
`log.retention.hours` is set, though its value is the one the hours give.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import IntEnum

from insync.security_config import listener_config_base


class ConfigSource(IntEnum):
    """Kafka's `DescribeConfigsResponse.ConfigSource`: where a config's value comes from."""

    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


MINUTE_MS = 60_000
HOUR_MS = 3_600_000

# Each group: (key, milliseconds per unit of the key), the key that wins first.
_RETENTION = (("log.retention.ms", 1), ("log.retention.minutes", MINUTE_MS), ("log.retention.hours", HOUR_MS))
_ROLL = (("log.roll.ms", 1), ("log.roll.hours", HOUR_MS))
_FLUSH = (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1))
# Kafka lists the flush group for log.flush.interval.ms only: the scheduler interval is a key of its own too.
_GROUPS: dict[str, tuple[tuple[str, int], ...]] = {
    **{key: _RETENTION for key, _ in _RETENTION}, **{key: _ROLL for key, _ in _ROLL}, _FLUSH[0][0]: _FLUSH}


def broker_synonyms(name: str) -> tuple[str, ...]:
    """The keys that set broker config `name`, the one that wins first (Kafka's `brokerConfigSynonyms`)."""
    group = _GROUPS.get(name)
    if group is not None:
        return tuple(key for key, _ in group)
    prefixed = listener_config_base(name)
    return (name, prefixed[1]) if prefixed is not None else (name,)


def resolved(values: Mapping[str, object], name: str) -> object:
    """The value of `name` in `values` as Kafka reads it: for the first key of a group, the first key of the group
    that has a value, converted to `name`'s unit; otherwise the key's own value."""
    group = _GROUPS.get(name)
    if group is None or group[0][0] != name:
        return values[name]
    assert all(key in values for key, _ in group), group
    for key, unit_ms in group:  # bounded: a group has at most three keys
        value = values[key]
        if value is not None:
            assert isinstance(value, int), (key, value)
            # Kafka's logRetentionTimeMillis: any negative retention is -1, "keep forever", whatever its unit.
            return -1 if value < 0 and group is _RETENTION else value * unit_ms
    return None


def config_synonyms(name: str, layers: Sequence[tuple[ConfigSource, Mapping[str, object]]]
                    ) -> tuple[tuple[str, object, ConfigSource], ...]:
    """(key, value, source) of each value that sets `name`, as Kafka lists them; `layers` most specific first."""
    names = broker_synonyms(name)
    found = [(key, layer[key], source) for source, layer in layers for key in names
             if layer.get(key) is not None]
    first = next((index for index, (key, _, _) in enumerate(found) if key == name), len(found))
    assert first == len(found) or found[first][0] == name
    return tuple(found[first:])
