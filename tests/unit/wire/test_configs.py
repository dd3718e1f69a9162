from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from apis_helpers import client_request, cluster_image, incremental, request_entity, wire

from insync import errors
from insync.config import BrokerConfig, ConfigChange, ConfigOp, ConfigSource
from insync.errors import KafkaException
from insync.wire import configs

CONFIG = BrokerConfig({"node.id": 1, "log.retention.ms": 3_600_000})


def describe(version: int, *resources: tuple[int, str, tuple[str, ...] | None], synonyms: bool = True,
             config: BrokerConfig = CONFIG) -> Any:
    entities = tuple(request_entity(32, version, "DescribeConfigsResource", resource_type=t, resource_name=n,
                                    configuration_keys=k) for t, n, k in resources)
    request = client_request(32, version, resources=entities, include_synonyms=synonyms, include_documentation=True)
    return wire(configs.describe_configs(request, cluster_image(), config, broker_id=1))


@pytest.mark.parametrize("version", [1, 3, 4])
def test_topic_configs_with_sources(version: int) -> None:
    keys = ("min.insync.replicas", "retention.ms", "segment.bytes")
    body = describe(version, (configs.TOPIC_RESOURCE, "orders", keys))
    (result,) = body.results
    assert (result.error_code, result.resource_name) == (0, "orders")
    entries = {c.name: c for c in result.configs}
    assert set(entries) == set(keys)
    min_isr = entries["min.insync.replicas"]
    assert (min_isr.value, min_isr.config_source, min_isr.read_only) == ("2", ConfigSource.TOPIC_CONFIG, False)
    assert [(s.name, s.value, s.source) for s in min_isr.synonyms] == [
        ("min.insync.replicas", "2", ConfigSource.TOPIC_CONFIG), ("min.insync.replicas", "1", ConfigSource.DEFAULT_CONFIG)]
    retention = entries["retention.ms"]
    assert (retention.value, retention.config_source) == ("3600000", ConfigSource.STATIC_BROKER_CONFIG)
    assert [s.name for s in retention.synonyms] == ["log.retention.ms", "log.retention.hours"]
    segment = entries["segment.bytes"]
    assert (segment.value, segment.config_source) == ("1073741824", ConfigSource.DEFAULT_CONFIG)
    if version >= 3:
        assert min_isr.config_type == 3 and min_isr.documentation


def test_broker_configs_and_errors() -> None:
    body = describe(4, (configs.BROKER_RESOURCE, "1", ("log.retention.ms", "auto.create.topics.enable")),
                    (configs.TOPIC_RESOURCE, "nope", None), (configs.BROKER_RESOURCE, "7", None), (99, "x", None),
                    synonyms=False)
    broker, unknown_topic, other_broker, bad_type = body.results
    entries = {c.name: c for c in broker.configs}
    assert (entries["log.retention.ms"].value, entries["log.retention.ms"].config_source) == (
        "3600000", ConfigSource.STATIC_BROKER_CONFIG)
    assert (entries["auto.create.topics.enable"].value, entries["auto.create.topics.enable"].read_only) == (
        "true", True)  # Kafka's default; not dynamic
    assert entries["log.retention.ms"].read_only is False
    assert entries["log.retention.ms"].synonyms == ()
    assert (unknown_topic.error_code, unknown_topic.error_message) == (errors.UNKNOWN_TOPIC_OR_PARTITION.code, "")
    assert broker.error_message == ""  # Kafka's ConfigHelper sets no message: the field's default
    assert other_broker.error_code == errors.INVALID_REQUEST.code and bad_type.error_code == errors.INVALID_REQUEST.code


