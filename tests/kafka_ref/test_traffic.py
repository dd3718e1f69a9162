"""Real clients' traffic replayed to Kafka 4.1 and insync, the answers compared field by field.

The workloads of traffic_workloads.py (confluent-kafka and kafka-python: producers, consumer groups, admin
clients, at their defaults) run through a recording proxy in front of a 1-broker insync cluster. Their
requests are then replayed, connection by connection and in the order the clients saw, to a fresh 1-broker Kafka
4.1 cluster and a fresh 1-broker insync cluster prepared the same way (traffic_replay.py); each answer pair is
compared with differential.py's masking. One broker each: every request reaches the broker the client sent it
to, coordinator and partition leader alike. Every difference is fixed or listed in traffic_differences.toml
with its reason; the report goes to build/compat/traffic.md."""

from __future__ import annotations

import collections
import datetime
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from differential import CLOSED, Connection, check_listed, differences, listed, masked, plain, request
from reference import start_kafka
from traffic_proxy import Recording, RecordingProxy
from traffic_replay import AFTER_CLOSE, SideIds, recorded_answer, replay, topic_ids
from traffic_workloads import GROUPS, TOPICS, WORKLOADS

from insync.chaos import cluster
from insync.protocol.kio import request_class
from insync.protocol.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, decode_records
from insync.waiting import wait_until

pytestmark = pytest.mark.timeout(900)
REPORT = Path(__file__).resolve().parents[2] / "build" / "compat" / "traffic.md"
LISTED = listed(Path(__file__).parent / "traffic_differences.toml")
MS = datetime.timedelta(milliseconds=1)
# Both engines alike: topics only when asked for, and the launcher's Kafka setting of no initial rebalance
# delay (a group of one consumer waits for nobody).
COMMON = ["auto.create.topics.enable=false"]
INSYNC_ONLY = ["insync.events.topic.enable=false", "group.initial.rebalance.delay.ms=0"]
# Beyond differential.MASKED: the member id JoinGroup names as the group's leader (the broker makes it up), and
# DescribeLogDirs' free bytes of the file system, which anything writing on the machine changes.
ALSO_MASKED = frozenset({"leader", "usable_bytes"})
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0


def _prepare(address: str) -> dict[str, uuid.UUID]:
    """The workloads' topics on the single broker (node 1), a leader for each, a loaded coordinator for each
    group, and producer ids to hand out; the topics' ids."""
    connection = Connection(address)
    try:
        created = connection.send(request(19, 7, timeout=30_000 * MS, topics=[
            {"name": name, "num_partitions": -1, "replication_factor": -1,
             "assignments": [{"partition_index": p, "broker_ids": [1]} for p in range(count)]}
            for name, count in TOPICS.items()]))
        assert all(int(t.error_code) == 0 for t in created.topics), created

        def led() -> Any:
            answer = connection.send(request(3, 12, topics=[{"name": name} for name in TOPICS]))
            return answer if all(int(t.error_code) == 0 and all(p.leader_id >= 0 for p in t.partitions)
                                 for t in answer.topics) else None

        topics = wait_until(led, READY_TIMEOUT_S, f"{address}: a leader for every partition", interval_s=0.5).topics
        for group in GROUPS:
            wait_until(lambda g=group: int(connection.send(request(10, 3, key=g, key_type=0)).error_code) == 0,
                       READY_TIMEOUT_S, f"{address}: a coordinator for {group}", interval_s=0.5)
            # Kafka's group coordinator loads a partition after FindCoordinator names it: NOT_COORDINATOR until then.
            wait_until(lambda g=group: int(connection.send(request(15, 5, groups=[g])).groups[0].error_code) == 0,
                       READY_TIMEOUT_S, f"{address}: {group}'s coordinator loaded", interval_s=0.5)
        # A fresh Kafka answers the first InitProducerId COORDINATOR_LOAD_IN_PROGRESS until it has a block of ids.
        wait_until(lambda: int(connection.send(request(22, 4, transactional_id=None, transaction_timeout=60_000 * MS,
                                                       producer_id=-1, producer_epoch=-1)).error_code) == 0,
                   READY_TIMEOUT_S, f"{address}: producer ids", interval_s=0.5)
        return {t.name: t.topic_id for t in topics}
    finally:
        connection.close()


def _record(directory: Path) -> Recording:
    """The workloads' traffic through the proxy in front of a 1-broker insync cluster that advertises it."""
    proxy = RecordingProxy().start()
    try:
        spec = cluster.up(str(directory), 1, 0, [*COMMON, *INSYNC_ONLY,
                                                 f"advertised.listeners=PLAINTEXT://{proxy.address}"])
        try:
            proxy.upstream = spec.brokers[0].address
            _prepare(spec.brokers[0].address)
            for name, workload in WORKLOADS:
                proxy.workload = name
                workload(proxy.address)
                proxy.workload = None
        finally:
            cluster.down(cluster.ClusterSpec.load(spec.directory), STOP_TIMEOUT_S)
    finally:
        proxy.stop()
    return proxy.recording


