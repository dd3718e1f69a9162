"""DescribeConfigs (v1-v4): topic configs from the metadata image, broker configs from the broker's effective
`BrokerConfig`; and IncrementalAlterConfigs (v0-v1) and AlterConfigs (v0-v2) of topic and dynamic broker configs.

A topic's config is, key by key, its override (TOPIC_CONFIG) or the broker setting that supplies its default,
from DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG; with
`include_synonyms` each entry lists that chain as Kafka's ConfigHelper does, so `kafka-configs --describe` reads
the same. A BROKER resource named by this broker's id lists every broker config the same way; named "" only the
cluster-wide dynamic defaults. Values are Kafka's text; `topic_configs` also serves CreateTopics v5+.
Alterations are forwarded to the controller, as KRaft brokers forward them, and applied per resource all
together or not at all. AlterConfigs replaces a resource's whole set of overrides; IncrementalAlterConfigs
changes single keys. A key listed twice, an unknown operation or another resource type is refused here, as
Kafka refuses them, and a BROKER resource naming another broker (`preprocess`); the controller refuses the rest.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from insync import errors
from insync.config import (
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    TOPIC_TO_BROKER,
    BrokerConfig,
    ConfigChange,
    ConfigOp,
    ConfigSource,
    definition_of,
)
from insync.config import config_text as kafka_text
from insync.errors import KafkaError, KafkaException
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import (
    NO_THROTTLE,
    build,
    check_body,
    code,
    error_of,
    field_or,
    nested,
    response_class,
)
from insync.security_config import is_sensitive
from insync.wire.versions import ALTER_CONFIGS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS

# Kafka's ConfigResource.Type
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

# Kafka's DescribeConfigsResponse.ConfigType, by insync's config types
_CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    config_type: int
    documentation: str
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]  # (name, value, source), most specific first


def config_text(value: object) -> str | None:
    """A config value as Kafka prints it; null stays null."""
    return None if value is None else kafka_text(value)


def topic_configs(overrides: Mapping[str, str], config: BrokerConfig) -> list[ConfigEntry]:
    """Every topic-level config of a topic with `overrides`, resolved against the broker's settings."""
    entries = []
    for key, definition in sorted(TOPIC_CONFIGS.items()):
        broker_key = TOPIC_TO_BROKER.get(key)  # None: a topic config with no broker default (throttled replicas)
        chain: list[tuple[str, str | None, ConfigSource]] = []
        if key in overrides:
            chain.append((key, overrides[key], ConfigSource.TOPIC_CONFIG))
        if broker_key is not None:
            chain.extend((name, config_text(value), source) for name, value, source in config.synonyms(broker_key))
        # The value is what the log uses even when Kafka's synonyms leave its source out (log.retention.hours).
        value = overrides[key] if key in overrides else config_text(
            definition.default if broker_key is None else config.effective(broker_key))
        entries.append(ConfigEntry(key, value, chain[0][2] if chain else ConfigSource.DEFAULT_CONFIG, False,
                                   _CONFIG_TYPES[definition.type], definition.doc, tuple(chain)))
    return entries


def broker_configs(config: BrokerConfig, per_broker: bool) -> list[ConfigEntry]:
    """Every broker config (`per_broker`), or only those set cluster-wide, without the per-broker values."""
    entries = []
    for name, value in config.items():
        chain = [(key, config_text(v), source) for key, v, source in config.synonyms(name)
                 if per_broker or source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        if not per_broker and not chain:
            continue
        definition = definition_of(name)
        assert definition is not None, name
        # As Kafka: the key's own value (log.retention.ms stays null when log.retention.hours sets it); for ""
        # the cluster-wide value only.
        text = config_text(value) if per_broker else chain[0][1]
        entries.append(ConfigEntry(name, text, chain[0][2] if chain else ConfigSource.DEFAULT_CONFIG,
                                   name not in DYNAMIC_BROKER_CONFIGS, _CONFIG_TYPES[definition.type], definition.doc,
                                   tuple(chain)))
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
        if wanted:  # as Kafka's ConfigHelper: null or empty asks for every key
            entries = [e for e in entries if e.name in wanted]
        configs = tuple(_entry(cls, e, synonyms, documentation) for e in entries)
        results.append(build(nested(cls, "DescribeConfigsResult"), error_code=code(error), error_message=message,
                             resource_type=resource_type, resource_name=name, configs=configs))
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(results))


def _describe(resource_type: int, name: str, image: MetadataImage, config: BrokerConfig,
              broker_id: int) -> tuple[KafkaError, str | None, list[ConfigEntry]]:
    """A resource's answer; the message is Kafka's default ("") where Kafka's ConfigHelper sets none."""
    if resource_type == TOPIC_RESOURCE:
        if image.topic(name) is None:
            return errors.UNKNOWN_TOPIC_OR_PARTITION, "", []
        return errors.NONE, "", topic_configs(image.configs(name), config)
    if resource_type == BROKER_RESOURCE:
        if name not in ("", str(broker_id)):
            return (errors.INVALID_REQUEST,
                    f"Unexpected broker id, expected {broker_id} or empty string, but received {name}", [])
        return errors.NONE, "", broker_configs(config, per_broker=name != "")
    return errors.INVALID_REQUEST, f"Unsupported resource type {resource_type}", []


