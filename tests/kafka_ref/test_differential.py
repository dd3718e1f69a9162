"""The same requests to a Kafka 4.1 cluster and an insync cluster (3 brokers each, ACLs on with everyone allowed
where no ACL is found), the responses compared field by field (differential.py). Every difference is fixed or
listed in differential_differences.toml with its reason; the report goes to build/compat/differential.md."""

from __future__ import annotations

import dataclasses
import datetime
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from differential import (
    CLOSED,
    SMALL_MAX_BYTES,
    TOPICS,
    Connection,
    Scenario,
    batch,
    check_listed,
    differences,
    listed,
    masked,
    plain,
    request,
)
from reference import start_kafka

from insync.chaos import cluster
from insync.protocol.kio import request_class
from insync.protocol.records import build_batch
from insync.waiting import wait_until

pytestmark = pytest.mark.timeout(900)
REPORT = Path(__file__).resolve().parents[2] / "build" / "compat" / "differential.md"
LISTED = listed(Path(__file__).parent / "differential_differences.toml")
MS = datetime.timedelta(milliseconds=1)
# ACLs on, everyone allowed where no ACL is found, and no super user: the harness's own principal (ANONYMOUS on
# a plaintext listener) meets the DENY it creates.
ACLS_ON = ["authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "allow.everyone.if.no.acl.found=true", "auto.create.topics.enable=false"]
# insync's replication events topic (on by default, listed in the tools table) would be one more topic in every
# answer that lists them all.
INSYNC_ONLY = ["insync.events.topic.enable=false"]
FUTURE_VERSION = 127
COORDINATOR_WAIT_S = 30.0
GROUP_APIS = frozenset({8, 9, 11, 12, 13, 14, 15, 47})  # sent to the group's coordinator, on each side
# Answers that say "not yet" (a coordinator loading or not available): asked again, at most this many times. A
# group's request also meets NOT_COORDINATOR (16) while the offsets topic's leaders settle: its coordinator is
# looked up again, as a client does.
TRANSIENT_ERRORS = frozenset({14, 15})
NOT_COORDINATOR = 16
NOT_LEADER_OR_FOLLOWER = 6
TRANSIENT_RETRIES = 10
# APIs whose empty request is not sent in the sweep: it would change what the scenarios then read.
SWEEP_SKIPPED = {0, 19, 20, 21, 30, 31, 33, 34, 37, 43, 44, 45, 47, 51}
Context = dict[str, Any]


class Side:
    """One cluster as the harness talks to it: a connection per broker, its versions and its topic ids."""

    def __init__(self, spec: cluster.ClusterSpec) -> None:
        self.spec = spec
        self.connections = [Connection(b.address) for b in spec.brokers]
        answer = self.connections[0].send(request(18, 3, client_software_name="differential",
                                                  client_software_version="1"))
        self.versions = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}
        self.ids: dict[str, uuid.UUID] = {}

    def send(self, broker: int, body: Any) -> Any:
        return self.connections[broker - 1].send(body)

    def coordinator(self, group: str) -> int:
        """The broker (1-based) coordinating `group`, once the offsets topic has a leader for it."""
        def found() -> Any:
            answer = self.send(1, request(10, 3, key=group, key_type=0))
            return answer if answer != CLOSED and int(answer.error_code) == 0 else None

        node_id = int(wait_until(found, COORDINATOR_WAIT_S, f"{self.spec.engine}: a coordinator for group {group!r}",
                                 interval_s=0.5).node_id)
        return next(i + 1 for i, b in enumerate(self.spec.brokers) if b.node_id == node_id)

    def close(self) -> None:
        for connection in self.connections:
            connection.close()


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    kafka = start_kafka(tmp_path_factory.mktemp("kafka"), "4.1", extra=ACLS_ON)
    try:
        insync = cluster.up(str(tmp_path_factory.mktemp("insync")), 3, 0, [*ACLS_ON, *INSYNC_ONLY])
        try:
            pair = (Side(kafka), Side(insync))
            for side in pair:
                _prepare(side)
            yield pair
            for side in pair:
                side.close()
        finally:
            cluster.down(cluster.ClusterSpec.load(insync.directory), 20.0)
    finally:
        cluster.down(cluster.ClusterSpec.load(kafka.directory), 20.0)


