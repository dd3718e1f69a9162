"""DeleteGroups and OffsetDelete decided as Kafka 4.0 decides them for classic groups, from a group's view."""

from __future__ import annotations

import struct

from membership_helpers import join, join_request, member_id_for, stable_group

from insync import errors
from insync.groups import deletion
from insync.groups.deletion import GroupView, OffsetDeletion, plan_offset_delete
from insync.groups.group_metadata import GroupState
from insync.groups.membership import GroupMembership
from insync.groups.messages import LeaveGroup
from insync.types import TopicPartition

E = errors.BY_NAME
T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def subscription(*topics: str, version: int = 3) -> bytes:
    """A ConsumerProtocolSubscription as Kafka's consumers write it (trailing fields are not read)."""
    body = struct.pack(">hi", version, len(topics))
    for topic in topics:
        body += struct.pack(">h", len(topic.encode())) + topic.encode()
    return body + struct.pack(">i", -1) + b"\x00\x00\x00\x00"  # null user data, no owned partitions


def exists(tp: TopicPartition) -> bool:
    return tp.topic in ("t", "u") and tp.partition < 2


def test_subscriptions_read_kafkas_consumer_protocol_and_anything_else_is_unknown() -> None:
    assert deletion.subscription_topics(subscription("t", "u")) == {"t", "u"}
    assert deletion.subscription_topics(subscription(version=0)) == frozenset()
    for garbage in (b"", b"\x00", b"sub-range", struct.pack(">hi", 0, 5) + b"\x00\x01t", struct.pack(">hi", -1, 0),
                    struct.pack(">hih", 0, 1, 4) + b"\xff\xfe\xfd\xfc"):
        assert deletion.subscription_topics(garbage) is None, garbage
    assert deletion.subscribed_topics("consumer", [subscription("t"), subscription("u")]) == {"t", "u"}
    assert deletion.subscribed_topics("consumer", [subscription("t"), b"garbage"]) is None
    assert deletion.subscribed_topics("connect", [subscription("t")]) is None


def test_delete_group_refuses_unknown_and_non_empty_groups() -> None:
    assert deletion.group_id_error("") == E["INVALID_GROUP_ID"]
    assert deletion.group_id_error("g") == errors.NONE
    assert deletion.delete_group_error(None, has_offsets=False) == E["GROUP_ID_NOT_FOUND"]
    assert deletion.delete_group_error(None, has_offsets=True) == errors.NONE  # a simple consumer group
    for state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
        assert deletion.delete_group_error(GroupView(state, "consumer", None), False) == E["NON_EMPTY_GROUP"]
    assert deletion.delete_group_error(GroupView(GroupState.EMPTY, "consumer", frozenset()), False) == errors.NONE


def test_offset_delete_of_an_empty_or_simple_group_tombstones_only_what_was_committed() -> None:
    empty = GroupView(GroupState.EMPTY, "consumer", frozenset())
    for view in (empty, None):
        plan = plan_offset_delete(view, frozenset({T0, U0}), [T0, T1, TopicPartition("gone", 0), T0], exists)
        assert plan == OffsetDeletion(errors.NONE, ((T0, errors.NONE), (T1, errors.NONE),
                                                    (TopicPartition("gone", 0), E["UNKNOWN_TOPIC_OR_PARTITION"]),
                                                    (T0, errors.NONE)), (T0,))
    assert plan_offset_delete(None, frozenset(), [T0], exists) == OffsetDeletion(E["GROUP_ID_NOT_FOUND"], (), ())


def test_offset_delete_of_an_active_group_spares_subscribed_topics_and_refuses_other_protocols() -> None:
    stable = GroupView(GroupState.STABLE, "consumer", frozenset({"t"}))
    plan = plan_offset_delete(stable, frozenset({T0, U0}), [T0, U0], exists)
    assert plan == OffsetDeletion(errors.NONE, ((T0, E["GROUP_SUBSCRIBED_TO_TOPIC"]), (U0, errors.NONE)), (U0,))
    unknown = GroupView(GroupState.STABLE, "consumer", None)  # Kafka: nothing counts as subscribed
    assert plan_offset_delete(unknown, frozenset({T0}), [T0], exists).tombstones == (T0,)
    connect = GroupView(GroupState.PREPARING_REBALANCE, "connect", None)
    assert plan_offset_delete(connect, frozenset({T0}), [T0], exists) == OffsetDeletion(E["NON_EMPTY_GROUP"], (), ())


def test_membership_views_a_stable_group_with_its_subscriptions_and_an_empty_one() -> None:
    gm = GroupMembership(seed=3, initial_rebalance_delay_ms=0)
    assert gm.view("g") is None
    a = member_id_for(gm, 0, "a", protocols=(("range", subscription("t")),))
    join(gm, 0, join_request(a, protocols=(("range", subscription("t")),)))
    view = gm.view("g")
    assert view is not None and view.state is GroupState.COMPLETING_REBALANCE and view.subscribed_topics == {"t"}
    gm.leave(1, LeaveGroup("g", ((a, None),)))
    assert gm.view("g") == GroupView(GroupState.EMPTY, "consumer", frozenset())


def test_membership_view_of_members_whose_metadata_is_not_a_subscription() -> None:
    gm = GroupMembership(seed=4, initial_rebalance_delay_ms=0)
    stable_group(gm)  # metadata b"sub-range": not Kafka's format
    assert gm.view("g") == GroupView(GroupState.STABLE, "consumer", None)


def test_membership_view_during_a_first_rebalance_reads_each_members_first_protocol() -> None:
    gm = GroupMembership(seed=5, initial_rebalance_delay_ms=3000)
    protocols = (("cooperative-sticky", subscription("t")), ("range", subscription("t")))
    a = member_id_for(gm, 0, "a", protocols=protocols)
    join(gm, 0, join_request(a, protocols=protocols))
    view = gm.view("g")
    assert view is not None and view.state is GroupState.PREPARING_REBALANCE and view.subscribed_topics == {"t"}
