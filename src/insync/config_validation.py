"""Validation of whole sets of config values, and of alterations to them.

`validate` parses every value of a set against its key's definition and refuses unknown keys, all at once so
that nothing is half-applied; `check_relations` applies the rules that span keys, once the set is complete.
Dynamic broker configs (IncrementalAlterConfigs on a BROKER resource) may only set `DYNAMIC_BROKER_CONFIGS`
(`validate_dynamic`). `altered_topic_configs` and `altered_broker_configs` apply Kafka's alteration operations
(`ConfigOp`) to a topic's overrides or a dynamic layer and validate the result. Errors are `ConfigError` in
Kafka's words, naming the key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from insync.config_keys import (
    BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    THROTTLED_REPLICAS_KEYS,
    TOPIC_CONFIGS,
    TOPIC_TO_BROKER,
    ConfigDef,
)
from insync.properties import ConfigError
from insync.security_config import listener_config_base

_THROTTLED_REPLICA = re.compile(r"^[0-9]+:[0-9]+$")


class NotDynamicError(ConfigError):
    """A broker config that cannot change while brokers run, or an unknown one; the message names the keys."""


def validate(raw: Mapping[str, object], defs: Mapping[str, ConfigDef], what: str) -> dict[str, object]:
    """Each value of `raw` parsed by its key's definition in `defs`; unknown keys (of a `what`: "broker" or
    "topic") are refused, all of them named, before any value is parsed."""
    found = {key: definition_of(key, defs) for key in raw}
    unknown = sorted(key for key, definition in found.items() if definition is None)
    if unknown and what == "topic":  # Kafka's LogConfig.validateNames names the first one
        raise ConfigError(f"Unknown topic config name: {unknown[0]}")
    if unknown:
        raise ConfigError(f"unknown {what} config key{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
    return {key: found[key].parse(value) for key, value in raw.items()}  # type: ignore[union-attr]


def definition_of(key: str, defs: Mapping[str, ConfigDef] = BROKER_CONFIGS) -> ConfigDef | None:
    """A key's definition; a broker key set for one listener (`listener.name.<l>.<key>`) is its base key's."""
    if key in defs:
        return defs[key]
    prefixed = listener_config_base(key) if defs is BROKER_CONFIGS else None
    return defs.get(prefixed[1]) if prefixed else None


def check_relations(values: Mapping[str, object]) -> None:
    """Rules that span keys, checked once the whole set is known."""
    if values.get("metadata.store") == "zookeeper" and not values.get("zookeeper.connect"):
        raise ConfigError("zookeeper.connect is required when metadata.store=zookeeper")
    heartbeat, session = values["broker.heartbeat.interval.ms"], values["broker.session.timeout.ms"]
    assert isinstance(heartbeat, int) and isinstance(session, int)
    if heartbeat >= session:
        raise ConfigError(
            f"broker.heartbeat.interval.ms ({heartbeat}) must be less than broker.session.timeout.ms ({session})")
    _check_fetch_wait(values)
    dirs = values.get("log.dirs") or ()
    if isinstance(dirs, tuple):
        normalised = [os.path.normpath(str(d)) for d in dirs]
        repeated = sorted({d for d in normalised if normalised.count(d) > 1})
        if repeated:  # Kafka's LogManager refuses them too: one dir would be opened twice
            raise ConfigError(f"log.dirs lists the same directory twice: {', '.join(repeated)}")


def _check_fetch_wait(values: Mapping[str, object]) -> None:
    """A follower fetch may wait up to replica.fetch.wait.max.ms on the leader: longer than its request timeout it
    would time out for nothing, longer than the lag its follower would leave the ISR while idle. Kafka's
    KafkaConfig requires both, with these words (<=, as Kafka)."""
    wait, socket_timeout, lag = (values[key] for key in (
        "replica.fetch.wait.max.ms", "replica.socket.timeout.ms", "replica.lag.time.max.ms"))
    assert isinstance(wait, int) and isinstance(socket_timeout, int) and isinstance(lag, int)
    if wait > socket_timeout:
        raise ConfigError(f"replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms to "
                          f"prevent unnecessary socket timeouts (replica.fetch.wait.max.ms={wait}, "
                          f"replica.socket.timeout.ms={socket_timeout})")
    if wait > lag:
        raise ConfigError(f"replica.fetch.wait.max.ms should always be less than or equal to "
                          f"replica.lag.time.max.ms to prevent frequent changes in ISR "
                          f"(replica.fetch.wait.max.ms={wait}, replica.lag.time.max.ms={lag})")


def validate_dynamic(raw: Mapping[str, object]) -> dict[str, object]:
    """One dynamic layer of broker configs; a key that is unknown or not dynamic raises NotDynamicError."""
    unknown = sorted(key for key in raw if key not in BROKER_CONFIGS)
    if unknown:
        raise NotDynamicError(f"Unknown broker configs: {', '.join(unknown)}")
    static = sorted(key for key in raw if key not in DYNAMIC_BROKER_CONFIGS)
    if static:
        raise NotDynamicError(f"Cannot update these configs dynamically: {', '.join(static)}; set them in "
                              "server.properties and restart")
    return validate(raw, BROKER_CONFIGS, "broker")


def validate_topic_configs(raw: Mapping[str, object]) -> dict[str, object]:
    """Validate topic-level overrides (CreateTopics configs, `--config k=v`); unknown keys are an error."""
    values = validate(raw, TOPIC_CONFIGS, "topic")
    for key in THROTTLED_REPLICAS_KEYS:
        replicas = values.get(key) or ()
        assert isinstance(replicas, tuple)
        if replicas != ("*",) and not all(_THROTTLED_REPLICA.match(r) for r in replicas):
            raise TOPIC_CONFIGS[key].invalid(raw[key], "must be the literal '*' or a list of replicas in the "
                                             "following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
    _check_compaction_lags(values)
    return values


def _check_compaction_lags(values: Mapping[str, object]) -> None:
    """Kafka's `LogConfig.validateValues`: a record may not be protected from compaction for longer than the
    lag that forces it; a key the set leaves alone counts at Kafka's default (0, Long.MAX_VALUE)."""
    least, most = values.get("min.compaction.lag.ms"), values.get("max.compaction.lag.ms")
    least = 0 if least is None else least
    most = BROKER_CONFIGS["log.cleaner.max.compaction.lag.ms"].default if most is None else most
    assert isinstance(least, int) and isinstance(most, int)
    if least > most:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({least}) > "
                          f"max.compaction.lag.ms ({most})")


