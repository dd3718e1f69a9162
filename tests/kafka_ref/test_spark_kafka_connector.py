"""Spark's own Kafka connector (`format("kafka")`, the jars of insync.spark.connector_jars, Kafka's Java client)
against a 3-broker insync cluster with every topic at replication factor 3: what users' existing Spark jobs do.

Batch reads with every way of naming offsets, a batch write read back with confluent-kafka, a streaming query from
a topic to a topic, `failOnDataLoss` both ways after DeleteRecords, `kafka.isolation.level=read_committed` over
committed, aborted and open transactions, and a streaming query that goes on reading while the leader of a partition
is killed, every produced offset read exactly once (last: the killed broker stays down).
"""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]  # public, not in stubs
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster
from insync.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

# Short liveness timings, so that a killed leader is replaced within seconds.
TIMING = ["replica.lag.time.max.ms=4000", "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500",
          "replica.fetch.backoff.ms=200", "insync.events.topic.enable=false"]
QUERY_TIMEOUT_S = 90
# Spark's driver asks for the latest offsets through Kafka's admin client. A ListOffsets bound for the killed leader
# before the controller fenced it stays bound to that broker id, which then leaves the Metadata broker list (Kafka's
# KRaftMetadataCache lists unfenced brokers only): the call waits out `default.api.timeout.ms` (60 s) before Spark
# retries it. The same query over a Kafka 4.1 cluster (`cluster.up(..., engine="kafka:4.1")`) stalls so after
# every kill.
FAILOVER_TIMEOUT_S = 150
# The records' CreateTime: record i is at BASE_MS + 1000 * i; the hour of the run, so no retention (7 days, which
# deletes the active segment too, as Kafka's does) removes them during it.
BASE_MS = int(time.time()) // 3600 * 3600 * 1000

Record = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]  # partition, key, value, headers


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSpec]:
    started = cluster.up(str(tmp_path_factory.mktemp("spark-kafka")), 3, 0, TIMING)
    try:
        yield started
    finally:
        cluster.down(cluster.ClusterSpec.load(started.directory), 10.0)


def new_topic(spec: cluster.ClusterSpec, partitions: int, **configs: str) -> str:
    name = f"sk-{uuid.uuid4().hex[:10]}"
    ensure_topic(spec.bootstrap, name, partitions, 3, {"min.insync.replicas": "2", **configs})
    return name


