"""format("insync") with `kafka.isolation.level` against the live insync cluster of the other Spark tests: a
transactional producer (confluent-kafka) commits, aborts and leaves one transaction open, a plain producer writes
after the open one. read_committed reads exactly the committed records, up to the last stable offset (the open
transaction's first offset), batch and stream alike; read_uncommitted reads every data record."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import Row, SparkSession

from insync.admin import ensure_topic
from insync.chaos.cluster import ClusterSpec
from insync.spark.source.datasource import InsyncDataSource

PARTITIONS = 2
QUERY_TIMEOUT_S = 60
TXN_TIMEOUT_S = 60
Seen = list[tuple[int, int, bytes]]  # (partition, offset, value) of each row


def send(producer: Producer, topic: str, prefix: str, count: int) -> list[bytes]:
    values = [f"{prefix}-{i}".encode() for i in range(count)]
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % PARTITIONS)
    return values


@pytest.fixture(scope="module")
def txn_topic(insync_cluster: ClusterSpec) -> Iterator[tuple[str, list[bytes], list[bytes]]]:
    """The topic, its committed values, and every data value; one transaction is left open while the tests run."""
    bootstrap = insync_cluster.bootstrap
    topic = f"rc-{uuid.uuid4().hex[:10]}"
    ensure_topic(bootstrap, topic, PARTITIONS, 1, {})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-producer",
                         "transaction.timeout.ms": 120_000, "linger.ms": 0})
    producer.init_transactions(TXN_TIMEOUT_S)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.begin_transaction()
    committed = send(producer, topic, "committed", 6)
    producer.commit_transaction(TXN_TIMEOUT_S)
    before = send(plain, topic, "plain", 2)  # non-transactional records between the transactions
    assert plain.flush(10) == 0
    producer.begin_transaction()
    aborted = send(producer, topic, "aborted", 6)
    assert producer.flush(10) == 0
    producer.abort_transaction(TXN_TIMEOUT_S)
    producer.begin_transaction()
    last = send(producer, topic, "last", 2)
    producer.commit_transaction(TXN_TIMEOUT_S)
    producer.begin_transaction()
    pending = send(producer, topic, "open", 2)  # past the last stable offset until it is decided
    assert producer.flush(10) == 0
    after = send(plain, topic, "after", 2)
    assert plain.flush(10) == 0
    try:
        yield topic, committed + before + last, committed + before + aborted + last + pending + after
    finally:
        producer.abort_transaction(TXN_TIMEOUT_S)


@pytest.fixture(scope="module")
def insync(spark: SparkSession) -> SparkSession:
    spark.dataSource.register(InsyncDataSource)
    return spark


def seen(rows: list[Row]) -> Seen:
    return sorted((r.partition, r.offset, bytes(r.value)) for r in rows)


def test_batch_read_committed_reads_committed_records_only(insync: SparkSession, insync_cluster: ClusterSpec,
                                                           txn_topic: tuple[str, list[bytes], list[bytes]]) -> None:
    topic, committed, every = txn_topic

    def read(isolation: str) -> Seen:
        return seen(insync.read.format("insync").option("kafka.bootstrap.servers", insync_cluster.bootstrap)
                    .option("subscribe", topic).option("kafka.isolation.level", isolation).load().collect())

    uncommitted_rows, committed_rows = read("read_uncommitted"), read("read_committed")
    assert sorted(v for _, _, v in uncommitted_rows) == sorted(every)
    # The same records at the same offsets, the others left out: offsets have gaps (aborted records, markers).
    assert committed_rows == [r for r in uncommitted_rows if r[2] in committed]
    assert sorted(v for _, _, v in committed_rows) == sorted(committed)


def test_stream_read_committed_stops_at_the_last_stable_offset(insync: SparkSession, insync_cluster: ClusterSpec,
                                                               txn_topic: tuple[str, list[bytes], list[bytes]],
                                                               tmp_path: Path) -> None:
    topic, committed, _ = txn_topic
    rows: list[Row] = []
    stream = (insync.readStream.format("insync").option("kafka.bootstrap.servers", insync_cluster.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("kafka.isolation.level", "read_committed").option("maxOffsetsPerTrigger", "5").load())
    query = (stream.writeStream.foreachBatch(lambda df, _batch_id: rows.extend(df.collect()))
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish"
    assert query.exception() is None, query.exception()
    assert sorted(bytes(r.value) for r in rows) == sorted(committed)
