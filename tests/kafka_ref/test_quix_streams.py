"""A Python stream processor with its state in compacted changelog topics (quix-streams, from PyPI, in its own venv
made by `make quix-venv`: it pins a confluent-kafka older than insync's) on a 3-broker insync cluster: a word
count with exactly-once processing is killed, its local state deleted, and restarted; it restores its counts from
the changelog and goes on, and the output read under read_committed holds each word's counts 1..n once each: no
count lost, none repeated."""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from insync import maven
from insync.admin import ensure_topic
from insync.chaos import cluster
from insync.waiting import wait_until

pytestmark = pytest.mark.timeout(600)

QUIX_PYTHON = maven.cache_root() / "quix-venv" / "bin" / "python"  # the Makefile's quix-venv
APP = Path(__file__).with_name("quix_wordcount.py")
WORDS = [f"word{i}" for i in range(12)]
RECORDS = 600
CONFIG = ["transaction.state.log.num.partitions=3", "offsets.topic.num.partitions=3",
          "group.initial.rebalance.delay.ms=0"]


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    assert QUIX_PYTHON.exists(), f"no quix-streams venv at {QUIX_PYTHON}: run `make quix-venv`"
    spec = cluster.up(str(tmp_path_factory.mktemp("quix")), 3, 0, CONFIG)
    try:
        yield spec
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 20.0)


def start_app(spec: cluster.ClusterSpec, state_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([str(QUIX_PYTHON), str(APP), spec.bootstrap, str(state_dir), "words", "counts"],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def committed_counts(consumer: object, seen: list[tuple[str, int]]) -> int:
    """Read what is new of the output under read_committed into `seen`; how many there are in all."""
    for message in consumer.consume(1000, 0.5):  # type: ignore[attr-defined]
        if message.error() is None:
            value = json.loads(message.value())
            seen.append((value["word"], int(value["count"])))
    return len(seen)


def test_a_killed_processor_restores_its_counts_from_the_changelog(spec: cluster.ClusterSpec, tmp_path: Path) -> None:
    """The first half of the words is counted, the processor killed and its local state deleted; the second half
    is produced only then, so every count it writes after the restart depends on the restored state."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    for topic in ("words", "counts"):
        ensure_topic(spec.bootstrap, topic, 2, 3, {"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": spec.bootstrap, "acks": "all"})
    expected: collections.Counter[str] = collections.Counter()

    def produce(start: int, end: int) -> None:
        for i in range(start, end):
            word = WORDS[(i * 7 + i // 5) % len(WORDS)]
            expected[word] += 1
            producer.produce("words", key=word, value=word)
        assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": spec.bootstrap, "group.id": "checker", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition("counts", p, 0) for p in range(2)])
    seen: list[tuple[str, int]] = []
    state_dir, log = tmp_path / "state", tmp_path / "app.log"
    produce(0, RECORDS // 2)
    app = start_app(spec, state_dir, log)
    try:
        wait_until(lambda: committed_counts(consumer, seen) >= RECORDS // 2, 120,
                   lambda: f"the first half's counts ({len(seen)}; the app's log: {log})")
        os.killpg(app.pid, signal.SIGKILL)
        app.wait(10)
        shutil.rmtree(state_dir)  # nothing local left: the counts must come back from the changelog
        produce(RECORDS // 2, RECORDS)
        app = start_app(spec, state_dir, log)
        wait_until(lambda: committed_counts(consumer, seen) >= RECORDS, 180,
                   lambda: f"every count ({len(seen)} of {RECORDS}; the app's log: {log})")
        time.sleep(2)  # any count written twice would show in the next read
        committed_counts(consumer, seen)
    finally:
        if app.poll() is None:
            os.killpg(app.pid, signal.SIGKILL)
            app.wait(10)
        consumer.close()
    by_word: dict[str, list[int]] = collections.defaultdict(list)
    for word, count in seen:
        by_word[word].append(count)
    assert {word: sorted(counts) for word, counts in by_word.items()} == {
        word: list(range(1, n + 1)) for word, n in expected.items()}
    changelogs = [t for t in _topics(spec) if t.startswith("changelog__")]
    assert changelogs and all(_config(spec, t, "cleanup.policy") == "compact" for t in changelogs), changelogs


def _topics(spec: cluster.ClusterSpec) -> list[str]:
    from confluent_kafka.admin import AdminClient

    return list(AdminClient({"bootstrap.servers": spec.bootstrap}).list_topics(timeout=30).topics)


def _config(spec: cluster.ClusterSpec, topic: str, key: str) -> str:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": spec.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return str(admin.describe_configs([resource])[resource].result(30)[key].value)
