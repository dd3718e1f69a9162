"""Transactions with real, unmodified clients against a 3-broker insync cluster: confluent-kafka's transactional
producer commits one transaction over three partitions and aborts another, a read_committed consumer sees exactly
the committed records and a read_uncommitted one both; and a consume-transform-produce loop commits its input
offsets in its transaction with `send_offsets_to_transaction` under the group's generation (KIP-447); and
kafka-python's transactional producer (its own transaction manager) commits, aborts and is fenced."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from conftest import running
from insync.admin import ensure_topic
from insync.chaos import cluster
from insync.waiting import wait_until

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 3
CONFIG = ["group.initial.rebalance.delay.ms=200", "offsets.topic.num.partitions=5",
          "transaction.state.log.num.partitions=5"]


@pytest.fixture(scope="module")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    with running(tmp_path_factory.mktemp("txn"), 3, CONFIG) as spec:
        yield spec


def transactional_producer(bootstrap: str, transactional_id: str) -> object:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 30000})
    producer.init_transactions(60)
    return producer


def read_all(bootstrap: str, topic: str, isolation: str, want: int, deadline_s: float = 30.0) -> list[bytes]:
    """Every value of `topic` an assigned consumer reads until `want` arrived or the deadline (then a little more,
    so extra records would show)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}-{time.monotonic_ns()}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got: list[bytes] = []
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=0.5):
                if message.error() is None:
                    got.append(message.value() or b"")
            if len(got) >= want:
                deadline = min(deadline, time.monotonic() + 1.0)
        return got
    finally:
        consumer.close()


