"""DescribeClientQuotas and AlterClientQuotas: no quotas exist, a malformed filter or entity is refused as Kafka
refuses it, and a change is refused without storing anything."""

from __future__ import annotations

from typing import Any

import pytest
from apis_helpers import client_request, cluster_image, request_entity, wire

from insync.protocol.kio import ERROR_MESSAGE_MAX
from insync.wire import client_quotas
from insync.wire.versions import ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS


def describe(version: int, *components: tuple[str, int, str | None]) -> Any:
    request = client_request(DESCRIBE_CLIENT_QUOTAS, version, strict=False, components=tuple(
        request_entity(DESCRIBE_CLIENT_QUOTAS, version, "ComponentData", entity_type=t, match_type=m, match=n)
        for t, m, n in components))
    return wire(client_quotas.respond(request))


@pytest.mark.parametrize("version", [0, 1])
def test_every_filter_finds_no_quotas(version: int) -> None:
    for components in [(), (("user", 2, None),), (("user", 0, "alice"), ("client-id", 1, None)), (("ip", 1, None),)]:
        answer = describe(version, *components)
        assert (answer.error_code, answer.error_message, answer.entries) == (0, "", ()), components  # Kafka's


@pytest.mark.parametrize(("components", "error", "message"), [
    ((("", 2, None),), 42, "Invalid empty entity type."),
    ((("user", 2, None), ("user", 1, None)), 42, "Entity type user cannot appear more than once in the filter."),
    ((("group", 2, None),), 35, "Unsupported entity type group"),
    ((("user", 0, None),), 42, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ((("user", 1, "alice"),), 42, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ((("user", 2, "alice"),), 42, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ((("user", 7, None),), 42, "Unknown match type 7"),
    ((("ip", 2, None), ("client-id", 2, None)), 42, "Invalid entity filter component combination. IP filter "
                                                  "component should not be used with user or clientId filter "
                                                  "component."),
])
def test_a_malformed_filter_is_refused_in_kafkas_words(components: tuple[tuple[str, int, str | None], ...],
                                                       error: int, message: str) -> None:
    answer = describe(1, *components)
    assert (answer.error_code, answer.error_message) == (error, message)


def alter(entries: list[tuple[list[tuple[str, str | None]], list[tuple[str, float, bool]]]],
          version: int = 1) -> list[Any]:
    request = client_request(ALTER_CLIENT_QUOTAS, version, validate_only=False, entries=tuple(
        request_entity(ALTER_CLIENT_QUOTAS, version, "EntryData", entity=tuple(
            request_entity(ALTER_CLIENT_QUOTAS, version, "EntityData", entity_type=t, entity_name=n)
            for t, n in entity),
            ops=tuple(request_entity(ALTER_CLIENT_QUOTAS, version, "OpData", key=k, value=v, remove=r)
                      for k, v, r in ops))
        for entity, ops in entries))
    return list(wire(client_quotas.respond(request)).entries)


def test_changes_are_refused_and_an_entity_without_changes_succeeds() -> None:
    refused, untouched = alter([([("user", "alice")], [("producer_byte_rate", 1024.0, False)]),
                                ([("user", "alice")], [])])
    assert (refused.error_code, refused.error_message) == (42, client_quotas.NOT_ENFORCED)
    assert [(e.entity_type, e.entity_name) for e in refused.entity] == [("user", "alice")]
    assert (untouched.error_code, untouched.error_message) == (0, None)


@pytest.mark.parametrize(("entity", "ops", "message"), [
    ([], [("producer_byte_rate", 1.0, False)], "Invalid empty client quota entity"),
    ([("group", "g")], [], "Unhandled client quota entity type: group"),
    ([("user", "a"), ("user", "b")], [], "Invalid client quota entity, duplicate entity entry user"),
    ([("user", "")], [], "Empty user not supported"),
    ([("ip", None), ("user", None)], [], "Invalid quota entity combination, IP entity shouldnot be combined with "
                                         "User or ClientId"),
    ([("user", "a")], [("connection_creation_rate", 1.0, False)], "Invalid configuration key "
                                                                  "connection_creation_rate"),
    ([("client-id", None)], [("request_percentage", 0.0, False)], "Quota request_percentage must be greater than 0"),
])
def test_a_malformed_entity_or_key_is_refused_in_kafkas_words(entity: list[tuple[str, str | None]],
                                                              ops: list[tuple[str, float, bool]],
                                                              message: str) -> None:
    [answer] = alter([(entity, ops)])
    assert (answer.error_code, answer.error_message) == (42, message)


def test_a_message_quoting_a_longest_entity_type_still_fits_a_v0_answer() -> None:
    [answer] = alter([([("x" * 32_767, "a")], [])], version=0)
    assert answer.error_code == 42 and answer.error_message.startswith("Unhandled client quota entity type: xxx")
    assert len(answer.error_message) == ERROR_MESSAGE_MAX
    described = describe(0, ("x" * 32_767, 2, None))
    assert described.error_code == 35 and described.error_message.startswith("Unsupported entity type xxx")
    assert len(described.error_message) == ERROR_MESSAGE_MAX


def test_describing_needs_describe_configs_and_altering_alter_configs_on_the_cluster() -> None:
    from apis_helpers import access, allow

    from insync.config import BrokerConfig
    from insync.security.acl import AclOperation, ResourceType
    from insync.wire import access_refusals

    CONFIG = BrokerConfig({"node.id": 1})
    request = client_request(DESCRIBE_CLIENT_QUOTAS, 1, strict=False, components=())
    refused = wire(access_refusals.refusal(request, access(api_key=DESCRIBE_CLIENT_QUOTAS), CONFIG, cluster_image()))
    assert (refused.error_code, refused.entries) == (31, None)
    allowed = access(allow(ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE_CONFIGS),
                     api_key=DESCRIBE_CLIENT_QUOTAS)
    assert access_refusals.refusal(request, allowed, CONFIG, cluster_image()) is None
    request = client_request(ALTER_CLIENT_QUOTAS, 1, validate_only=False, entries=(request_entity(
        ALTER_CLIENT_QUOTAS, 1, "EntryData", entity=(request_entity(
            ALTER_CLIENT_QUOTAS, 1, "EntityData", entity_type="user", entity_name="alice"),), ops=()),))
    refused = wire(access_refusals.refusal(request, access(api_key=ALTER_CLIENT_QUOTAS), CONFIG, cluster_image()))
    assert [(e.error_code, [x.entity_name for x in e.entity]) for e in refused.entries] == [(31, ["alice"])]