def _batches(data: bytes) -> list[dict[str, Any]]:
    """A records field as its batches, without what each cluster assigns (producer id, and the CRC over it)."""
    out: list[dict[str, Any]] = []
    pos = 0
    while pos + BATCH_HEADER_SIZE <= len(data):  # bounded: advances by a whole batch
        size = LOG_OVERHEAD + struct.unpack_from(">i", data, pos + 8)[0]
        if pos + size > len(data):
            out.append({"partial_tail_bytes": len(data) - pos})
            break
        (base_offset, leader_epoch, attributes, producer_epoch, base_sequence) = (
            struct.unpack_from(">q", data, pos)[0], struct.unpack_from(">i", data, pos + 12)[0],
            struct.unpack_from(">h", data, pos + 21)[0], struct.unpack_from(">h", data, pos + 51)[0],
            struct.unpack_from(">i", data, pos + 53)[0])
        out.append({"base_offset": base_offset, "partition_leader_epoch": leader_epoch, "attributes": attributes,
                    "producer_epoch": producer_epoch, "base_sequence": base_sequence,
                    "records": plain([[r.offset, r.timestamp, r.key, r.value, r.headers] for r in
                                      decode_records(data, pos)])})
        pos += size
    return out


def _normalized(answer: Any) -> Any:
    if isinstance(answer, str):  # CLOSED or NO_ANSWER
        return answer
    return masked(_records_opened(plain(answer)), ALSO_MASKED)


def _records_opened(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _batches(bytes.fromhex(v)) if k == "records" and isinstance(v, str) else _records_opened(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_records_opened(v) for v in value]
    return value


def _api_name(api_key: int, version: int) -> str:
    return request_class(api_key, version).__name__.removesuffix("Request")


def test_the_clients_traffic_gets_the_same_answers(tmp_path_factory: pytest.TempPathFactory) -> None:
    recording = _record(tmp_path_factory.mktemp("recorded"))
    exchanges = recording.exchanges
    assert exchanges and not recording.truncated, (len(exchanges), recording.truncated)
    assert all(e.response is not None for e in exchanges if e.expects_answer and e.answered_at), "unmatched"
    recorded_topics = {topic_id: name for e in exchanges for name, topic_id in _ids_in(recorded_answer(e))}
    kafka = start_kafka(tmp_path_factory.mktemp("kafka"), "4.1", brokers=1, extra=COMMON)
    try:
        insync = cluster.up(str(tmp_path_factory.mktemp("insync")), 1, 0, [*COMMON, *INSYNC_ONLY])
        try:
            sides = {name: (spec.brokers[0].address, SideIds(recorded_topics, _prepare(spec.brokers[0].address)))
                     for name, spec in (("kafka", kafka), ("insync", insync))}
            answers = replay(exchanges, sides)
        finally:
            cluster.down(cluster.ClusterSpec.load(insync.directory), STOP_TIMEOUT_S)
    finally:
        cluster.down(cluster.ClusterSpec.load(kafka.directory), STOP_TIMEOUT_S)
    rows = []
    for exchange, from_kafka, from_insync in zip(exchanges, answers["kafka"], answers["insync"], strict=True):
        if AFTER_CLOSE in (from_kafka, from_insync) or (exchange.expects_answer and exchange.answered_at is None):
            continue  # also a request whose client left before its answer: when it was served is a race
        name = f"{_api_name(exchange.api_key, exchange.api_version)} v{exchange.api_version}: {exchange.workload}"
        rows.append((name, list(differences(_normalized(from_kafka), _normalized(from_insync)))))
    check_listed(rows, LISTED, REPORT, "Clients' traffic replayed to Kafka 4.1 and insync",
                 _per_api(rows, recording, len(exchanges) - len(rows)))


def _ids_in(answer: Any) -> list[tuple[str, uuid.UUID]]:
    return [] if answer is None else list(topic_ids(answer))


def _per_api(rows: list[tuple[str, list[str]]], recording: Recording, after_close: int) -> list[str]:
    """The report's table: per API (and version), exchanges, identical, differing."""
    counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for name, found in rows:
        counts[name.split(":", 1)[0]][bool(found)] += 1
    closed = sum(1 for name, found in rows if any(CLOSED in line for line in found))
    return [f"{len(recording.exchanges)} requests recorded on {recording.connections} connections "
            f"({recording.recorded_bytes} bytes), each replayed to both; {closed} answered by a closed connection "
            f"on one side; {after_close} not compared: the recording has them after a request whose connection one "
            "side closed, or has no answer to them (the client closed the connection first).", "", "| API | exchanges | identical | differing |", "| --- | --- | --- | --- |",
            *(f"| {api} | {same + differ} | {same} | {differ} |" for api, (same, differ) in sorted(counts.items())),
            ""]
