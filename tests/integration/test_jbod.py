"""Several log dirs per broker (JBOD) on a real broker, through kafka-python's admin client: DescribeLogDirs answers
each dir, and AlterReplicaLogDirs moves a partition to the other dir while an acks=all producer writes to it; every
acknowledged record is read back from the new dir alone, also after the broker is killed (SIGKILL) mid-move."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import start, wait_until
from insync.admin import ensure_topic
from insync.chaos import cluster
from insync.chaos.cluster import ClusterSpec

pytestmark = pytest.mark.timeout(240)

RATE_BYTES_PER_S = 100_000  # slow enough that a move of a few hundred KB is seen in progress
VALUE = b"x" * 1000


@pytest.fixture(scope="module")
def jbod_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSpec]:
    spec = start(tmp_path_factory.mktemp("jbod"), brokers=1,
                 extra=["log.dirs=data,data2", f"replica.alter.log.dirs.io.max.bytes.per.second={RATE_BYTES_PER_S}"])
    try:
        yield spec
    finally:
        cluster.down(ClusterSpec.load(spec.directory), 10.0)


def dirs(spec: ClusterSpec) -> tuple[str, str]:
    node = Path(spec.brokers[0].directory)
    return str((node / "data").absolute()), str((node / "data2").absolute())


def admin(spec: ClusterSpec):  # type: ignore[no-untyped-def]
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=spec.bootstrap.split(","), request_timeout_ms=15_000)


def placed(spec: ClusterSpec, topic: str) -> dict[str, list[tuple[str, bool]]]:
    """Each log dir -> the (partition, is_future) of `topic` DescribeLogDirs lists in it."""
    client = admin(spec)
    try:
        (answer,) = client.describe_log_dirs()
    finally:
        client.close()
    return {d["log_dir"]: [(f"{t['name']}-{p['partition_index']}", p["is_future_key"])
                           for t in d["topics"] if t["name"] == topic for p in t["partitions"]]
            for d in answer["log_dirs"] if d["error_code"] == 0}


def move(spec: ClusterSpec, topic: str, destination: str) -> None:
    from kafka import TopicPartitionReplica
    from kafka.errors import NoError

    client = admin(spec)
    try:
        replica = TopicPartitionReplica(topic, 0, spec.brokers[0].node_id)
        assert client.alter_replica_log_dirs({replica: destination}) == {replica: NoError}
    finally:
        client.close()


class Producing:
    """An acks=all producer writing numbered records until stopped; `acked` holds the numbers acknowledged."""

    def __init__(self, spec: ClusterSpec, topic: str) -> None:
        from kafka import KafkaProducer

        self.acked: set[int] = set()
        self._stop = threading.Event()
        self._producer = KafkaProducer(bootstrap_servers=spec.bootstrap.split(","), acks="all", linger_ms=5,
                                       retries=2**31 - 1, request_timeout_ms=10_000)
        self._topic = topic
        self._thread = threading.Thread(target=self._run, daemon=True)

    def send(self, count: int) -> None:
        for number in range(count):
            self._producer.send(self._topic, value=b"%d:" % number + VALUE, partition=0).get(timeout=30)
            self.acked.add(number)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        number = 10**6
        while not self._stop.is_set() and number < 10**6 + 100_000:
            future = self._producer.send(self._topic, value=b"%d:" % number + VALUE, partition=0)
            try:
                future.get(timeout=30)
                self.acked.add(number)
            except Exception:  # noqa: BLE001 - a record not acknowledged is simply not counted
                pass
            number += 1
            time.sleep(0.02)  # under the throttle: a copy slower than the appends never catches up, as in Kafka

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(60)
        self._producer.close(10)


def read_back(spec: ClusterSpec, topic: str) -> set[int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=spec.bootstrap.split(","), enable_auto_commit=False,
                             consumer_timeout_ms=5_000, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(topic, 0)])
        return {int(message.value.split(b":", 1)[0]) for message in consumer}
    finally:
        consumer.close()


def partition_dirs(spec: ClusterSpec, topic: str) -> list[str]:
    node = Path(spec.brokers[0].directory)
    return sorted(f"{d.parent.name}/{d.name}" for d in node.glob(f"data*/{topic}-0*"))


def test_a_move_under_acks_all_load_keeps_every_acknowledged_record(jbod_cluster: ClusterSpec) -> None:
    spec, topic = jbod_cluster, "jbod-move"
    first, second = dirs(spec)
    ensure_topic(spec.bootstrap, topic, 1, 1, {})
    producing = Producing(spec, topic)
    producing.send(400)  # 400 KB: four seconds of copying at the throttle
    assert placed(spec, topic) == {first: [(f"{topic}-0", False)], second: []}
    producing.start()
    move(spec, topic, second)
    wait_until(lambda: placed(spec, topic)[second] == [(f"{topic}-0", True)], 10, "the future copy listed")
    wait_until(lambda: placed(spec, topic) == {first: [], second: [(f"{topic}-0", False)]}, 60, "the move done")
    producing.stop()
    assert partition_dirs(spec, topic) == [f"data2/{topic}-0"]
    assert len(producing.acked) > 400 and producing.acked <= read_back(spec, topic)


def test_a_broker_killed_mid_move_serves_one_copy_and_finishes_it(jbod_cluster: ClusterSpec) -> None:
    spec, topic = jbod_cluster, "jbod-kill"
    first, second = dirs(spec)
    ensure_topic(spec.bootstrap, topic, 1, 1, {})
    producing = Producing(spec, topic)
    producing.send(600)
    producing.stop()
    move(spec, topic, second)
    wait_until(lambda: any(n.endswith("-future") for n in partition_dirs(spec, topic)), 10, "the copy started")
    node_id = spec.brokers[0].node_id
    spec = cluster.stop_node(spec, node_id, deadline_s=0, sig=signal.SIGKILL)
    leftovers = partition_dirs(spec, topic)
    assert f"data/{topic}-0" in leftovers and any(n.startswith("data2/") for n in leftovers), leftovers
    spec = cluster.start_node(spec, node_id)
    cluster.wait_listening(spec.brokers[0])
    wait_until(lambda: placed(spec, topic) == {first: [], second: [(f"{topic}-0", False)]}, 60, "the move resumed")
    assert partition_dirs(spec, topic) == [f"data2/{topic}-0"]
    assert set(range(600)) <= read_back(spec, topic)
