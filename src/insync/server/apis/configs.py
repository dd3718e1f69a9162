"""DescribeConfigs (v1-v4): topic configs from the metadata image, broker configs from `BrokerConfig`.

A topic's config is, key by key, its override (a `ConfigRecord` in the image: source TOPIC_CONFIG) or else the
broker setting that supplies its default (`log.retention.ms` for `retention.ms`): STATIC_BROKER_CONFIG when
server.properties or `--config` set it, DEFAULT_CONFIG otherwise. With `include_synonyms` each entry lists
that chain, most specific first, exactly as Kafka does, so `kafka-configs --describe` reads the same. Broker
configs are static (insync has no dynamic broker configs), hence read-only.

Values are Kafka's text: `true`/`false`, comma-joined lists, null for unset. `topic_configs` also serves
CreateTopics v5+, which returns the new topic's resulting configs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from insync import errors
from insync.config import BROKER_CONFIGS, TOPIC_CONFIGS, TOPIC_TO_BROKER, BrokerConfig, ConfigDef
from insync.controller.image import MetadataImage
from insync.errors import KafkaError
from insync.protocol.codec import DecodedRequest
from insync.server.apis.entities import NO_THROTTLE, build, check_body, code, field_or, nested, response_class
from insync.server.apis.versions import DESCRIBE_CONFIGS

# Kafka's ConfigResource.Type
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

# Kafka's DescribeConfigsResponse.ConfigSource
TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# Kafka's DescribeConfigsResponse.ConfigType, by insync's config types
_CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    config_type: int
    documentation: str
    synonyms: tuple[tuple[str, str | None, int], ...]  # (name, value, source), most specific first


def config_text(value: object) -> str | None:
    """A config value as Kafka prints it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def topic_configs(overrides: Mapping[str, str], config: BrokerConfig) -> list[ConfigEntry]:
    """Every topic-level config of a topic with `overrides`, resolved against the broker's settings."""
    entries = []
    for key, definition in sorted(TOPIC_CONFIGS.items()):
        broker_key = TOPIC_TO_BROKER[key]
        broker_value = config_text(config.get(broker_key))
        chain: list[tuple[str, str | None, int]] = []
        if key in overrides:
            chain.append((key, overrides[key], TOPIC_CONFIG))
        if config.is_explicit(broker_key):
            chain.append((broker_key, broker_value, STATIC_BROKER_CONFIG))
        chain.append((broker_key, config_text(BROKER_CONFIGS[broker_key].default), DEFAULT_CONFIG))
        value, source = chain[0][1], chain[0][2]
        entries.append(ConfigEntry(key, value, source, False, _CONFIG_TYPES[definition.type], definition.doc,
                                   tuple(chain)))
    return entries


def broker_configs(config: BrokerConfig) -> list[ConfigEntry]:
    entries = []
    for name, value in config.items():
        definition: ConfigDef = BROKER_CONFIGS[name]
        chain: list[tuple[str, str | None, int]] = []
        if config.is_explicit(name):
            chain.append((name, config_text(value), STATIC_BROKER_CONFIG))
        chain.append((name, config_text(definition.default), DEFAULT_CONFIG))
        entries.append(ConfigEntry(name, chain[0][1], chain[0][2], True, _CONFIG_TYPES[definition.type],
                                   definition.doc, tuple(chain)))
    return entries


def describe_configs(request: DecodedRequest, image: MetadataImage, config: BrokerConfig, broker_id: int) -> Any:
    body = request.body
    version = check_body(body, DESCRIBE_CONFIGS)
    cls = response_class(DESCRIBE_CONFIGS, version)
    synonyms = bool(body.include_synonyms)
    documentation = bool(field_or(body, "include_documentation", False))
    results = []
    for resource in body.resources:
        resource_type, name = int(resource.resource_type), resource.resource_name
        error, message, entries = _describe(resource_type, name, image, config, broker_id)
        wanted = resource.configuration_keys
        if wanted is not None:
            entries = [e for e in entries if e.name in wanted]
        configs = tuple(_entry(cls, e, synonyms, documentation) for e in entries)
        results.append(build(nested(cls, "DescribeConfigsResult"), error_code=code(error), error_message=message,
                             resource_type=resource_type, resource_name=name, configs=configs))
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(results))


def _describe(resource_type: int, name: str, image: MetadataImage, config: BrokerConfig,
              broker_id: int) -> tuple[KafkaError, str | None, list[ConfigEntry]]:
    if resource_type == TOPIC_RESOURCE:
        if image.topic(name) is None:
            return errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist", []
        return errors.NONE, None, topic_configs(image.configs(name), config)
    if resource_type == BROKER_RESOURCE:
        if name not in ("", str(broker_id)):
            return errors.INVALID_REQUEST, f"Unexpected broker id, expected {broker_id}, but received {name}", []
        return errors.NONE, None, broker_configs(config)
    return errors.INVALID_REQUEST, f"Unsupported resource type {resource_type}", []


def _entry(cls: type, entry: ConfigEntry, synonyms: bool, documentation: bool) -> Any:
    synonym_cls = nested(cls, "DescribeConfigsSynonym")
    listed = tuple(build(synonym_cls, name=n, value=v, source=s) for n, v, s in entry.synonyms) if synonyms else ()
    return build(nested(cls, "DescribeConfigsResourceResult"), name=entry.name, value=entry.value,
                 read_only=entry.read_only, config_source=entry.source, is_sensitive=False, synonyms=listed,
                 config_type=entry.config_type, documentation=entry.documentation if documentation else None)
