"""Kafka's ACL vocabulary: resource types, pattern types, operations, permissions, bindings and filters.

The enums carry Kafka's wire codes (`ResourceType`, `PatternType`, `AclOperation`, `AclPermissionType` in
org.apache.kafka.common), so a CreateAcls request, a metadata record and `kafka-acls.sh`'s names all meet here.
An `AclBinding` is one ACL: a resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal, host,
operation, ALLOW or DENY). An `AclBindingFilter` selects bindings for DescribeAcls and DeleteAcls with Kafka's
matching rules: ANY matches every value, a None name or principal or host matches every one, and the MATCH
pattern type selects every pattern that would apply to the named resource (the literal name, the `*` wildcard
and every prefix of it).

`validate_binding` is what KRaft's `AclControlManager.validateNewAcl` and `AclApis.createAcls` refuse, with
their messages, raised as INVALID_REQUEST.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from insync import errors
from insync.errors import KafkaException
from insync.security.principal import parse_principal

WILDCARD = "*"  # a LITERAL name, a principal name or a host that matches every one
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the only name of the CLUSTER resource


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# Kafka's AclEntry.supportedOperations: what `authorized_operations` reports for each resource type.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def _invalid(detail: str) -> KafkaException:
    return KafkaException(errors.INVALID_REQUEST, detail)


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this ACL's pattern covers the (literal) resource `name`: StandardAuthorizerData's section scan."""
        if resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        assert self.pattern_type == PatternType.LITERAL, self
        return self.name in (name, WILDCARD)


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str  # "Type:name", Kafka's KafkaPrincipal.toString
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        """Kafka's StandardAcl.toString, which the authorizer log quotes."""
        return (f"StandardAcl(resourceType={self.pattern.resource_type.name}, resourceName={self.pattern.name}, "
                f"patternType={self.pattern.pattern_type.name}, principal={self.entry.principal}, "
                f"host={self.entry.host}, operation={self.entry.operation.name}, "
                f"permissionType={self.entry.permission_type.name})")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """None for the name, principal or host matches every value; ANY for an enum matches every value."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        return self._matches_pattern(binding.pattern) and self._matches_entry(binding.entry)

    def _matches_pattern(self, pattern: ResourcePattern) -> bool:
        """Kafka's ResourcePatternFilter.matches."""
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        return pattern.applies_to(pattern.resource_type, self.name)  # MATCH

    def _matches_entry(self, entry: AccessControlEntry) -> bool:
        """Kafka's AccessControlEntryFilter.matches."""
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission_type in (AclPermissionType.ANY, entry.permission_type))


def validate_binding(binding: AclBinding) -> None:
    """Refuse what Kafka refuses in a new ACL (INVALID_REQUEST, Kafka's messages)."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise _invalid(f"Invalid resourceType {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise _invalid(f"Invalid patternType {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise _invalid(f"Invalid operation {entry.operation.name}")
    if entry.permission_type in (AclPermissionType.UNKNOWN, AclPermissionType.ANY):
        raise _invalid(f"Invalid permissionType {entry.permission_type.name}")
    if not pattern.name:
        raise _invalid("Resource name should not be empty")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise _invalid(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    try:
        parse_principal(entry.principal)
    except ValueError as exc:
        raise _invalid(str(exc)) from None
    if not entry.host:
        raise _invalid("Invalid host: an empty host (use * for every host)")


def validate_filter(acl_filter: AclBindingFilter) -> None:
    """A filter naming an UNKNOWN value (a code this version does not know) is refused, as Kafka refuses it."""
    if acl_filter.resource_type == ResourceType.UNKNOWN or acl_filter.pattern_type == PatternType.UNKNOWN:
        raise _invalid("Unknown patternFilter.")
    if acl_filter.operation == AclOperation.UNKNOWN or acl_filter.permission_type == AclPermissionType.UNKNOWN:
        raise _invalid("Unknown entryFilter.")
