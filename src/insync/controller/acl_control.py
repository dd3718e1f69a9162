"""The controller's ACL decisions, after KRaft's `AclControlManager`: pure functions of an image.

CreateAcls: each binding is validated alone (`validate_binding`, INVALID_REQUEST with Kafka's message); a valid
one becomes an `AccessControlEntryRecord`, unless the same binding already exists (then it succeeds with no
record, as in Kafka) or the cluster already holds `ACLS_MAX`. DeleteAcls: each filter removes every ACL it
matches that an earlier filter of the request did not (a filter with an UNKNOWN type is INVALID_REQUEST), one `RemoveAccessControlEntryRecord` each; a filter that
matches nothing succeeds with no ACL. Results come back in the request's order, records in one batch.

Record ids are the metadata offset of the batch and the position in it (`<offset>-<n>`): unique across the
metadata log and the same on every replay, where Kafka draws a random UUID.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from insync import errors
from insync.errors import KafkaException
from insync.limits import ACLS_MAX
from insync.metadata.image import MetadataImage
from insync.metadata.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from insync.security.acl import AclBinding, AclBindingFilter, validate_binding, validate_filter


@dataclass(frozen=True, slots=True)
class AclCreation:
    """Per binding: None for success or the refusal; and the records to commit."""

    results: tuple[KafkaException | None, ...]
    records: tuple[AccessControlEntryRecord, ...]


@dataclass(frozen=True, slots=True)
class AclDeletion:
    """Per filter: the refusal, or the bindings it removes; and the records to commit."""

    results: tuple[KafkaException | tuple[AclBinding, ...], ...]
    records: tuple[RemoveAccessControlEntryRecord, ...]


def create_acls(image: MetadataImage, bindings: Sequence[AclBinding]) -> AclCreation:
    existing = set(image.acls.values())
    results: list[KafkaException | None] = []
    records: list[AccessControlEntryRecord] = []
    for binding in bindings:
        try:
            validate_binding(binding)
            if binding in existing:
                results.append(None)
                continue
            if len(existing) >= ACLS_MAX:
                raise KafkaException(errors.INVALID_REQUEST, f"The cluster already holds {ACLS_MAX} ACLs")
        except KafkaException as exc:
            results.append(exc)
            continue
        existing.add(binding)
        records.append(AccessControlEntryRecord.of(f"{image.offset}-{len(records)}", binding))
        results.append(None)
    assert len(results) == len(bindings)
    return AclCreation(tuple(results), tuple(records))


def delete_acls(image: MetadataImage, filters: Sequence[AclBindingFilter]) -> AclDeletion:
    deleted: set[str] = set()
    results: list[KafkaException | tuple[AclBinding, ...]] = []
    records: list[RemoveAccessControlEntryRecord] = []
    for acl_filter in filters:
        try:
            validate_filter(acl_filter)
        except KafkaException as exc:
            results.append(exc)
            continue
        matched = [(acl_id, binding) for acl_id, binding in sorted(image.acls.items())
                   if acl_id not in deleted and acl_filter.matches(binding)]
        deleted.update(acl_id for acl_id, _ in matched)
        records.extend(RemoveAccessControlEntryRecord(acl_id) for acl_id, _ in matched)
        results.append(tuple(binding for _, binding in matched))
    assert len(results) == len(filters)
    return AclDeletion(tuple(results), tuple(records))

