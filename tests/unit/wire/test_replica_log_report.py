from __future__ import annotations

import datetime
import uuid

import pytest
from apis_helpers import TOPIC_ID, client_request, request_entity

from insync import errors
from insync.controller.messages import ReplicaLogReportRequest
from insync.controller.unclean_recovery import ReplicaLog, ReplicaLogReport
from insync.errors import KafkaException
from insync.protocol.codec import decode_request, encode_request
from insync.types import BrokerEpoch, BrokerId
from insync.wire import metadata_log, replica_log_report
from insync.wire.versions import BROKER_API_VERSIONS, CONTROLLER_API_VERSIONS, FETCH

OTHER = "0b1c2d3e-4f5a-4b6c-8d7e-8f9a0b1c2d3e"


def over_the_wire(message: ReplicaLogReportRequest) -> ReplicaLogReportRequest | None:
    frame = encode_request(replica_log_report.encode_request(message), message.correlation_id)
    return replica_log_report.decode_request(decode_request(frame[4:], {**BROKER_API_VERSIONS,
                                                                         **CONTROLLER_API_VERSIONS}))


def test_a_report_survives_the_trip_as_a_fetch() -> None:
    reports = (ReplicaLogReport(TOPIC_ID, 0, 7, ReplicaLog(2, 10, 150, ((0, 0), (1, 100), (4, 130)))),
               ReplicaLogReport(TOPIC_ID, 3, 2, ReplicaLog(2, 0, 0, ())),
               ReplicaLogReport(OTHER, 1, 9, ReplicaLog(2, 5, 60, ((3, 5),))))
    message = ReplicaLogReportRequest(11, BrokerId(2), BrokerEpoch(42), reports)
    assert over_the_wire(message) == message


def test_a_metadata_fetch_is_no_report() -> None:
    body = metadata_log.fetch_request(5, BrokerId(1), 0, 15, 0)
    frame = encode_request(body, 5)
    request = decode_request(frame[4:], CONTROLLER_API_VERSIONS)
    assert replica_log_report.decode_request(request) is None


def test_a_report_without_its_log_end_is_refused() -> None:
    entry = request_entity(FETCH, 15, "FetchPartition", partition=0, current_leader_epoch=1, fetch_offset=0,
                           last_fetched_epoch=3, log_start_offset=0, partition_max_bytes=0)
    topic = request_entity(FETCH, 15, "FetchTopic", topic_id=uuid.UUID(TOPIC_ID), partitions=(entry,))
    state = request_entity(FETCH, 15, "ReplicaState", replica_id=1, replica_epoch=3)
    request = client_request(FETCH, 15, replica_state=state, max_wait=datetime.timedelta(0),
                             min_bytes=0, max_bytes=0, isolation_level=0, session_id=0, session_epoch=-1,
                             topics=(topic,), forgotten_topics_data=(), rack_id="")
    with pytest.raises(KafkaException) as refused:
        replica_log_report.decode_request(request)
    assert refused.value.error is errors.INVALID_REQUEST
