"""A Kafka Streams application (kafka-streams of the release, tools/kafka/StreamsWordCount.java) counting words with
processing.guarantee=exactly_once_v2 in a state store whose changelog Streams creates compacted, on Kafka 4.1 and
on insync, three brokers each. The broker leading the most input and changelog partitions is SIGKILLed while the
application runs and restarted; read under read_committed, every word's counts on the output are 1, 2, ... n in
order, each once, n its true count: no count lost, none repeated, on both."""

from __future__ import annotations

import collections
import random
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reference import start_kafka

from insync.admin import admin_client, ensure_topic
from insync.chaos import cluster, kafka_dist, kafka_tools
from insync.waiting import wait_until

pytestmark = pytest.mark.timeout(900)

APP = Path(__file__).resolve().parents[2] / "tools" / "kafka" / "StreamsWordCount.java"
APPLICATION_ID = "wordcount"
INPUT, OUTPUT = "lines", "word-counts"
CHANGELOG, REPARTITION = f"{APPLICATION_ID}-counts-changelog", f"{APPLICATION_ID}-words-repartition"
VOCABULARY = [f"w{i:02d}" for i in range(40)]
LINES_PER_BATCH = 400
WORDS_PER_LINE = 6
# Small internal topics and no rebalance delay: the two clusters are alike and light on two shared cores.
CONFIG = ["transaction.state.log.num.partitions=3", "offsets.topic.num.partitions=3",
          "group.initial.rebalance.delay.ms=0"]
APP_START_S = 180.0  # a JVM on loaded cores, a first rebalance and the internal topics created
COUNTED_S = 300.0  # every count committed, across the kill, the restart and the transactions they abort
STOP_S = 90.0


