"""How a broker's replica log report (unclean recovery, KIP-966) travels to the controller: a Fetch.

Kafka 4's controller asks replicas with GetReplicaLogInfo, which kio does not know and which needs the controller
to connect to brokers; insync brokers push the same facts with their heartbeats instead (`broker.replica_logs`).
On the wire the report is what a follower's Fetch already says about its log, sent to the controller listener:
Fetch v15, `replica_state` = (broker id, broker epoch), and per reported partition (by topic id) its leader-epoch
history as partition entries in order, each with `last_fetched_epoch` = an epoch and `fetch_offset` = where it
starts, then a closing entry with `last_fetched_epoch` -1 and `fetch_offset` = the log end offset; every entry
carries the partition's leader epoch as `current_leader_epoch` and the log start offset. `partition_max_bytes`
is 0: nothing is to be read. A Fetch on the controller listener that does not ask for the metadata partition is a
report; the controller answers it with an empty Fetch response (no topics). A malformed report raises
INVALID_REQUEST.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from insync import errors
from insync.controller.messages import ReplicaLogReportRequest
from insync.controller.unclean_recovery import REPORTED_EPOCHS_MAX, ReplicaLog, ReplicaLogReport
from insync.errors import KafkaException
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import (
    NO_THROTTLE,
    build,
    code,
    duration,
    field_or,
    nested,
    request_class,
    response_class,
)
from insync.types import BrokerEpoch, BrokerId
from insync.wire.metadata_log import METADATA_TOPIC_ID
from insync.wire.versions import FETCH

REPORT_VERSION = 15  # the first Fetch with ReplicaState{ReplicaId, ReplicaEpoch}
END = -1  # `last_fetched_epoch` of the closing entry, whose `fetch_offset` is the log end offset


def encode_request(message: ReplicaLogReportRequest) -> Any:
    cls = request_class(FETCH, REPORT_VERSION)
    partition_cls, topic_cls = nested(cls, "FetchPartition"), nested(cls, "FetchTopic")
    by_topic: dict[str, list[Any]] = {}
    for report in message.reports:
        log = report.log
        entries = [*log.epochs, (END, log.log_end_offset)]
        by_topic.setdefault(report.topic_id, []).extend(
            build(partition_cls, partition=report.partition, current_leader_epoch=report.leader_epoch,
                  fetch_offset=offset, last_fetched_epoch=epoch, log_start_offset=log.log_start_offset,
                  partition_max_bytes=0) for epoch, offset in entries)
    topics = tuple(build(topic_cls, topic_id=uuid.UUID(topic_id), partitions=tuple(entries))
                   for topic_id, entries in by_topic.items())
    state = build(nested(cls, "ReplicaState"), replica_id=message.broker_id, replica_epoch=message.broker_epoch)
    return build(cls, cluster_id=None, replica_state=state, max_wait=duration(0), min_bytes=0, max_bytes=0,
                 isolation_level=0, session_id=0, session_epoch=-1, topics=topics, forgotten_topics_data=(),
                 rack_id="")


def decode_request(request: DecodedRequest) -> ReplicaLogReportRequest | None:
    """The report a Fetch carries, or None when it is not one (it asks for the metadata log, or predates v15)."""
    body = request.body
    if request.api_version < REPORT_VERSION or any(t.topic_id == METADATA_TOPIC_ID for t in body.topics):
        return None
    state = field_or(body, "replica_state", None)
    if state is None or int(state.replica_id) < 0:
        raise KafkaException(errors.INVALID_REQUEST, "a replica log report names no broker")
    broker = BrokerId(int(state.replica_id))
    reports = [report for topic in body.topics for report in _reports(broker, str(topic.topic_id), topic.partitions)]
    return ReplicaLogReportRequest(request.correlation_id, broker, BrokerEpoch(int(state.replica_epoch)),
                                   tuple(reports))


def _reports(broker: BrokerId, topic_id: str, entries: tuple[Any, ...]) -> Iterator[ReplicaLogReport]:
    """One report per run of entries closed by an END entry."""
    run: list[Any] = []
    for entry in entries:
        run.append(entry)
        if int(entry.last_fetched_epoch) == END:
            yield _report(broker, topic_id, run)
            run = []
    if run:
        raise KafkaException(errors.INVALID_REQUEST, f"a replica log report of {topic_id} lacks its log end")


def _report(broker: BrokerId, topic_id: str, run: list[Any]) -> ReplicaLogReport:
    first, closing = run[0], run[-1]
    epochs = tuple((int(e.last_fetched_epoch), int(e.fetch_offset)) for e in run[:-1])
    start, end = int(first.log_start_offset), int(closing.fetch_offset)
    consistent = (
        all(int(e.partition) == int(first.partition) and int(e.current_leader_epoch) == int(first.current_leader_epoch)
            for e in run)
        and len(epochs) <= REPORTED_EPOCHS_MAX and 0 <= start <= end and all(e >= 0 and o >= 0 for e, o in epochs)
        and all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(epochs, epochs[1:], strict=False)))
    if not consistent:
        raise KafkaException(errors.INVALID_REQUEST, f"a malformed replica log report of {topic_id}")
    log = ReplicaLog(broker, start, end, epochs)
    return ReplicaLogReport(topic_id, int(first.partition), int(first.current_leader_epoch), log)


def empty_response(request: DecodedRequest) -> Any:
    """The answer to a report: nothing to read."""
    cls = response_class(FETCH, request.api_version)
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(errors.NONE), session_id=0, responses=(),
                 node_endpoints=())