def _prepare(side: Side) -> None:
    """The same topics (explicit assignments: the same leaders) and the same batches on both clusters."""
    topics = [{"name": name, "num_partitions": -1, "replication_factor": -1,
               "assignments": [{"partition_index": i, "broker_ids": list(replicas)} for i, replicas in
                               enumerate(assignment)],
               "configs": [{"name": "max.message.bytes", "value": str(SMALL_MAX_BYTES)}] if name == "small" else []}
              for name, assignment in {**TOPICS, "secret": ((1, 2, 3),)}.items()]
    created = side.send(1, request(19, 7, topics=topics, timeout=30_000 * MS))
    assert all(int(t.error_code) == 0 for t in created.topics), (side.spec.engine, created)
    def led() -> Any:
        answer = side.send(1, request(3, 12, topics=[{"name": n} for n in (*TOPICS, "secret")]))
        return answer if all(int(t.error_code) == 0 and all(p.leader_id >= 0 for p in t.partitions)
                             for t in answer.topics) else None

    answer = wait_until(led, 30, f"{side.spec.engine}: a leader for every partition", interval_s=0.5)
    side.ids = {t.name: t.topic_id for t in answer.topics}
    for partition, replicas in enumerate(TOPICS["d"]):
        # Broker 1's metadata may name a leader before that broker has taken the leadership (Kafka under load):
        # NOT_LEADER_OR_FOLLOWER is asked again, as a client would, and the batch goes in once.
        def written(partition: int = partition, leader: int = replicas[0]) -> Any:
            produced = side.send(leader, _produce(12, "d", partition, batch([b"a", b"b", b"c"])))
            error = int(produced.responses[0].partition_responses[0].error_code)
            assert error in (0, NOT_LEADER_OR_FOLLOWER), (side.spec.engine, produced)
            return error == 0

        wait_until(written, 30, f"{side.spec.engine}: d-{partition} written", interval_s=0.5)


def _produce(version: int, topic: str, partition: int, records: bytes, acks: int = -1) -> Any:
    return request(0, version, acks=acks, timeout=10_000 * MS, topic_data=[
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}])