def _entry(cls: type, entry: ConfigEntry, synonyms: bool, documentation: bool) -> Any:
    synonym_cls = nested(cls, "DescribeConfigsSynonym")
    listed = (tuple(build(synonym_cls, name=n, value=v, source=int(s)) for n, v, s in entry.synonyms) if synonyms
              else ())
    sensitive = is_sensitive(entry.name)
    if sensitive:  # as Kafka: a password's value is never sent, neither in the entry nor in its synonyms
        listed = tuple(build(synonym_cls, name=n, value=None, source=int(s)) for n, _, s in entry.synonyms) \
            if synonyms else ()
    return build(nested(cls, "DescribeConfigsResourceResult"), name=entry.name,
                 value=None if sensitive else entry.value, read_only=entry.read_only,
                 config_source=int(entry.source), is_sensitive=sensitive, synonyms=listed,
                 config_type=entry.config_type, documentation=entry.documentation if documentation else None)


# IncrementalAlterConfigs and AlterConfigs -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigAlteration:
    """One resource of an (Incremental)AlterConfigs request; `refusal` when the translator refuses it itself."""

    resource_type: int
    name: str
    changes: tuple[ConfigChange, ...]
    refusal: tuple[KafkaError, str] | None = None


# (name, changes, replace, validate_only): applies or raises KafkaException; `Controller.alter_topic_configs` for a
# topic, `Controller.alter_broker_configs` for a broker (name: its id, or "" for the cluster-wide defaults).
Alter = Callable[[str, tuple[ConfigChange, ...], bool, bool], None]


def alter_configs(request: DecodedRequest, alter_topic: Alter, alter_broker: Alter) -> Any:
    """The answer to an IncrementalAlterConfigs or AlterConfigs request, each resource altered by `alter_topic`
    or `alter_broker`."""
    replace = request.api_key == ALTER_CONFIGS
    validate_only = bool(request.body.validate_only)
    results: list[tuple[ConfigAlteration, KafkaError, str | None]] = []
    for resource in decode_alterations(request):
        if resource.refusal is not None:
            results.append((resource, *resource.refusal))
            continue
        try:
            alter = alter_topic if resource.resource_type == TOPIC_RESOURCE else alter_broker
            alter(resource.name, resource.changes, replace, validate_only)
            results.append((resource, errors.NONE, None))
        except KafkaException as exc:
            results.append((resource, exc.error, exc.detail or None))
    return _alter_response(request, results)


@dataclass(frozen=True, slots=True)
class Preprocessed:
    """An alteration as a broker forwards it: what it refuses itself, by resource index, and the request body
    of the other resources for the controller (None when none is left)."""

    request: DecodedRequest
    refusals: Mapping[int, tuple[KafkaError, str]]
    forward: Any | None

    def answer(self, forwarded: Any | None) -> Any:
        """The response to the whole request: the refusals, and the controller's answers in the request's order."""
        answers = iter(forwarded.responses if forwarded is not None else ())
        results: list[tuple[ConfigAlteration, KafkaError, str | None]] = []
        for index, resource in enumerate(decode_alterations(self.request)):
            if index in self.refusals:
                results.append((resource, *self.refusals[index]))
            else:
                answered = next(answers)
                results.append((resource, error_of(answered.error_code), answered.error_message))
        return _alter_response(self.request, results)


def preprocess(request: DecodedRequest, broker_id: int) -> Preprocessed:
    """What Kafka's broker checks before forwarding (ConfigAdminManager.preprocess), with its wording: a BROKER
    resource names this broker, or is "" for the cluster-wide defaults."""
    refusals: dict[int, tuple[KafkaError, str]] = {}
    for index, resource in enumerate(request.body.resources):
        name = resource.resource_name
        if int(resource.resource_type) != BROKER_RESOURCE or name == "":
            continue
        if re.fullmatch(r"-?[0-9]+", name) is None:
            refusals[index] = errors.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
        elif int(name) != broker_id:
            refusals[index] = errors.INVALID_REQUEST, f"Unexpected broker id, expected {broker_id}, but received {name}"
    kept = tuple(r for index, r in enumerate(request.body.resources) if index not in refusals)
    return Preprocessed(request, refusals, dataclasses.replace(request.body, resources=kept) if kept else None)


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
        nulls = [c.key for c in changes if c.value is None and c.op is not ConfigOp.DELETE]
        if refusal is None and nulls:
            refusal = errors.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}"
        if refusal is None and resource_type not in (TOPIC_RESOURCE, BROKER_RESOURCE):
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
