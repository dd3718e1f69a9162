"""Whatever a client sends that kio can parse, the translators decode it and the answer serialises.

Hypothesis builds arbitrary request entities (kio registers strategies for its field types); each is decoded,
answered with an empty core response (or its immediate error), and the response written with kio. Nothing may
raise but a `KafkaException` (an operating error the handler turns into a code).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import pytest
from apis_helpers import cluster_image, read_encoded
from hypothesis import HealthCheck, given, settings
from kio.serial import entity_writer
from kio.static.primitive import Records

from insync import errors
from insync.broker.log_dirs import AlterReplicaLogDirsResponse, DescribeLogDirsResponse
from insync.broker.messages import (
    ConsumerFetchResponse,
    DeleteRecordsResponse,
    InitProducerIdResponse,
    ListOffsetsResponse,
    OffsetForLeaderEpochResponse,
    ProduceResponse,
)
from insync.broker.producers import DescribeProducersResponse
from insync.config import BrokerConfig
from insync.controller import acl_control
from insync.controller.messages import (
    AlterPartitionResponse,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
)
from insync.errors import KafkaException
from insync.groups.deletion import OffsetDeletion
from insync.groups.messages import JoinedMember, JoinResult, LeaveResult, SyncResult
from insync.groups.offsets import CommittedOffset
from insync.protocol.codec import DecodedRequest, EncodedBody
from insync.protocol.kio import request_class
from insync.replication.messages import FetchResponse
from insync.types import BrokerEpoch, TopicPartition
from insync.wire import (
    acls,
    client_quotas,
    configs,
    controller_apis,
    describe_topic_partitions,
    fetch,
    groups,
    log_dirs,
    metadata,
    metadata_log,
    offsets,
    produce,
    producer_id,
    producers,
    reassignments,
    replica_log_report,
    sasl,
    scram_credentials,
    topics,
    transaction_views,
    transactions,
    versions,
)
from insync.wire.internal import CreateTopicsResponse, DeleteTopicsResponse

st.register_type_strategy(Records, st.binary(max_size=64))  # kio registers none for record bytes

IMAGE = cluster_image()
CONFIG = BrokerConfig({"node.id": 1})
CID = 42


def _fetch(r: DecodedRequest) -> Any:
    decoded = fetch.decode_request(r, IMAGE)
    if decoded.error is not errors.NONE:
        return fetch.encode_response(None, decoded, IMAGE)
    if fetch.is_follower_fetch(decoded.request):
        return fetch.encode_response(FetchResponse(CID, errors.NONE, ()), decoded, IMAGE)
    fetch.consumer_request(decoded.request)
    return fetch.encode_response(ConsumerFetchResponse(CID, ()), decoded, IMAGE)


def _metadata_log(r: DecodedRequest) -> Any:
    """The controller listener's Fetch: a replica log report (refused when malformed) or a metadata fetch."""
    try:
        if replica_log_report.decode_request(r) is not None:
            return replica_log_report.empty_response(r)
    except KafkaException:
        return None
    decoded = metadata_log.decode_fetch(r)
    metadata_log.metadata_fetch_request(decoded)
    return metadata_log.encode_fetch_response(None, decoded)


def _producer_id(r: DecodedRequest) -> Any:
    decoded = producer_id.decode_request(r)
    response = None if decoded.error is not errors.NONE else InitProducerIdResponse(CID, errors.NONE, 5, 0)
    return producer_id.encode_response(response, decoded)


def _join(r: DecodedRequest) -> Any:
    join = groups.decode_join(r, "/127.0.0.1")
    return groups.encode_join(r, JoinResult(errors.NONE, 1, join.protocol_type, "range", join.member_id,
                                            join.member_id, (JoinedMember(join.member_id, None, b"m"),)))


def _leave(r: DecodedRequest) -> Any:
    leave = groups.decode_leave(r)
    return groups.encode_leave(r, LeaveResult(errors.NONE, tuple((m, i, errors.NONE) for m, i in leave.members)))


def _offset_commit(r: DecodedRequest) -> Any:
    commit = groups.decode_offset_commit(r)
    return groups.encode_offset_commit(r, [(tp, errors.NONE) for tp, _ in commit.offsets])


def _offset_fetch(r: DecodedRequest) -> Any:
    answers = []
    for asked in groups.decode_offset_fetch(r):
        rows = tuple((TopicPartition(t, p), CommittedOffset(5, 1, "", 0)) for t, ps in asked.topics or () for p in ps)
        answers.append(groups.FetchedOffsets(asked.group_id, errors.NONE, rows))
    return groups.encode_offset_fetch(r, answers)


