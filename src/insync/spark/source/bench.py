"""Spark reading a topic through `format("insync")` beside Spark reading the same records from parquet.

`run` fills a topic, copies it to a local parquet file through the data source itself (so both sides hold the
very same rows), reads each twice untimed (the JVM's JIT), then times batch reads into Spark's `noop` sink
(every column materialised, nothing written). Each round starts with the next reader in turn: the JVM goes on
compiling in the background what the previous read made hot, and on few cores that slows whichever read comes
next, so a fixed order would charge it to the same reader every round. `format("insync-floor")` only yields
ready-made Arrow batches: what Spark itself costs any Python source. `format("insync-ceiling")` also receives,
over loopback TCP, as many bytes as the records take on the wire: the most any Kafka-protocol source can reach
here. The result has the best and median round of each, and the ratio insync / parquet (the target is >= 0.5).
The last record of each partition is produced in a one-record batch: some brokers (Tansu) answer
ListOffsets(latest) with the newest batch's base offset + 1, the high watermark only for a one-record batch.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import socket
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # public, not in stubs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from insync.spark.source.datasource import SCHEMA_DDL, InsyncDataSource
from insync.spark.source.kafka_io import arrow_schema

DELIVERY_TIMEOUT_S = 120.0
TOPIC_TIMEOUT_S = 30.0
ROUNDS_MAX = 20
WARMUP_ROUNDS = 2  # parquet's round time falls by a quarter over its first reads in a JVM (JIT), insync's less
FLOOR_BATCH_BYTES = 8 * 1024 * 1024  # about what one fetch of the insync source becomes
# What a v2 record adds on the wire around an 8-byte key and its value (length, attributes, two deltas, two
# lengths, header count), batch headers spread over a batch's records: the ceiling reader receives this much more.
WIRE_OVERHEAD_BYTES = 20
SEND_CHUNK_BYTES = 8 * 1024 * 1024
SENDER_CONNECTIONS_MAX = 10_000
SENDER_START_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class SourceBenchResult:
    records: int
    record_bytes: int
    partitions: int
    spark_partitions: int
    rounds: int
    # Per reader: the best and the median round, in seconds, and rows/s and MB/s of the best.
    insync_seconds: float
    insync_median_seconds: float
    insync_rows_per_s: float
    insync_mb_per_s: float
    floor_seconds: float
    floor_median_seconds: float
    floor_rows_per_s: float
    parquet_seconds: float
    parquet_median_seconds: float
    parquet_rows_per_s: float
    parquet_mb_per_s: float
    ratio: float  # insync rows/s over parquet rows/s, best rounds (the target: >= 0.5)
    median_ratio: float  # the same over median rounds
    floor_ratio: float  # the Arrow-only Python source over parquet, best rounds: Spark's own ceiling for any
    # Python data source on this machine
    ceiling_seconds: float
    ceiling_median_seconds: float
    ceiling_ratio: float  # the floor plus the records' bytes over loopback TCP, over parquet, best rounds: the
    # ceiling for any Kafka-protocol Python source here

    def to_json(self) -> str:
        return json.dumps(asdict(self))


class FloorDataSource(DataSource):
    """`format("insync-floor")`: a Python data source that yields ready-made Arrow batches of the insync schema
    and does nothing else. Spark's cost of moving those batches from its Python workers into rows is the least
    any Python data source pays, so its rate beside parquet's shows how much of the gap is Spark's own."""

    @classmethod
    def name(cls) -> str:
        return "insync-floor"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return _FloorReader(int(self.options["rows"]), int(self.options["size"]), int(self.options["partitions"]))


class _FloorReader(DataSourceReader):
    def __init__(self, rows: int, size: int, partitions: int) -> None:
        self.rows, self.size, self.parts = rows, size, partitions

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(self.rows // self.parts + (1 if i < self.rows % self.parts else 0))
                for i in range(self.parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        rows: int = partition.value
        per_batch = max(1, min(rows, FLOOR_BATCH_BYTES // self.size))
        n = np.arange(per_batch, dtype=np.int64)
        value_offsets = np.arange(per_batch + 1, dtype=np.int32) * self.size
        values = pa.Array.from_buffers(pa.binary(), per_batch, [
            None, pa.py_buffer(value_offsets), pa.py_buffer(np.random.bytes(per_batch * self.size))])
        batch = pa.RecordBatch.from_arrays([
            pa.array(n.astype(">i8").view("S8"), pa.binary()), values,
            pa.repeat(pa.scalar("floor", pa.string()), per_batch), pa.repeat(pa.scalar(0, pa.int32()), per_batch),
            pa.array(n), pa.array(n * 1000).cast(pa.timestamp("us", tz="UTC")),
            pa.repeat(pa.scalar(0, pa.int32()), per_batch)], schema=arrow_schema(False))
        done = 0
        while done < rows:  # bounded by `rows`
            take = min(per_batch, rows - done)
            yield batch if take == per_batch else batch.slice(0, take)
            done += take


class CeilingDataSource(FloorDataSource):
    """`format("insync-ceiling")`: the floor, plus each task receiving `rows * (size + WIRE_OVERHEAD_BYTES)`
    bytes from a `ByteSender` on `port` as it yields its batches (module docstring)."""

    @classmethod
    def name(cls) -> str:
        return "insync-ceiling"

    def reader(self, schema: StructType) -> DataSourceReader:
        return _CeilingReader(int(self.options["rows"]), int(self.options["size"]), int(self.options["partitions"]),
                              int(self.options["port"]))


class _CeilingReader(_FloorReader):
    def __init__(self, rows: int, size: int, partitions: int, port: int) -> None:
        super().__init__(rows, size, partitions)
        self.port = port

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        rows: int = partition.value
        total = rows * (self.size + WIRE_OVERHEAD_BYTES)
        with socket.create_connection(("127.0.0.1", self.port), timeout=SENDER_START_TIMEOUT_S) as sock:
            sock.sendall(total.to_bytes(8, "big"))
            view = memoryview(bytearray(max(1, min(total, SEND_CHUNK_BYTES))))
            received = 0
            for batch in super().read(partition):  # each batch once its share of the bytes is in
                share = total * batch.num_rows // rows
                received = _receive(sock, view, received, min(total, received + share))
                yield batch
            _receive(sock, view, received, total)


def _receive(sock: socket.socket, view: memoryview, received: int, until: int) -> int:
    while received < until:  # bounded: each pass takes at least a byte or raises
        n = sock.recv_into(view[:min(len(view), until - received)])
        if n == 0:
            raise ConnectionError("the byte sender closed early")
        received += n
    return received


class ByteSender:
    """A process on 127.0.0.1 that answers each connection's 8-byte count with that many bytes, sent from
    memory: the cheapest possible broker. `with ByteSender() as port:`."""

    def __enter__(self) -> int:
        context = multiprocessing.get_context("spawn")  # the driver runs JVM gateway threads: do not fork it
        ports = context.Queue()
        self._process = context.Process(target=_send_bytes, args=(ports,), daemon=True)
        self._process.start()
        port: int = ports.get(timeout=SENDER_START_TIMEOUT_S)
        return port

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.join(SENDER_START_TIMEOUT_S)


def _send_bytes(ports: multiprocessing.Queue[int]) -> None:
    data = memoryview(os.urandom(SEND_CHUNK_BYTES))
    with socket.create_server(("127.0.0.1", 0)) as server:
        ports.put(server.getsockname()[1])

        def serve(conn: socket.socket) -> None:
            with conn:
                total, sent = int.from_bytes(conn.recv(8, socket.MSG_WAITALL), "big"), 0
                while sent < total:  # bounded by the count asked for
                    chunk = min(SEND_CHUNK_BYTES, total - sent)
                    conn.sendall(data[:chunk])
                    sent += chunk

        for _ in range(SENDER_CONNECTIONS_MAX):  # the process is terminated when the benchmark ends
            conn, _ = server.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()


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
    """Time the three reads `rounds` times each, in turn, and report the best and the median of each."""
    assert 0 < rounds <= ROUNDS_MAX, rounds
    spark.dataSource.register(InsyncDataSource)
    spark.dataSource.register(FloorDataSource)
    spark.dataSource.register(CeilingDataSource)
    topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
    fill_topic(bootstrap, topic, partitions, records, size)
    reader = (spark.read.format("insync").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic))
    if min_partitions is not None:
        reader = reader.option("minPartitions", str(min_partitions))
    spark_partitions = reader.load().rdd.getNumPartitions()
    shape = {"rows": str(records), "size": str(size), "partitions": str(spark_partitions)}
    floor = spark.read.format("insync-floor").options(**shape)
    directory = tempfile.mkdtemp(prefix="insync-bench-parquet-")
    try:
        path = os.path.join(directory, "records.parquet")
        reader.load().write.parquet(path)
        assert spark.read.parquet(path).count() == records, "the parquet copy must hold every record"
        with ByteSender() as port:
            ceiling = spark.read.format("insync-ceiling").options(**shape, port=str(port))
            readers: dict[str, Callable[[], DataFrame]] = {
                "insync": reader.load, "floor": floor.load, "ceiling": ceiling.load,
                "parquet": lambda: spark.read.parquet(path)}
            times: dict[str, list[float]] = {name: [] for name in readers}
            for _ in range(WARMUP_ROUNDS):  # untimed: the JVM compiles each reader's hot code in its first reads
                for load in readers.values():
                    _timed_noop(load())
            names = list(readers)
            for round_index in range(rounds):  # each round starts with the next reader (module docstring)
                for name in names[round_index % len(names):] + names[:round_index % len(names)]:
                    times[name].append(_timed_noop(readers[name]()))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    best = {k: min(v) for k, v in times.items()}
    median = {k: statistics.median(v) for k, v in times.items()}
    mb = records * size / 1e6
    return SourceBenchResult(
        records=records, record_bytes=size, partitions=partitions, spark_partitions=spark_partitions, rounds=rounds,
        insync_seconds=round(best["insync"], 3), insync_median_seconds=round(median["insync"], 3),
        insync_rows_per_s=round(records / best["insync"]), insync_mb_per_s=round(mb / best["insync"], 1),
        floor_seconds=round(best["floor"], 3), floor_median_seconds=round(median["floor"], 3),
        floor_rows_per_s=round(records / best["floor"]),
        parquet_seconds=round(best["parquet"], 3), parquet_median_seconds=round(median["parquet"], 3),
        parquet_rows_per_s=round(records / best["parquet"]), parquet_mb_per_s=round(mb / best["parquet"], 1),
        ratio=round(best["parquet"] / best["insync"], 3), median_ratio=round(median["parquet"] / median["insync"], 3),
        floor_ratio=round(best["parquet"] / best["floor"], 3),
        ceiling_seconds=round(best["ceiling"], 3), ceiling_median_seconds=round(median["ceiling"], 3),
        ceiling_ratio=round(best["parquet"] / best["ceiling"], 3))
