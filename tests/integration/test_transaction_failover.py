"""A transaction coordinator killed under real clients (3 brokers, `__transaction_state` RF 3): the producer's
commit goes to the partition's new leader, which loaded the transaction from the log, and a read_committed
consumer sees every record once; a transaction its producer abandoned (the process killed mid-transaction) is
aborted by the coordinator after `transaction.timeout.ms`, the coordinator's broker killed meanwhile, so the last
stable offset moves on and later transactions become readable. Slow: two broker kills and restarts."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from conftest import running, wait_until
from insync.admin import ensure_topic
from insync.chaos import cluster
from insync.protocol.kio import build, error_of, request_class

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CONFIG = ["transaction.state.log.num.partitions=3", "offsets.topic.num.partitions=3",
          "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000"]


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    with running(tmp_path_factory.mktemp("txn-failover"), 3, CONFIG) as spec:
        yield spec


def coordinator_of(spec: cluster.ClusterSpec, transactional_id: str) -> int:
    """The broker id FindCoordinator names for `transactional_id` (asked until one is named)."""
    from insync.admin_requests import request

    def named() -> int | None:
        body = build(request_class(10, 4), key_type=1, coordinator_keys=(transactional_id,))
        (answer,) = request(spec.brokers[0].address, body, 10).coordinators
        return int(answer.node_id) if error_of(answer.error_code).name == "NONE" else None

    return wait_until(named, 30, f"a coordinator for {transactional_id}")


def kill_and_restart(spec: cluster.ClusterSpec, node_id: int) -> cluster.ClusterSpec:
    # stop_node waits for the killed process to be gone: SIGKILL is delivered asynchronously, and a restart
    # that still finds the old pid alive refuses to start.
    killed = cluster.stop_node(cluster.ClusterSpec.load(spec.directory), node_id, sig=signal.SIGKILL)
    return cluster.start_node(killed, node_id)


def read_committed(bootstrap: str, topic: str, want: int, deadline_s: float) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    try:
        def enough() -> bool:
            got.extend(m.value() or b"" for m in consumer.consume(500, 0.5) if m.error() is None)
            return len(got) >= want
        wait_until(enough, deadline_s, f"{want} committed records of {topic}")
        got.extend(m.value() or b"" for m in consumer.consume(500, 1.0) if m.error() is None)  # and no more
        return got
    finally:
        consumer.close()


def test_a_commit_survives_its_coordinators_death(spec: cluster.ClusterSpec) -> None:
    from confluent_kafka import Producer

    topic, txn_id = "failover", "txn-coordinator-killed"
    ensure_topic(spec.bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": spec.bootstrap, "transactional.id": txn_id})
    producer.init_transactions(60)
    producer.begin_transaction()
    values = [f"v{i}".encode() for i in range(30)]
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0
    victim = coordinator_of(spec, txn_id)
    restarted = kill_and_restart(spec, victim)
    producer.commit_transaction(90)  # to the new coordinator, once librdkafka finds it
    assert sorted(read_committed(spec.bootstrap, topic, len(values), 60)) == sorted(values)
    cluster.wait_registered(restarted, 60)


ABANDONING = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
                         "transaction.timeout.ms": 6000})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(sys.argv[3], b"abandoned-%d" % i, partition=0)
    assert producer.flush(30) == 0
    print("open", flush=True)
    time.sleep(300)
""")


def test_an_abandoned_transaction_is_aborted_on_timeout_across_a_coordinator_kill(spec: cluster.ClusterSpec) -> None:
    from confluent_kafka import Producer

    topic, txn_id = "abandoned", "txn-abandoned"
    ensure_topic(spec.bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
    process = subprocess.Popen([sys.executable, "-c", ABANDONING, spec.bootstrap, txn_id, topic],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "open"
    finally:
        process.kill()  # mid-transaction: nobody will end it but the coordinator
        process.wait(10)
    kill_and_restart(spec, coordinator_of(spec, txn_id))
    later = Producer({"bootstrap.servers": spec.bootstrap, "transactional.id": "txn-after"})
    later.init_transactions(60)
    later.begin_transaction()
    later.produce(topic, b"after", partition=0)
    later.commit_transaction(60)
    # Readable only once the abandoned transaction is aborted: its records hold the last stable offset back.
    assert read_committed(spec.bootstrap, topic, 1, 90) == [b"after"]
    cluster.wait_registered(cluster.ClusterSpec.load(spec.directory), 60)
