"""CreateAcls and DeleteAcls at the controller: records, replay into the image, a restart, refusals."""

from __future__ import annotations

import random

import pytest
from ctrl_harness import Harness

from insync.controller import acl_control
from insync.controller.controller import Controller
from insync.errors import KafkaException
from insync.limits import ACLS_MAX
from insync.metadata.image import MetadataImage
from insync.metadata.records import AccessControlEntryRecord, RecordError, record_from_dict
from insync.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)


def binding(name: str, principal: str = "User:alice", operation: AclOperation = AclOperation.READ) -> AclBinding:
    return AclBinding(ResourcePattern(ResourceType.TOPIC, name, PatternType.LITERAL),
                      AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW))


def create(harness: Harness, *bindings: AclBinding) -> tuple[KafkaException | None, ...]:
    creation = acl_control.create_acls(harness.controller.image, bindings)
    harness.controller.commit_records(creation.records, harness.now)
    return creation.results


def test_created_acls_replay_into_the_image_and_survive_a_restart() -> None:
    harness = Harness()
    assert create(harness, binding("a"), binding("b")) == (None, None)
    assert sorted(b.pattern.name for b in harness.controller.image.acls.values()) == ["a", "b"]
    restarted = Controller(101, harness.config, harness.store, harness.now, random.Random(1))
    assert set(restarted.image.acls.values()) == {binding("a"), binding("b")}


def test_an_existing_acl_is_not_created_twice() -> None:
    harness = Harness()
    create(harness, binding("a"))
    creation = acl_control.create_acls(harness.controller.image, [binding("a"), binding("a", "User:bob")])
    assert creation.results == (None, None) and len(creation.records) == 1


def test_an_invalid_acl_is_refused_alone() -> None:
    harness = Harness()
    bad = AclBinding(ResourcePattern(ResourceType.TOPIC, "x", PatternType.MATCH), binding("x").entry)
    results = create(harness, binding("a"), bad)
    assert results[0] is None
    assert isinstance(results[1], KafkaException) and results[1].error.name == "INVALID_REQUEST"
    assert "Invalid patternType MATCH" in results[1].detail
    assert len(harness.controller.image.acls) == 1


def test_the_cluster_holds_at_most_acls_max() -> None:
    image = MetadataImage.from_records([AccessControlEntryRecord.of(str(i), binding(f"t{i}"))
                                        for i in range(ACLS_MAX)])
    (refusal,) = acl_control.create_acls(image, [binding("one-more")]).results
    assert refusal is not None and f"{ACLS_MAX} ACLs" in refusal.detail


def test_delete_removes_what_each_filter_matches_once() -> None:
    harness = Harness()
    create(harness, binding("a"), binding("b"), binding("a", "User:bob"))
    everything_named_a = AclBindingFilter(name="a")
    deletion = acl_control.delete_acls(harness.controller.image, [everything_named_a, AclBindingFilter()])
    assert [len(r) for r in deletion.results if isinstance(r, tuple)] == [2, 1]
    harness.controller.commit_records(deletion.records, harness.now)
    assert harness.controller.image.acls == {}


def test_a_filter_with_an_unknown_code_is_refused() -> None:
    harness = Harness()
    create(harness, binding("a"))
    unknown = AclBindingFilter(operation=AclOperation.UNKNOWN)
    (result,) = acl_control.delete_acls(harness.controller.image, [unknown]).results
    assert isinstance(result, KafkaException) and result.detail == "Unknown entryFilter."


def test_acl_records_round_trip_and_refuse_bad_codes() -> None:
    record = AccessControlEntryRecord.of("7-0", binding("a"))
    assert record_from_dict(record.to_dict()) == record
    with pytest.raises(RecordError, match="AccessControlEntryRecord"):
        record_from_dict({**record.to_dict(), "operation": 99})
