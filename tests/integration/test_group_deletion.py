"""DeleteGroups and OffsetDelete against a 3-broker insync cluster, through confluent-kafka's and kafka-python's
admin clients: an Empty group goes with its offsets, an active one is refused NON_EMPTY_GROUP, an unknown one
GROUP_ID_NOT_FOUND; a consumer group's offsets go for the topics it does not subscribe to and are refused
GROUP_SUBSCRIBED_TO_TOPIC for those it does; a broker that does not coordinate the group answers NOT_COORDINATOR.
Deletions are tombstones in `__consumer_offsets`: a coordinator that replays the partition does not bring them back.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import start, wait_until
from insync import admin_requests
from insync.admin import ensure_topic
from insync.chaos import cluster
from insync.groups.offsets import partition_for
from insync.protocol.kio import build, nested, request_class
from insync.types import OFFSETS_TOPIC

pytestmark = pytest.mark.timeout(240)

OFFSETS_PARTITIONS = 10
CONFIG = ["group.initial.rebalance.delay.ms=200", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}"]


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    started = start(tmp_path_factory.mktemp("group-deletion"), 3, CONFIG)
    try:
        for topic in ("subscribed", "other"):
            ensure_topic(started.bootstrap, topic, 2, 3, {})
        yield started
    finally:
        cluster.down(cluster.ClusterSpec.load(started.directory), 10.0)


def consumer(bootstrap: str, group_id: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})


def tp(topic: str, partition: int, offset: int = -1001) -> Any:
    from confluent_kafka import TopicPartition

    return TopicPartition(topic, partition, offset)


def commit_and_leave(bootstrap: str, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
    """Offsets committed without joining (a simple consumer group, Empty), as `assign()` users do."""
    c = consumer(bootstrap, group_id)
    c.commit(offsets=[tp(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    c.close()


def active_member(bootstrap: str, group_id: str, topic: str) -> Any:
    """A subscribed member of a Stable group."""
    c = consumer(bootstrap, group_id)
    c.subscribe([topic])
    wait_until(lambda: c.poll(0.2) is None and bool(c.assignment()), 60, f"{group_id} to be assigned {topic}")
    return c


def committed(admin: Any, group_id: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)])[group_id].result(timeout=20)
    return {(t.topic, t.partition): t.offset for t in result.topic_partitions if t.offset >= 0}


def error_name(future: Any) -> str:
    try:
        future.result(timeout=30)
    except Exception as exc:
        return str(exc.args[0].name())
    return "NONE"


def test_delete_groups_with_confluent_kafka(spec: cluster.ClusterSpec) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": spec.bootstrap})
    commit_and_leave(spec.bootstrap, "idle", {("other", 0): 5, ("other", 1): 7})
    busy = active_member(spec.bootstrap, "busy", "subscribed")
    assert committed(admin, "idle") == {("other", 0): 5, ("other", 1): 7}
    futures = admin.delete_consumer_groups(["idle", "busy", "never-seen"], request_timeout=30)
    assert {g: error_name(f) for g, f in futures.items()} == {
        "idle": "NONE", "busy": "NON_EMPTY_GROUP", "never-seen": "GROUP_ID_NOT_FOUND"}
    assert committed(admin, "idle") == {}
    listed = {g.group_id for g in admin.list_consumer_groups().result(timeout=20).valid}
    assert "idle" not in listed and "busy" in listed
    busy.close()  # the last member leaves: the group is Empty and can go
    assert error_name(admin.delete_consumer_groups(["busy"], request_timeout=30)["busy"]) == "NONE"
    assert error_name(admin.delete_consumer_groups(["busy"], request_timeout=30)["busy"]) == "GROUP_ID_NOT_FOUND"


def test_delete_groups_and_offsets_with_kafka_python(spec: cluster.ClusterSpec) -> None:
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupIdNotFoundError, NoError

    admin = KafkaAdminClient(bootstrap_servers=spec.bootstrap, request_timeout_ms=30_000)
    try:
        commit_and_leave(spec.bootstrap, "kp-idle", {("other", 0): 3})
        assert dict(admin.delete_groups(["kp-idle", "kp-never"])) == {
            "kp-idle": "OK", "kp-never": "GroupIdNotFoundError"}
        member = active_member(spec.bootstrap, "kp-active", "subscribed")
        member.commit(offsets=[tp("subscribed", 0, 1), tp("other", 0, 2), tp("other", 1, 4)], asynchronous=False)
        answer = admin.delete_group_offsets("kp-active", [TopicPartition("subscribed", 0), TopicPartition("other", 0),
                                                          TopicPartition("no-such-topic", 0)])
        assert {(t.topic, t.partition): e.__name__ for t, e in answer.items()} == {
            ("subscribed", 0): "GroupSubscribedToTopicError", ("other", 0): "NoError",
            ("no-such-topic", 0): "UnknownTopicOrPartitionError"}
        offsets = admin.list_group_offsets({"kp-active": None})["kp-active"]
        assert {(t.topic, t.partition): o.offset for t, o in offsets.items()} == {("subscribed", 0): 1, ("other", 1): 4}
        member.close()
        answer = admin.delete_group_offsets("kp-active", [TopicPartition("subscribed", 0)])
        assert {t.partition: e for t, e in answer.items()} == {0: NoError}
        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets("kp-never", [TopicPartition("other", 0)])
    finally:
        admin.close()


def _raw(address: str, api_key: int, version: int, **fields: Any) -> Any:
    return admin_requests.request(address, build(request_class(api_key, version), **fields), 15)


def test_a_broker_that_does_not_coordinate_the_group_answers_not_coordinator(spec: cluster.ClusterSpec) -> None:
    from confluent_kafka.admin import AdminClient

    commit_and_leave(spec.bootstrap, "elsewhere", {("other", 0): 1})
    topic = AdminClient({"bootstrap.servers": spec.bootstrap}).list_topics(OFFSETS_TOPIC, timeout=20).topics[
        OFFSETS_TOPIC]
    leader = topic.partitions[partition_for("elsewhere", OFFSETS_PARTITIONS)].leader
    address = next(b.address for b in spec.brokers if b.node_id != leader)
    answer = _raw(address, 42, 2, groups_names=("elsewhere", ""))
    assert [(r.group_id, int(r.error_code)) for r in answer.results] == [("elsewhere", 16), ("", 24)]
    offset_delete = request_class(47, 0)
    topics = (build(nested(offset_delete, "OffsetDeleteRequestTopic"), name="other", partitions=(
        build(nested(offset_delete, "OffsetDeleteRequestPartition"), partition_index=0),)),)
    assert int(_raw(address, 47, 0, group_id="elsewhere", topics=topics).error_code) == 16
    assert int(_raw(address, 47, 0, group_id="", topics=topics).error_code) == 24


def test_deleted_offsets_stay_deleted_when_a_new_coordinator_replays_the_partition(spec: cluster.ClusterSpec) -> None:
    """Last in the module: it leaves the old coordinator down."""
    from confluent_kafka.admin import AdminClient
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    admin = AdminClient({"bootstrap.servers": spec.bootstrap})
    partition = partition_for("replayed", OFFSETS_PARTITIONS)
    partly = next(g for g in (f"partly-{i}" for i in range(1000)) if partition_for(g, OFFSETS_PARTITIONS) == partition)
    commit_and_leave(spec.bootstrap, "replayed", {("other", 0): 9, ("other", 1): 8})
    commit_and_leave(spec.bootstrap, partly, {("other", 0): 5, ("other", 1): 6})
    assert error_name(admin.delete_consumer_groups(["replayed"], request_timeout=30)["replayed"]) == "NONE"
    kp = KafkaAdminClient(bootstrap_servers=spec.bootstrap, request_timeout_ms=30_000)
    try:
        assert [e.__name__ for e in kp.delete_group_offsets(partly, [TopicPartition("other", 0)]).values()] == [
            "NoError"]
    finally:
        kp.close()
    coordinator = admin.list_topics(OFFSETS_TOPIC, timeout=20).topics[OFFSETS_TOPIC].partitions[partition].leader
    cluster.signal_node(spec, coordinator, signal.SIGKILL)
    survivor = AdminClient({"bootstrap.servers": ",".join(b.address for b in spec.brokers
                                                          if b.node_id != coordinator)})

    def replayed() -> bool:
        try:
            return committed(survivor, partly) == {("other", 1): 6} and committed(survivor, "replayed") == {}
        except Exception:  # noqa: BLE001 - the coordinator is moving: ask again
            return False

    wait_until(replayed, 60, "the new coordinator to replay the partition without the deleted offsets")