def _find_coordinator(r: DecodedRequest) -> Any:
    _, keys = groups.find_coordinator_keys(r)
    return groups.encode_find_coordinator(r, [groups.CoordinatorAnswer(k, errors.NONE, 1, "127.0.0.1", 9092)
                                              for k in keys])


ANSWER: dict[int, Callable[[DecodedRequest], Any]] = {
    versions.API_VERSIONS: lambda r: versions.respond(r, versions.BROKER_API_VERSIONS),
    versions.PRODUCE: lambda r: produce.encode_response(ProduceResponse(CID, ()), produce.decode_request(r, IMAGE),
                                                        IMAGE),
    versions.FETCH: _fetch,
    versions.METADATA: lambda r: metadata.respond(r, IMAGE, "cluster", 1),
    versions.LIST_OFFSETS: lambda r: offsets.encode_list_offsets(ListOffsetsResponse(CID, ()),
                                                                 offsets.decode_list_offsets(r)),
    versions.OFFSET_FOR_LEADER_EPOCH: lambda r: offsets.encode_offset_for_leader_epoch(
        OffsetForLeaderEpochResponse(CID, ()), offsets.decode_offset_for_leader_epoch(r)),
    versions.DELETE_RECORDS: lambda r: offsets.encode_delete_records(DeleteRecordsResponse(CID, ()),
                                                                     offsets.decode_delete_records(r)),
    versions.CREATE_TOPICS: lambda r: topics.encode_create_topics(CreateTopicsResponse(CID, ()),
                                                                  topics.decode_create_topics(r, CONFIG), CONFIG),
    versions.DELETE_TOPICS: lambda r: topics.encode_delete_topics(DeleteTopicsResponse(CID, ()),
                                                                  topics.decode_delete_topics(r, IMAGE)),
    versions.CREATE_PARTITIONS: lambda r: topics.create_partitions(r, lambda *_: None),
    versions.ELECT_LEADERS: lambda r: topics.elect_leaders(r, lambda _, asked: {tp: errors.NONE for tp in asked or ()}),
    versions.ALTER_PARTITION_REASSIGNMENTS: lambda r: reassignments.alter_partition_reassignments(
        r, lambda targets: [None] * len(targets)),
    versions.LIST_PARTITION_REASSIGNMENTS: lambda r: reassignments.list_partition_reassignments(r, IMAGE),
    versions.INIT_PRODUCER_ID: _producer_id,
    versions.DESCRIBE_CONFIGS: lambda r: configs.describe_configs(r, IMAGE, CONFIG, 1),
    versions.DESCRIBE_LOG_DIRS: lambda r: log_dirs.encode_describe_log_dirs(DescribeLogDirsResponse(CID, ()),
                                                                            log_dirs.decode_describe_log_dirs(r)),
    versions.ALTER_REPLICA_LOG_DIRS: lambda r: log_dirs.encode_alter_replica_log_dirs(
        AlterReplicaLogDirsResponse(CID, ()), log_dirs.decode_alter_replica_log_dirs(r)),
    versions.DESCRIBE_PRODUCERS: lambda r: producers.encode_response(DescribeProducersResponse(CID, ()),
                                                                     producers.decode_request(r)),
    versions.ALTER_CONFIGS: lambda r: configs.alter_configs(r, lambda *_: None, lambda *_: None),
    versions.INCREMENTAL_ALTER_CONFIGS: lambda r: configs.alter_configs(r, lambda *_: None, lambda *_: None),
    versions.DESCRIBE_CLUSTER: lambda r: metadata.describe_cluster(r, IMAGE, "cluster", 1),
    versions.DESCRIBE_TOPIC_PARTITIONS: lambda r: describe_topic_partitions.respond(r, IMAGE),
    versions.BROKER_REGISTRATION: lambda r: (controller_apis.decode_registration(r, "cluster"),
                                             controller_apis.encode_registration_response(
                                                 BrokerRegistrationResponse(CID, errors.NONE, BrokerEpoch(3)),
                                                 r.api_version))[1],
    versions.BROKER_HEARTBEAT: lambda r: (controller_apis.decode_heartbeat(r),
                                          controller_apis.encode_heartbeat_response(
                                              BrokerHeartbeatResponse(CID, errors.NONE, False, 0, is_caught_up=True),
                                              r.api_version))[1],
    versions.FIND_COORDINATOR: _find_coordinator,
    versions.JOIN_GROUP: _join,
    versions.SYNC_GROUP: lambda r: (groups.decode_sync(r),
                                    groups.encode_sync(r, SyncResult(errors.NONE, "consumer", "range", b"a")))[1],
    versions.HEARTBEAT: lambda r: (groups.decode_heartbeat(r), groups.encode_heartbeat(r, errors.NONE))[1],
    versions.LEAVE_GROUP: _leave,
    versions.OFFSET_COMMIT: _offset_commit,
    versions.OFFSET_FETCH: _offset_fetch,
    versions.LIST_GROUPS: lambda r: (groups.list_groups_filter(r),
                                     groups.encode_list_groups(r, errors.NONE, [("g", "consumer", "Stable")]))[1],
    versions.DESCRIBE_GROUPS: lambda r: groups.encode_describe_groups(
        r, [(g, errors.NONE, None) for g in groups.describe_groups_ids(r)]),
    versions.DELETE_GROUPS: lambda r: groups.encode_delete_groups(
        r, [(g, errors.NONE) for g in groups.decode_delete_groups(r)]),
    versions.OFFSET_DELETE: lambda r: groups.encode_offset_delete(r, OffsetDeletion(
        errors.NONE, tuple((tp, errors.NONE) for tp in groups.decode_offset_delete(r)[1]), ())),
    versions.DESCRIBE_ACLS: lambda r: acls.describe_acls(r, IMAGE),
    versions.CREATE_ACLS: lambda r: acls.encode_create_acls(
        acl_control.create_acls(IMAGE, acls.decode_create_acls(r)).results, r.api_version),
    versions.DELETE_ACLS: lambda r: acls.encode_delete_acls(
        acl_control.delete_acls(IMAGE, acls.decode_delete_acls(r)).results, r.api_version),
    versions.ALTER_PARTITION: lambda r: (controller_apis.decode_alter_partition(r),
                                         controller_apis.encode_alter_partition_response(
                                             AlterPartitionResponse(CID, errors.NONE, ()), r.api_version))[1],
}