def produce(bootstrap: str, topic: str, records: list[Record], first: int = 0) -> None:
    """Each record with its own CreateTime, BASE_MS + 1000 * (its index + first)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i, (partition, key, value, headers) in enumerate(records):
        producer.produce(topic, value, key, partition=partition, headers=headers, timestamp=BASE_MS + 1000 * (i + first))
    assert producer.flush(30) == 0


def kafka(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    return spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).options(**options).load()


def rows(df: DataFrame) -> list[tuple[Any, ...]]:
    """(partition, offset, key, value, CreateTime ms, timestamp type, headers) in log order."""
    out = df.select("partition", "offset", "key", "value", F.unix_millis("timestamp").alias("ms"), "timestampType",
                    "headers" if "headers" in df.columns else F.lit(None).alias("headers")).collect()
    return sorted((r.partition, r.offset, r.key, r.value, r.ms, r.timestampType,
                   None if r.headers is None else [(h.key, h.value) for h in r.headers]) for r in out)


# 3 partitions, 10 records each: null keys, a tombstone, headers (one null-valued) on every third record.
KNOWN: list[Record] = [
    (i % 3, None if i % 7 == 0 else b"k%d" % i, None if i == 13 else b"v%d" % i,
     [("n", b"%d" % i), ("tag", None)] if i % 3 == 0 else [])
    for i in range(30)
]


def expected(partitions: dict[int, tuple[int, int]]) -> list[tuple[Any, ...]]:
    """KNOWN's rows at offsets [start, end) of each partition named (Spark's headers are null for none)."""
    out = []
    for i, (partition, key, value, headers) in enumerate(KNOWN):
        offset = i // 3
        start, end = partitions.get(partition, (0, 0))
        if start <= offset < end:
            out.append((partition, offset, key, value, BASE_MS + 1000 * i, 0, headers or None))
    return sorted(out)


@pytest.fixture(scope="module")
def known(spec: cluster.ClusterSpec) -> str:
    topic = new_topic(spec, 3)
    produce(spec.bootstrap, topic, KNOWN)
    return topic


def test_batch_read_earliest_to_latest_is_every_record_with_its_headers(
        spark: SparkSession, spec: cluster.ClusterSpec, known: str) -> None:
    df = kafka(spark, spec.bootstrap, subscribe=known, includeHeaders="true", startingOffsets="earliest",
               endingOffsets="latest")
    assert rows(df) == expected({0: (0, 10), 1: (0, 10), 2: (0, 10)})
    assert {r.topic for r in df.select("topic").collect()} == {known}


def test_batch_read_with_offsets_per_partition(spark: SparkSession, spec: cluster.ClusterSpec, known: str) -> None:
    starting = json.dumps({known: {"0": 2, "1": -2, "2": 5}})  # -2: earliest
    ending = json.dumps({known: {"0": 6, "1": -1, "2": 7}})  # -1: latest
    df = kafka(spark, spec.bootstrap, subscribe=known, includeHeaders="true", startingOffsets=starting,
               endingOffsets=ending)
    assert rows(df) == expected({0: (2, 6), 1: (0, 10), 2: (5, 7)})
    assert rows(kafka(spark, spec.bootstrap, assign=json.dumps({known: [1]}), includeHeaders="true")) == expected(
        {1: (0, 10)})


def test_batch_read_from_timestamps(spark: SparkSession, spec: cluster.ClusterSpec, known: str) -> None:
    # Partition 0's record at offset 4 is KNOWN[12]; a timestamp between two records starts at the later one
    # (partition 1: KNOWN[13], offset 4). An ending timestamp is the first offset not read.
    by_time = json.dumps({known: {"0": BASE_MS + 12_000, "1": BASE_MS + 12_500, "2": BASE_MS + 1_000_000}})
    with pytest.raises(Exception, match="No offset matched"):  # Spark's default for a partition with no such record
        kafka(spark, spec.bootstrap, subscribe=known, startingOffsetsByTimestamp=by_time).count()
    df = kafka(spark, spec.bootstrap, subscribe=known, includeHeaders="true", startingOffsetsByTimestamp=by_time,
               startingOffsetsByTimestampStrategy="latest")
    assert rows(df) == expected({0: (4, 10), 1: (4, 10)})
    ending = {known: {"0": BASE_MS + 9_000, "1": BASE_MS + 1_000_000, "2": BASE_MS + 2_500}}
    df = kafka(spark, spec.bootstrap, subscribe=known, includeHeaders="true", endingOffsetsByTimestamp=json.dumps(ending))
    assert rows(df) == expected({0: (0, 3), 1: (0, 10), 2: (0, 1)})  # partition 1: no record that late, so latest


def test_batch_write_is_read_back_by_confluent_kafka(spark: SparkSession, spec: cluster.ClusterSpec) -> None:
    topic = new_topic(spec, 3)
    data = [(f"k{i}", f"v{i}", i % 3, [("h", f"{i}".encode())]) for i in range(300)]
    df = spark.createDataFrame(data, "key string, value string, partition int, "
                                     "headers array<struct<key: string, value: binary>>")
    df.write.format("kafka").option("kafka.bootstrap.servers", spec.bootstrap).option("topic", topic).save()

    consumer = Consumer({"bootstrap.servers": spec.bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        got: list[tuple[str, str, int, Any]] = []
        deadline = time.monotonic() + QUERY_TIMEOUT_S
        while len(got) < len(data) and time.monotonic() < deadline:
            for m in consumer.consume(500, 1.0):
                assert m.error() is None, m.error()
                got.append((bytes(m.key() or b"").decode(), bytes(m.value() or b"").decode(), m.partition(), m.headers()))
    finally:
        consumer.close()
    assert sorted(got) == sorted(data)


def wait_for(query: StreamingQuery, predicate: Any, what: str, timeout_s: int = QUERY_TIMEOUT_S) -> None:
    """Until `predicate()` holds; at once if the query failed."""
    def held() -> bool:
        if predicate():
            return True
        if query.exception() is not None:
            raise AssertionError(f"{what}: the query failed: {query.exception()}")
        return False

    wait_until(held, timeout_s, lambda: f"{what}; last progress {query.lastProgress}", interval_s=0.5)


def test_streaming_topic_to_topic_processes_records_produced_while_it_runs(
        spark: SparkSession, spec: cluster.ClusterSpec, tmp_path: Path) -> None:
    source, sink = new_topic(spec, 3), new_topic(spec, 2)
    produce(spec.bootstrap, source, [(i % 3, b"%d" % i, b"before-%d" % i, []) for i in range(30)])
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", spec.bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest").load()
              .select("key", F.upper(F.col("value").cast("string")).alias("value")))
    query = (stream.writeStream.format("kafka").option("kafka.bootstrap.servers", spec.bootstrap)
             .option("topic", sink).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    try:
        wait_for(query, lambda: kafka(spark, spec.bootstrap, subscribe=sink).count() >= 30, "the first records")
        produce(spec.bootstrap, source, [(i % 3, b"%d" % i, b"during-%d" % i, []) for i in range(30, 90)])
        wait_for(query, lambda: kafka(spark, spec.bootstrap, subscribe=sink).count() >= 90, "the later records")
    finally:
        query.stop()
    written = kafka(spark, spec.bootstrap, subscribe=sink).select(F.col("value").cast("string")).collect()
    assert sorted(r.value for r in written) == sorted(
        [f"BEFORE-{i}" for i in range(30)] + [f"DURING-{i}" for i in range(30, 90)])


def run_available(spark: SparkSession, bootstrap: str, topic: str, directory: Path, **options: str) -> StreamingQuery:
    """A query reading what `topic` holds now, appending (partition, offset) to parquet files in `directory`
    (a sink that resumes from its checkpoint)."""
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
              .option("startingOffsets", "earliest").options(**options).load().select("partition", "offset"))
    return (stream.writeStream.format("parquet").option("path", str(directory / "out"))
            .option("checkpointLocation", str(directory / "checkpoint")).trigger(availableNow=True).start())


def offsets_written(spark: SparkSession, directory: Path) -> list[int]:
    return sorted(r.offset for r in spark.read.parquet(str(directory / "out")).collect())


def delete_records(bootstrap: str, topic: str, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, before)]).values():
        assert future.result(timeout=30).low_watermark == before


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_fail_on_data_loss_after_delete_records(spark: SparkSession, spec: cluster.ClusterSpec, tmp_path: Path,
                                                fail_on_data_loss: bool) -> None:
    topic = new_topic(spec, 1)
    produce(spec.bootstrap, topic, [(0, None, b"%d" % i, []) for i in range(10)])
    options = {"failOnDataLoss": str(fail_on_data_loss).lower()}
    first = run_available(spark, spec.bootstrap, topic, tmp_path, **options)
    assert first.awaitTermination(QUERY_TIMEOUT_S)
    assert offsets_written(spark, tmp_path) == list(range(10))
    produce(spec.bootstrap, topic, [(0, None, b"%d" % i, []) for i in range(10, 30)], first=10)
    delete_records(spec.bootstrap, topic, 20)  # offsets 10-19, which the query has not read, are gone

    second = run_available(spark, spec.bootstrap, topic, tmp_path, **options)
    if fail_on_data_loss:
        with pytest.raises(StreamingQueryException, match="(?i)data.*lost|DATA_LOSS"):
            second.awaitTermination(QUERY_TIMEOUT_S)
        assert offsets_written(spark, tmp_path) == list(range(10))
    else:
        assert second.awaitTermination(QUERY_TIMEOUT_S)
        assert second.exception() is None
        assert offsets_written(spark, tmp_path) == [*range(10), *range(20, 30)]


def test_read_committed_skips_aborted_records_and_stops_at_the_last_stable_offset(
        spark: SparkSession, spec: cluster.ClusterSpec, tmp_path: Path) -> None:
    topic = new_topic(spec, 1)
    txn = Producer({"bootstrap.servers": spec.bootstrap, "transactional.id": topic, "linger.ms": 0,
                    "transaction.timeout.ms": 120_000})
    txn.init_transactions(60)
    plain = Producer({"bootstrap.servers": spec.bootstrap, "acks": "all", "linger.ms": 0})
    # Offsets: committed 0-3 (marker 4), aborted 5-8 (marker 9), committed 10-11 (marker 12), an open transaction
    # 13-14 and a plain record 15 after it: the last stable offset is 13 until the open one is decided.
    for outcome, values in (("commit", [b"c0", b"c1", b"c2", b"c3"]), ("abort", [b"a0", b"a1", b"a2", b"a3"]),
                            ("commit", [b"l0", b"l1"]), ("open", [b"o0", b"o1"])):
        txn.begin_transaction()
        for value in values:
            txn.produce(topic, value, partition=0)
        assert txn.flush(30) == 0
        if outcome != "open":
            getattr(txn, f"{outcome}_transaction")(60)
    plain.produce(topic, b"p0", partition=0)
    assert plain.flush(30) == 0
    try:
        def read(isolation: str) -> list[tuple[int, bytes]]:
            df = kafka(spark, spec.bootstrap, subscribe=topic, **{"kafka.isolation.level": isolation})
            return sorted((r.offset, r.value) for r in df.collect())

        committed = [(0, b"c0"), (1, b"c1"), (2, b"c2"), (3, b"c3"), (10, b"l0"), (11, b"l1")]
        assert read("read_committed") == committed
        assert [o for o, _ in read("read_uncommitted")] == [0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 13, 14, 15]
        query = run_available(spark, spec.bootstrap, topic, tmp_path, **{"kafka.isolation.level": "read_committed"})
        assert query.awaitTermination(QUERY_TIMEOUT_S) and query.exception() is None
        assert offsets_written(spark, tmp_path) == [o for o, _ in committed]
    finally:
        txn.abort_transaction(60)


class Flow:
    """A producer thread with idempotence on, so retries after a failover add no duplicates to the log; keeps the
    values the cluster acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 60_000})
        self.topic, self.partitions = topic, partitions
        self.acked: list[bytes] = []
        self.failed: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append(msg.value())
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        for i in range(100_000):  # bounded; stopped long before
            if self.stopping.is_set():
                break
            self.producer.produce(self.topic, b"v%d" % i, partition=i % self.partitions, on_delivery=self._delivered)
            self.producer.poll(0.01)
        self.producer.flush(90)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(120)
        assert not self.thread.is_alive()


