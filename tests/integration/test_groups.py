"""Consumer groups with real, unmodified clients against a 3-broker insync cluster: subscribe() consumers
share a topic's partitions and read every message once, committed offsets are where the next member of the group
resumes, confluent-kafka, kafka-python, aiokafka and kcat all join groups, the admin client lists and describes
them, and a group's committed offsets and its members survive its coordinator being killed (they are replicated
records of `__consumer_offsets`)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import running, start, wait_until
from insync.admin import ensure_topic
from insync.chaos import cluster
from insync.groups.offsets import partition_for
from insync.types import OFFSETS_TOPIC

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 4
# A quick first rebalance and a short session keep the test short; the protocol is the same as with Kafka's defaults.
GROUP_CONFIG = ["group.initial.rebalance.delay.ms=200", "offsets.topic.num.partitions=10"]


@pytest.fixture(scope="module")
def groups_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    with running(tmp_path_factory.mktemp("groups"), 3, GROUP_CONFIG) as spec:
        yield spec


def restart(spec: cluster.ClusterSpec, node_id: int) -> None:
    """Start a killed broker again and wait until it is registered: later tests create topics with 3 replicas."""
    spec = cluster.start_node(cluster.ClusterSpec.load(spec.directory), node_id)
    cluster.wait_listening(spec.node(node_id))
    cluster.wait_registered(spec, 60)


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def new_topic(spec: cluster.ClusterSpec, topic: str, count: int) -> list[bytes]:
    ensure_topic(spec.bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    values = [f"{topic}-{i}".encode() for i in range(count)]
    if values:
        produce(spec.bootstrap, topic, values)
    return values


def confluent_consumer(bootstrap: str, group_id: str, **extra: object) -> object:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                     **extra})


def drain(consumers: list[object], want: int, deadline_s: float) -> dict[int, list[bytes]]:
    """Poll every consumer in turn until `want` messages in all arrived; messages by consumer index."""
    got: dict[int, list[bytes]] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + deadline_s
    while sum(map(len, got.values())) < want and time.monotonic() < deadline:
        for i, consumer in enumerate(consumers):
            for message in consumer.consume(num_messages=500, timeout=0.2):  # type: ignore[attr-defined]
                assert message.error() is None, message.error()
                got[i].append(message.value())
    return got


def test_two_subscribers_share_the_partitions_and_a_new_member_resumes_from_the_commits(
        groups_cluster: cluster.ClusterSpec) -> None:
    new_topic(groups_cluster, "shared", 0)
    first = confluent_consumer(groups_cluster.bootstrap, "sharers")
    second = confluent_consumer(groups_cluster.bootstrap, "sharers")
    for consumer in (first, second):
        consumer.subscribe(["shared"])  # type: ignore[attr-defined]
    assignments: list[set[int]] = []

    def split() -> bool:  # both members joined the same generation: the topic is shared out between them
        nonlocal assignments
        assert not any(drain([first, second], 1, 0.2).values()), "the topic is still empty"
        assignments = [{tp.partition for tp in c.assignment()} for c in (first, second)]  # type: ignore[attr-defined]
        return all(assignments) and sum(map(len, assignments)) == PARTITIONS

    wait_until(split, 60, "both members to get partitions")
    assert not assignments[0] & assignments[1] and assignments[0] | assignments[1] == set(range(PARTITIONS))
    values = [f"shared-{i}".encode() for i in range(2000)]
    produce(groups_cluster.bootstrap, "shared", values)
    got = drain([first, second], len(values), 90)
    assert sorted(got[0] + got[1]) == sorted(values), "every message exactly once across the group"
    assert got[0] and got[1], "both members read their share"
    for consumer in (first, second):
        consumer.commit(asynchronous=False)  # type: ignore[attr-defined]
        consumer.close()  # type: ignore[attr-defined]
    more = [f"shared-late-{i}".encode() for i in range(100)]
    produce(groups_cluster.bootstrap, "shared", more)
    third = confluent_consumer(groups_cluster.bootstrap, "sharers")
    third.subscribe(["shared"])  # type: ignore[attr-defined]
    resumed = drain([third], len(more), 60)[0]
    assert sorted(resumed) == sorted(more), "the group resumes where its members committed"
    committed = third.committed([_tp("shared", p) for p in range(PARTITIONS)], timeout=10)  # type: ignore[attr-defined]
    assert sum(tp.offset for tp in committed) == len(values)
    third.close()  # type: ignore[attr-defined]


def _tp(topic: str, partition: int) -> object:
    from confluent_kafka import TopicPartition

    return TopicPartition(topic, partition)


def test_admin_lists_and_describes_groups(groups_cluster: cluster.ClusterSpec) -> None:
    from confluent_kafka.admin import AdminClient

    new_topic(groups_cluster, "described", 40)
    consumer = confluent_consumer(groups_cluster.bootstrap, "described-group", **{"client.id": "me"})
    consumer.subscribe(["described"])  # type: ignore[attr-defined]
    assert len(drain([consumer], 40, 60)[0]) == 40
    admin = AdminClient({"bootstrap.servers": groups_cluster.bootstrap})
    listed = admin.list_consumer_groups().result(timeout=20)
    assert "described-group" in {g.group_id for g in listed.valid}
    description = admin.describe_consumer_groups(["described-group"])["described-group"].result(timeout=20)
    assert str(description.state).endswith("STABLE")
    (member,) = description.members
    assert member.client_id == "me" and member.host == "/127.0.0.1"
    assert {tp.partition for tp in member.assignment.topic_partitions} == set(range(PARTITIONS))
    consumer.close()  # type: ignore[attr-defined]


def test_kafka_python_group_commits_and_reads_back(groups_cluster: cluster.ClusterSpec) -> None:
    from kafka import KafkaConsumer, TopicPartition

    values = new_topic(groups_cluster, "kpg", 300)
    consumer = KafkaConsumer("kpg", bootstrap_servers=groups_cluster.bootstrap.split(","), group_id="kpg-group",
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=20_000)
    got = []
    for message in consumer:
        got.append(message.value)
        if len(got) == len(values):
            break
    assert sorted(got) == sorted(values)
    consumer.commit()
    assert sum(consumer.committed(TopicPartition("kpg", p)) or 0 for p in range(PARTITIONS)) == len(values)
    consumer.close()


def test_aiokafka_group_consumes_and_commits(groups_cluster: cluster.ClusterSpec) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    values = new_topic(groups_cluster, "aio", 300)

    async def run() -> tuple[list[bytes], int]:
        consumer = AIOKafkaConsumer("aio", bootstrap_servers=groups_cluster.bootstrap, group_id="aio-group",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            got: list[bytes] = []
            async with asyncio.timeout(60):
                while len(got) < len(values):
                    batches = await consumer.getmany(timeout_ms=500)
                    got.extend(m.value for messages in batches.values() for m in messages)
            await consumer.commit()
            committed = [await consumer.committed(TopicPartition("aio", p)) for p in range(PARTITIONS)]
            return got, sum(c or 0 for c in committed)
        finally:
            await consumer.stop()

    got, committed = asyncio.run(run())
    assert sorted(got) == sorted(values) and committed == len(values)


def test_kcat_balanced_consumer(groups_cluster: cluster.ClusterSpec) -> None:
    values = new_topic(groups_cluster, "kcg", 200)
    consumed = subprocess.run(["kcat", "-b", groups_cluster.bootstrap, "-G", "kcat-group", "kcg", "-o", "beginning",
                               "-c", str(len(values)), "-f", "%s\n", "-X", "topic.auto.offset.reset=earliest"],
                              capture_output=True, timeout=90, check=True)
    assert sorted(consumed.stdout.split()) == sorted(values)


def test_committed_offsets_survive_a_sigkill_of_the_coordinator(groups_cluster: cluster.ClusterSpec) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    spec = cluster.ClusterSpec.load(groups_cluster.directory)  # the pids of brokers other tests restarted
    new_topic(spec, "durable", 40)
    group_id = "durable-group"
    consumer = confluent_consumer(spec.bootstrap, group_id)
    consumer.commit(offsets=[TopicPartition("durable", p, 7 + p) for p in range(PARTITIONS)],  # type: ignore[attr-defined]
                    asynchronous=False)
    consumer.close()  # type: ignore[attr-defined]
    partition = partition_for(group_id, 10)
    metadata = AdminClient({"bootstrap.servers": spec.bootstrap}).list_topics(OFFSETS_TOPIC, timeout=10)
    coordinator = metadata.topics[OFFSETS_TOPIC].partitions[partition].leader
    cluster.signal_node(spec, coordinator, signal.SIGKILL)
    try:
        survivor = next(b for b in spec.brokers if b.node_id != coordinator)
        reader = confluent_consumer(f"127.0.0.1:{survivor.port}", group_id)
        committed: list[object] = []

        def read_committed() -> bool:
            nonlocal committed
            try:
                committed = reader.committed([TopicPartition("durable", p) for p in range(PARTITIONS)],  # type: ignore[attr-defined]
                                             timeout=5)
            except Exception:  # noqa: BLE001 - the coordinator is moving: ask again
                return False
            return [tp.offset for tp in committed] == [7 + p for p in range(PARTITIONS)]  # type: ignore[attr-defined]

        wait_until(read_committed, 60, "the new coordinator to serve the committed offsets")
        reader.close()  # type: ignore[attr-defined]
    finally:
        restart(spec, coordinator)


def test_a_member_carries_on_with_its_generation_when_the_coordinator_is_killed(
        groups_cluster: cluster.ClusterSpec) -> None:
    """The rebalance's end is a record of the group's partition, as in Kafka: the next coordinator knows the member,
    so a commit in the old generation passes and the member keeps its id (a rejoin would have a new one)."""
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    spec = cluster.ClusterSpec.load(groups_cluster.directory)  # the pids of brokers other tests restarted
    new_topic(spec, "carry-on", 8)
    group_id = "carry-on-group"
    consumer = KafkaConsumer("carry-on", bootstrap_servers=spec.bootstrap.split(","), group_id=group_id,
                             auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=10_000,
                             heartbeat_interval_ms=1_000)

    def members() -> tuple[str, list[str]]:
        # A fresh client each time: librdkafka caches a group's coordinator, and the cached one is the killed broker.
        admin = AdminClient({"bootstrap.servers": spec.bootstrap})
        description = admin.describe_consumer_groups([group_id])[group_id].result(timeout=10)
        return str(description.state), sorted(m.member_id for m in description.members)

    try:
        wait_until(lambda: bool(consumer.poll(timeout_ms=500) is not None and consumer.assignment()), 60,
                   "the consumer's assignment")
        state, before = members()
        assert len(before) == 1, (state, before)
        partition = partition_for(group_id, 10)
        metadata = AdminClient({"bootstrap.servers": spec.bootstrap}).list_topics(OFFSETS_TOPIC, timeout=10)
        coordinator = metadata.topics[OFFSETS_TOPIC].partitions[partition].leader
        cluster.signal_node(spec, coordinator, signal.SIGKILL)
        try:
            consumer.commit({TopicPartition("carry-on", 0): OffsetAndMetadata(1, "", -1)})  # retries NOT_COORDINATOR
            assert consumer.committed(TopicPartition("carry-on", 0)) == 1
            state, after = members()
            assert (state.rsplit(".", 1)[-1], after) == ("STABLE", before)
        finally:
            restart(spec, coordinator)
    finally:
        consumer.close()


def test_bad_group_requests_get_kafkas_errors(groups_cluster: cluster.ClusterSpec) -> None:
    from confluent_kafka import KafkaException

    consumer = confluent_consumer(groups_cluster.bootstrap, "bad-timeout", **{"session.timeout.ms": 1000})
    consumer.subscribe(["shared"])  # type: ignore[attr-defined]
    errors: list[str] = []
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        try:
            for message in consumer.consume(timeout=0.5):  # type: ignore[attr-defined]
                if message.error() is not None:
                    errors.append(message.error().name())
        except KafkaException as exc:
            errors.append(exc.args[0].name())
    consumer.close()  # type: ignore[attr-defined]
    assert "INVALID_SESSION_TIMEOUT" in errors, errors



def test_bad_commits_are_refused_per_partition(groups_cluster: cluster.ClusterSpec) -> None:
    from confluent_kafka import KafkaException, TopicPartition

    new_topic(groups_cluster, "commits", 0)
    consumer = confluent_consumer(groups_cluster.bootstrap, "bad-commits")

    def refusal(offsets: list[TopicPartition]) -> str:
        """The error librdkafka reports for a synchronous commit (it raises the first partition error)."""
        try:
            answered = consumer.commit(offsets=offsets, asynchronous=False)  # type: ignore[attr-defined]
        except KafkaException as exc:
            return str(exc.args[0].name())
        return ",".join(tp.error.name() for tp in answered if tp.error) or "NONE"

    assert refusal([TopicPartition("commits", 0, 5, "m" * 5000), TopicPartition("commits", 1, 6, "fine")]) == \
        "OFFSET_METADATA_TOO_LARGE"
    assert refusal([TopicPartition("no-such-topic", 0, 1)]) == "UNKNOWN_TOPIC_OR_PART"
    committed = consumer.committed([TopicPartition("commits", p) for p in (0, 1)], timeout=10)  # type: ignore[attr-defined]
    assert [(tp.offset, tp.metadata) for tp in committed] == [(-1001, None), (6, "fine")], \
        "the valid partition is committed, the refused one not"
    consumer.close()  # type: ignore[attr-defined]


def test_too_few_brokers_for_the_offsets_topic_says_which_setting(tmp_path: Path) -> None:
    from confluent_kafka import KafkaException, TopicPartition
    spec = start(tmp_path, 1, [*GROUP_CONFIG, "offsets.topic.replication.factor=3"])
    try:
        consumer = confluent_consumer(spec.bootstrap, "lonely")
        with pytest.raises(KafkaException):
            consumer.committed([TopicPartition("nothing", 0)], timeout=3)  # type: ignore[attr-defined]
        consumer.close()  # type: ignore[attr-defined]
        server_log = spec.node(1).log_dir / "server.log"
        wait_until(lambda: "lower that setting" in server_log.read_text(), 10, "the broker to say why")
        assert "offsets.topic.replication.factor=3" in server_log.read_text()
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


def test_groups_describe_shows_committed_offsets_lag_and_members(
        groups_cluster: cluster.ClusterSpec, capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka import TopicPartition

    from insync.cli.main import main

    new_topic(groups_cluster, "lagging", 40)  # 10 per partition
    consumer = confluent_consumer(groups_cluster.bootstrap, "laggards", **{"client.id": "lag-client"})
    consumer.commit(offsets=[TopicPartition("lagging", p, 4) for p in range(PARTITIONS)],  # type: ignore[attr-defined]
                    asynchronous=False)
    consumer.close()  # type: ignore[attr-defined]
    capsys.readouterr()
    assert main(["groups", "describe", "laggards", "--bootstrap-server", groups_cluster.bootstrap]) == 0
    out = capsys.readouterr().out
    assert "Consumer group 'laggards' has no active members" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("laggards ")]
    assert [(r[1], r[2], r[3], r[4], r[5]) for r in rows] == [("lagging", str(p), "4", "10", "6") for p in range(4)]
    assert main(["groups", "list", "--bootstrap-server", groups_cluster.bootstrap]) == 0
    assert "laggards\tEMPTY" in capsys.readouterr().out
    assert main(["groups", "describe", "no-such-group", "--bootstrap-server", groups_cluster.bootstrap]) == 1
    assert "consumer group 'no-such-group' does not exist" in capsys.readouterr().err


def test_console_consume_with_a_group_resumes_where_it_stopped(
        groups_cluster: cluster.ClusterSpec, capsys: pytest.CaptureFixture[str]) -> None:
    from insync.cli.main import main

    values = new_topic(groups_cluster, "console", 40)
    args = ["consume", "--topic", "console", "--group", "console-group", "--idle-timeout-ms", "4000",
            "--bootstrap-server", groups_cluster.bootstrap]
    capsys.readouterr()
    assert main([*args, "--max-messages", "25"]) == 0
    first = capsys.readouterr().out.split()
    assert main(args) == 0
    second = capsys.readouterr().out.split()
    assert len(first) == 25 and sorted(first + second) == sorted(v.decode() for v in values)
    assert main([*args, "--partition", "0"]) == 1
    assert "--partition cannot be used with --group" in capsys.readouterr().err


def test_members_carry_on_through_a_coordinator_crash(groups_cluster: cluster.ClusterSpec) -> None:
    """Two members consume while their coordinator is SIGKILLed: they find the new one, rejoin, and between them
    read every message (at least once: what was read after the last commit may come again)."""
    from confluent_kafka.admin import AdminClient


    spec = cluster.ClusterSpec.load(groups_cluster.directory)  # the pids of brokers other tests restarted
    group_id = "survivors"
    values = new_topic(spec, "through-crash", 400)
    members = [confluent_consumer(spec.bootstrap, group_id, **{"enable.auto.commit": True,
                                                               "auto.commit.interval.ms": 200}) for _ in range(2)]
    for member in members:
        member.subscribe(["through-crash"])  # type: ignore[attr-defined]
    got = drain(members, 200, 60)
    assert sum(map(len, got.values())) >= 200
    metadata = AdminClient({"bootstrap.servers": spec.bootstrap}).list_topics(OFFSETS_TOPIC, timeout=10)
    coordinator = metadata.topics[OFFSETS_TOPIC].partitions[partition_for(group_id, 10)].leader
    survivors = ",".join(b.address for b in spec.brokers if b.node_id != coordinator)
    cluster.signal_node(spec, coordinator, signal.SIGKILL)
    try:
        produce(survivors, "through-crash", more := [f"through-crash-late-{i}".encode() for i in range(200)])
        seen = {v for vs in got.values() for v in vs}
        deadline = time.monotonic() + 90
        while not seen >= set(values) | set(more) and time.monotonic() < deadline:
            for vs in drain(members, 1, 1).values():
                seen.update(vs)
        assert seen >= set(values) | set(more), f"{len(set(values) | set(more) - seen)} messages never read"
        for member in members:
            member.close()  # type: ignore[attr-defined]
    finally:
        restart(spec, coordinator)
