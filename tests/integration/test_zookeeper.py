"""`metadata.store=zookeeper` with a real ZooKeeper server: two controllers, one active and one standby, and
three brokers. Killing the active controller hands the cluster to the standby (topics, ISR changes and leader
elections keep working, nothing acknowledged is lost), and a paused controller that comes back after losing its
epoch stops instead of acting on stale metadata."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import FAST, events, wait_until
from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster
from insync.chaos.zookeeper import ZooKeeperServer
from insync.config import ConfigError

pytestmark = pytest.mark.timeout(240)

STANDBY = cluster.STANDBY_CONTROLLER_IDS_FROM + 1
CHROOT = "/insync-test"


@pytest.fixture
def zk_cluster(tmp_path: Path) -> Iterator[tuple[cluster.ClusterSpec, ZooKeeperServer]]:
    with ZooKeeperServer(tmp_path / "zookeeper", cluster.free_ports(1)[0]) as zk:
        spec = cluster.up(str(tmp_path / "cluster"), 3, 0, [
            *FAST, "metadata.store=zookeeper", f"zookeeper.connect={zk.connect(CHROOT)}",
            "zookeeper.session.timeout.ms=2000"], controllers=2)
        try:
            yield spec, zk
        finally:
            cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


def znode(zk: ZooKeeperServer, path: str) -> bytes | None:
    from kazoo.client import KazooClient

    client = KazooClient(zk.connect(CHROOT))
    client.start(timeout=10)
    try:
        return client.get(path)[0] if client.exists(path) else None
    finally:
        client.stop()
        client.close()


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(60) == 0


def consume_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        got.extend(m.value() for m in consumer.consume(num_messages=1000, timeout=0.5) if m.error() is None)
    consumer.close()
    return got


def leaders(bootstrap: str, topic: str) -> list[int]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
    return [p.leader for p in metadata.topics[topic].partitions.values()]


def created(spec: cluster.ClusterSpec, topic: str) -> bool:
    try:
        ensure_topic(spec.bootstrap, topic, 1, 3, {})
    except ConfigError as exc:
        assert "NOT_CONTROLLER" in str(exc), exc
        return False
    return True


def status_lines(spec: cluster.ClusterSpec) -> dict[int, str]:
    """`insync cluster status` lines by node id."""
    import contextlib
    import io

    from insync.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["cluster", "status", "--dir", spec.directory])
    return {int(line.split()[0]): line for line in out.getvalue().splitlines() if line.split()[0].isdigit()}


def controller_of(zk: ZooKeeperServer) -> int:
    data = znode(zk, "/controller")
    assert data is not None, "no active controller"
    return int(json.loads(data)["brokerid"])


def test_the_standby_takes_over_when_the_active_controller_dies(
        zk_cluster: tuple[cluster.ClusterSpec, ZooKeeperServer]) -> None:
    spec, zk = zk_cluster
    assert controller_of(zk) == cluster.CONTROLLER_ID and znode(zk, "/controller_epoch") == b"1"
    ensure_topic(spec.bootstrap, "before", 3, 3, {"min.insync.replicas": "2"})
    state = json.loads(znode(zk, "/brokers/topics/before/partitions/0/state") or b"{}")
    assert sorted(state["isr"]) == [1, 2, 3], "partition state is mirrored in Kafka's znodes"
    first = [f"before-{i}".encode() for i in range(300)]
    produce(spec.bootstrap, "before", first)

    assert status_lines(spec)[cluster.CONTROLLER_ID].endswith("running, active")
    assert status_lines(spec)[STANDBY].endswith("running, standby")
    cluster.signal_node(spec, cluster.CONTROLLER_ID, signal.SIGKILL)
    wait_until(lambda: znode(zk, "/controller") is not None and controller_of(zk) == STANDBY, 30,
               "the standby to win the election")
    wait_until(lambda: status_lines(spec)[STANDBY].endswith("running, active"), 10, "status to show the new one")
    assert znode(zk, "/controller_epoch") == b"2"
    elected = events(spec, STANDBY, "controller_elected")
    assert elected, "the standby logged its election"

    # The new controller serves everything: topic creation (forwarded by brokers), and a leader election.
    ensure_topic(spec.bootstrap, "after", 3, 3, {"min.insync.replicas": "2"})
    second = [f"after-{i}".encode() for i in range(300)]
    produce(spec.bootstrap, "after", second)
    victim = describe_rows(spec.bootstrap, ["before"])[0].leader
    cluster.signal_node(spec, victim, signal.SIGKILL)
    survivors = ",".join(b.address for b in spec.brokers if b.node_id != victim)
    wait_until(lambda: all(leader not in (victim, -1) for leader in leaders(survivors, "before")), 30,
               "the new controller to move leadership off the killed broker")
    assert sorted(consume_all(survivors, "before", 3, len(first))) == sorted(first)
    assert sorted(consume_all(survivors, "after", 3, len(second))) == sorted(second)


def test_a_paused_controller_that_lost_its_epoch_stops(zk_cluster: tuple[cluster.ClusterSpec, ZooKeeperServer]) -> None:
    spec, zk = zk_cluster
    active = spec.node(cluster.CONTROLLER_ID)
    assert active.pid is not None
    cluster.signal_node(spec, cluster.CONTROLLER_ID, signal.SIGSTOP)  # a long GC pause, as far as ZooKeeper knows
    try:
        wait_until(lambda: znode(zk, "/controller") is not None and controller_of(zk) == STANDBY, 30,
                   "the standby to win while the active controller is paused")
        # Brokers give up on the paused controller after a session's wait (NOT_CONTROLLER, which tools retry) and
        # move on to the standby.
        wait_until(lambda: created(spec, "while-paused"), 30, "a topic to be created by the new controller")
    finally:
        cluster.signal_node(spec, cluster.CONTROLLER_ID, signal.SIGCONT)
    wait_until(lambda: not cluster.pid_alive(active.pid), 30, "the paused controller to stop once resumed")
    server_log = (Path(active.directory) / "data" / "server.log").read_text()
    assert "is no longer the active controller" in server_log and "; stopping" in server_log
    assert controller_of(zk) == STANDBY and znode(zk, "/controller_epoch") == b"2"
    assert [r.leader >= 1 for r in describe_rows(spec.bootstrap, ["while-paused"])] == [True]


def test_a_controller_without_its_zookeeper_says_so_and_exits(tmp_path: Path) -> None:
    import subprocess
    import sys

    port = cluster.free_ports(1)[0]  # nothing listens there
    config = tmp_path / "server.properties"
    config.write_text(f"node.id=0\nprocess.roles=controller\ncontroller.listener=CONTROLLER://127.0.0.1:{port + 1}\n"
                      f"log.dirs={tmp_path / 'data'}\nmetadata.store=zookeeper\n"
                      f"zookeeper.connect=127.0.0.1:{port}/x\nzookeeper.session.timeout.ms=2000\n")
    done = subprocess.run([sys.executable, "-m", "insync.cli.main", "broker", "start", "--config", str(config)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 4, done.stderr
    assert "cannot use its metadata store" in done.stderr and f"127.0.0.1:{port}/x" in done.stderr