def test_committed_records_only_under_read_committed(txn_cluster: cluster.ClusterSpec) -> None:
    bootstrap, topic = txn_cluster.bootstrap, "txn-basic"
    ensure_topic(bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    producer = transactional_producer(bootstrap, "txn-basic-producer")
    producer.begin_transaction()  # type: ignore[attr-defined]
    committed = [f"committed-{i}".encode() for i in range(30)]
    for i, value in enumerate(committed):
        producer.produce(topic, value=value, partition=i % PARTITIONS)  # type: ignore[attr-defined]
    producer.commit_transaction(60)  # type: ignore[attr-defined]
    producer.begin_transaction()  # type: ignore[attr-defined]
    aborted = [f"aborted-{i}".encode() for i in range(30)]
    for i, value in enumerate(aborted):
        producer.produce(topic, value=value, partition=i % PARTITIONS)  # type: ignore[attr-defined]
    producer.flush(60)  # type: ignore[attr-defined]
    producer.abort_transaction(60)  # type: ignore[attr-defined]
    producer.begin_transaction()  # type: ignore[attr-defined]
    last = [f"last-{i}".encode() for i in range(PARTITIONS)]
    for i, value in enumerate(last):
        producer.produce(topic, value=value, partition=i)  # type: ignore[attr-defined]
    producer.commit_transaction(60)  # type: ignore[attr-defined]

    read_committed = read_all(bootstrap, topic, "read_committed", len(committed) + len(last))
    assert sorted(read_committed) == sorted(committed + last)
    read_uncommitted = read_all(bootstrap, topic, "read_uncommitted", 2 * len(committed) + len(last))
    assert sorted(read_uncommitted) == sorted(committed + aborted + last)


def test_a_new_producer_with_the_same_id_fences_the_old_one(txn_cluster: cluster.ClusterSpec) -> None:
    from confluent_kafka import KafkaException

    bootstrap, topic = txn_cluster.bootstrap, "txn-fence"
    ensure_topic(bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    old = transactional_producer(bootstrap, "txn-fenced")
    old.begin_transaction()  # type: ignore[attr-defined]
    old.produce(topic, value=b"zombie", partition=0)  # type: ignore[attr-defined]
    old.flush(30)  # type: ignore[attr-defined]
    new = transactional_producer(bootstrap, "txn-fenced")  # aborts the old one's open transaction
    new.begin_transaction()  # type: ignore[attr-defined]
    new.produce(topic, value=b"current", partition=1)  # type: ignore[attr-defined]
    new.commit_transaction(60)  # type: ignore[attr-defined]
    with pytest.raises(KafkaException) as info:
        old.commit_transaction(30)  # type: ignore[attr-defined]
    assert info.value.args[0].fatal() or "fenced" in str(info.value).lower()
    assert read_all(bootstrap, topic, "read_committed", 1, 15) == [b"current"]


def test_consume_transform_produce_commits_offsets_in_the_transaction(txn_cluster: cluster.ClusterSpec) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    bootstrap, source, sink, group = txn_cluster.bootstrap, "ctp-in", "ctp-out", "ctp-group"
    for topic in (source, sink):
        ensure_topic(bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    plain = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    inputs = [f"word-{i}".encode() for i in range(20)]
    for i, value in enumerate(inputs):
        plain.produce(source, value=value, partition=i % PARTITIONS)
    assert plain.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    consumer.subscribe([source])
    producer = transactional_producer(bootstrap, "ctp-producer")
    seen = 0
    deadline = time.monotonic() + 60
    try:
        while seen < len(inputs) and time.monotonic() < deadline:
            messages = [m for m in consumer.consume(num_messages=100, timeout=0.5) if m.error() is None]
            if not messages:
                continue
            producer.begin_transaction()  # type: ignore[attr-defined]
            for message in messages:
                producer.produce(sink, value=(message.value() or b"").upper(), partition=message.partition())  # type: ignore[attr-defined]
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)  # type: ignore[attr-defined]
            producer.commit_transaction(60)  # type: ignore[attr-defined]
            seen += len(messages)
        assert seen == len(inputs)
        committed = consumer.committed([TopicPartition(source, p) for p in range(PARTITIONS)], 30)
        assert sum(tp.offset for tp in committed) == len(inputs)
    finally:
        consumer.close()
    outputs = read_all(bootstrap, sink, "read_committed", len(inputs))
    assert sorted(outputs) == sorted(value.upper() for value in inputs)


def test_aborted_offsets_leave_the_group_at_its_last_committed_offsets(txn_cluster: cluster.ClusterSpec) -> None:
    """Offsets sent in a transaction that aborts are dropped: a new member of the group starts from the offsets the
    last committed transaction wrote (OffsetFetch with require_stable stops answering UNSTABLE_OFFSET_COMMIT), as
    librdkafka's 0103_transactions checks."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    bootstrap, source, group = txn_cluster.bootstrap, "abort-offsets-in", "abort-offsets-group"
    ensure_topic(bootstrap, source, 1, 3, {"min.insync.replicas": "2"})
    plain = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(30):
        plain.produce(source, value=f"in-{i}".encode(), partition=0)
    assert plain.flush(30) == 0
    producer = transactional_producer(bootstrap, "abort-offsets-producer")

    def member() -> object:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        consumer.subscribe([source])
        return consumer

    def take(consumer: object, count: int) -> list[object]:
        taken: list[object] = []
        wait_until(lambda: taken.extend(m for m in consumer.consume(count - len(taken), 0.5)  # type: ignore[attr-defined]
                                        if m.error() is None) or len(taken) >= count, 30, f"{count} records")
        return taken

    consumer = member()
    for records, commit in ((10, True), (5, False)):
        taken = take(consumer, records)
        producer.begin_transaction()  # type: ignore[attr-defined]
        positions = consumer.position(consumer.assignment())  # type: ignore[attr-defined]
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)  # type: ignore[attr-defined]
        (producer.commit_transaction if commit else producer.abort_transaction)(60)  # type: ignore[attr-defined]
        assert len(taken) == records
    consumer.close()  # type: ignore[attr-defined]
    consumer = member()
    try:
        assert [m.offset() for m in take(consumer, 1)] == [10]  # type: ignore[attr-defined]
        assert consumer.committed([TopicPartition(source, 0)], 30)[0].offset == 10  # type: ignore[attr-defined]
    finally:
        consumer.close()  # type: ignore[attr-defined]


def test_kafka_pythons_transactional_producer_and_read_committed_consumer(txn_cluster: cluster.ClusterSpec) -> None:
    """kafka-python's own transaction manager (not librdkafka's): commit, abort, a zombie fenced, and its
    read_committed consumer reading the committed records only."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import KafkaError

    bootstrap, topic = txn_cluster.bootstrap, "txn-kafka-python"
    ensure_topic(bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kafka-python-txn")
    producer.init_transactions()
    sent: dict[bool, list[bytes]] = {True: [], False: []}
    for commit in (True, False, True):
        producer.begin_transaction()
        values = [b"%s-%d" % (b"committed" if commit else b"aborted", len(sent[commit]) + i) for i in range(9)]
        for i, value in enumerate(values):
            producer.send(topic, value=value, partition=i % PARTITIONS)
        producer.flush()
        (producer.commit_transaction if commit else producer.abort_transaction)()
        sent[commit] += values
    current = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kafka-python-txn")
    current.init_transactions()  # fences the first
    producer.begin_transaction()
    producer.send(topic, value=b"zombie", partition=0)
    with pytest.raises(KafkaError) as fenced:
        producer.commit_transaction()
    # ProducerFencedError itself, or, when the zombie's send met the fence first, the error state it left
    # ("Cannot execute transactional method because we are in an error state: [Error 90] ProducerFencedError").
    named = f"{type(fenced.value).__name__} {fenced.value}".lower()
    assert "fenced" in named or "epoch" in named, named
    producer.close(timeout=5)
    current.close(timeout=5)

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    read: list[bytes] = []

    def all_committed_read() -> bool:
        read.extend(r.value for records in consumer.poll(timeout_ms=500).values() for r in records)
        return len(read) >= len(sent[True])

    try:
        wait_until(all_committed_read, 30, lambda: f"the committed records ({len(read)} read)")
        all_committed_read()  # one more poll: an aborted record would show
    finally:
        consumer.close()
    assert sorted(read) == sorted(sent[True])
    everything = read_all(bootstrap, topic, "read_uncommitted", len(sent[True]) + len(sent[False]))
    assert sorted(everything) == sorted(sent[True] + sent[False])
