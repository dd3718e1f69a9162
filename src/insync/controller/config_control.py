"""The controller's config decisions, after Kafka's `ConfigurationControlManager`: pure functions of an image.

A new topic's overrides become one `ConfigRecord` per key. An alteration of a topic's overrides or of a broker's
dynamic configs (a broker id, or "" for the cluster-wide defaults) is validated whole, then becomes one record per
key whose value changes: `ConfigRecord` for a topic, `BrokerConfigRecord` for a broker. A refusal raises
`KafkaException` with Kafka's error, naming the key.

With Eligible Leader Replicas on, min ISR must mean the same on every broker, as in Kafka 4.x: the cluster-wide
`min.insync.replicas` is always set (`elr_safety_records` writes the static value when the controller takes
office, and removes any per-broker value), a per-broker one is refused, and so is removing the cluster-wide one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from insync import errors
from insync.config import (
    BrokerConfig,
    ConfigChange,
    ConfigError,
    NotDynamicError,
    altered_broker_configs,
    altered_topic_configs,
    config_text,
    validate_topic_configs,
)
from insync.errors import KafkaException
from insync.metadata.image import MetadataImage
from insync.metadata.records import BrokerConfigRecord, ConfigRecord


@dataclass(frozen=True, slots=True)
class ConfigUpdate:
    """One resource's configs before and after an alteration, and the records that make the change."""

    before: Mapping[str, str]
    after: Mapping[str, str]
    records: tuple[ConfigRecord | BrokerConfigRecord, ...]

    def changed(self, key: str) -> bool:
        return self.before.get(key) != self.after.get(key)


def new_topic_config_records(name: str, configs: Mapping[str, object]) -> tuple[ConfigRecord, ...]:
    """A new topic's overrides, validated as CreateTopics validates them (INVALID_CONFIG naming the key)."""
    try:
        parsed = validate_topic_configs(configs)
    except ConfigError as exc:
        raise KafkaException(errors.INVALID_CONFIG, str(exc)) from None
    return tuple(ConfigRecord(name, key, config_text(parsed[key])) for key in sorted(parsed))


def topic_config_update(image: MetadataImage, name: str, changes: Sequence[ConfigChange],
                        replace: bool) -> ConfigUpdate:
    """Refused: an unknown topic (UNKNOWN_TOPIC_OR_PARTITION), an unknown key or a bad value (INVALID_CONFIG),
    in the words of Kafka's controller."""
    if image.topic(name) is None:
        raise KafkaException(errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    before = image.configs(name)
    try:
        after = {key: config_text(value) for key, value in
                 altered_topic_configs(before, changes, replace=replace).items()}
    except ConfigError as exc:
        raise KafkaException(errors.INVALID_CONFIG, str(exc)) from None
    return ConfigUpdate(before, after, tuple(ConfigRecord(name, key, after.get(key))
                                             for key in _changed_keys(before, after)))


MIN_ISR_KEY = "min.insync.replicas"


def elr_safety_records(image: MetadataImage, static_min_isr: int) -> tuple[BrokerConfigRecord, ...]:
    """Kafka's `maybeGenerateElrSafetyRecords`: the cluster-wide min ISR set to the static value where unset, and
    every per-broker one removed (nothing when already so)."""
    records = [] if MIN_ISR_KEY in image.dynamic_configs("") else [
        BrokerConfigRecord("", MIN_ISR_KEY, str(static_min_isr))]
    records += [BrokerConfigRecord(broker, MIN_ISR_KEY, None) for broker in sorted(image.broker_configs)
                if broker and MIN_ISR_KEY in image.dynamic_configs(broker)]
    return tuple(records)


def _check_elr_min_isr(broker: str, before: Mapping[str, str], after: Mapping[str, str]) -> None:
    if before.get(MIN_ISR_KEY) == after.get(MIN_ISR_KEY):
        return
    if broker:
        raise KafkaException(errors.INVALID_CONFIG,
                             "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
    if MIN_ISR_KEY not in after:
        raise KafkaException(errors.INVALID_CONFIG,
                             "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")


def _controller_ids(static: BrokerConfig, image: MetadataImage) -> set[int]:
    """Every controller the quorum lists (standbys too, as Kafka accepts any controller id), and the active one."""
    voters = {int(v.split("@", 1)[0]) for v in static.node.controller_quorum_voters
              if v.split("@", 1)[0].isdigit()}
    return {*voters, image.controller_id}


def broker_config_update(image: MetadataImage, static: BrokerConfig, broker: str, changes: Sequence[ConfigChange],
                         replace: bool, elr_enabled: bool = False) -> ConfigUpdate:
    """Refused: a name that is neither a broker id nor "" (INVALID_REQUEST), the id of no registered broker nor
    the controller (BROKER_ID_NOT_REGISTERED, as Kafka's ConfigResourceExistenceChecker), a key that cannot change
    dynamically or is unknown (INVALID_REQUEST naming it), a bad value or one that breaks a rule between keys, checked
    against the controller's `static` settings since it does not know the brokers' (INVALID_CONFIG); with ELR on,
    a per-broker min ISR or the cluster-wide one removed (INVALID_CONFIG)."""
    if broker and not (broker.isdigit() and broker.isascii()):
        raise KafkaException(errors.INVALID_REQUEST, f"Invalid broker name {broker}")
    if broker and int(broker) not in image.brokers and int(broker) not in _controller_ids(static, image):
        raise KafkaException(errors.BROKER_ID_NOT_REGISTERED, f"No node with id {int(broker)} found.")
    before = image.dynamic_configs(broker)
    try:
        after = {key: config_text(value) for key, value in
                 altered_broker_configs(before, changes, replace=replace).items()}
        if elr_enabled:
            _check_elr_min_isr(broker, before, after)
        if broker == "":
            static.with_dynamic(after, {})
        else:
            static.with_dynamic(image.dynamic_configs(""), after)
    except NotDynamicError as exc:
        raise KafkaException(errors.INVALID_REQUEST, str(exc)) from None
    except ConfigError as exc:
        raise KafkaException(errors.INVALID_CONFIG, str(exc)) from None
    return ConfigUpdate(before, after, tuple(BrokerConfigRecord(broker, key, after.get(key))
                                             for key in _changed_keys(before, after)))


def _changed_keys(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    return sorted(key for key in before.keys() | after.keys() if before.get(key) != after.get(key))
