"""The broker's per-API authorization: per-partition refusals, whole-request refusals, filtered answers."""

from __future__ import annotations

import dataclasses
import datetime

import pytest
from apis_helpers import (
    ALICE,
    PLAIN,
    access,
    allow,
    arrive,
    client_request,
    cluster_image,
    incremental,
    produce_request,
    request_entity,
    topics_request,
    wire,
)

from insync import errors
from insync.config import BrokerConfig, ConfigError
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import build, code, nested, response_class
from insync.security.acl import (
    AclOperation,
    ResourceType,
)
from insync.wire import access_refusals, access_views, describe_topic_partitions, metadata, produce
from insync.wire.authorization import Authorization, deny_topics, request_error
from insync.wire.versions import (
    ADD_PARTITIONS_TO_TXN,
    CREATE_TOPICS,
    DESCRIBE_GROUPS,
    DESCRIBE_TOPIC_PARTITIONS,
    ELECT_LEADERS,
    FETCH,
    HEARTBEAT,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    METADATA,
    OFFSET_COMMIT,
    PRODUCE,
    SYNC_GROUP,
    TXN_OFFSET_COMMIT,
)

Op = AclOperation
MS = datetime.timedelta(milliseconds=1)
CONFIG = BrokerConfig({"node.id": 1})


def test_no_authorizer_configured_checks_nothing() -> None:
    assert Authorization(CONFIG.authorizer).access(cluster_image(), ALICE, "h", PRODUCE) is None
    on = BrokerConfig({"node.id": 1, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                       "super.users": "User:admin; User:alice"})
    view = Authorization(on.authorizer).access(cluster_image(), ALICE, "h", PRODUCE)
    assert view is not None and view.allows(Op.WRITE, ResourceType.TOPIC, "anything")  # a super user


def test_produce_partitions_of_unwritable_topics_are_refused_and_logged_once() -> None:
    decoded = produce.decode_request(produce_request(9), cluster_image())
    view = access()
    checked = deny_topics(decoded, view, Op.WRITE)
    assert checked.request.partitions == ()
    assert {(r.topic.name, r.partition, r.error.name) for r in checked.rejected} >= {
        ("orders", 0, "TOPIC_AUTHORIZATION_FAILED"), ("orders", 1, "TOPIC_AUTHORIZATION_FAILED")}
    assert [d.message for d in view.denials] == [
        "Principal = User:alice is Denied operation = WRITE from host = 127.0.0.1 on resource = "
        "Topic:LITERAL:orders for request = PRODUCE with resourceRefCount = 1 based on rule DefaultDeny"]
    permitted = access(allow(ResourceType.TOPIC, "orders", Op.WRITE))
    assert deny_topics(decoded, permitted, Op.WRITE) is decoded


def test_a_follower_fetch_needs_cluster_action() -> None:
    state = request_entity(FETCH, 15, "ReplicaState", replica_id=2, replica_epoch=5)
    request = client_request(FETCH, 15, replica_state=state, max_wait=0 * MS, min_bytes=1, max_bytes=1024,
                             isolation_level=0, session_id=0, session_epoch=-1, topics=(), forgotten_topics_data=(),
                             rack_id="")
    assert request_error(request, access()).name == "CLUSTER_AUTHORIZATION_FAILED"
    assert request_error(request, access(allow(ResourceType.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION))).name == "NONE"


def test_an_idempotent_producer_needs_idempotent_write_or_write_on_some_topic() -> None:
    request = client_request(INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout=60_000 * MS,
                             producer_id=-1, producer_epoch=-1)
    assert request_error(request, access()).name == "CLUSTER_AUTHORIZATION_FAILED"
    assert request_error(request, access(allow(ResourceType.TOPIC, "orders", Op.WRITE))).name == "NONE"


def test_cluster_apis_are_refused_whole() -> None:
    request = client_request(ELECT_LEADERS, 2, election_type=0, topic_partitions=None, timeout=1000 * MS)
    answer = wire(access_refusals.refusal(request, access(api_key=ELECT_LEADERS), CONFIG, cluster_image()))
    assert answer.error_code == 31