class ConfigOp(IntEnum):
    """Kafka's `AlterConfigOp.OpType`: what an IncrementalAlterConfigs entry does to its key."""

    SET = 0
    DELETE = 1
    APPEND = 2  # list configs only: add the items not already there
    SUBTRACT = 3  # list configs only: remove the items


@dataclass(frozen=True, slots=True)
class ConfigChange:
    key: str
    op: ConfigOp
    value: str | None = None


def altered_topic_configs(current: Mapping[str, str], changes: Sequence[ConfigChange], *,
                          replace: bool = False) -> dict[str, object]:
    """A topic's overrides after `changes`, validated as CreateTopics validates them (unknown keys and bad values
    raise ConfigError naming the key). `replace` is the legacy AlterConfigs: the SET changes become the whole set
    of overrides. APPEND and SUBTRACT start from the current override, else the broker default, as in Kafka."""
    for change in changes:
        if change.key not in TOPIC_CONFIGS:
            raise ConfigError(f"Unknown topic config name: {change.key}")
    altered = _altered(current, changes, replace, TOPIC_CONFIGS,
                       lambda key: (BROKER_CONFIGS[TOPIC_TO_BROKER[key]].default if key in TOPIC_TO_BROKER
                                    else TOPIC_CONFIGS[key].default))
    return validate_topic_configs(altered)


def altered_broker_configs(current: Mapping[str, str], changes: Sequence[ConfigChange], *,
                           replace: bool = False) -> dict[str, object]:
    """One dynamic layer (a broker's, or the cluster-wide one) after `changes`, as `altered_topic_configs` does
    for a topic: a key that is not dynamic, or unknown, raises NotDynamicError; a bad value ConfigError."""
    validate_dynamic({change.key: None for change in changes})
    altered = _altered(current, changes, replace, BROKER_CONFIGS, lambda key: BROKER_CONFIGS[key].default)
    return validate_dynamic(altered)


def _altered(current: Mapping[str, str], changes: Sequence[ConfigChange], replace: bool,
             defs: Mapping[str, ConfigDef], default: Callable[[str], object]) -> dict[str, object]:
    """`current` after `changes` (keys known to `defs`), values left to validate; APPEND and SUBTRACT start from
    the current value, else `default(key)`."""
    result: dict[str, object] = {} if replace else dict(current)
    for change in changes:
        if change.op is ConfigOp.DELETE:
            result.pop(change.key, None)
            continue
        if change.value is None:
            raise ConfigError(f"null value for {change.key}: {change.op.name} needs a value")
        if change.op is ConfigOp.SET:
            result[change.key] = change.value
            continue
        definition = defs[change.key]
        if definition.type != "list":
            raise ConfigError(f"{change.op.name} applies to list configs only; {change.key} is {definition.type}")
        items = list(definition.parse(result.get(change.key, default(change.key))) or ())  # type: ignore[call-overload]
        operand = definition.parse(change.value) or ()
        assert isinstance(operand, tuple)
        if change.op is ConfigOp.APPEND:
            items.extend(item for item in operand if item not in items)
        else:
            items = [item for item in items if item not in operand]
        result[change.key] = ",".join(items)
    return result
