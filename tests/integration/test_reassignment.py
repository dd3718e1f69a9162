"""Partition reassignment on real processes (issue 19), as kafka-reassign-partitions.sh drives it: kafka-python's
KafkaAdminClient alters and lists reassignments (confluent-kafka 2.16's Python AdminClient has neither call), and
confluent-kafka produces and reads the data.

- A partition moves from brokers [1,2,3] to [2,3,4] under an acks=all producer: broker 4 bootstraps from the
  leader outside the ISR, joins it, then broker 1 (the leader) leaves and its copy is deleted; every record the
  producer saw acknowledged is read back.
- A topic's replication factor goes from 1 to 3; both new replicas join the ISR.
- A reassignment to a stopped broker waits (listed, and shown by `insync topics describe` with its adding and
  removing replicas) until cancelled, which reverts it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import events, start, wait_until
from insync import admin_requests, errors
from insync.admin import describe_rows
from insync.chaos import cluster
from insync.chaos.cluster import ClusterSpec

pytestmark = pytest.mark.timeout(240)

PRODUCED_MAX = 200_000  # the producer thread's bound


@pytest.fixture(scope="module")
def four_brokers(tmp_path_factory: pytest.TempPathFactory) -> Any:
    spec = start(tmp_path_factory.mktemp("reassign"), brokers=4)
    try:
        yield spec
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


def create(spec: ClusterSpec, topic: str, replicas: list[int], configs: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": spec.bootstrap})
    new = NewTopic(topic, num_partitions=1, replica_assignment=[replicas], config=configs or {})
    admin.create_topics([new])[topic].result(timeout=15)
    wait_until(lambda: len(describe_rows(spec.bootstrap, [topic])[0].isr) == len(replicas), 30, f"{topic}'s ISR")


def reassign(spec: ClusterSpec, topic: str, replicas: list[int] | None) -> None:
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=spec.bootstrap.split(","))
    try:
        assert client.alter_partition_reassignments({TopicPartition(topic, 0): replicas}) == {
            TopicPartition(topic, 0): None}
    finally:
        client.close()


def ongoing(spec: ClusterSpec) -> dict[tuple[str, int], dict[str, list[int]]]:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=spec.bootstrap.split(","))
    try:
        return {(tp.topic, tp.partition): found for tp, found in client.list_partition_reassignments().items()}
    finally:
        client.close()


def brokers_in_metadata(spec: ClusterSpec) -> set[int]:
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    return set(AdminClient({"bootstrap.servers": spec.bootstrap}).list_topics(timeout=10).brokers)


def throttle_configs(spec: ClusterSpec, topic: str) -> dict[str, str]:
    from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

    resource = ConfigResource("topic", topic)
    admin = AdminClient({"bootstrap.servers": spec.bootstrap})  # referenced until its future is done
    entries = admin.describe_configs([resource])[resource].result(15)
    return {k: v.value or "" for k, v in entries.items() if k.endswith("replication.throttled.replicas")}


def settled(spec: ClusterSpec, topic: str, replicas: tuple[int, ...]) -> bool:
    row = describe_rows(spec.bootstrap, [topic])[0]
    return (row.replicas == replicas and set(row.isr) == set(replicas) and row.leader in replicas
            and (topic, 0) not in ongoing(spec))


class AckedProducer:
    """An acks=all producer writing numbered records on a thread; `acked` holds those the leader acknowledged."""

    def __init__(self, spec: ClusterSpec, topic: str) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": spec.bootstrap, "acks": "all", "linger.ms": 5,
                                  "message.timeout.ms": 60_000})
        self.topic = topic
        self.acked: set[int] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _acked(self, error: Any, message: Any) -> None:
        if error is None:
            self.acked.add(int(message.value()))

    def _run(self) -> None:
        for i in range(PRODUCED_MAX):
            if self.stop.is_set():
                break
            while True:
                try:
                    self.producer.produce(self.topic, str(i).encode(), partition=0, on_delivery=self._acked)
                    break
                except BufferError:
                    self.producer.poll(0.1)
            self.producer.poll(0.001)
        self.producer.flush(60)


def read_all(spec: ClusterSpec, topic: str) -> set[int]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": spec.bootstrap, "group.id": f"read-{topic}",
                         "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        seen: set[int] = set()
        read = 0
        for _ in range(10_000):  # bounded: each round reads a batch or waits a second
            if read >= high:
                break
            for message in consumer.consume(1000, timeout=1):
                if message.error() is None:
                    seen.add(int(message.value()))
                    read = message.offset() + 1
        assert read >= high, (read, high)
        return seen
    finally:
        consumer.close()


@pytest.mark.slow
def test_a_partition_moves_from_1_2_3_to_2_3_4_under_acks_all_with_nothing_lost(four_brokers: ClusterSpec) -> None:
    spec = four_brokers
    create(spec, "moving", [1, 2, 3], {"min.insync.replicas": "2"})
    producer = AckedProducer(spec, "moving")
    producer.thread.start()
    try:
        wait_until(lambda: len(producer.acked) >= 2000, 60, "records acknowledged before the move")
        reassign(spec, "moving", [2, 3, 4])
        wait_until(lambda: settled(spec, "moving", (2, 3, 4)), 90, "the move to brokers 2, 3, 4 completing")
        before = len(producer.acked)
        wait_until(lambda: len(producer.acked) >= before + 2000, 60, "records acknowledged after the move")
    finally:
        producer.stop.set()
        producer.thread.join(90)
    assert not producer.thread.is_alive()
    assert producer.acked <= read_all(spec, "moving")  # every acknowledged record is there
    moved = [e for e in events(spec, cluster.CONTROLLER_ID, "leader_change")
             if e["topic"] == "moving" and e["reason"] == "reassignment"]
    assert [(e["leader_before"], e["leader_after"]) for e in moved] == [(1, 2)]
    wait_until(lambda: not (spec.node(1).log_dir / "moving-0").exists(), 30, "broker 1 deleting its copy")
    assert (spec.node(4).log_dir / "moving-0").exists()


def test_the_replication_factor_grows_from_1_to_3(four_brokers: ClusterSpec) -> None:
    from confluent_kafka import Producer

    spec = four_brokers
    create(spec, "growing", [2])
    producer = Producer({"bootstrap.servers": spec.bootstrap, "acks": "all"})
    for i in range(500):
        producer.produce("growing", str(i).encode(), partition=0)
    assert producer.flush(30) == 0
    reassign(spec, "growing", [2, 3, 1])
    wait_until(lambda: settled(spec, "growing", (2, 3, 1)), 60, "replicas 2, 3, 1 all in the ISR")
    assert describe_rows(spec.bootstrap, ["growing"])[0].leader == 2
    assert read_all(spec, "growing") == set(range(500))


def test_a_reassignment_waiting_for_a_stopped_broker_is_listed_described_and_cancelled(
        four_brokers: ClusterSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from insync.cli.main import main

    spec = four_brokers
    create(spec, "waiting", [1, 2, 3])
    spec = cluster.stop_node(spec, 4, deadline_s=15)
    try:
        live = ",".join(b.address for b in spec.brokers if b.node_id != 4)
        error, _, outcomes = admin_requests.alter_partition_reassignments(
            live.split(",")[0], {("waiting", 0): [1, 2, 4]}, 15)
        assert (error, outcomes) == (errors.NONE, {("waiting", 0): (errors.NONE, None)})
        assert ongoing(spec)[("waiting", 0)] == {"replicas": [1, 2, 4, 3], "adding_replicas": [4],
                                                 "removing_replicas": [3]}
        capsys.readouterr()
        assert main(["topics", "describe", "waiting", "--bootstrap-server", live]) == 0
        out = capsys.readouterr().out
        assert "Replicas: 1,2,4,3\tIsr: 1,2,3\tAdding Replicas: 4\tRemoving Replicas: 3" in out
        assert "ReplicationFactor: 3" in out
        plan = tmp_path / "plan.json"
        plan.write_text('{"version":1,"partitions":[{"topic":"waiting","partition":0,"replicas":[1,2,4]}]}')
        tool = ["topics", "reassign", "--bootstrap-server", live, "--reassignment-json-file", str(plan)]
        assert main([*tool, "--verify"]) == 0
        assert "Reassignment of partition waiting-0 is still in progress." in capsys.readouterr().out
        assert main([*tool, "--execute"]) == 1  # another reassignment runs: --additional would be needed
        assert capsys.readouterr().out.startswith("Cannot execute because there is an existing partition assignment.")
        assert main(["topics", "reassign", "--list", "--bootstrap-server", live]) == 0
        assert capsys.readouterr().out == ("Current partition reassignments:\n"
                                           "waiting-0: replicas: 1,2,4,3. adding: 4. removing: 3.\n")
        reassign(spec, "waiting", None)
        wait_until(lambda: settled(spec, "waiting", (1, 2, 3)), 30, "the cancel reverting to 1, 2, 3")
        _, _, refused = admin_requests.alter_partition_reassignments(live.split(",")[0], {("waiting", 0): None}, 15)
        assert refused == {("waiting", 0): (errors.BY_NAME["NO_REASSIGNMENT_IN_PROGRESS"],
                                            "No partition reassignment is in progress.")}
        assert main([*tool, "--cancel", "--preserve-throttles"]) == 0
        assert capsys.readouterr().out == "None of the specified partition reassignments are active.\n"
    finally:
        spec = cluster.start_node(spec, 4)
        wait_until(lambda: len(brokers_in_metadata(spec)) == 4, 30, "broker 4 back in the cluster's metadata")


def test_the_reassign_tool_generates_executes_and_verifies_a_plan(four_brokers: ClusterSpec, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    from insync.cli.main import main

    spec = four_brokers
    admin = AdminClient({"bootstrap.servers": spec.bootstrap})
    admin.create_topics([NewTopic("tool", num_partitions=2, replica_assignment=[[1, 2], [2, 1]])])["tool"].result(15)
    wait_until(lambda: all(len(r.isr) == 2 for r in describe_rows(spec.bootstrap, ["tool"])), 30, "full ISRs")
    topics = tmp_path / "topics.json"
    topics.write_text('{"version":1,"topics":[{"topic":"tool"}]}')
    tool = ["topics", "reassign", "--bootstrap-server", spec.bootstrap]
    capsys.readouterr()
    assert main([*tool, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "3,4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1])["partitions"][0] == {"topic": "tool", "partition": 0, "replicas": [1, 2],
                                                     "log_dirs": ["any", "any"]}
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])
    assert {tuple(sorted(p["replicas"])) for p in proposed["partitions"]} == {(3, 4)}
    plan = tmp_path / "plan.json"
    plan.write_text(lines[4])
    assert main([*tool, "--execute", "--reassignment-json-file", str(plan), "--throttle", "50000000"]) == 0
    out = capsys.readouterr().out
    assert "Save this to use as the --reassignment-json-file option during rollback" in out
    assert "Warning: You must run --verify periodically" in out
    assert "The inter-broker throttle limit was set to 50000000 B/s" in out
    assert out.endswith("Successfully started partition reassignments for tool-0,tool-1\n")
    assert throttle_configs(spec, "tool")["leader.replication.throttled.replicas"] == "0:1,0:2,1:1,1:2"

    def verified() -> bool:
        assert main([*tool, "--verify", "--reassignment-json-file", str(plan)]) == 0
        return capsys.readouterr().out.count("is completed.") == 2

    wait_until(verified, 60, "both reassignments completed")
    assert throttle_configs(spec, "tool") == {"leader.replication.throttled.replicas": "",
                                              "follower.replication.throttled.replicas": ""}  # cleared by --verify
    assert {r.replicas for r in describe_rows(spec.bootstrap, ["tool"])} == {
        tuple(p["replicas"]) for p in proposed["partitions"]}
    assert main([*tool, "--list"]) == 0
    assert capsys.readouterr().out == "No partition reassignments found.\n"


def test_the_reassign_tool_refuses_unknown_brokers_and_partitions_before_asking(
        four_brokers: ClusterSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from insync.cli.main import main

    spec = four_brokers
    create(spec, "checked", [1])
    plan = tmp_path / "plan.json"
    tool = ["topics", "reassign", "--execute", "--reassignment-json-file", str(plan), "--bootstrap-server",
            spec.bootstrap]
    plan.write_text('{"version":1,"partitions":[{"topic":"checked","partition":0,"replicas":[1,9]}]}')
    capsys.readouterr()
    assert main(tool) == 1
    assert capsys.readouterr().err == "insync: error: Unknown broker id 9\n"
    plan.write_text('{"version":1,"partitions":[{"topic":"checked","partition":3,"replicas":[1]},'
                    '{"topic":"nowhere","partition":0,"replicas":[2]}]}')
    assert main(tool) == 1
    assert capsys.readouterr().err == "insync: error: Unable to find partition: checked-3, nowhere-0\n"
    assert (("checked", 0) not in ongoing(spec)) and describe_rows(spec.bootstrap, ["checked"])[0].replicas == (1,)


def test_a_leader_throttle_holds_a_reassignment_back_until_lifted_while_acks_all_goes_on(
        four_brokers: ClusterSpec) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    spec = four_brokers
    create(spec, "throttled", [1], {"leader.replication.throttled.replicas": "*"})
    producer = Producer({"bootstrap.servers": spec.bootstrap, "acks": "all", "linger.ms": 20})
    for i in range(3000):  # about 3 MB: more than one follower fetch (replica.fetch.max.bytes, 1 MiB) carries
        producer.produce("throttled", str(i).encode().ljust(1000, b"."), partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0
    admin = AdminClient({"bootstrap.servers": spec.bootstrap})
    rate = ConfigEntry("leader.replication.throttled.rate", "10000",
                       incremental_operation=AlterConfigOpType.SET)
    admin.incremental_alter_configs([ConfigResource("broker", "1", incremental_configs=[rate])])[
        ConfigResource("broker", "1")].result(timeout=15)
    reassign(spec, "throttled", [1, 2])
    wait_until(lambda: (spec.node(2).log_dir / "throttled-0").exists(), 30, "broker 2 starting its copy")
    for i in range(100):  # acks=all needs only the ISR, which the copying replica is not in
        producer.produce("throttled", f"late-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    assert ("throttled", 0) in ongoing(spec)  # 10 kB/s holds back the rest of the 3 MB
    assert 2 not in describe_rows(spec.bootstrap, ["throttled"])[0].isr
    lift = ConfigEntry("leader.replication.throttled.rate", None, incremental_operation=AlterConfigOpType.DELETE)
    admin.incremental_alter_configs([ConfigResource("broker", "1", incremental_configs=[lift])])[
        ConfigResource("broker", "1")].result(timeout=15)
    wait_until(lambda: settled(spec, "throttled", (1, 2)), 60, "the reassignment completing once the throttle is lifted")
