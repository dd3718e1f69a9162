"""Kafka requests the command-line tools send themselves, where confluent-kafka does not expose the answer.

- `describe_topic_partitions`: DescribeTopicPartitions v0 (KIP-966), every page, for each partition's ELR and
  last known ELR, which confluent-kafka's `describe_topics` drops.
- `replica_logs`: each replica's own log of a partition, asked of the broker holding it with Kafka's debugging
  replica id (-2): ListOffsets EARLIEST and one OffsetForLeaderEpoch for every epoch (`history_from_answers`);
  `unclean_plan`: what an unclean election would cost, choice by choice (`controller.unclean_recovery.plan`).
- `delete_group_offsets`: OffsetDelete to the group's coordinator, retried while it moves or loads.
- `describe_broker_configs` and `alter_broker_configs`: DescribeConfigs v4 and IncrementalAlterConfigs v1 of one
  BROKER resource, including "" (the cluster-wide defaults), which the client libraries refuse to name.
- `alter_partition_reassignments`, `list_partition_reassignments`; `metadata_partitions` and `leaders_known`:
  Metadata v7 of one topic asked of one broker, for what that broker itself has applied.
One short blocking connection per request; an unreachable broker raises, Kafka error codes are returned.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from insync import command_config, errors
from insync.config import ConfigError
from insync.controller.unclean_recovery import REPORTED_EPOCHS_MAX, Choice, ReplicaLog, plan
from insync.errors import KafkaError
from insync.protocol.codec import MalformedRequest, decode_response, encode_request
from insync.protocol.kio import build, error_of, nested, request_class
from insync.security.sasl_client import SaslCredentials
from insync.types import BrokerId, TopicPartition
from insync.wire import sasl_exchange

DESCRIBE_TOPIC_PARTITIONS, OFFSET_FOR_LEADER_EPOCH, LIST_OFFSETS = 75, 23, 2
FIND_COORDINATOR, OFFSET_DELETE = 10, 47
METADATA, METADATA_VERSION = 3, 7  # with each partition's leader epoch; Kafka 2.0 to 4.x answer v7
FIND_COORDINATOR_VERSION = 4  # coordinator_keys; Kafka 4 and insync
COORDINATOR_ATTEMPTS = 10
COORDINATOR_BACKOFF_S = 0.5
_MOVING = frozenset(("NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE"))
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, BROKER_RESOURCE = 32, 44, 4
ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
OFFSET_FOR_LEADER_EPOCH_VERSION, LIST_OFFSETS_VERSION = 4, 7  # both in Kafka 4 and insync
DEBUGGING_REPLICA_ID = -2
EARLIEST_TIMESTAMP = -2
PAGES_MAX = 10_000  # 2000 partitions a page: far more than a cluster holds
RESPONSE_BYTES_MAX = 64 * 1024 * 1024
_SIZE = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    topic: str
    topic_id: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


def request(address: str, body: Any, timeout_s: float) -> Any:
    """Send one request to `address` (host:port) and return the response body; over TLS and after SASL as the
    command's client settings say (`--command-config`)."""
    host, _, port = address.rpartition(":")
    tls = command_config.ssl_context()
    with socket.create_connection((host, int(port)), timeout=timeout_s) as raw, \
            (tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw) as sock:
        credentials = _sasl_credentials(command_config.current())
        if credentials is not None:
            _authenticate(sock, address, credentials)
        return _exchange(sock, address, body)


def _exchange(sock: socket.socket, address: str, body: Any) -> Any:
    sock.sendall(encode_request(body, 1, "insync-tools"))
    (size,) = _SIZE.unpack(_read(sock, _SIZE.size))
    if not 4 <= size <= RESPONSE_BYTES_MAX:
        raise ConnectionError(f"response of {size} bytes from {address}")
    try:
        _, response = decode_response(int(body.__api_key__), int(body.__version__), _read(sock, size))
    except MalformedRequest as exc:
        raise ConnectionError(f"{address}: {exc}") from None
    return response


def _sasl_credentials(settings: dict[str, str]) -> SaslCredentials | None:
    if not settings.get("security.protocol", "PLAINTEXT").upper().startswith("SASL_"):
        return None
    try:
        return SaslCredentials(settings.get("sasl.mechanism", "GSSAPI").upper(), settings["sasl.username"],
                               settings["sasl.password"])
    except (KeyError, AssertionError):
        raise ConfigError("--command-config: SASL needs sasl.mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), "
                          "sasl.username and sasl.password") from None