@pytest.fixture(scope="module", params=["kafka", "insync"])
def spec(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    directory = tmp_path_factory.mktemp(f"streams-{request.param}")
    if request.param == "kafka":
        started = start_kafka(directory, "4.1", extra=CONFIG)
    else:
        started = cluster.up(str(directory), 3, 0, CONFIG)
    try:
        yield started
    finally:
        cluster.down(cluster.ClusterSpec.load(started.directory), 20.0)


def lines(batch: int) -> list[str]:
    """The batch's lines: words of the vocabulary, some repeated within a line, in mixed case and punctuation."""
    rng = random.Random(batch)
    return [" ".join(rng.choice(VOCABULARY).upper() if rng.random() < 0.2 else rng.choice(VOCABULARY) + ","
                     for _ in range(WORDS_PER_LINE)) for _ in range(LINES_PER_BATCH)]


def true_counts(all_lines: list[str]) -> collections.Counter[str]:
    return collections.Counter(word.strip(",").lower() for line in all_lines for word in line.split())


def produce(producer: Any, batch: list[str]) -> None:
    for i, line in enumerate(batch):
        producer.produce(INPUT, key=str(i), value=line)
        producer.poll(0)
    assert producer.flush(60) == 0, "the input's records were not all acknowledged"


def start_app(spec: cluster.ClusterSpec, state_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    command = kafka_tools.driver_command(kafka_dist.with_streams("4.1"), APP,
                                         [spec.bootstrap, APPLICATION_ID, INPUT, OUTPUT, str(state_dir)])
    with log.open("ab") as out:
        return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def read_new(consumer: Any, seen: dict[str, list[int]]) -> int:
    """What is new on the output under read_committed, appended to each word's counts; the counts' total."""
    for message in consumer.consume(1000, 0.5):
        if message.error() is None:
            seen[message.key().decode()].append(int.from_bytes(message.value(), "big", signed=True))
    return sum(counts[-1] for counts in seen.values())


def busiest_leader(spec: cluster.ClusterSpec) -> int:
    """The broker leading the most partitions of the input and the changelog."""
    topics = admin_client(spec.bootstrap).list_topics(timeout=30).topics
    leaders = collections.Counter(p.leader for name in (INPUT, CHANGELOG) for p in topics[name].partitions.values())
    leader, _ = leaders.most_common(1)[0]
    assert leader >= 0, leaders
    return int(leader)


def test_word_counts_stay_exact_across_a_killed_broker(spec: cluster.ClusterSpec, tmp_path: Path) -> None:
    """A batch of lines is counted, the busiest leader is killed, a second batch is produced while it is down and a
    third once it is back; the output must hold each word's counts 1..n exactly once, in order."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    for topic in (INPUT, OUTPUT):
        ensure_topic(spec.bootstrap, topic, 3, 3, {"min.insync.replicas": "2"})
    # Idempotent, so a retry across the kill writes no input line twice: the truth is what was produced.
    producer = Producer({"bootstrap.servers": spec.bootstrap, "enable.idempotence": True,
                         "delivery.timeout.ms": 120_000})
    consumer = Consumer({"bootstrap.servers": spec.bootstrap, "group.id": "checker", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(OUTPUT, p, 0) for p in range(3)])
    batches = [lines(b) for b in range(3)]
    truth = true_counts([line for batch in batches for line in batch])
    seen: dict[str, list[int]] = collections.defaultdict(list)
    log = tmp_path / "app.log"
    produce(producer, batches[0])
    app = start_app(spec, tmp_path / "state", log)
    try:
        wait_until(lambda: read_new(consumer, seen) > 0, APP_START_S,
                   lambda: f"the first counts on {spec.engine} (the app's log: {log})")
        victim = busiest_leader(spec)
        spec = cluster.stop_node(spec, victim, deadline_s=0, sig=signal.SIGKILL)
        produce(producer, batches[1])
        spec = cluster.start_node(spec, victim)
        cluster.wait_listening(spec.node(victim), spec.start_deadline_s)
        produce(producer, batches[2])
        wait_until(lambda: read_new(consumer, seen) >= truth.total(), COUNTED_S,
                   lambda: f"every count on {spec.engine}: {sum(c[-1] for c in seen.values())} of {truth.total()}"
                           f" (the app's log: {log})")
    finally:
        stopped = stop_app(app)
        consumer.close()
    read_back = read_output(spec)
    assert stopped, f"the application did not close in time (its log: {log})"
    assert dict(read_back) == {word: list(range(1, n + 1)) for word, n in truth.items()}, (
        f"{spec.engine}: counts read back differ from 1..n (the app's log: {log})")
    assert describe_config(spec, CHANGELOG, "cleanup.policy") == "compact"
    assert describe_config(spec, REPARTITION, "cleanup.policy") == "delete"


def stop_app(app: subprocess.Popen[bytes]) -> bool:
    """Close the application's standard input (it closes itself then); killed if it has not exited in time."""
    assert app.stdin is not None
    app.stdin.close()
    try:
        return app.wait(STOP_S) == 0
    except subprocess.TimeoutExpired:
        app.kill()
        app.wait(10)
        return False


def read_output(spec: cluster.ClusterSpec) -> dict[str, list[int]]:
    """The whole output read from the start under read_committed, up to its last stable offset."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": spec.bootstrap, "group.id": "read-back", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(OUTPUT, p), timeout=30)[1] for p in range(3)}
        consumer.assign([TopicPartition(OUTPUT, p, 0) for p in range(3)])
        seen: dict[str, list[int]] = collections.defaultdict(list)

        def caught_up() -> bool:
            read_new(consumer, seen)
            positions = consumer.position([TopicPartition(OUTPUT, p) for p in range(3)])
            return all(tp.offset >= ends[tp.partition] for tp in positions)

        wait_until(caught_up, 60.0, lambda: f"the output read back to {ends}")
        return seen
    finally:
        consumer.close()


def describe_config(spec: cluster.ClusterSpec, topic: str, key: str) -> str:
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = admin_client(spec.bootstrap)  # held while the future is awaited: a dropped client fails its futures
    return str(admin.describe_configs([resource])[resource].result(30)[key].value)
