"""Topics changed on a live cluster: config overrides through IncrementalAlterConfigs (confluent-kafka, `insync
topics alter`) and the legacy AlterConfigs (kafka-python), their refusals, a new min.insync.replicas taking effect
at once; partitions added with CreatePartitions, then written and read; and preferred leader elections."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import events, produce_raw, start, wait_until
from insync import errors
from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster
from insync.chaos.cluster import ClusterSpec
from insync.protocol.records import build_batch

pytestmark = pytest.mark.timeout(120)


def topic_config(admin: Any, topic: str) -> dict[str, tuple[str, int]]:
    """(value, source) of each config of `topic`, as DescribeConfigs gives it."""
    from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]

    entries = list(admin.describe_configs([ConfigResource("topic", topic)]).values())[0].result(timeout=10)
    return {name: (entry.value, int(entry.source)) for name, entry in entries.items()}


def configured(admin: Any, topic: str, **expected: tuple[str, int]) -> dict[str, tuple[str, int]]:
    """`topic`'s configs once they show `expected` (key with dots as underscores: (value, source)). The controller
    answers once the change is committed; the broker that answers DescribeConfigs sees it when the metadata
    records reach it, milliseconds later, as in KRaft."""
    wanted = {key.replace("_", "."): value for key, value in expected.items()}
    seen: dict[str, tuple[str, int]] = {}

    def shows() -> bool:
        seen.update(topic_config(admin, topic))
        return all(seen.get(key) == value for key, value in wanted.items())

    wait_until(shows, 10, f"{topic} configs {wanted} (last seen {seen})")
    return seen


def alter(admin: Any, resource_type: str, name: str, *entries: tuple[str, str | None, str]) -> Any:
    """IncrementalAlterConfigs of one resource; `entries` are (key, value, SET|DELETE|APPEND|SUBTRACT)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource  # type: ignore[attr-defined]

    configs = [ConfigEntry(k, v, incremental_operation=getattr(AlterConfigOpType, op)) for k, v, op in entries]
    futures = admin.incremental_alter_configs([ConfigResource(resource_type, name, incremental_configs=configs)])
    return list(futures.values())[0]


def test_incremental_alter_configs_and_its_refusals(insync_cluster: ClusterSpec) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    ensure_topic(insync_cluster.bootstrap, "altered", 1, 3, {"retention.ms": "3600000"})
    admin = AdminClient({"bootstrap.servers": insync_cluster.bootstrap})
    alter(admin, "topic", "altered", ("min.insync.replicas", "2", "SET"), ("retention.ms", None, "DELETE"),
          ("segment.ms", "600000", "SET")).result(timeout=15)
    # TOPIC_CONFIG (1) for the set keys; retention.ms back to the default (DEFAULT_CONFIG, 5)
    configured(admin, "altered", min_insync_replicas=("2", 1), segment_ms=("600000", 1),
               retention_ms=("604800000", 5))

    refusals = [
        (("bogus.key", "1", "SET"), "INVALID_CONFIG", "bogus.key"),
        (("min.insync.replicas", "x", "SET"), "INVALID_CONFIG", "min.insync.replicas"),
        (("retention.ms", "5", "APPEND"), "INVALID_CONFIG", "list configs only"),
    ]
    for entry, error, words in refusals:
        with pytest.raises(KafkaException) as refused:
            # The valid change beside the bad one is not applied either: all or nothing per topic.
            alter(admin, "topic", "altered", ("segment.ms", "900000", "SET"), entry).result(timeout=15)
        assert refused.value.args[0].name() == error and words in refused.value.args[0].str()
    time.sleep(1)  # no change to wait for: give one that was wrongly made time to show
    assert topic_config(admin, "altered")["segment.ms"] == ("600000", 1)
    with pytest.raises(KafkaException) as unknown:
        alter(admin, "topic", "no-such-topic", ("retention.ms", "5", "SET")).result(timeout=15)
    assert unknown.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"
    with pytest.raises(KafkaException) as broker:
        alter(admin, "broker", "1", ("listeners", "PLAINTEXT://127.0.0.1:1", "SET")).result(timeout=15)
    assert broker.value.args[0].name() == "INVALID_REQUEST" and "server.properties" in broker.value.args[0].str()


def test_kafka_python_alter_configs_both_apis(insync_cluster: ClusterSpec) -> None:
    """kafka-python 3 sends AlterConfigs when told `incremental=False` (filling in the topic's other overrides
    itself, since AlterConfigs replaces the whole set) and IncrementalAlterConfigs otherwise."""
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    ensure_topic(insync_cluster.bootstrap, "replaced", 1, 3, {"retention.ms": "3600000", "min.insync.replicas": "2"})
    client = KafkaAdminClient(bootstrap_servers=insync_cluster.bootstrap.split(","), request_timeout_ms=15_000)
    admin = AdminClient({"bootstrap.servers": insync_cluster.bootstrap})
    try:
        legacy = client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "replaced",
                                                      configs={"segment.ms": "700000"})], incremental=False)
        assert legacy == {"topic": {"replaced": "OK"}}
        configured(admin, "replaced", segment_ms=("700000", 1), retention_ms=("3600000", 1),
                   min_insync_replicas=("2", 1))
        incremental = client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "replaced", configs={
            "retention.ms": ("DELETE", None), "max.message.bytes": "9000"})])
        assert incremental == {"topic": {"replaced": "OK"}}
    finally:
        client.close()
    configured(admin, "replaced", retention_ms=("604800000", 5), max_message_bytes=("9000", 1))


