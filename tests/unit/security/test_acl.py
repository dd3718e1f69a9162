"""ACL filters (DescribeAcls, DeleteAcls) and the validation of new ACLs."""

from __future__ import annotations

import pytest

from insync.errors import KafkaException
from insync.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)

TOPIC = ResourceType.TOPIC


def binding(name: str = "foo", pattern: PatternType = PatternType.LITERAL, principal: str = "User:alice",
            operation: AclOperation = AclOperation.READ, resource_type: ResourceType = TOPIC,
            permission: AclPermissionType = AclPermissionType.ALLOW, host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, host, operation, permission))


LITERAL_FOO = binding()
PREFIXED_FO = binding("fo", PatternType.PREFIXED)
WILDCARD = binding("*")
OTHER = binding("bar")
GROUP_FOO = binding(resource_type=ResourceType.GROUP)
ALL = (LITERAL_FOO, PREFIXED_FO, WILDCARD, OTHER, GROUP_FOO)


@pytest.mark.parametrize(("acl_filter", "expected"), [
    (AclBindingFilter(), ALL),
    (AclBindingFilter(resource_type=TOPIC), (LITERAL_FOO, PREFIXED_FO, WILDCARD, OTHER)),
    (AclBindingFilter(name="foo"), (LITERAL_FOO, GROUP_FOO)),
    (AclBindingFilter(TOPIC, "foo", PatternType.LITERAL), (LITERAL_FOO,)),
    (AclBindingFilter(TOPIC, "fo", PatternType.PREFIXED), (PREFIXED_FO,)),
    (AclBindingFilter(TOPIC, "foo", PatternType.MATCH), (LITERAL_FOO, PREFIXED_FO, WILDCARD)),
    (AclBindingFilter(TOPIC, None, PatternType.PREFIXED), (PREFIXED_FO,)),
    (AclBindingFilter(principal="User:bob"), ()),
    (AclBindingFilter(operation=AclOperation.WRITE), ()),
    (AclBindingFilter(permission_type=AclPermissionType.DENY), ()),
    (AclBindingFilter(host="*", operation=AclOperation.READ), ALL),
])
def test_filters_select_as_kafka_does(acl_filter: AclBindingFilter, expected: tuple[AclBinding, ...]) -> None:
    assert tuple(b for b in ALL if acl_filter.matches(b)) == expected


@pytest.mark.parametrize(("bad", "message"), [
    (binding(resource_type=ResourceType.ANY), "Invalid resourceType ANY"),
    (binding(pattern=PatternType.MATCH), "Invalid patternType MATCH"),
    (binding(operation=AclOperation.ANY), "Invalid operation ANY"),
    (binding(permission=AclPermissionType.UNKNOWN), "Invalid permissionType UNKNOWN"),
    (binding(name=""), "Resource name should not be empty"),
    (binding(name="c", resource_type=ResourceType.CLUSTER), "only valid name for the CLUSTER resource"),
    (binding(principal="alice"), "Expected a string in format principalType:principalName"),
    (binding(host=""), "Invalid host"),
])
def test_invalid_acls_are_refused_naming_what_is_wrong(bad: AclBinding, message: str) -> None:
    with pytest.raises(KafkaException, match=message) as caught:
        validate_binding(bad)
    assert caught.value.error.name == "INVALID_REQUEST"


def test_a_valid_acl_passes() -> None:
    validate_binding(binding(name="kafka-cluster", resource_type=ResourceType.CLUSTER,
                             operation=AclOperation.CLUSTER_ACTION))
