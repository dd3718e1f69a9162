"""The consumer-group translators across versions: what each version carries in, and how the answer reads."""

from __future__ import annotations

import datetime

import pytest
from apis_helpers import client_request, request_entity, wire

from insync import errors
from insync.groups.deletion import OffsetDeletion
from insync.groups.messages import GroupDescription, JoinedMember, JoinResult, LeaveResult
from insync.groups.offsets import CommittedOffset
from insync.types import TopicPartition
from insync.wire import groups
from insync.wire.versions import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    JOIN_GROUP,
    LEAVE_GROUP,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
)

E = errors.BY_NAME
MS = datetime.timedelta(milliseconds=1)


def test_find_coordinator_takes_one_key_before_v4_and_a_list_from_v4() -> None:
    v0 = client_request(FIND_COORDINATOR, 0, key="g")
    assert groups.find_coordinator_keys(v0) == (0, ["g"])
    answer = wire(groups.encode_find_coordinator(v0, [groups.CoordinatorAnswer("g", errors.NONE, 2, "h", 9)]))
    assert (answer.node_id, answer.host, answer.port, int(answer.error_code)) == (2, "h", 9, 0)
    v4 = client_request(FIND_COORDINATOR, 4, key_type=1, coordinator_keys=("a", "b"))
    assert groups.find_coordinator_keys(v4) == (1, ["a", "b"])
    answer = wire(groups.encode_find_coordinator(v4, [
        groups.CoordinatorAnswer(k, E["INVALID_REQUEST"], message="no") for k in ("a", "b")]))
    assert [(c.key, int(c.error_code), c.error_message) for c in answer.coordinators] == [("a", 42, "no"), ("b", 42, "no")]


@pytest.mark.parametrize("version", [1, 3, 4, 6])
def test_find_coordinator_messages_are_kafkas(version: int) -> None:
    """KafkaApis: v4+ coordinators carry no message (""); before v4 `Errors.message()`, "NONE" on success."""
    request = client_request(FIND_COORDINATOR, version, key="g", key_type=0, coordinator_keys=("g",))
    for error, old in ((errors.NONE, "NONE"), (E["COORDINATOR_NOT_AVAILABLE"], "The coordinator is not available.")):
        answer = wire(groups.encode_find_coordinator(request, [groups.CoordinatorAnswer("g", error, 2, "h", 9)]))
        message = answer.coordinators[0].error_message if version >= 4 else answer.error_message
        assert message == ("" if version >= 4 else old)


def _join(version: int, **extra: object) -> groups.DecodedRequest:  # type: ignore[name-defined]
    protocol = request_entity(JOIN_GROUP, version, "JoinGroupRequestProtocol", name="range", metadata=b"sub")
    return client_request(JOIN_GROUP, version, group_id="g", session_timeout=10_000 * MS,
                          rebalance_timeout=60_000 * MS, member_id="", group_instance_id=None,
                          protocol_type="consumer", protocols=(protocol,), reason=None, **extra)


def test_join_v0_uses_the_session_timeout_for_rebalances_and_v4_requires_a_member_id() -> None:
    v0 = groups.decode_join(_join(0), "/127.0.0.1")
    assert (v0.session_timeout_ms, v0.rebalance_timeout_ms, v0.require_known_member_id) == (10_000, 10_000, False)
    assert v0.protocols == (("range", b"sub"),) and v0.client_id == "test-client" and v0.client_host == "/127.0.0.1"
    v4 = groups.decode_join(_join(4), "/127.0.0.1")
    assert (v4.rebalance_timeout_ms, v4.require_known_member_id) == (60_000, True)


