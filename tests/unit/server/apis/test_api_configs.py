from __future__ import annotations

from typing import Any

import pytest
from apis_helpers import client_request, cluster_image, request_entity, wire

from insync import errors
from insync.config import BrokerConfig
from insync.server.apis import configs

CONFIG = BrokerConfig({"node.id": 1, "log.retention.ms": 3_600_000})


def describe(version: int, *resources: tuple[int, str, tuple[str, ...] | None], synonyms: bool = True) -> Any:
    entities = tuple(request_entity(32, version, "DescribeConfigsResource", resource_type=t, resource_name=n,
                                    configuration_keys=k) for t, n, k in resources)
    request = client_request(32, version, resources=entities, include_synonyms=synonyms, include_documentation=True)
    return wire(configs.describe_configs(request, cluster_image(), CONFIG, broker_id=1))


@pytest.mark.parametrize("version", [1, 3, 4])
def test_topic_configs_with_sources(version: int) -> None:
    keys = ("min.insync.replicas", "retention.ms", "segment.bytes")
    body = describe(version, (configs.TOPIC_RESOURCE, "orders", keys))
    (result,) = body.results
    assert (result.error_code, result.resource_name) == (0, "orders")
    entries = {c.name: c for c in result.configs}
    assert set(entries) == set(keys)
    min_isr = entries["min.insync.replicas"]
    assert (min_isr.value, min_isr.config_source, min_isr.read_only) == ("2", configs.TOPIC_CONFIG, False)
    assert [(s.name, s.value, s.source) for s in min_isr.synonyms] == [
        ("min.insync.replicas", "2", configs.TOPIC_CONFIG), ("min.insync.replicas", "1", configs.DEFAULT_CONFIG)]
    retention = entries["retention.ms"]
    assert (retention.value, retention.config_source) == ("3600000", configs.STATIC_BROKER_CONFIG)
    assert [s.name for s in retention.synonyms] == ["log.retention.ms", "log.retention.ms"]
    segment = entries["segment.bytes"]
    assert (segment.value, segment.config_source) == ("1073741824", configs.DEFAULT_CONFIG)
    if version >= 3:
        assert min_isr.config_type == 3 and min_isr.documentation


def test_broker_configs_and_errors() -> None:
    body = describe(4, (configs.BROKER_RESOURCE, "1", ("log.retention.ms", "auto.create.topics.enable")),
                    (configs.TOPIC_RESOURCE, "nope", None), (configs.BROKER_RESOURCE, "7", None), (99, "x", None),
                    synonyms=False)
    broker, unknown_topic, other_broker, bad_type = body.results
    entries = {c.name: c for c in broker.configs}
    assert (entries["log.retention.ms"].value, entries["log.retention.ms"].config_source) == (
        "3600000", configs.STATIC_BROKER_CONFIG)
    assert (entries["auto.create.topics.enable"].value, entries["auto.create.topics.enable"].read_only) == (
        "false", True)
    assert entries["log.retention.ms"].synonyms == ()
    assert unknown_topic.error_code == errors.UNKNOWN_TOPIC_OR_PARTITION.code
    assert other_broker.error_code == errors.INVALID_REQUEST.code and bad_type.error_code == errors.INVALID_REQUEST.code


def test_all_topic_configs_when_no_keys_given() -> None:
    (result,) = describe(4, (configs.TOPIC_RESOURCE, "orders", None)).results
    assert {c.name for c in result.configs} >= {"min.insync.replicas", "retention.ms", "cleanup.policy"}