def test_passwords_and_keys_are_described_as_sensitive_without_their_values() -> None:
    secret = BrokerConfig({"ssl.key.password": "hunter2", "listener.name.ssl.ssl.key.password": "hunter3",
                           "ssl.client.auth": "required", "ssl.truststore.location": "/ca.pem"})
    body = describe(4, (configs.BROKER_RESOURCE, "1", None), config=secret)
    entries = {c.name: c for c in body.results[0].configs}
    for name in ("ssl.key.password", "listener.name.ssl.ssl.key.password"):
        assert (entries[name].value, entries[name].is_sensitive) == (None, True), name
        assert all(s.value is None for s in entries[name].synonyms)
    assert (entries["ssl.client.auth"].value, entries["ssl.client.auth"].is_sensitive) == ("required", False)


DYNAMIC = CONFIG.with_dynamic({"log.retention.ms": "7200000", "min.insync.replicas": "2"},
                              {"log.retention.ms": "60000", "replica.lag.time.max.ms": "5000"})


def test_dynamic_broker_configs_are_the_first_synonyms_of_a_topic_config() -> None:
    (result,) = describe(4, (configs.TOPIC_RESOURCE, "orders", ("retention.ms", "segment.ms")), config=DYNAMIC).results
    entries = {c.name: c for c in result.configs}
    retention = entries["retention.ms"]
    assert (retention.value, retention.config_source) == ("60000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.ms", "60000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", "3600000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    assert entries["segment.ms"].config_source == ConfigSource.DEFAULT_CONFIG


def test_broker_configs_with_dynamic_sources_and_read_only_flags() -> None:
    own, cluster = describe(4, (configs.BROKER_RESOURCE, "1", None), (configs.BROKER_RESOURCE, "", None),
                            config=DYNAMIC).results
    entries = {c.name: c for c in own.configs}
    lag, min_isr, listeners = (entries[k] for k in ("replica.lag.time.max.ms", "min.insync.replicas", "listeners"))
    assert (lag.value, lag.config_source, lag.read_only) == ("5000", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    assert (min_isr.value, min_isr.config_source) == ("2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert (listeners.config_source, listeners.read_only) == (ConfigSource.DEFAULT_CONFIG, True)
    # The cluster-wide resource lists what is set cluster-wide, without this broker's own values (Kafka's
    # `kafka-configs --describe --entity-type brokers --entity-default`).
    shown = {c.name: c for c in cluster.configs}
    assert set(shown) == {"log.retention.ms", "min.insync.replicas"}
    assert (shown["log.retention.ms"].value, shown["log.retention.ms"].config_source) == (
        "7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert [s.source for s in shown["log.retention.ms"].synonyms] == [ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]


@pytest.mark.parametrize("keys", [None, ()])
def test_all_topic_configs_when_no_keys_given(keys: tuple[str, ...] | None) -> None:
    """Kafka's ConfigHelper: null or empty configuration keys ask for every key."""
    (result,) = describe(4, (configs.TOPIC_RESOURCE, "orders", keys)).results
    assert {c.name for c in result.configs} >= {"min.insync.replicas", "retention.ms", "cleanup.policy"}
    assert result.error_message == ""


# IncrementalAlterConfigs and AlterConfigs

class Recorder:
    """Stands in for the controller: records each topic alteration, refuses topics named in `refuse`."""

    def __init__(self, refuse: dict[str, errors.KafkaError] | None = None) -> None:
        self.calls: list[tuple[str, tuple[ConfigChange, ...], bool, bool]] = []
        self.refuse = refuse or {}

    def __call__(self, name: str, changes: tuple[ConfigChange, ...], replace: bool, validate_only: bool) -> None:
        if name in self.refuse:
            raise KafkaException(self.refuse[name], f"refused {name}")
        self.calls.append((name, changes, replace, validate_only))


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_configs_reaches_the_controller_per_topic(version: int) -> None:
    recorder = Recorder({"gone": errors.UNKNOWN_TOPIC_OR_PARTITION})
    request = incremental(version, (configs.TOPIC_RESOURCE, "orders", (
        ("min.insync.replicas", 0, "3"), ("retention.ms", 1, None), ("cleanup.policy", 2, "delete"))),
        (configs.TOPIC_RESOURCE, "gone", (("retention.ms", 0, "1"),)), validate_only=True)
    body = wire(configs.alter_configs(request, recorder, Recorder()))
    assert [(r.resource_name, r.error_code, r.error_message) for r in body.responses] == [
        ("orders", 0, None), ("gone", errors.UNKNOWN_TOPIC_OR_PARTITION.code, "refused gone")]
    assert recorder.calls == [("orders", (ConfigChange("min.insync.replicas", ConfigOp.SET, "3"),
                                          ConfigChange("retention.ms", ConfigOp.DELETE, None),
                                          ConfigChange("cleanup.policy", ConfigOp.APPEND, "delete")), False, True)]


def test_broker_resources_reach_the_controller_as_brokers() -> None:
    topics, brokers = Recorder(), Recorder({"2": errors.INVALID_REQUEST})
    request = incremental(1, (configs.BROKER_RESOURCE, "", (("log.retention.ms", 0, "60000"),)),
                          (configs.BROKER_RESOURCE, "2", (("listeners", 0, "x"),)))
    body = wire(configs.alter_configs(request, topics, brokers))
    assert [(r.resource_type, r.resource_name, r.error_code) for r in body.responses] == [
        (configs.BROKER_RESOURCE, "", 0), (configs.BROKER_RESOURCE, "2", errors.INVALID_REQUEST.code)]
    assert topics.calls == [] and brokers.calls == [
        ("", (ConfigChange("log.retention.ms", ConfigOp.SET, "60000"),), False, False)]


def test_incremental_alter_configs_refusals_name_what_was_wrong() -> None:
    recorder = Recorder()
    request = incremental(1, (configs.TOPIC_RESOURCE, "dup", (("retention.ms", 0, "1"), ("retention.ms", 1, None))),
                          (configs.BROKER_RESOURCE, "badop", (("retention.ms", 9, "1"),)),
                          (99, "x", (("a", 0, "b"),)))
    body = wire(configs.alter_configs(request, recorder, recorder))
    assert recorder.calls == []  # nothing reached the controller
    dup, badop, other = body.responses
    assert all(r.error_code == errors.INVALID_REQUEST.code for r in body.responses)
    assert "duplicate config keys: retention.ms" in dup.error_message
    assert "unknown config operation 9 for retention.ms" in badop.error_message
    assert (other.resource_type, other.error_message) == (99, "Unsupported resource type 99")


def test_null_values_are_refused_except_for_delete() -> None:
    recorder = Recorder()
    request = incremental(1, (configs.TOPIC_RESOURCE, "t", (("retention.ms", 0, None), ("segment.ms", 1, None))),
                          (configs.BROKER_RESOURCE, "", (("log.roll.ms", 1, None),)))
    body = wire(configs.alter_configs(request, recorder, recorder))
    assert [(r.error_code, r.error_message) for r in body.responses] == [
        (errors.INVALID_REQUEST.code, "Null value not supported for : retention.ms"), (0, None)]
    assert recorder.calls == [("", (ConfigChange("log.roll.ms", ConfigOp.DELETE, None),), False, False)]


def test_a_broker_refuses_broker_resources_naming_another_and_forwards_the_rest() -> None:
    request = incremental(1, (configs.BROKER_RESOURCE, "2", (("log.roll.ms", 0, "1"),)),
                          (configs.TOPIC_RESOURCE, "t", (("retention.ms", 0, "1"),)),
                          (configs.BROKER_RESOURCE, "x", (("log.roll.ms", 0, "1"),)),
                          (configs.BROKER_RESOURCE, "", (("log.roll.ms", 0, "1"),)),
                          (configs.BROKER_RESOURCE, "1", (("log.roll.ms", 0, "1"),)))
    checked = configs.preprocess(request, broker_id=1)
    assert [(r.resource_type, r.resource_name) for r in checked.forward.resources] == [
        (configs.TOPIC_RESOURCE, "t"), (configs.BROKER_RESOURCE, ""), (configs.BROKER_RESOURCE, "1")]
    forwarded = configs.alter_configs(dataclasses.replace(request, body=checked.forward),
                                      Recorder({"t": errors.UNKNOWN_TOPIC_OR_PARTITION}), Recorder())
    body = wire(checked.answer(forwarded))
    assert [(r.resource_name, r.error_code, r.error_message) for r in body.responses] == [
        ("2", errors.INVALID_REQUEST.code, "Unexpected broker id, expected 1, but received 2"),
        ("t", errors.UNKNOWN_TOPIC_OR_PARTITION.code, "refused t"),
        ("x", errors.INVALID_REQUEST.code, "Node id must be an integer, but it is: x"),
        ("", 0, None), ("1", 0, None)]
    alone = configs.preprocess(incremental(1, (configs.BROKER_RESOURCE, "3", ())), broker_id=1)
    assert alone.forward is None
    assert [r.error_code for r in wire(alone.answer(None)).responses] == [errors.INVALID_REQUEST.code]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_alter_configs_replaces_the_whole_set(version: int) -> None:
    recorder = Recorder()
    resource = request_entity(33, version, "AlterConfigsResource", resource_type=configs.TOPIC_RESOURCE,
                              resource_name="orders", configs=(
                                  request_entity(33, version, "AlterableConfig", name="retention.ms", value="5"),))
    body = wire(configs.alter_configs(client_request(33, version, resources=(resource,), validate_only=False),
                                      recorder, Recorder()))
    assert [r.error_code for r in body.responses] == [0]
    assert recorder.calls == [("orders", (ConfigChange("retention.ms", ConfigOp.SET, "5"),), True, False)]


def test_refuse_alter_configs_refuses_every_resource() -> None:
    request = incremental(1, (configs.TOPIC_RESOURCE, "a", ()), (configs.TOPIC_RESOURCE, "b", ()))
    body = wire(configs.refuse_alter_configs(request, errors.NOT_CONTROLLER, "no controller"))
    assert [(r.resource_name, r.error_code, r.error_message) for r in body.responses] == [
        ("a", errors.NOT_CONTROLLER.code, "no controller"), ("b", errors.NOT_CONTROLLER.code, "no controller")]


def test_static_keys_in_hours_are_synonyms_as_kafka_lists_them() -> None:
    static = BrokerConfig({"node.id": 1, "log.retention.ms": "3600000", "log.retention.hours": "48",
                           "log.roll.hours": "2"})
    (topic,) = describe(4, (configs.TOPIC_RESOURCE, "orders", ("retention.ms", "segment.ms")), config=static).results
    entries = {c.name: c for c in topic.configs}
    retention, segment = entries["retention.ms"], entries["segment.ms"]
    assert (retention.value, retention.config_source) == ("3600000", ConfigSource.STATIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.ms", "3600000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "48", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    # Kafka drops synonyms before the first log.roll.ms entry: none here; the value is still the hours'.
    assert (segment.value, segment.config_source, segment.synonyms) == ("7200000", ConfigSource.DEFAULT_CONFIG, ())
    (broker,) = describe(4, (configs.BROKER_RESOURCE, "1", ("log.roll.hours", "log.roll.ms")), config=static).results
    shown = {c.name: c for c in broker.configs}
    assert (shown["log.roll.hours"].value, shown["log.roll.hours"].config_source) == (
        "2", ConfigSource.STATIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in shown["log.roll.hours"].synonyms] == [
        ("log.roll.hours", "2", ConfigSource.STATIC_BROKER_CONFIG), ("log.roll.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    assert (shown["log.roll.ms"].value, shown["log.roll.ms"].config_source) == (None, ConfigSource.DEFAULT_CONFIG)
