"""DescribeConfigs (v1-v4): topic configs from the metadata image, broker configs from `BrokerConfig`; and
IncrementalAlterConfigs (v0-v1) and AlterConfigs (v0-v2) of topic configs.

A topic's config is, key by key, its override (a `ConfigRecord` in the image: source TOPIC_CONFIG) or else the
broker setting that supplies its default (`log.retention.ms` for `retention.ms`): STATIC_BROKER_CONFIG when
server.properties or `--config` set it, DEFAULT_CONFIG otherwise. With `include_synonyms` each entry lists
that chain, most specific first, exactly as Kafka does, so `kafka-configs --describe` reads the same. Broker
configs are static (insync has no dynamic broker configs), hence read-only.

Values are Kafka's text: `true`/`false`, comma-joined lists, null for unset. `topic_configs` also serves
CreateTopics v5+, which returns the new topic's resulting configs.

Alterations are forwarded to the controller, as KRaft brokers forward them, and answered per resource: a topic's
changes are applied all together or not at all (`Controller.alter_topic_configs`). AlterConfigs replaces the
topic's whole set of overrides; IncrementalAlterConfigs sets, deletes, appends to or subtracts from single keys.
Refused per resource, as Kafka refuses them: a key listed twice, an unknown operation, a broker resource (insync
has no dynamic broker configs; INVALID_REQUEST naming the key to set in server.properties), another resource
type.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from insync import errors
from insync.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    TOPIC_TO_BROKER,
    BrokerConfig,
    ConfigChange,
    ConfigDef,
    ConfigOp,
)
from insync.errors import KafkaError, KafkaException
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import NO_THROTTLE, build, check_body, code, field_or, nested, response_class
from insync.wire.versions import ALTER_CONFIGS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS

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


# IncrementalAlterConfigs and AlterConfigs -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigAlteration:
    """One resource of an (Incremental)AlterConfigs request; `refusal` when the translator refuses it itself."""

    resource_type: int
    name: str
    changes: tuple[ConfigChange, ...]
    refusal: tuple[KafkaError, str] | None = None


# (topic, changes, replace, validate_only): applies or raises KafkaException; `Controller.alter_topic_configs`.
AlterTopic = Callable[[str, tuple[ConfigChange, ...], bool, bool], None]


def alter_configs(request: DecodedRequest, alter_topic: AlterTopic) -> Any:
    """The answer to an IncrementalAlterConfigs or AlterConfigs request, each topic altered by `alter_topic`."""
    replace = request.api_key == ALTER_CONFIGS
    validate_only = bool(request.body.validate_only)
    results: list[tuple[ConfigAlteration, KafkaError, str | None]] = []
    for resource in decode_alterations(request):
        if resource.refusal is not None:
            results.append((resource, *resource.refusal))
            continue
        try:
            alter_topic(resource.name, resource.changes, replace, validate_only)
            results.append((resource, errors.NONE, None))
        except KafkaException as exc:
            results.append((resource, exc.error, exc.detail or None))
    return _alter_response(request, results)


def refuse_alter_configs(request: DecodedRequest, error: KafkaError, message: str) -> Any:
    """Every resource refused with `error`: a broker's answer when no controller takes the request."""
    return _alter_response(request, [(r, error, message) for r in decode_alterations(request)])


def decode_alterations(request: DecodedRequest) -> list[ConfigAlteration]:
    body = request.body
    incremental = request.api_key == INCREMENTAL_ALTER_CONFIGS
    check_body(body, INCREMENTAL_ALTER_CONFIGS if incremental else ALTER_CONFIGS)
    alterations = []
    for resource in body.resources:
        resource_type, name = int(resource.resource_type), resource.resource_name
        changes: list[ConfigChange] = []
        refusal: tuple[KafkaError, str] | None = None
        for entry in resource.configs:
            op = int(entry.config_operation) if incremental else ConfigOp.SET
            if op not in tuple(ConfigOp):
                refusal = errors.INVALID_REQUEST, f"unknown config operation {op} for {entry.name}"
                break
            changes.append(ConfigChange(entry.name, ConfigOp(op), entry.value))
        duplicated = sorted(key for key, n in Counter(c.key for c in changes).items() if n > 1)
        if refusal is None and duplicated:
            refusal = errors.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(duplicated)}"
        if refusal is None and resource_type == BROKER_RESOURCE:
            keys = ", ".join(c.key for c in changes) or "(none)"
            refusal = errors.INVALID_REQUEST, (f"Cannot update these configs dynamically: {keys}; insync broker "
                                               "configs are static: set them in server.properties and restart")
        elif refusal is None and resource_type != TOPIC_RESOURCE:
            refusal = errors.INVALID_REQUEST, f"Unsupported resource type {resource_type}"
        alterations.append(ConfigAlteration(resource_type, name, tuple(changes), refusal))
    return alterations


def _alter_response(request: DecodedRequest, results: list[tuple[ConfigAlteration, KafkaError, str | None]]) -> Any:
    cls = response_class(request.api_key, request.api_version)
    responses = tuple(build(nested(cls, "AlterConfigsResourceResponse"), error_code=code(error),
                            error_message=message, resource_type=resource.resource_type,
                            resource_name=resource.name)
                      for resource, error, message in results)
    return build(cls, throttle_time=NO_THROTTLE, responses=responses)