def _authenticate(sock: socket.socket, address: str, credentials: SaslCredentials) -> None:
    """SaslHandshake and SaslAuthenticate (wire.sasl_exchange) before the request."""
    try:
        sasl_exchange.run(credentials, lambda body: _exchange(sock, address, body))
    except sasl_exchange.SaslRefused as exc:
        raise ConfigError(f"{address} {exc}") from None


def _read(sock: socket.socket, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:  # bounded: each pass reads at least a byte or raises
        chunk = sock.recv(size - len(out))
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        out += chunk
    return bytes(out)


def describe_topic_partitions(address: str, names: Iterable[str], timeout_s: float, page_partitions: int = 2000
                              ) -> tuple[list[PartitionDescription], dict[str, KafkaError]]:
    """Every partition of the named topics (all when none), following `next_cursor` from page to page of at most
    `page_partitions`; and the topics answered with an error (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
    cls = request_class(DESCRIBE_TOPIC_PARTITIONS, 0)
    topics = tuple(build(nested(cls, "TopicRequest"), name=name) for name in names)
    rows: list[PartitionDescription] = []
    failed: dict[str, KafkaError] = {}
    cursor = None
    for _ in range(PAGES_MAX):
        body = request(address, build(cls, topics=topics, response_partition_limit=page_partitions,
                                         cursor=cursor), timeout_s)
        for topic in body.topics:
            if error_of(topic.error_code) is not errors.NONE:
                failed[topic.name] = error_of(topic.error_code)
                continue
            rows.extend(PartitionDescription(
                topic.name, str(topic.topic_id or ""), int(p.partition_index), int(p.leader_id), int(p.leader_epoch),
                tuple(p.replica_nodes), tuple(p.isr_nodes), tuple(p.eligible_leader_replicas or ()),
                tuple(p.last_known_elr or ()), tuple(p.offline_replicas)) for p in topic.partitions)
        if body.next_cursor is None:
            return rows, failed
        cursor = build(nested(cls, "Cursor"), topic_name=body.next_cursor.topic_name,
                       partition_index=body.next_cursor.partition_index)
    raise ConnectionError(f"{address} kept answering DescribeTopicPartitions pages ({PAGES_MAX})")


def find_group_coordinator(address: str, group_id: str, timeout_s: float) -> tuple[KafkaError, str]:
    """(NONE, coordinator host:port), or the error FindCoordinator answered for the group."""
    cls = request_class(FIND_COORDINATOR, FIND_COORDINATOR_VERSION)
    (answer,) = request(address, build(cls, key_type=0, coordinator_keys=(group_id,)), timeout_s).coordinators
    return error_of(answer.error_code), f"{answer.host}:{answer.port}"


def delete_group_offsets(address: str, group_id: str, partitions: Sequence[TopicPartition], timeout_s: float
                         ) -> tuple[KafkaError, list[tuple[TopicPartition, KafkaError]]]:
    """OffsetDelete at the group's coordinator: (the group's error, each partition's)."""
    cls = request_class(OFFSET_DELETE, 0)
    topic_cls, partition_cls = nested(cls, "OffsetDeleteRequestTopic"), nested(cls, "OffsetDeleteRequestPartition")
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:  # bounded by the caller's list
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    body = build(cls, group_id=group_id, topics=tuple(
        build(topic_cls, name=t, partitions=tuple(build(partition_cls, partition_index=p) for p in ps))
        for t, ps in by_topic.items()))
    error: KafkaError = errors.NONE
    for _ in range(COORDINATOR_ATTEMPTS):
        error, coordinator = find_group_coordinator(address, group_id, timeout_s)
        if error is errors.NONE:
            answer = request(coordinator, body, timeout_s)
            error = error_of(answer.error_code)
            if error is errors.NONE:
                return error, [(TopicPartition(t.name, int(p.partition_index)), error_of(p.error_code))
                               for t in answer.topics for p in t.partitions]
        if error.name not in _MOVING:
            return error, []
        time.sleep(COORDINATOR_BACKOFF_S)
    return error, []


@dataclass(frozen=True, slots=True)
class BrokerConfigEntry:
    name: str
    value: str | None
    source: int  # Kafka's ConfigSource
    read_only: bool
    synonyms: tuple[tuple[str, str | None, int], ...]  # (name, value, source), most specific first


def describe_broker_configs(address: str, broker: str, timeout_s: float
                            ) -> tuple[KafkaError, str | None, list[BrokerConfigEntry]]:
    """The configs of BROKER resource `broker` (an id, asked of that broker at `address`; or "") with synonyms."""
    cls = request_class(DESCRIBE_CONFIGS, 4)
    resource = build(nested(cls, "DescribeConfigsResource"), resource_type=BROKER_RESOURCE, resource_name=broker,
                     configuration_keys=None)
    body = request(address, build(cls, resources=(resource,), include_synonyms=True, include_documentation=False),
                   timeout_s)
    [result] = body.results
    entries = [BrokerConfigEntry(c.name, c.value, int(c.config_source), bool(c.read_only),
                                 tuple((s.name, s.value, int(s.source)) for s in c.synonyms))
               for c in result.configs]
    return error_of(result.error_code), result.error_message, entries


def alter_broker_configs(address: str, broker: str, sets: dict[str, str], deletes: Sequence[str],
                         timeout_s: float, validate_only: bool = False) -> tuple[KafkaError, str | None]:
    """IncrementalAlterConfigs of BROKER resource `broker`: `sets` SET, `deletes` DELETE, all or nothing."""
    cls = request_class(INCREMENTAL_ALTER_CONFIGS, 1)
    entry = nested(cls, "AlterableConfig")
    configs = (*(build(entry, name=k, config_operation=SET, value=v) for k, v in sets.items()),
               *(build(entry, name=k, config_operation=DELETE, value=None) for k in deletes))
    resource = build(nested(cls, "AlterConfigsResource"), resource_type=BROKER_RESOURCE, resource_name=broker,
                     configs=configs)
    body = request(address, build(cls, resources=(resource,), validate_only=validate_only), timeout_s)
    [response] = body.responses
    return error_of(response.error_code), response.error_message


@dataclass(frozen=True, slots=True)
class Reassignment:
    """A partition being reassigned, as ListPartitionReassignments answers it."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def alter_partition_reassignments(address: str, targets: Mapping[tuple[str, int], Sequence[int] | None],
                                  timeout_s: float) -> tuple[KafkaError, str | None,
                                                             dict[tuple[str, int], tuple[KafkaError, str | None]]]:
    """Reassign each (topic, partition) to its replicas (None: cancel); the request's error and each partition's."""
    cls = request_class(ALTER_PARTITION_REASSIGNMENTS, 0)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), replicas in targets.items():
        by_topic.setdefault(topic, []).append(build(nested(cls, "ReassignablePartition"), partition_index=partition,
                                                    replicas=None if replicas is None else tuple(replicas)))
    topics = tuple(build(nested(cls, "ReassignableTopic"), name=name, partitions=tuple(partitions))
                   for name, partitions in by_topic.items())
    body = request(address, build(cls, topics=topics), timeout_s)
    outcomes = {(t.name, int(p.partition_index)): (error_of(p.error_code), p.error_message)
                for t in body.responses for p in t.partitions}
    return error_of(body.error_code), body.error_message, outcomes


def leaders_known(address: str, topic: str, timeout_s: float) -> int | None:
    """How many partitions of `topic` the broker at `address` knows a leader for, from its own metadata; None when
    it does not know the topic (or answers it with an error)."""
    rows = metadata_partitions(address, topic, timeout_s)
    return None if rows is None else sum(1 for row in rows if row.leader >= 0)


def metadata_partitions(address: str, topic: str, timeout_s: float) -> list[PartitionDescription] | None:
    """`topic`'s partitions as the broker at `address` has them in its own metadata (Metadata v7, which every Kafka
    since 2.0 answers, ZooKeeper-mode ones too, where DescribeTopicPartitions does not exist); None when it does not
    know the topic (or answers it with an error). Metadata carries no ELR."""
    cls = request_class(METADATA, METADATA_VERSION)
    body = request(address, build(cls, topics=(build(nested(cls, "MetadataRequestTopic"), name=topic),),
                                  allow_auto_topic_creation=False), timeout_s)
    for answer in body.topics:
        if answer.name == topic and error_of(answer.error_code) is errors.NONE:
            return [PartitionDescription(topic, "", int(p.partition_index), int(p.leader_id), int(p.leader_epoch),
                                         tuple(p.replica_nodes), tuple(p.isr_nodes), (), (), tuple(p.offline_replicas))
                    for p in answer.partitions]
    return None


def list_partition_reassignments(address: str, timeout_s: float) -> tuple[KafkaError, list[Reassignment]]:
    """Every partition being reassigned in the cluster."""
    body = request(address, build(request_class(LIST_PARTITION_REASSIGNMENTS, 0), topics=None), timeout_s)
    return error_of(body.error_code), [Reassignment(t.name, int(p.partition_index), tuple(p.replicas),
                                                    tuple(p.adding_replicas), tuple(p.removing_replicas))
                                       for t in body.topics for p in t.partitions]


def history_from_answers(log_start_offset: int, answers: Sequence[tuple[int, int, int]]
                         ) -> tuple[int, tuple[tuple[int, int], ...]]:
    """(log end offset, `(epoch, start_offset)` history) from OffsetForLeaderEpoch answers `(asked epoch,
    answered epoch, end offset)` for ascending asked epochs reaching the replica's latest epoch.

    Kafka's `endOffsetFor`: an epoch the replica holds answers itself and where it ends (its latest epoch: the
    log end); an epoch between two it holds answers the lower one; one below all it holds answers itself and
    where the first one starts; one above its latest is undefined (-1). So each held epoch starts where the
    answers before it ended, and the largest end is the log end."""
    assert all(a[0] < b[0] for a, b in zip(answers, answers[1:], strict=False)), answers
    known = [(asked, epoch, end) for asked, epoch, end in answers if epoch >= 0]
    history: list[tuple[int, int]] = []
    start = log_start_offset
    for asked, epoch, end in known:
        if epoch == asked and end > start:
            history.append((epoch, start))
        start = max(start, end)
    latest = max((epoch for _, epoch, _ in known), default=-1)
    if latest >= 0 and (not history or history[-1][0] != latest):
        history.append((latest, start))  # the latest epoch has no records yet
    return start, tuple(history)


def replica_logs(addresses: dict[int, str], topic: str, partition: int, leader_epoch: int, timeout_s: float
                 ) -> dict[int, ReplicaLog]:
    """Each reachable replica's log (`addresses`: broker id -> host:port); unreachable ones are left out."""
    first_epoch = max(0, leader_epoch - REPORTED_EPOCHS_MAX + 1)
    out: dict[int, ReplicaLog] = {}
    for broker, address in addresses.items():
        try:
            log_start = _log_start(address, topic, partition, timeout_s)
            answers = _epoch_answers(address, topic, partition, range(first_epoch, leader_epoch + 1), timeout_s)
        except (OSError, ConnectionError):
            continue
        if log_start is None or answers is None:
            continue
        end, history = history_from_answers(log_start, answers)
        out[broker] = ReplicaLog(BrokerId(broker), log_start, end, history)
    return out