def _fetch(version: int, ctx: Context, topic: str, partition: int, offset: int) -> Any:
    return request(1, version, replica_id=-1, max_wait=0 * MS, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                   session_id=0, session_epoch=-1, rack_id="",
                   topics=[{"topic": topic, "topic_id": ctx["ids"].get(topic, uuid.UUID(int=0)), "partitions": [
                       {"partition": partition, "fetch_offset": offset, "current_leader_epoch": -1,
                        "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}])


def _list_offsets(version: int, timestamp: int, topic: str = "d") -> Any:
    return request(2, version, replica_id=-1, isolation_level=0, topics=[
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}])


def _create(version: int, name: str, partitions: int, rf: int, assignments: list[dict[str, Any]] | None = None,
            configs: list[dict[str, str]] | None = None, validate_only: bool = False) -> Any:
    return request(19, version, validate_only=validate_only, timeout=30_000 * MS, topics=[
        {"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": assignments or [],
         "configs": configs or []}])


Make = Callable[[int, Context], Any]
SCENARIOS: tuple[Scenario, ...] = (
    Scenario("Metadata: a topic and an unknown one", 3, lambda v, c: request(
        3, v, topics=[{"name": "d"}, {"name": "nope"}], allow_auto_topic_creation=False), versions="all"),
    Scenario("Produce: to the leader", 0, lambda v, c: _produce(v, "d", 0, batch([b"x"])), versions="all"),
    Scenario("Produce: to a follower", 0, lambda v, c: _produce(v, "d", 0, batch([b"x"])), broker=2),
    Scenario("Produce: an unknown topic", 0, lambda v, c: _produce(v, "nope", 0, batch([b"x"]))),
    Scenario("Produce: a bad CRC", 0, lambda v, c: _produce(v, "d", 0, batch([b"y"], corrupt=True))),
    Scenario("Produce: a batch above max.message.bytes", 0,
             lambda v, c: _produce(v, "small", 0, batch([b"z" * (2 * SMALL_MAX_BYTES)]))),
    Scenario("Produce: acks=2", 0, lambda v, c: _produce(v, "d", 0, batch([b"x"]), acks=2)),
    Scenario("Fetch: from the start", 1, lambda v, c: _fetch(v, c, "d", 1, 0), broker=2, versions="all"),
    Scenario("Fetch: an offset out of range", 1, lambda v, c: _fetch(v, c, "d", 1, 1000), broker=2),
    Scenario("Fetch: from a follower", 1, lambda v, c: _fetch(v, c, "d", 1, 0), broker=1),
    Scenario("Fetch: an unknown topic", 1, lambda v, c: _fetch(v, c, "nope", 0, 0)),
    Scenario("ListOffsets: earliest", 2, lambda v, c: _list_offsets(v, -2), versions="all"),
    Scenario("ListOffsets: latest", 2, lambda v, c: _list_offsets(v, -1)),
    Scenario("ListOffsets: max timestamp", 2, lambda v, c: _list_offsets(v, -3)),
    Scenario("ListOffsets: an unknown topic", 2, lambda v, c: _list_offsets(v, -1, "nope")),
    Scenario("CreateTopics: replication factor 5", 19, lambda v, c: _create(v, "big", 1, 5)),
    Scenario("CreateTopics: an absent broker in an assignment", 19, lambda v, c: _create(
        v, "absent", -1, -1, [{"partition_index": 0, "broker_ids": [1, 9]}])),
    Scenario("CreateTopics: an invalid config", 19, lambda v, c: _create(
        v, "badcfg", 1, 1, configs=[{"name": "retention.ms", "value": "soon"}])),
    Scenario("CreateTopics: an unknown config", 19, lambda v, c: _create(
        v, "unknowncfg", 1, 1, configs=[{"name": "no.such.config", "value": "1"}])),
    Scenario("CreateTopics: an existing topic", 19, lambda v, c: _create(v, "d", 1, 1)),
    Scenario("CreateTopics: validate only", 19, lambda v, c: _create(v, "v", 2, 3, validate_only=True)),
    Scenario("CreatePartitions: fewer than now, and an unknown topic", 37, lambda v, c: request(
        37, v, timeout=10_000 * MS, topics=[{"name": "d", "count": 2}, {"name": "nope", "count": 4}])),
    Scenario("DeleteRecords: beyond the high watermark", 21, lambda v, c: request(
        21, v, timeout=10_000 * MS, topics=[{"name": "d", "partitions": [{"partition_index": 1, "offset": 100}]}]),
             broker=2),
    Scenario("DescribeConfigs: a topic, with synonyms", 32, lambda v, c: request(
        32, v, include_synonyms=True, resources=[{"resource_type": 2, "resource_name": "d"}])),
    Scenario("DescribeConfigs: an unknown topic", 32, lambda v, c: request(
        32, v, resources=[{"resource_type": 2, "resource_name": "nope"}])),
    Scenario("IncrementalAlterConfigs: an invalid value", 44, lambda v, c: request(
        44, v, resources=[{"resource_type": 2, "resource_name": "d", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "soon"}]}])),
    Scenario("FindCoordinator: a group", 10, lambda v, c: request(
        10, v, key="dg", key_type=0, coordinator_keys=["dg"])),
    Scenario("DescribeGroups: an unknown group", 15, lambda v, c: request(15, v, groups=["nope"]), broker="nope"),
    Scenario("ApiVersions: a version from the future", 18, lambda v, c: request(18, 3)),
    Scenario("CreateAcls: deny reads of secret", 30, lambda v, c: request(30, v, creations=[{
        "resource_type": 2, "resource_name": "secret", "resource_pattern_type": 3, "principal": "User:ANONYMOUS",
        "host": "*", "operation": 3, "permission_type": 2}]), settle_s=3.0),
    Scenario("Fetch: a topic the ACLs deny", 1, lambda v, c: _fetch(v, c, "secret", 0, 0)),
    Scenario("ListOffsets: a topic the ACLs deny", 2, lambda v, c: _list_offsets(v, -1, "secret")),
    Scenario("CreateAcls: deny writes of transactional id denied-tx", 30, lambda v, c: request(30, v, creations=[{
        "resource_type": 5, "resource_name": "denied-tx", "resource_pattern_type": 3, "principal": "User:ANONYMOUS",
        "host": "*", "operation": 4, "permission_type": 2}]), settle_s=3.0),
    Scenario("InitProducerId: a transactional id the ACLs deny", 22, lambda v, c: request(
        22, v, transactional_id="denied-tx", transaction_timeout=60_000 * MS, producer_id=-1, producer_epoch=-1)),
    Scenario("AddPartitionsToTxn: a transactional id the ACLs deny", 24, lambda v, c: request(
        24, 3, v3_and_below_transactional_id="denied-tx", v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[{"name": "d", "partitions": [0]}])),
    Scenario("AddOffsetsToTxn: a transactional id the ACLs deny", 25, lambda v, c: request(
        25, v, transactional_id="denied-tx", producer_id=1, producer_epoch=0, group_id="dg")),
    Scenario("EndTxn: a transactional id the ACLs deny", 26, lambda v, c: request(
        26, v, transactional_id="denied-tx", producer_id=1, producer_epoch=0, committed=True)),
    Scenario("TxnOffsetCommit: a transactional id the ACLs deny", 28, lambda v, c: request(
        28, v, transactional_id="denied-tx", group_id="dg", producer_id=1, producer_epoch=0, generation_id=-1,
        member_id="", group_instance_id=None, topics=[{"name": "d", "partitions": [{
            "partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": ""}]}])),
    Scenario("Metadata: a null topic name", 3, lambda v, c: request(
        3, v, topics=[{"name": None, "topic_id": uuid.UUID(int=0)}, {"name": "d", "topic_id": uuid.UUID(int=0)}],
        allow_auto_topic_creation=False), versions="all", since=10),
    Scenario("InitProducerId: an idempotent producer", 22, lambda v, c: request(
        22, v, transactional_id=None, transaction_timeout=60_000 * MS, producer_id=-1, producer_epoch=-1)),
    Scenario("InitProducerId: an idempotent producer's id and epoch", 22, lambda v, c: request(
        22, v, transactional_id=None, transaction_timeout=60_000 * MS, producer_id=1000, producer_epoch=5),
             since=3),
    Scenario("InitProducerId: an idempotent producer at the last epoch", 22, lambda v, c: request(
        22, v, transactional_id=None, transaction_timeout=60_000 * MS, producer_id=1000, producer_epoch=32767),
             since=3),
    Scenario("WriteTxnMarkers: a negative producer id", 27, lambda v, c: request(27, v, markers=[{
        "producer_id": -5, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
        "topics": [{"name": "d", "partition_indexes": [0]}]}])),
    Scenario("InitProducerId: an idempotent producer's id without an epoch", 22, lambda v, c: request(
        22, v, transactional_id=None, transaction_timeout=60_000 * MS, producer_id=1000, producer_epoch=-1),
             since=3),
    Scenario("WriteTxnMarkers: a negative producer id and epoch", 27, lambda v, c: request(27, v, markers=[{
        "producer_id": -5, "producer_epoch": -3, "transaction_result": False, "coordinator_epoch": 0,
        "topics": [{"name": "d", "partition_indexes": [0]}]}])),
    Scenario("WriteTxnMarkers: a negative producer epoch", 27, lambda v, c: request(27, v, markers=[{
        "producer_id": 5, "producer_epoch": -3, "transaction_result": False, "coordinator_epoch": 0,
        "topics": [{"name": "d", "partition_indexes": [0]}]}])),
    Scenario("Produce: transactional batches of an id the ACLs deny", 0, lambda v, c: dataclasses.replace(
        _produce(v, "d", 0, build_batch([(None, b"t")], producer_id=1, producer_epoch=0, base_sequence=0,
                                        is_transactional=True)), transactional_id="denied-tx")),
)


def _versions(scenario: Scenario, kafka: Side, insync: Side) -> list[int]:
    (k_min, k_max), (i_min, i_max) = kafka.versions[scenario.api_key], insync.versions[scenario.api_key]
    if scenario.name.startswith("ApiVersions: a version from the future"):
        return [FUTURE_VERSION]
    common = _buildable(scenario.api_key, max(k_min, i_min, scenario.since), min(k_max, i_max))
    return common if scenario.versions == "all" else common[-1:]


def _buildable(api_key: int, low: int, high: int) -> list[int]:
    """The versions from `low` to `high` the codec has a schema for (Kafka 4 still advertises Produce v0-v2, which
    it refuses, and kio has none)."""
    versions = []
    for version in range(low, high + 1):
        try:
            request_class(api_key, version)
        except Exception:  # kio's UnknownEntity: no schema for this version
            continue
        versions.append(version)
    return versions


def _compare(kafka: Side, insync: Side, broker: int | str, make: Callable[[Side], Any],
             wire_version: int | None = None) -> list[str]:
    """Both answers compared; `broker` a 1-based index, or a group whose coordinator each side asks."""
    answers = [_answer(side, broker, make, wire_version) for side in (kafka, insync)]
    return list(differences(*(masked(a) if a != CLOSED else a for a in answers)))


def _answer(side: Side, broker: int | str, make: Callable[[Side], Any], wire_version: int | None) -> Any:
    transient = TRANSIENT_ERRORS | {NOT_COORDINATOR} if isinstance(broker, str) else TRANSIENT_ERRORS
    answer: Any = CLOSED
    for _ in range(TRANSIENT_RETRIES):  # bounded: a coordinator still loading, or moving, is asked again
        target = side.coordinator(broker) if isinstance(broker, str) else broker
        answer = plain(side.connections[target - 1].send(make(side), wire_version))
        if not transient & set(_error_codes(answer)):
            break
        time.sleep(1.0)
    return answer


def _error_codes(value: Any) -> Iterator[int]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "error_code" and isinstance(item, int):
                yield item
            else:
                yield from _error_codes(item)
    elif isinstance(value, list):
        for item in value:
            yield from _error_codes(item)


def test_the_same_requests_get_the_same_answers(sides: tuple[Side, Side]) -> None:
    kafka, insync = sides
    rows: list[tuple[str, list[str]]] = []
    only = sorted(set(kafka.versions) ^ set(insync.versions))
    ranges = [f"{key}: kafka {kafka.versions.get(key)} insync {insync.versions.get(key)}"
              for key in sorted(set(kafka.versions) & set(insync.versions)) if kafka.versions[key] != insync.versions[key]]
    rows.append(("ApiVersions: the APIs advertised", [f"only one side: {only}"] if only else []))
    rows.append(("ApiVersions: the version ranges", ranges))
    for scenario in SCENARIOS:
        for version in _versions(scenario, kafka, insync):
            future = version == FUTURE_VERSION
            found = _compare(kafka, insync, scenario.broker,
                             lambda side, v=version, s=scenario: s.make(v, {"ids": side.ids}),
                             FUTURE_VERSION if future else None)
            rows.append((f"{scenario.name} (v{version})", found))
        time.sleep(scenario.settle_s)
    for key in sorted(set(kafka.versions) & set(insync.versions) - SWEEP_SKIPPED):
        low, high = max(kafka.versions[key][0], insync.versions[key][0]), min(kafka.versions[key][1],
                                                                              insync.versions[key][1])
        for version in _buildable(key, low, high):
            found = _compare(kafka, insync, "" if key in GROUP_APIS else 1,
                             lambda side, k=key, v=version: request(k, v))
            rows.append((f"empty request: api {key} v{version}", found))
    check_listed(rows, LISTED, REPORT, "Differential check")
