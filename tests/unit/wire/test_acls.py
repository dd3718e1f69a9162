"""CreateAcls, DescribeAcls, DeleteAcls translators: kio entities <-> bindings and filters, and refusals."""

from __future__ import annotations

from apis_helpers import client_request, request_entity, wire

from insync import errors
from insync.errors import KafkaException
from insync.metadata.image import MetadataImage
from insync.metadata.records import AccessControlEntryRecord
from insync.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from insync.wire import acls
from insync.wire.versions import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS

READ_T = AclBinding(ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL),
                    AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW))
WRITE_T = AclBinding(READ_T.pattern, AccessControlEntry("User:bob", "10.0.0.1", AclOperation.WRITE,
                                                        AclPermissionType.DENY))
GROUP_G = AclBinding(ResourcePattern(ResourceType.GROUP, "g", PatternType.PREFIXED), READ_T.entry)
IMAGE = MetadataImage.from_records([AccessControlEntryRecord.of(str(i), b)
                                    for i, b in enumerate((READ_T, WRITE_T, GROUP_G))])


def describe(**filters: object) -> object:
    fields = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
              "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1, **filters}
    return wire(acls.describe_acls(client_request(DESCRIBE_ACLS, 3, **fields), IMAGE))


def test_create_acls_decodes_codes_and_unknown_codes_read_unknown() -> None:
    creation = request_entity(CREATE_ACLS, 3, "AclCreation", resource_type=2, resource_name="t",
                              resource_pattern_type=3, principal="User:alice", host="*", operation=3,
                              permission_type=3)
    odd = request_entity(CREATE_ACLS, 3, "AclCreation", resource_type=42, resource_name="t", resource_pattern_type=3,
                         principal="User:alice", host="*", operation=77, permission_type=3)
    decoded = acls.decode_create_acls(client_request(CREATE_ACLS, 3, creations=(creation, odd)))
    assert decoded[0] == READ_T
    assert decoded[1].pattern.resource_type == ResourceType.UNKNOWN and decoded[1].entry.operation == AclOperation.UNKNOWN


def test_create_acls_answers_each_creation() -> None:
    refused = KafkaException(errors.INVALID_REQUEST, "Invalid operation ANY")
    answer = wire(acls.encode_create_acls([None, refused, KafkaException(errors.INVALID_REQUEST)], 3))
    assert [(r.error_code, r.error_message) for r in answer.results] == [
        (0, ""), (42, "Invalid operation ANY"), (42, None)]  # Kafka's AclApis: no message set on success


def test_describe_acls_groups_entries_by_resource_pattern() -> None:
    answer = describe(resource_type_filter=2)
    assert answer.error_code == 0
    (resource,) = answer.resources
    assert (resource.resource_type, resource.resource_name, resource.pattern_type) == (2, "t", 3)
    assert [(a.principal, a.host, a.operation, a.permission_type) for a in resource.acls] == [
        ("User:alice", "*", 3, 3), ("User:bob", "10.0.0.1", 4, 2)]
    assert [r.resource_name for r in describe(principal_filter="User:alice").resources] == ["t", "g"]
    assert [r.resource_name for r in describe(resource_name_filter="gx", pattern_type_filter=2).resources] == ["g"]


def test_describe_acls_refuses_an_unknown_filter() -> None:
    answer = describe(operation=0)
    assert (answer.error_code, answer.error_message, answer.resources) == (42, "Unknown entryFilter.", ())


def test_delete_acls_answers_the_matching_acls_per_filter() -> None:
    refused = KafkaException(errors.INVALID_REQUEST, "Unknown patternFilter.")
    answer = wire(acls.encode_delete_acls([(READ_T,), refused], 3))
    first, second = answer.filter_results
    assert first.error_code == 0 and [(m.resource_name, m.principal, m.operation) for m in first.matching_acls] == [
        ("t", "User:alice", 3)]
    assert (second.error_code, second.error_message, second.matching_acls) == (42, "Unknown patternFilter.", ())


def test_refusals_of_each_acl_api() -> None:
    disabled = errors.BY_NAME["SECURITY_DISABLED"]
    request = client_request(DESCRIBE_ACLS, 2, resource_type_filter=1, resource_name_filter=None,
                             pattern_type_filter=1, principal_filter=None, host_filter=None, operation=1,
                             permission_type=1)
    assert (wire(acls.refuse_disabled(request)).error_code, wire(acls.refuse_disabled(request)).error_message) == (
        54, "No Authorizer is configured.")
    flt = request_entity(DELETE_ACLS, 3, "DeleteAclsFilter", resource_type_filter=1, resource_name_filter=None,
                         pattern_type_filter=1, principal_filter=None, host_filter=None, operation=1,
                         permission_type=1)
    deleted = wire(acls.refuse(client_request(DELETE_ACLS, 3, filters=(flt, flt)), disabled, "off"))
    assert [r.error_code for r in deleted.filter_results] == [54, 54]
    created = wire(acls.refuse(client_request(CREATE_ACLS, 1, creations=()), disabled, "off"))
    assert created.results == ()