def test_group_apis_need_their_group_operation() -> None:
    heartbeat = client_request(HEARTBEAT, 4, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    assert wire(access_refusals.refusal(heartbeat, access(), CONFIG, cluster_image())).error_code == 30
    assert access_refusals.refusal(heartbeat, access(allow(ResourceType.GROUP, "g", Op.READ)), CONFIG,
                                   cluster_image()) is None
    protocol = request_entity(JOIN_GROUP, 5, "JoinGroupRequestProtocol", name="range", metadata=b"")
    join = client_request(JOIN_GROUP, 5, group_id="g", session_timeout=10_000 * MS, rebalance_timeout=10_000 * MS,
                          member_id="m-1", group_instance_id=None, protocol_type="consumer", protocols=(protocol,))
    answer = wire(access_refusals.refusal(join, access(allow(ResourceType.GROUP, "g", Op.DESCRIBE)), CONFIG,
                                          cluster_image()))
    assert (answer.error_code, answer.member_id) == (30, "m-1")


def test_a_sync_v5_without_its_protocol_is_refused_before_its_group_access() -> None:
    """Kafka's KafkaApis answers INCONSISTENT_GROUP_PROTOCOL before it authorizes the group."""
    sync = client_request(SYNC_GROUP, 5, group_id="g", generation_id=1, member_id="m", group_instance_id=None,
                          protocol_type=None, protocol_name="range", assignments=())
    assert wire(access_refusals.refusal(sync, access(), CONFIG, cluster_image())).error_code == 23
    named = dataclasses.replace(sync, body=dataclasses.replace(sync.body, protocol_type="consumer"))
    assert wire(access_refusals.refusal(named, access(), CONFIG, cluster_image())).error_code == 30


def test_offset_commit_commits_the_readable_topics_and_refuses_the_others() -> None:
    """As Kafka's handleOffsetCommitRequest: READ on the group, then READ on each topic; the topics the principal
    may read are committed, the others' partitions answered TOPIC_AUTHORIZATION_FAILED (29)."""

    def topic(name: str) -> object:
        partition = request_entity(OFFSET_COMMIT, 8, "OffsetCommitRequestPartition", partition_index=0,
                                   committed_offset=5, committed_leader_epoch=-1, committed_metadata="")
        return request_entity(OFFSET_COMMIT, 8, "OffsetCommitRequestTopic", name=name, partitions=(partition,))

    commit = client_request(OFFSET_COMMIT, 8, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                            group_instance_id=None, topics=(topic("a"), topic("b")))
    group = allow(ResourceType.GROUP, "g", Op.READ)
    split = access_refusals.refusal(commit, access(group, allow(ResourceType.TOPIC, "a", Op.READ)), CONFIG,
                                    cluster_image())
    assert isinstance(split, access_refusals.Split)
    assert [str(t.name) for t in split.permitted.body.topics] == ["a"]
    assert [(str(t.name), t.partitions[0].error_code) for t in wire(split.refused).topics] == [("b", 29)]
    everything = access(group, allow(ResourceType.TOPIC, "a", Op.READ), allow(ResourceType.TOPIC, "b", Op.READ))
    assert access_refusals.refusal(commit, everything, CONFIG, cluster_image()) is None
    refused = wire(access_refusals.refusal(commit, access(group), CONFIG, cluster_image()))
    assert [(str(t.name), t.partitions[0].error_code) for t in refused.topics] == [("a", 29), ("b", 29)]


def test_create_topics_needs_create_on_the_cluster_or_each_topic() -> None:
    topic = request_entity(CREATE_TOPICS, 7, "CreatableTopic", name="new", num_partitions=1, replication_factor=1,
                           assignments=(), configs=())
    request = client_request(CREATE_TOPICS, 7, topics=(topic,), timeout=1000 * MS, validate_only=False)
    refused = wire(access_refusals.refusal(request, access(), CONFIG, cluster_image()))
    assert [(t.name, t.error_code) for t in refused.topics] == [("new", 29)]
    for acl in (allow(ResourceType.CLUSTER, "kafka-cluster", Op.CREATE), allow(ResourceType.TOPIC, "new", Op.CREATE)):
        assert access_refusals.refusal(request, access(acl), CONFIG, cluster_image()) is None


def test_metadata_lists_only_describable_topics_and_refuses_named_ones() -> None:
    image = cluster_image()
    view = access(allow(ResourceType.TOPIC, "orders", Op.READ), api_key=METADATA)
    every = client_request(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                           include_topic_authorized_operations=True)
    query, denied = access_views.metadata_query(metadata.decode_request(every), view, image)
    answer = wire(access_views.metadata_view(every, metadata.encode_response(query, image, "c", 1), view, denied))
    assert [(t.name, t.topic_authorized_operations) for t in answer.topics] == [
        ("orders", (1 << Op.READ) | (1 << Op.DESCRIBE))]
    assert view.denials == []  # a listing filters quietly, as Kafka's
    named = client_request(METADATA, 12, topics=topics_request(12, "orders", "logs", "new"),
                           allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    query, denied = access_views.metadata_query(metadata.decode_request(named), view, image)
    assert (query.topics, denied) == (("orders",), ("logs", "new"))
    answer = wire(access_views.metadata_view(named, metadata.encode_response(query, image, "c", 1), view, denied))
    assert [(t.name, t.error_code) for t in answer.topics] == [("orders", 0), ("logs", 29), ("new", 29)]


def test_describe_topic_partitions_of_every_topic_leaves_out_undescribable_ones() -> None:
    """As Kafka's DescribeTopicPartitionsRequestHandler: quietly when asked for all, refused when named."""
    image = cluster_image()
    view = access(allow(ResourceType.TOPIC, "orders", Op.DESCRIBE), api_key=DESCRIBE_TOPIC_PARTITIONS)

    def described(*names: str) -> list[tuple[str, int]]:
        asked = client_request(DESCRIBE_TOPIC_PARTITIONS, 0, response_partition_limit=2000, cursor=None, topics=tuple(
            request_entity(DESCRIBE_TOPIC_PARTITIONS, 0, "TopicRequest", name=n) for n in names))
        answer = access_views.view(asked, describe_topic_partitions.respond(asked, image), view)
        return [(t.name, t.error_code) for t in wire(answer).topics]

    assert described() == [("orders", 0)]
    assert described("logs", "orders") == [("logs", 29), ("orders", 0)]


def test_describe_groups_hides_groups_and_reports_authorized_operations() -> None:
    request = client_request(DESCRIBE_GROUPS, 5, groups=("g", "h"), include_authorized_operations=True)
    group_cls_fields = {"group_state": "Stable", "protocol_type": "consumer", "protocol_data": "range",
                        "members": (), "authorized_operations": -2147483648, "error_code": code(errors.NONE)}
    cls = response_class(DESCRIBE_GROUPS, 5)
    described = build(cls, throttle_time=0 * MS, groups=tuple(
        build(nested(cls, "DescribedGroup"), group_id=g, **group_cls_fields) for g in ("g", "h")))
    view = access(allow(ResourceType.GROUP, "g", Op.READ))
    answer = wire(access_views.view(request, described, view))
    assert [(g.group_id, g.error_code, g.authorized_operations) for g in answer.groups] == [
        ("g", 0, (1 << Op.READ) | (1 << Op.DESCRIBE)), ("h", 30, -2147483648)]


def test_an_unknown_authorizer_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        BrokerConfig({"node.id": 1, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})


def test_the_controller_needs_cluster_action_for_all_but_the_handshake() -> None:

    from insync.controller.messages import BrokerRegistrationRequest
    from insync.types import BrokerId
    from insync.wire import controller_apis

    body = controller_apis.registration_request(BrokerRegistrationRequest(1, BrokerId(2), 5), 4, "c", PLAIN)
    registration = arrive(body)
    refused = wire(access_refusals.controller_refusal(registration, access(), CONFIG, cluster_image()))
    assert refused.error_code == 31
    permitted = access(allow(ResourceType.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION))
    assert access_refusals.controller_refusal(registration, permitted, CONFIG, cluster_image()) is None
    topic = request_entity(CREATE_TOPICS, 7, "CreatableTopic", name="new", num_partitions=1, replication_factor=1,
                           assignments=(), configs=())
    forwarded = client_request(CREATE_TOPICS, 7, topics=(topic,), timeout=1000 * MS, validate_only=False)
    answer = wire(access_refusals.controller_refusal(forwarded, access(), CONFIG, cluster_image()))
    assert [(t.name, t.error_code) for t in answer.topics] == [("new", 31)]
    handshake = client_request(18, 3, client_software_name="x", client_software_version="1")
    assert access_refusals.controller_refusal(handshake, access(), CONFIG, cluster_image()) is None


def test_controller_refusals_of_heartbeats_partition_changes_and_metadata_fetches() -> None:

    from insync.controller.messages import AlterPartitionRequest, BrokerHeartbeatRequest
    from insync.types import BrokerEpoch, BrokerId
    from insync.wire import controller_apis, metadata_log

    requests = [controller_apis.heartbeat_request(BrokerHeartbeatRequest(9, BrokerId(2), BrokerEpoch(1), 0), 1),
                controller_apis.alter_partition_request(AlterPartitionRequest(9, BrokerId(2), BrokerEpoch(1), ()), 3),
                metadata_log.fetch_request(9, BrokerId(2), 0, 12, 0)]
    for body in requests:
        refused = wire(access_refusals.controller_refusal(arrive(body), access(), CONFIG, cluster_image()))
        assert refused.error_code == 31, body


def test_metadata_by_topic_id_does_not_reveal_an_undescribable_topic() -> None:
    from apis_helpers import OTHER_ID, TOPIC_ID

    image = cluster_image()
    view = access(allow(ResourceType.TOPIC, "orders", Op.DESCRIBE), api_key=METADATA)
    request = client_request(METADATA, 12, topics=topics_request(12, ids=(TOPIC_ID, OTHER_ID)),
                             allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    query, denied = access_views.metadata_query(metadata.decode_request(request), view, image)
    answer = wire(access_views.metadata_view(request, metadata.encode_response(query, image, "c", 1), view, denied))
    assert [(t.name, str(t.topic_id), t.error_code, len(t.partitions)) for t in answer.topics] == [
        ("orders", TOPIC_ID, 0, 3), (None, OTHER_ID, 29, 0)]
    assert [d.resource for d in view.denials] == ["logs"]


def test_only_the_refused_topics_of_an_admin_request_are_refused() -> None:
    def topic(name: str) -> object:
        return request_entity(CREATE_TOPICS, 7, "CreatableTopic", name=name, num_partitions=1, replication_factor=1,
                              assignments=(), configs=())

    request = client_request(CREATE_TOPICS, 7, topics=(topic("new"), topic("other")), timeout=1000 * MS,
                             validate_only=False)
    split = access_refusals.refusal(request, access(allow(ResourceType.TOPIC, "new", Op.CREATE)), CONFIG,
                                    cluster_image())
    assert isinstance(split, access_refusals.Split)
    assert [t.name for t in split.permitted.body.topics] == ["new"]
    created = split.refused  # stands for the controller's answer about "new": same shape
    merged = wire(split.merge(dataclasses.replace(created, topics=tuple(
        dataclasses.replace(t, name="new", error_code=code(errors.NONE)) for t in created.topics))))
    assert [(t.name, t.error_code) for t in merged.topics] == [("new", 0), ("other", 29)]
    deleted = access_refusals.refusal(client_request(20, 6, topics=(
        request_entity(20, 6, "DeleteTopicState", name="orders", topic_id=None),
        request_entity(20, 6, "DeleteTopicState", name="logs", topic_id=None)), timeout=1000 * MS),
        access(allow(ResourceType.TOPIC, "orders", Op.DELETE)), CONFIG, cluster_image())
    assert isinstance(deleted, access_refusals.Split)
    assert [t.name for t in deleted.permitted.body.topics] == ["orders"]
    assert [(r.name, r.error_code) for r in wire(deleted.refused).responses] == [("logs", 29)]


def test_config_alterations_and_group_deletions_refuse_only_what_is_refused() -> None:

    request = incremental(1, (2, "orders", (("retention.ms", 0, "1"),)), (4, "1", (("log.retention.ms", 0, "1"),)),
                          (2, "logs", (("retention.ms", 0, "1"),)))
    split = access_refusals.refusal(request, access(allow(ResourceType.TOPIC, "orders", Op.ALTER_CONFIGS)), CONFIG,
                                    cluster_image())
    assert isinstance(split, access_refusals.Split)
    assert [r.resource_name for r in split.permitted.body.resources] == ["orders"]
    assert [(r.resource_name, r.error_code) for r in wire(split.refused).responses] == [("1", 31), ("logs", 29)]
    deletion = client_request(42, 2, groups_names=("g", "h"))
    split = access_refusals.refusal(deletion, access(allow(ResourceType.GROUP, "h", Op.DELETE)), CONFIG,
                                    cluster_image())
    assert isinstance(split, access_refusals.Split)
    assert split.permitted.body.groups_names == ("h",)
    assert [(r.group_id, r.error_code) for r in wire(split.refused).results] == [("g", 30)]


def test_find_coordinator_refuses_each_key_alone_from_v4() -> None:
    request = client_request(10, 4, key_type=0, coordinator_keys=("g", "h"))
    split = access_refusals.refusal(request, access(allow(ResourceType.GROUP, "h", Op.READ)), CONFIG,
                                    cluster_image())
    assert isinstance(split, access_refusals.Split)
    assert split.permitted.body.coordinator_keys == ("h",)
    assert [(c.key, c.error_code) for c in wire(split.refused).coordinators] == [("g", 30)]
    old = client_request(10, 3, key="g", key_type=0)
    assert wire(access_refusals.refusal(old, access(), CONFIG, cluster_image())).error_code == 30


def _txn_offset_commit(*topics: str) -> DecodedRequest:
    def topic(name: str) -> object:
        partition = request_entity(TXN_OFFSET_COMMIT, 3, "TxnOffsetCommitRequestPartition", partition_index=0,
                                   committed_offset=5, committed_leader_epoch=-1, committed_metadata="")
        return request_entity(TXN_OFFSET_COMMIT, 3, "TxnOffsetCommitRequestTopic", name=name, partitions=(partition,))

    return client_request(TXN_OFFSET_COMMIT, 3, transactional_id="tx", group_id="g", producer_id=7, producer_epoch=0,
                          generation_id=-1, member_id="", group_instance_id=None, topics=tuple(map(topic, topics)))


def test_txn_offset_commit_needs_the_id_then_the_group_then_each_topic() -> None:
    """As Kafka's handleTxnOffsetCommitRequest: WRITE on the transactional id (53 for every partition), READ on the
    group (30), then READ on each topic: the readable ones go on, the others are answered 29."""
    commit, image = _txn_offset_commit("a", "b"), cluster_image()
    by_topic = lambda answer: [(str(t.name), t.partitions[0].error_code) for t in wire(answer).topics]  # noqa: E731
    assert by_topic(access_refusals.refusal(commit, access(), CONFIG, image)) == [("a", 53), ("b", 53)]
    writer = allow(ResourceType.TRANSACTIONAL_ID, "tx", Op.WRITE)
    assert by_topic(access_refusals.refusal(commit, access(writer), CONFIG, image)) == [("a", 30), ("b", 30)]
    group = allow(ResourceType.GROUP, "g", Op.READ)
    split = access_refusals.refusal(commit, access(writer, group, allow(ResourceType.TOPIC, "a", Op.READ)), CONFIG,
                                    image)
    assert isinstance(split, access_refusals.Split)
    assert [str(t.name) for t in split.permitted.body.topics] == ["a"] and by_topic(split.refused) == [("b", 29)]


def test_add_partitions_to_txn_refuses_every_partition_when_one_topic_is_refused() -> None:
    """Kafka answers the refused topics 29 (an internal topic is never writable so), and the rest 55,
    OPERATION_NOT_ATTEMPTED; v4, the brokers' form, needs CLUSTER_ACTION (31 at the top)."""
    def topic(name: str) -> object:
        return request_entity(ADD_PARTITIONS_TO_TXN, 3, "AddPartitionsToTxnTopic", name=name, partitions=(0,))

    add = client_request(ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id="tx", v3_and_below_producer_id=7,
                         v3_and_below_producer_epoch=0, v3_and_below_topics=(topic("orders"), topic("__consumer_offsets")))
    writer = allow(ResourceType.TRANSACTIONAL_ID, "tx", Op.WRITE)
    answer = wire(access_refusals.refusal(add, access(writer, allow(ResourceType.TOPIC, "*", Op.WRITE)), CONFIG,
                                          cluster_image()))
    assert sorted((str(t.name), t.results_by_partition[0].partition_error_code)
                  for t in answer.results_by_topic_v3_and_below) == [("__consumer_offsets", 29), ("orders", 55)]
    refused = wire(access_refusals.refusal(add, access(), CONFIG, cluster_image()))
    assert {p.partition_error_code for t in refused.results_by_topic_v3_and_below for p in t.results_by_partition} == {53}
    batched = client_request(ADD_PARTITIONS_TO_TXN, 4, transactions=())
    assert wire(access_refusals.refusal(batched, access(writer), CONFIG, cluster_image())).error_code == 31
    broker = access(allow(ResourceType.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION))
    assert access_refusals.refusal(batched, broker, CONFIG, cluster_image()) is None


def test_transactional_produce_needs_write_on_its_transactional_id() -> None:
    """A Produce whose batches are transactional is refused whole (53 on every partition) without WRITE on its id,
    or without an id at all; a non-transactional one is not asked."""
    from insync.protocol.records import build_batch
    from insync.wire.authorization import deny_partitions

    batch = build_batch([(None, b"x")], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    data = request_entity(PRODUCE, 9, "PartitionProduceData", index=0, records=batch)

    def produce_of(transactional_id: str | None) -> DecodedRequest:
        return client_request(PRODUCE, 9, transactional_id=transactional_id, acks=-1, timeout=1000 * MS, topic_data=(
            request_entity(PRODUCE, 9, "TopicProduceData", name="orders", partition_data=(data,)),))

    writer = allow(ResourceType.TRANSACTIONAL_ID, "tx", Op.WRITE)
    assert request_error(produce_of("tx"), access()).name == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    assert request_error(produce_of(None), access(writer)).name == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    assert request_error(produce_of("tx"), access(writer)) is errors.NONE
    assert request_error(produce_request(9), access()) is errors.NONE  # plain batches: the topics decide
    decoded = deny_partitions(produce.decode_request(produce_of("tx"), cluster_image()),
                              errors.BY_NAME["TRANSACTIONAL_ID_AUTHORIZATION_FAILED"])
    assert decoded.request.partitions == () and [(r.partition, r.error.code) for r in decoded.rejected] == [(0, 53)]


def test_transactions_are_listed_and_described_only_with_describe_on_their_id() -> None:
    from insync.wire import transaction_views
    from insync.wire.versions import DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS

    listed = client_request(LIST_TRANSACTIONS, 1, state_filters=(), producer_id_filters=(), duration_filter=-1)
    cls = response_class(LIST_TRANSACTIONS, 1)
    state_cls = nested(cls, "TransactionState")
    answer = build(cls, throttle_time=0 * MS, error_code=0, unknown_state_filters=(), transaction_states=tuple(
        build(state_cls, transactional_id=t, producer_id=1, transaction_state="Ongoing") for t in ("tx", "other")))
    reader = allow(ResourceType.TRANSACTIONAL_ID, "tx", Op.DESCRIBE)
    seen = access_views.view(listed, answer, access(reader, api_key=LIST_TRANSACTIONS))
    assert [t.transactional_id for t in seen.transaction_states] == ["tx"]
    described = client_request(DESCRIBE_TRANSACTIONS, 0, transactional_ids=("tx", "other"))
    answer = transaction_views.encode_describe(described, [
        ("tx", errors.NONE, _ongoing(("orders", "logs"))), ("other", errors.NONE, _ongoing(("orders",)))])
    seen = access_views.view(described, answer, access(reader, allow(ResourceType.TOPIC, "orders", Op.DESCRIBE),
                                                       api_key=DESCRIBE_TRANSACTIONS))
    assert [(s.transactional_id, s.error_code, [t.topic for t in s.topics]) for s in seen.transaction_states] == [
        ("tx", 0, ["orders"]), ("other", 53, [])]


def _ongoing(topics: tuple[str, ...]) -> object:
    from insync.transactions.log_records import TxnMetadata, TxnState
    from insync.types import TopicPartition

    return TxnMetadata("tx", 1, 0, 60_000, TxnState.ONGOING, frozenset(TopicPartition(t, 0) for t in topics), 1000)