ANSWER.update({
    versions.SASL_HANDSHAKE: sasl.illegal_state_response,
    versions.SASL_AUTHENTICATE: sasl.illegal_state_response,
    versions.DESCRIBE_USER_SCRAM_CREDENTIALS: lambda r: scram_credentials.describe_user_scram_credentials(r, IMAGE),
    versions.ALTER_USER_SCRAM_CREDENTIALS: lambda r: scram_credentials.alter_user_scram_credentials(
        r, lambda deletions, upsertions: []),
    versions.DESCRIBE_CLIENT_QUOTAS: client_quotas.respond,
    versions.ALTER_CLIENT_QUOTAS: client_quotas.respond,
    **dict.fromkeys((versions.ADD_PARTITIONS_TO_TXN, versions.ADD_OFFSETS_TO_TXN, versions.END_TXN),
                    lambda r: (transactions.decode(r), transactions.encode(r, errors.NONE))[1]
                    if r.api_key != versions.ADD_PARTITIONS_TO_TXN or r.api_version < transactions.BATCHED_VERSION
                    else transactions.encode_batched(r, [(t.transactional_id, dict.fromkeys(t.partitions, errors.NONE))
                                                         for t in transactions.decode_batched(r)])),
    versions.TXN_OFFSET_COMMIT: lambda r: transactions.encode_txn_offset_commit(
        r, [(tp, errors.NONE) for tp, *_ in transactions.decode_txn_offset_commit(r).offsets]),
    versions.LIST_TRANSACTIONS: lambda r: (transaction_views.decode_list(r),
                                           transaction_views.encode_list(r, errors.NONE, [], []))[1],
    versions.DESCRIBE_TRANSACTIONS: lambda r: transaction_views.encode_describe(
        r, [(t, errors.NONE, None) for t in transaction_views.decode_describe(r)]),
    versions.WRITE_TXN_MARKERS: lambda r: transactions.encode_markers_response(
        r, [(m, dict.fromkeys(m.partitions, errors.NONE)) for m in transactions.decode_markers(r)]),
})

CASES = [(key, version) for key, (low, high) in {**versions.BROKER_API_VERSIONS,
                                                 **versions.CONTROLLER_API_VERSIONS}.items()
         for version in sorted({low, high})]


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_arbitrary_requests_decode_and_answer(api_key: int, version: int) -> None:
    answer = ANSWER[api_key]

    @settings(max_examples=15, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.from_type(request_class(api_key, version)))
    def check(body: Any) -> None:
        request = DecodedRequest(api_key, version, CID, "fuzz", body)
        try:
            response = answer(request)
        except KafkaException:
            return
        if isinstance(response, EncodedBody):  # written without kio (Fetch's hot path): kio must read it back
            response = read_encoded(response)
        assert int(response.__api_key__) == api_key and int(response.__version__) == version
        entity_writer(type(response))(io.BytesIO(), response)
        if api_key == versions.FETCH:
            _metadata_log(request)

    check()
