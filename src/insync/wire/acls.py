"""CreateAcls (30), DescribeAcls (29), DeleteAcls (31): kio entities <-> `security.acl` bindings and filters.

Brokers answer DescribeAcls from their metadata image and forward CreateAcls and DeleteAcls to the controller,
which answers them from `controller.acl_control` (as KRaft brokers forward them). An enum code this version does
not know reads as UNKNOWN, which validation then refuses (INVALID_REQUEST), as Kafka's `fromCode` does. A broker
without an authorizer answers every ACL request SECURITY_DISABLED ("No Authorizer is configured."), and a
principal without the cluster permission CLUSTER_AUTHORIZATION_FAILED: `refuse` builds those answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Any, TypeVar

from insync import errors
from insync.errors import KafkaError, KafkaException
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import NO_THROTTLE, build, check_body, code, nested, response_class
from insync.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_filter,
)
from insync.wire.versions import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS

E = TypeVar("E", bound=IntEnum)


def _enum(cls: type[E], value: int) -> E:
    """Kafka's `fromCode`: a code this version does not know is UNKNOWN (every one of these enums has code 0)."""
    try:
        return cls(int(value))
    except ValueError:
        return cls(0)


def _filter(entity: Any) -> AclBindingFilter:
    return AclBindingFilter(_enum(ResourceType, entity.resource_type_filter), entity.resource_name_filter,
                            _enum(PatternType, entity.pattern_type_filter), entity.principal_filter,
                            entity.host_filter, _enum(AclOperation, entity.operation),
                            _enum(AclPermissionType, entity.permission_type))


# CreateAcls ----------------------------------------------------------------------------------------------


def decode_create_acls(request: DecodedRequest) -> list[AclBinding]:
    check_body(request.body, CREATE_ACLS)
    return [AclBinding(ResourcePattern(_enum(ResourceType, c.resource_type), c.resource_name,
                                       _enum(PatternType, c.resource_pattern_type)),
                       AccessControlEntry(c.principal, c.host, _enum(AclOperation, c.operation),
                                          _enum(AclPermissionType, c.permission_type)))
            for c in request.body.creations]


def encode_create_acls(results: Sequence[KafkaException | None], version: int) -> Any:
    """Each creation's answer: as Kafka's AclApis, a success sets no message (the field's default, ""), a
    refusal its exception's (null without one)."""
    cls = response_class(CREATE_ACLS, version)
    result_cls = nested(cls, "AclCreationResult")
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(
        build(result_cls, error_code=code(errors.NONE if r is None else r.error),
              error_message="" if r is None else r.detail or None) for r in results))


# DeleteAcls ----------------------------------------------------------------------------------------------


def decode_delete_acls(request: DecodedRequest) -> list[AclBindingFilter]:
    check_body(request.body, DELETE_ACLS)
    return [_filter(f) for f in request.body.filters]


def encode_delete_acls(results: Sequence[KafkaException | tuple[AclBinding, ...]], version: int) -> Any:
    cls = response_class(DELETE_ACLS, version)
    result_cls, matching_cls = nested(cls, "DeleteAclsFilterResult"), nested(cls, "DeleteAclsMatchingAcl")
    encoded = []
    for result in results:
        if isinstance(result, KafkaException):
            encoded.append(build(result_cls, error_code=code(result.error), error_message=result.detail,
                                 matching_acls=()))
            continue
        matching = tuple(build(matching_cls, error_code=code(errors.NONE), error_message=None,
                               resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                               pattern_type=b.pattern.pattern_type, principal=b.entry.principal, host=b.entry.host,
                               operation=b.entry.operation, permission_type=b.entry.permission_type)
                         for b in result)
        encoded.append(build(result_cls, error_code=code(errors.NONE), error_message=None, matching_acls=matching))
    return build(cls, throttle_time=NO_THROTTLE, filter_results=tuple(encoded))


# DescribeAcls --------------------------------------------------------------------------------------------


def describe_acls(request: DecodedRequest, image: MetadataImage) -> Any:
    """The image's ACLs the filter matches, grouped by resource pattern, in a stable order."""
    version = check_body(request.body, DESCRIBE_ACLS)
    acl_filter = _filter(request.body)
    try:
        validate_filter(acl_filter)
    except KafkaException as exc:
        return refuse(request, exc.error, exc.detail)
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for _, binding in sorted(image.acls.items()):  # bounded by ACLS_MAX
        if acl_filter.matches(binding):
            by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    cls = response_class(DESCRIBE_ACLS, version)
    resource_cls, description_cls = nested(cls, "DescribeAclsResource"), nested(cls, "AclDescription")
    resources = tuple(
        build(resource_cls, resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type,
              acls=tuple(build(description_cls, principal=e.principal, host=e.host, operation=e.operation,
                               permission_type=e.permission_type) for e in entries))
        for p, entries in by_pattern.items())
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(errors.NONE), error_message=None,
                 resources=resources)


def refuse_disabled(request: DecodedRequest) -> Any:
    """Kafka's answer to an ACL request on a broker without an authorizer."""
    return refuse(request, errors.BY_NAME["SECURITY_DISABLED"], "No Authorizer is configured.")


def refuse(request: DecodedRequest, error: KafkaError, message: str) -> Any:
    """The whole request refused with `error`: DescribeAcls at the top, each creation or filter of the others."""
    version = check_body(request.body, request.api_key)
    failure = KafkaException(error, message)
    if request.api_key == CREATE_ACLS:
        return encode_create_acls([failure] * len(request.body.creations), version)
    if request.api_key == DELETE_ACLS:
        return encode_delete_acls([failure] * len(request.body.filters), version)
    assert request.api_key == DESCRIBE_ACLS, request.api_key
    return build(response_class(DESCRIBE_ACLS, version), throttle_time=NO_THROTTLE, error_code=code(error),
                 error_message=message, resources=())
