"""Spark reading a topic through `format("insync")` beside Spark reading the same records from parquet.

`run` fills a topic with `records` records of `size` random bytes over `partitions` partitions, copies the
topic to a local parquet file through the data source itself (so both sides hold the very same rows, schema
included), then times, in alternating rounds, a batch read of each into Spark's `noop` sink: every column is
materialised and nothing is written. It reports the best round of each (rows/s, MB/s of record values) and the
ratio insync / parquet; the target is >= 0.5.

The last record of each partition is produced on its own, in a one-record batch: some Kafka-compatible brokers
(Tansu) answer ListOffsets(latest) with the base offset of the newest batch + 1, which is the high watermark
only when that batch holds one record.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # public, not in stubs
from pyspark.sql import DataFrame, SparkSession

from insync.spark.datasource import InsyncDataSource

DELIVERY_TIMEOUT_S = 120.0
TOPIC_TIMEOUT_S = 30.0
ROUNDS_MAX = 20


@dataclass(frozen=True, slots=True)
class SourceBenchResult:
    records: int
    record_bytes: int
    partitions: int
    spark_partitions: int
    insync_seconds: float
    insync_rows_per_s: float
    insync_mb_per_s: float
    parquet_seconds: float
    parquet_rows_per_s: float
    parquet_mb_per_s: float
    ratio: float  # insync rows/s over parquet rows/s

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def fill_topic(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    """Create `topic` and produce `records` records of `size` random bytes each, round-robin over partitions.

    Every value is different, as in a real topic: with one value repeated, parquet stores it once in a
    dictionary and its read rate (the comparison) is that of decoding a constant, 3-4 times the real one.
    """
    assert records >= partitions > 0 and size > 0, (records, partitions, size)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(TOPIC_TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 200_000, "acks": "all"})
    bulk = records - partitions
    for i in range(bulk):
        _produce(producer, topic, i.to_bytes(8, "big"), os.urandom(size), i % partitions)
    _flush(producer)
    for i in range(bulk, records):  # one-record batches last (module docstring)
        _produce(producer, topic, i.to_bytes(8, "big"), os.urandom(size), i % partitions)
        _flush(producer)


def _produce(producer: Producer, topic: str, key: bytes, value: bytes, partition: int) -> None:
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    while True:
        try:
            producer.produce(topic, value, key, partition=partition)
            return
        except BufferError:
            if time.monotonic() > deadline:
                raise
            producer.poll(0.05)


def _flush(producer: Producer) -> None:
    if producer.flush(DELIVERY_TIMEOUT_S) != 0:
        raise TimeoutError(f"records not acknowledged within {DELIVERY_TIMEOUT_S} s")


def _timed_noop(df: DataFrame) -> float:
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def run(spark: SparkSession, bootstrap: str, *, records: int = 1_000_000, size: int = 1024, partitions: int = 2,
        rounds: int = 5, min_partitions: int | None = None) -> SourceBenchResult:
    """Measure both reads `rounds` times, alternating, and keep the best of each."""
    assert 0 < rounds <= ROUNDS_MAX, rounds
    spark.dataSource.register(InsyncDataSource)
    topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
    fill_topic(bootstrap, topic, partitions, records, size)
    reader = (spark.read.format("insync").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic))
    if min_partitions is not None:
        reader = reader.option("minPartitions", str(min_partitions))
    directory = tempfile.mkdtemp(prefix="insync-bench-parquet-")
    try:
        path = os.path.join(directory, "records.parquet")
        reader.load().write.parquet(path)
        parquet = spark.read.parquet(path)
        assert parquet.count() == records, "the parquet copy must hold every record"
        insync_s, parquet_s = float("inf"), float("inf")
        for _ in range(rounds):
            insync_s = min(insync_s, _timed_noop(reader.load()))
            parquet_s = min(parquet_s, _timed_noop(spark.read.parquet(path)))
        spark_partitions = reader.load().rdd.getNumPartitions()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    mb = records * size / 1e6
    return SourceBenchResult(
        records=records, record_bytes=size, partitions=partitions, spark_partitions=spark_partitions,
        insync_seconds=round(insync_s, 3), insync_rows_per_s=round(records / insync_s),
        insync_mb_per_s=round(mb / insync_s, 1), parquet_seconds=round(parquet_s, 3),
        parquet_rows_per_s=round(records / parquet_s), parquet_mb_per_s=round(mb / parquet_s, 1),
        ratio=round(parquet_s / insync_s, 3))