def _log_start(address: str, topic: str, partition: int, timeout_s: float) -> int | None:
    cls = request_class(LIST_OFFSETS, LIST_OFFSETS_VERSION)
    asked = build(nested(cls, "ListOffsetsPartition"), partition_index=partition, current_leader_epoch=-1,
                  timestamp=EARLIEST_TIMESTAMP)
    body = request(address, build(cls, replica_id=DEBUGGING_REPLICA_ID, isolation_level=0, topics=(
        build(nested(cls, "ListOffsetsTopic"), name=topic, partitions=(asked,)),)), timeout_s)
    answer = body.topics[0].partitions[0]
    return int(answer.offset) if error_of(answer.error_code) is errors.NONE else None


def _epoch_answers(address: str, topic: str, partition: int, epochs: range, timeout_s: float
                   ) -> list[tuple[int, int, int]] | None:
    cls = request_class(OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION)
    asked = tuple(build(nested(cls, "OffsetForLeaderPartition"), partition=partition, current_leader_epoch=-1,
                        leader_epoch=epoch) for epoch in epochs)
    body = request(address, build(cls, replica_id=DEBUGGING_REPLICA_ID, topics=(
        build(nested(cls, "OffsetForLeaderTopic"), topic=topic, partitions=asked),)), timeout_s)
    results = [p for t in body.topics for p in t.partitions]
    if len(results) != len(epochs) or any(error_of(p.error_code) is not errors.NONE for p in results):
        return None
    return [(epoch, int(p.leader_epoch), int(p.end_offset)) for epoch, p in zip(epochs, results, strict=True)]


@dataclass(frozen=True, slots=True)
class UncleanPlan:
    """The choices of an unclean election of one partition, the recovery rule's first; `unreachable`: replicas
    whose log could not be read (down, or fenced), which the controller would not elect either."""

    partition: PartitionDescription
    logs: tuple[ReplicaLog, ...]
    unreachable: tuple[int, ...]
    choices: tuple[Choice, ...]


def unclean_plan(partition: PartitionDescription, addresses: dict[int, str], timeout_s: float) -> UncleanPlan:
    """`addresses`: host:port of the live brokers."""
    reachable = {b: addresses[b] for b in partition.replicas if b in addresses}
    found = replica_logs(reachable, partition.topic, partition.partition, partition.leader_epoch, timeout_s)
    logs = tuple(found[b] for b in partition.replicas if b in found)
    unreachable = tuple(b for b in partition.replicas if b not in found)
    return UncleanPlan(partition, logs, unreachable, plan(logs) if logs else ())