def test_topics_alter_command(insync_cluster: ClusterSpec) -> None:
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    ensure_topic(insync_cluster.bootstrap, "cli-altered", 1, 3, {})

    def insync(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "insync.cli.main", "topics", *args, "--bootstrap-server",
                               insync_cluster.bootstrap], capture_output=True, text=True, timeout=60)

    done = insync("alter", "cli-altered", "--partitions", "2", "--config", "retention.ms=120000", "--config",
                  "max.message.bytes=5000")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["Altered topic cli-altered (2 partitions).", "Altered topic cli-altered (configs)."]
    wait_until(lambda: len(describe_rows(insync_cluster.bootstrap, ["cli-altered"])) == 2, 10, "two partitions")
    shrink = insync("alter", "cli-altered", "--partitions", "1")
    assert shrink.returncode == 1 and "INVALID_PARTITIONS" in shrink.stderr
    admin = AdminClient({"bootstrap.servers": insync_cluster.bootstrap})
    configured(admin, "cli-altered", max_message_bytes=("5000", 1), retention_ms=("120000", 1))
    deleted = insync("alter", "cli-altered", "--delete-config", "max.message.bytes")
    assert deleted.returncode == 0
    configured(admin, "cli-altered", max_message_bytes=("1048588", 5), retention_ms=("120000", 1))
    refused = insync("alter", "cli-altered", "--config", "retention.ms=soon")
    assert refused.returncode == 1 and "INVALID_CONFIG" in refused.stderr and "retention.ms" in refused.stderr
    for bad_args in (["alter", "cli-altered"], ["alter", "cli-altered", "--config", "a=1", "--delete-config", "a"],
                     ["alter", "cli-altered", "--config", "novalue"], ["alter", "cli-altered", "--partitions", "0"],
                     ["alter", "cli-altered", "--partitions", "two"], ["elect-leaders", "no-such-topic"]):
        result = insync(*bad_args)
        assert result.returncode != 0 and result.stderr.strip(), bad_args


def test_create_partitions_then_write_and_read_the_new_ones(insync_cluster: ClusterSpec) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewPartitions  # type: ignore[attr-defined]
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KafkaPythonNewPartitions

    ensure_topic(insync_cluster.bootstrap, "growing", 1, 3, {})
    admin = AdminClient({"bootstrap.servers": insync_cluster.bootstrap})
    admin.create_partitions([NewPartitions("growing", 3)])["growing"].result(timeout=15)
    client = KafkaAdminClient(bootstrap_servers=insync_cluster.bootstrap.split(","), request_timeout_ms=15_000)
    try:
        client.create_partitions({"growing": KafkaPythonNewPartitions(total_count=4)})
    finally:
        client.close()
    wait_until(lambda: [r.leader >= 0 for r in describe_rows(insync_cluster.bootstrap, ["growing"])] == [True] * 4,
               20, "four partitions, each with a leader")
    rows = describe_rows(insync_cluster.bootstrap, ["growing"])
    assert all(len(r.replicas) == 3 and set(r.isr) == set(r.replicas) for r in rows)

    producer = Producer({"bootstrap.servers": insync_cluster.bootstrap, "acks": "all"})
    for partition in range(4):
        producer.produce("growing", value=f"p{partition}".encode(), partition=partition)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": insync_cluster.bootstrap, "group.id": "growing-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition("growing", p, 0) for p in range(4)])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 30
    while len(seen) < 4 and time.monotonic() < deadline:  # bounded by the deadline
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen.add(message.value())
    consumer.close()
    assert seen == {b"p0", b"p1", b"p2", b"p3"}

    for count, error in ((4, "INVALID_PARTITIONS"), (2, "INVALID_PARTITIONS")):
        with pytest.raises(KafkaException) as refused:
            admin.create_partitions([NewPartitions("growing", count)])["growing"].result(timeout=15)
        assert refused.value.args[0].name() == error
    with pytest.raises(KafkaException) as unknown:
        admin.create_partitions([NewPartitions("no-such-topic", 2)])["no-such-topic"].result(timeout=15)
    assert unknown.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"