def test_a_query_reads_every_record_exactly_once_across_a_killed_leader(
        spark: SparkSession, spec: cluster.ClusterSpec, tmp_path: Path) -> None:
    topic = new_topic(spec, 3)
    table = f"failover_{uuid.uuid4().hex[:8]}"
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", spec.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest").load()
              .select("partition", "offset", "value"))
    query = (stream.writeStream.format("memory").queryName(table)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    flow = Flow(spec.bootstrap, topic, 3)
    flow.thread.start()
    try:
        wait_for(query, lambda: spark.table(table).count() >= 300, "records flowing before the kill")
        killed = next(r.leader for r in describe_rows(spec.bootstrap, [topic]) if r.partition == 0)
        cluster.signal_node(spec, killed, signal.SIGKILL)
        seen = spark.table(table).count()
        wait_for(query, lambda: spark.table(table).count() >= seen + 600, "records after the kill", FAILOVER_TIMEOUT_S)
        flow.stop()
        assert not flow.failed, flow.failed[:3]
        wait_for(query, lambda: spark.table(table).count() >= len(flow.acked), "every acknowledged record")
        time.sleep(2)  # a duplicate would come in a later micro-batch
    finally:
        query.stop()
        flow.stopping.set()
    read = spark.table(table).collect()
    by_partition: dict[int, list[int]] = {}
    for r in read:
        by_partition.setdefault(r.partition, []).append(r.offset)
    for partition, offsets in by_partition.items():
        assert sorted(offsets) == list(range(len(offsets))), f"partition {partition}: gaps or duplicates"
    assert sorted(r.value for r in read) == sorted(flow.acked)