def test_the_join_leader_gets_every_members_subscription() -> None:
    request = _join(9)
    result = JoinResult(errors.NONE, 3, "consumer", "range", "m1", "m1",
                        (JoinedMember("m1", None, b"s1"), JoinedMember("m2", "static-2", b"s2")))
    answer = wire(groups.encode_join(request, result))
    assert (answer.generation_id, answer.protocol_name, answer.leader, answer.member_id) == (3, "range", "m1", "m1")
    assert [(m.member_id, m.group_instance_id, m.metadata) for m in answer.members] == [
        ("m1", None, b"s1"), ("m2", "static-2", b"s2")]
    failed = wire(groups.encode_join(_join(2), JoinResult(E["NOT_COORDINATOR"], -1, None, None, "", "", ())))
    assert int(failed.error_code) == 16 and failed.protocol_name == ""  # non-null before v7


def test_leave_names_one_member_before_v3_and_answers_per_member_from_v3() -> None:
    v0 = client_request(LEAVE_GROUP, 0, group_id="g", member_id="m1")
    assert groups.decode_leave(v0).members == (("m1", None),)
    answer = wire(groups.encode_leave(v0, LeaveResult(errors.NONE, (("m1", None, E["UNKNOWN_MEMBER_ID"]),))))
    assert int(answer.error_code) == 25  # the only member's error is the request's
    members = tuple(request_entity(LEAVE_GROUP, 5, "MemberIdentity", member_id=m, group_instance_id=i, reason=None)
                    for m, i in (("m1", None), ("", "static")))
    v5 = client_request(LEAVE_GROUP, 5, group_id="g", members=members)
    assert groups.decode_leave(v5).members == (("m1", None), ("", "static"))
    answer = wire(groups.encode_leave(v5, LeaveResult(errors.NONE, (
        ("m1", None, errors.NONE), ("", "static", E["UNKNOWN_MEMBER_ID"])))))
    assert [(m.member_id, int(m.error_code)) for m in answer.members] == [("m1", 0), ("", 25)]


def _commit(version: int, **fields: object) -> groups.DecodedRequest:  # type: ignore[name-defined]
    partition = request_entity(OFFSET_COMMIT, version, "OffsetCommitRequestPartition", partition_index=1,
                               committed_offset=99, committed_leader_epoch=4, committed_metadata=None,
                               commit_timestamp=-1)
    topic = request_entity(OFFSET_COMMIT, version, "OffsetCommitRequestTopic", name="orders",
                           partitions=(partition,))
    return client_request(OFFSET_COMMIT, version, group_id="g", member_id="m", group_instance_id=None,
                          retention_time=-1 * MS, topics=(topic,), **fields)


def test_offset_commit_reads_the_leader_epoch_from_v6() -> None:
    v2 = groups.decode_offset_commit(_commit(2, generation_id_or_member_epoch=5))
    assert v2.generation_id == 5
    assert v2.offsets == ((TopicPartition("orders", 1), CommittedOffset(99, -1, "", -1)),)  # no epoch before v6
    v9 = groups.decode_offset_commit(_commit(9, generation_id_or_member_epoch=6))
    assert v9.generation_id == 6 and v9.offsets[0][1].leader_epoch == 4
    answer = wire(groups.encode_offset_commit(_commit(9, generation_id_or_member_epoch=6), [
        (TopicPartition("orders", 1), E["ILLEGAL_GENERATION"])]))
    assert [(t.name, [(p.partition_index, int(p.error_code)) for p in t.partitions]) for t in answer.topics] == [
        ("orders", [(1, 22)])]