def test_a_topic_larger_than_one_request_may_create_is_grown_in_steps(insync_cluster: ClusterSpec,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """ensure_topic's steps (a 10,000-partition topic is over what one CreateTopics may create, on Kafka too),
    with a step of 3 partitions so that a topic of 7 takes a create and two additions; asked again, it is left as it
    is."""
    from insync import admin

    monkeypatch.setattr(admin, "CREATE_PARTITIONS_MAX", 3)
    for _ in range(2):
        ensure_topic(insync_cluster.bootstrap, "stepped", 7, 3, {})
        rows = describe_rows(insync_cluster.bootstrap, ["stepped"])
        assert sorted(r.partition for r in rows) == list(range(7)) and all(r.leader >= 0 for r in rows)


def test_a_raised_min_insync_replicas_refuses_acks_all_at_once(tmp_path: Path) -> None:
    """A follower killed out of the ISR leaves 2 of 3 replicas in sync; raising min.insync.replicas to 3 on the
    live topic makes the leader refuse acks=all (and log under_min_isr_start) without any restart, and deleting
    the override lets writes through again. (SIGKILL rather than SIGSTOP: a stopped broker keeps its connections
    open, and the admin client may send it the very requests the test waits on.)"""
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    spec = start(tmp_path, extra=["replica.lag.time.max.ms=1500", "broker.session.timeout.ms=60000"])
    try:
        ensure_topic(spec.bootstrap, "guarded", 1, 3, {"min.insync.replicas": "2"})
        [row] = describe_rows(spec.bootstrap, ["guarded"])
        leader, killed = row.leader, next(r for r in row.replicas if r != row.leader)

        def produce() -> str:
            """acks=all straight to the leader (a raw Produce: librdkafka's delivery reports of refused writes
            once left a pending exception in the interpreter here, failing an unrelated call)."""
            return errors.by_code(produce_raw(spec.node(leader).address, "guarded", build_batch([(b"k", b"v")]))).name

        assert produce() == "NONE"
        cluster.signal_node(spec, killed, signal.SIGKILL)
        produce()  # leaves the dead follower behind
        # Each describe here asks the brokers while one is dead and not yet fenced: brokers name themselves as
        # the controller, so the admin client never waits on the dead one (it did, 15 s a call, when brokers
        # named the lowest live id).
        wait_until(lambda: len(describe_rows(spec.bootstrap, ["guarded"])[0].isr) == 2, 20, "the ISR shrinks to 2")
        assert produce() == "NONE"
        admin = AdminClient({"bootstrap.servers": spec.bootstrap})
        alter(admin, "topic", "guarded", ("min.insync.replicas", "3", "SET")).result(timeout=15)
        wait_until(lambda: produce() == "NOT_ENOUGH_REPLICAS", 15, "acks=all refused under the new minimum")
        assert events(spec, leader, "under_min_isr_start")
        alter(admin, "topic", "guarded", ("min.insync.replicas", None, "DELETE")).result(timeout=15)
        wait_until(lambda: produce() == "NONE", 15, "acks=all accepted once the override is deleted")
        assert events(spec, leader, "under_min_isr_end")
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


def test_preferred_leader_election_after_a_restart(tmp_path: Path) -> None:
    """A broker stopped cleanly hands its leaderships over and, restarted, only follows; a preferred election
    (`insync topics elect-leaders`, confluent-kafka's elect_leaders) gives them back."""
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    spec = start(tmp_path)
    try:
        ensure_topic(spec.bootstrap, "elected", 3, 3, {})
        wait_until(lambda: all(len(r.isr) == 3 for r in describe_rows(spec.bootstrap, ["elected"])), 30, "full ISRs")
        victim = describe_rows(spec.bootstrap, ["elected"])[0].leader
        spec = cluster.stop_node(spec, victim, deadline_s=15)
        spec = cluster.start_node(spec, victim)
        wait_until(lambda: all(len(r.isr) == 3 for r in describe_rows(spec.bootstrap, ["elected"])), 30,
                   f"broker {victim} back in every ISR")
        moved = [r.partition for r in describe_rows(spec.bootstrap, ["elected"]) if r.leader != r.replicas[0]]
        assert 0 in moved  # the victim was partition 0's preferred leader

        elect = subprocess.run([sys.executable, "-m", "insync.cli.main", "topics", "elect-leaders", "elected",
                                "--bootstrap-server", spec.bootstrap], capture_output=True, text=True, timeout=60)
        assert elect.returncode == 0, elect.stderr
        assert {f"Elected the preferred leader of elected-{p}." for p in moved} <= set(elect.stdout.splitlines())
        wait_until(lambda: all(r.leader == r.replicas[0] for r in describe_rows(spec.bootstrap, ["elected"])), 10,
                   "every partition led by its preferred replica")
        reasons = {e["reason"] for e in events(spec, cluster.CONTROLLER_ID, "leader_change")
                   if e["topic"] == "elected" and e["leader_after"] == victim}
        assert "preferred" in reasons

        admin = AdminClient({"bootstrap.servers": spec.bootstrap})
        again = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("elected", 0)]).result(timeout=15)
        [(tp, error)] = list(again.items())
        assert (tp.topic, tp.partition) == ("elected", 0) and error.name() == "ELECTION_NOT_NEEDED"
        assert admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=15) == {}  # nothing to move
        unclean = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("elected", 1)]).result(timeout=15)
        assert [e.name() for e in unclean.values()] == ["ELECTION_NOT_NEEDED"]  # it has a leader
        unknown = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("no-such-topic", 0)]).result(timeout=15)
        assert [e.name() for e in unknown.values()] == ["UNKNOWN_TOPIC_OR_PART"]
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