def test_offset_fetch_v1_puts_errors_on_partitions_v7_on_the_group_and_v8_asks_for_several_groups() -> None:
    topic = request_entity(OFFSET_FETCH, 1, "OffsetFetchRequestTopic", name="orders", partition_indexes=(0, 1))
    v1 = client_request(OFFSET_FETCH, 1, group_id="g", topics=(topic,))
    (asked,) = groups.decode_offset_fetch(v1)
    assert asked == groups.OffsetFetchGroup("g", (("orders", (0, 1)),))
    rows = ((TopicPartition("orders", 0), CommittedOffset(7, 2, "m", 1)), (TopicPartition("orders", 1), None))
    loading = wire(groups.encode_offset_fetch(v1, [groups.FetchedOffsets("g", E["COORDINATOR_LOAD_IN_PROGRESS"],
                                                                          rows)]))
    assert [int(p.error_code) for p in loading.topics[0].partitions] == [14, 14]
    v7 = client_request(OFFSET_FETCH, 7, group_id="g", topics=None, require_stable=False)
    assert groups.decode_offset_fetch(v7) == [groups.OffsetFetchGroup("g", None)]
    answer = wire(groups.encode_offset_fetch(v7, [groups.FetchedOffsets("g", errors.NONE, rows)]))
    assert int(answer.error_code) == 0
    assert [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata)
            for p in answer.topics[0].partitions] == [(0, 7, 2, "m"), (1, -1, -1, "")]
    group_entity = request_entity(OFFSET_FETCH, 9, "OffsetFetchRequestGroup", group_id="a", member_id=None,
                                  member_epoch=-1, topics=None)
    v9 = client_request(OFFSET_FETCH, 9, groups=(group_entity, group_entity), require_stable=False)
    assert [g.group_id for g in groups.decode_offset_fetch(v9)] == ["a", "a"]


def test_delete_groups_answers_each_group_in_every_version() -> None:
    for version in (0, 1, 2):
        request = client_request(DELETE_GROUPS, version, groups_names=("a", "b"))
        assert groups.decode_delete_groups(request) == ["a", "b"]
        answer = wire(groups.encode_delete_groups(request, [("a", errors.NONE), ("b", E["NON_EMPTY_GROUP"])]))
        assert [(r.group_id, int(r.error_code)) for r in answer.results] == [("a", 0), ("b", 68)]


def test_offset_delete_answers_per_partition_or_with_the_group_error_alone() -> None:
    topic = request_entity(OFFSET_DELETE, 0, "OffsetDeleteRequestTopic", name="t", partitions=(
        request_entity(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition", partition_index=1),
        request_entity(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition", partition_index=0)))
    request = client_request(OFFSET_DELETE, 0, group_id="g", topics=(topic,))
    assert groups.decode_offset_delete(request) == ("g", [TopicPartition("t", 1), TopicPartition("t", 0)])
    plan = OffsetDeletion(errors.NONE, ((TopicPartition("t", 1), E["GROUP_SUBSCRIBED_TO_TOPIC"]),
                                        (TopicPartition("t", 0), errors.NONE)), (TopicPartition("t", 0),))
    answer = wire(groups.encode_offset_delete(request, plan))
    assert int(answer.error_code) == 0
    assert [(t.name, [(p.partition_index, int(p.error_code)) for p in t.partitions]) for t in answer.topics] == [
        ("t", [(1, 86), (0, 0)])]
    answer = wire(groups.encode_offset_delete(request, OffsetDeletion(E["GROUP_ID_NOT_FOUND"], (), ())))
    assert (int(answer.error_code), answer.topics) == (69, ())


def test_describe_groups_answers_an_unknown_group_dead_before_v6_and_not_found_from_v6() -> None:
    known = GroupDescription("cg", "Empty", "consumer", "", ())
    for version, unknown in ((5, (0, None, "Dead")), (6, (69, "Group nope not found.", "Dead"))):
        request = client_request(DESCRIBE_GROUPS, version, groups=("nope", "cg"), include_authorized_operations=False)
        answer = wire(groups.encode_describe_groups(request, [("nope", errors.NONE, None), ("cg", errors.NONE, known)]))
        nope, cg = answer.groups
        assert (int(nope.error_code), getattr(nope, "error_message", None), nope.group_state) == unknown, version
        assert (int(cg.error_code), getattr(cg, "error_message", None), cg.group_state) == (0, None, "Empty")
    request = client_request(DESCRIBE_GROUPS, 6, groups=("moved",), include_authorized_operations=False)
    [moved] = wire(groups.encode_describe_groups(request, [("moved", E["NOT_COORDINATOR"], None)])).groups
    assert (int(moved.error_code), moved.error_message) == (16, None)  # the coordinator's own error stays
