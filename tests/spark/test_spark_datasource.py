"""format("insync") against a live Kafka-protocol broker: batch and streaming reads, the sink, options, data loss.

The broker comes from `kafka_bootstrap`: a live local insync cluster (3 brokers). The tests were first written
against Tansu, which answers ListOffsets(latest) with the newest batch's base offset + 1 instead of the high
watermark, so the test producers still put each record in its own batch (`batch.num.messages=1`) and the tests
hold on either broker. The "behind the log start" case is also covered by `loss_when_stalled` with explicit
watermarks; truncation and offsets going back are covered against the broker (a range past the high watermark; a
topic deleted and re-created).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # public, not in stubs
from pyspark.errors import AnalysisException, StreamingQueryException
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from insync import errors
from insync.admin import describe_rows
from insync.chaos.cluster import ClusterSpec
from insync.protocol.records import build_batch
from insync.spark.source import kafka_io
from insync.spark.source.bench import ByteSender
from insync.spark.source.bench import run as run_source_bench
from insync.spark.source.datasource import (
    InsyncDataSource,
    InsyncStreamReader,
    InsyncStreamWriter,
    offsets_to_json,
    parse_sink_options,
    parse_source_options,
    rate_limit,
    split_ranges,
)
from insync.spark.source.fetch_client import FetchError, FetchResult
from insync.spark.source.kafka_io import (
    DataLoss,
    DataLossError,
    Metadata,
    OffsetRange,
    RangeFetch,
    ReaderConf,
    Subscription,
    admin_config,
    check_reader_options,
    loss_when_stalled,
)
from insync.spark.source.options import OptionError
from insync.types import TopicPartition
from insync.waiting import wait_until

Record = tuple[int, bytes | None, bytes | None, list[tuple[str, str | bytes | None]] | None]  # partition, key, value, headers
QUERY_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def kafka_bootstrap(insync_cluster: ClusterSpec) -> str:
    return insync_cluster.bootstrap


@pytest.fixture(scope="module")
def insync(spark: SparkSession) -> SparkSession:
    spark.dataSource.register(InsyncDataSource)
    return spark


def create_topic(bootstrap: str, partitions: int, name: str | None = None) -> str:
    topic = name or f"ds-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(10)
    return topic


def produce(bootstrap: str, topic: str, records: list[Record]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0})
    for partition, key, value, headers in records:
        producer.produce(topic, value, key, partition=partition, headers=headers)
    assert producer.flush(10) == 0


def read(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    return spark.read.format("insync").option("kafka.bootstrap.servers", bootstrap).options(**options).load()


def by_position(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r.topic, r.partition, r.offset))


# 3 partitions, 10 records each: null keys, a null value (tombstone), headers (some null) on every third record.
KNOWN: list[Record] = [
    (i % 3, None if i % 7 == 0 else b"k%d" % i, None if i == 13 else b"v%d" % i,
     [("n", b"%d" % i), ("tag", None if i % 2 else b"x")] if i % 3 == 0 else None)
    for i in range(30)
]


@pytest.fixture(scope="module")
def known_topic(kafka_bootstrap: str) -> Iterator[tuple[str, float, float]]:
    topic = create_topic(kafka_bootstrap, 3)
    before = time.time()
    produce(kafka_bootstrap, topic, KNOWN)
    yield topic, before, time.time()


def expected_rows(records: list[Record]) -> list[tuple[int, int, bytes | None, bytes | None, object]]:
    """(partition, offset, key, value, headers) as the broker assigns offsets: in order within a partition."""
    next_offset: dict[int, int] = {}
    result = []
    for partition, key, value, headers in records:
        offset = next_offset.get(partition, 0)
        next_offset[partition] = offset + 1
        result.append((partition, offset, key, value, [tuple(h) for h in headers] if headers else None))
    return sorted(result, key=lambda r: (r[0], r[1]))


def test_batch_read_returns_every_record_with_the_kafka_schema(insync: SparkSession, kafka_bootstrap: str,
                                                               known_topic: tuple[str, float, float]) -> None:
    topic, before, after = known_topic
    df = read(insync, kafka_bootstrap, subscribe=topic, includeHeaders="true")
    headers = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
    assert df.schema == StructType([
        StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
        StructField("partition", IntegerType()), StructField("offset", LongType()),
        StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType()),
        StructField("headers", headers)])
    rows = by_position(df.collect())
    assert len(rows) == len(KNOWN)
    got = [(r.partition, r.offset, r.key, r.value,
            [(h.key, h.value) for h in r.headers] if r.headers is not None else None) for r in rows]
    assert got == expected_rows(KNOWN)
    assert {r.topic for r in rows} == {topic}
    assert {r.timestampType for r in rows} == {0}  # CreateTime
    # Spark returns naive datetimes in the session zone, which the shared session pins to UTC.
    stamps = [r.timestamp.replace(tzinfo=UTC).timestamp() for r in rows]
    assert all(before - 1 <= s <= after + 1 for s in stamps)
    assert "headers" not in read(insync, kafka_bootstrap, subscribe=topic).columns


def test_batch_read_exact_offset_ranges_split_by_min_partitions(insync: SparkSession, kafka_bootstrap: str,
                                                               known_topic: tuple[str, float, float]) -> None:
    topic = known_topic[0]
    starting = json.dumps({topic: {"0": 2, "1": -2, "2": 5}})
    ending = json.dumps({topic: {"0": 7, "1": -1, "2": 5}})
    df = read(insync, kafka_bootstrap, subscribePattern=topic.replace("-", "."), startingOffsets=starting,
              endingOffsets=ending, minPartitions="6")
    assert df.rdd.getNumPartitions() == 6  # [2, 7) and [0, 10) cut into pieces; the empty [5, 5) dropped
    got = [(r.partition, r.offset) for r in by_position(df.collect())]
    assert got == [(0, o) for o in range(2, 7)] + [(1, o) for o in range(10)]


def test_batch_read_without_crc_checks_reads_the_same(insync: SparkSession, kafka_bootstrap: str,
                                                      known_topic: tuple[str, float, float]) -> None:
    topic = known_topic[0]
    rows = read(insync, kafka_bootstrap, subscribe=topic, includeHeaders="true",
                **{"kafka.check.crcs": "false"}).collect()
    got = [(r.partition, r.offset, r.key, r.value,
            [(h.key, h.value) for h in r.headers] if r.headers is not None else None) for r in by_position(rows)]
    assert got == expected_rows(KNOWN)


def test_batch_read_in_fetches_smaller_than_a_batch_group(insync: SparkSession, kafka_bootstrap: str) -> None:
    """Tiny fetches (`kafka.max.partition.fetch.bytes`) over batches of many records, plain and compressed: a
    task fetches again from where each response's last whole batch ends, and reads every record once."""
    topic = create_topic(kafka_bootstrap, 1)
    for codec in ("none", "zstd"):
        producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 50, "compression.type": codec})
        for i in range(500):
            producer.produce(topic, b"%s-%d" % (codec.encode(), i) * 20, b"%d" % i, partition=0)
        assert producer.flush(10) == 0
    rows = read(insync, kafka_bootstrap, subscribe=topic, **{"kafka.max.partition.fetch.bytes": "2048"}).collect()
    assert [r.offset for r in by_position(rows)] == list(range(1000))
    assert [r.value for r in by_position(rows)] == [b"%s-%d" % (c, i) * 20 for c in (b"none", b"zstd")
                                                    for i in range(500)]


def test_batch_read_from_another_kafka_protocol_broker(insync: SparkSession, tansu_bootstrap: str) -> None:
    """The source speaks only the Kafka protocol: the same read works against Tansu (one record a batch, see the
    module doc), from the driver's planning to the tasks' fetches."""
    topic = create_topic(tansu_bootstrap, 2)
    records: list[Record] = [(i % 2, b"k%d" % i, b"v%d" % i, [("n", b"%d" % i)] if i % 3 == 0 else None)
                             for i in range(20)]
    produce(tansu_bootstrap, topic, records)
    rows = by_position(read(insync, tansu_bootstrap, subscribe=topic, includeHeaders="true").collect())
    got = [(r.partition, r.offset, r.key, r.value,
            [(h.key, h.value) for h in r.headers] if r.headers is not None else None) for r in rows]
    assert got == expected_rows(records)


def test_batch_read_of_assigned_partitions(insync: SparkSession, kafka_bootstrap: str,
                                           known_topic: tuple[str, float, float]) -> None:
    topic = known_topic[0]
    rows = read(insync, kafka_bootstrap, assign=json.dumps({topic: [2]})).collect()
    assert sorted(r.offset for r in rows) == list(range(10)) and {r.partition for r in rows} == {2}


def test_batch_read_from_a_timestamp(insync: SparkSession, kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, 1)
    base_ms = int(time.time() * 1000) - 100_000
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "batch.num.messages": 1, "linger.ms": 0})
    for i in range(5):
        producer.produce(topic, b"t%d" % i, partition=0, timestamp=base_ms + i * 1000)
    assert producer.flush(10) == 0
    with Metadata({"bootstrap.servers": kafka_bootstrap}) as md:
        if md.for_timestamp([TopicPartition(topic, 0)], base_ms + 1500)[TopicPartition(topic, 0)] == 0:
            pytest.skip("this broker ignores the timestamp in ListOffsets (Tansu 0.6 answers 0)")
    rows = read(insync, kafka_bootstrap, subscribe=topic, startingTimestamp=str(base_ms + 1500)).collect()
    assert sorted(r.offset for r in rows) == [2, 3, 4]
    assert read(insync, kafka_bootstrap, subscribe=topic, startingTimestamp=str(base_ms + 9000)).collect() == []


SOURCE = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}


@pytest.mark.parametrize(("options", "streaming", "named"), [
    ({"subscribe": "t"}, False, ["kafka.bootstrap.servers"]),
    ({"kafka.bootstrap.servers": "h:1"}, False, ["subscribe", "subscribePattern", "assign"]),
    (SOURCE | {"assign": '{"t": [0]}'}, False, ["subscribe", "assign"]),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": " , "}, False, ["subscribe"]),
    ({"kafka.bootstrap.servers": "h:1", "assign": '{"t": 0}'}, False, ["assign"]),
    (SOURCE | {"startingOffsets": "earliest", "startingTimestamp": "5"}, False,
     ["startingOffsets", "startingTimestamp"]),
    (SOURCE | {"startingOffsets": "latest"}, False, ["startingOffsets"]),
    (SOURCE | {"startingOffsets": '{"t": {"0": -1}}'}, False, ["startingOffsets"]),
    (SOURCE | {"endingOffsets": '{"t": {"0": -2}}'}, False, ["endingOffsets"]),
    (SOURCE | {"endingOffsets": "latest"}, True, ["endingOffsets"]),
    (SOURCE | {"maxOffsetsPerTrigger": "10"}, False, ["maxOffsetsPerTrigger"]),
    (SOURCE | {"maxOffsetsPerTrigger": "0"}, True, ["maxOffsetsPerTrigger"]),
    (SOURCE | {"minPartitions": "many"}, False, ["minPartitions"]),
    (SOURCE | {"failOnDataLoss": "maybe"}, False, ["failOnDataLoss"]),
    (SOURCE | {"startingOfsets": "earliest"}, False, ["startingofsets"]),  # Spark lower-cases keys
    (SOURCE | {"kafka.auto.offset.reset": "latest"}, False, ["kafka.auto.offset.reset"]),
    ({"kafka.bootstrap.servers": "h:1", "subscribePattern": "("}, True, ["subscribePattern"]),
    # Security settings the reader cannot honour are refused, not silently ignored.
    (SOURCE | {"kafka.security.protocol": "TLS"}, False, ["kafka.security.protocol=tls"]),
    (SOURCE | {"kafka.security.protocol": "SASL_SSL"}, True, ["kafka.sasl.mechanism=GSSAPI"]),  # Kafka's default
    (SOURCE | {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN"}, False,
     ["kafka.sasl.jaas.config"]),
    (SOURCE | {"kafka.ssl.truststore.type": "JKS"}, False, ["kafka.ssl.truststore.type", "PEM"]),
    (SOURCE | {"kafka.sasl.jaas.config": "nonsense"}, False, ["kafka.sasl.jaas.config"]),
    (SOURCE | {"kafka.max.partition.fetch.bytes": "8MB"}, False, ["kafka.max.partition.fetch.bytes"]),
    (SOURCE | {"kafka.check.crcs": "sometimes"}, False, ["kafka.check.crcs", "true or false"]),
    (SOURCE | {"kafka.isolation.level": "READ_COMMITTED"}, True,
     ["kafka.isolation.level", "'read_uncommitted', 'read_committed'", "'READ_COMMITTED'"]),
    # reader=driver (the monitor's): streaming only, and without the options only tasks can honour.
    (SOURCE | {"reader": "executor"}, True, ["option reader", "'tasks', 'driver'", "'executor'"]),
    (SOURCE | {"reader": "driver"}, False, ["option reader applies to streaming"]),
    (SOURCE | {"reader": "driver", "maxOffsetsPerTrigger": "10"}, True, ["maxOffsetsPerTrigger", "reader=driver"]),
    (SOURCE | {"reader": "driver", "minPartitions": "4"}, True, ["minPartitions", "reader=driver"]),
])
def test_source_option_errors_name_the_option(options: dict[str, str], streaming: bool, named: list[str]) -> None:
    # Spark hands options over lower-cased; errors still use the documented spelling.
    with pytest.raises(OptionError) as info:
        parse_source_options({k.lower(): v for k, v in options.items()}, streaming)
    assert all(name in str(info.value) for name in named), str(info.value)


def test_option_errors_surface_at_load(insync: SparkSession, kafka_bootstrap: str,
                                       known_topic: tuple[str, float, float]) -> None:
    topic = known_topic[0]
    with pytest.raises(AnalysisException, match="exactly one of the options subscribe"):
        read(insync, kafka_bootstrap, subscribe=topic, assign=json.dumps({topic: [0]}))
    with pytest.raises(AnalysisException, match=r"startingOffsets must give an offset for every .*-1'"):
        read(insync, kafka_bootstrap, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 0}})).collect()


def test_sink_option_errors_name_the_option() -> None:
    schema = StructType([StructField("value", StringType()), StructField("partition", LongType())])
    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    cases = [(base, schema, "partition"),
             (base, StructType([StructField("key", StringType())]), "value"),
             ({"kafka.bootstrap.servers": "h:1"}, StructType([StructField("value", BinaryType())]), "topic"),
             (base | {"kafka.acks": "1"}, StructType([StructField("value", BinaryType())]), "kafka.acks")]
    for options, sink_schema, named in cases:
        with pytest.raises(OptionError, match=named):
            parse_sink_options(options, sink_schema, overwrite=False)
    with pytest.raises(OptionError, match="append"):
        parse_sink_options(base, StructType([StructField("value", BinaryType())]), overwrite=True)


def test_driver_admin_client_reconnects_quickly_unless_the_user_says_otherwise() -> None:
    conf = admin_config({"bootstrap.servers": "h:1"})
    assert conf == {"bootstrap.servers": "h:1", "reconnect.backoff.ms": "10"}
    chosen = admin_config({"bootstrap.servers": "h:1", "reconnect.backoff.ms": "250"})
    assert chosen["reconnect.backoff.ms"] == "250"
    AdminClient(conf)  # librdkafka accepts the key and value
    # What only the tasks' reader uses stays out of the AdminClient (librdkafka would warn that it ignores it).
    tasks_only = {"max.partition.fetch.bytes": "1024", "fetch.wait.max.ms": "5", "check.crcs": "false",
                  "isolation.level": "read_committed"}
    assert admin_config({"bootstrap.servers": "h:1", "socket.timeout.ms": "9000"} | tasks_only) == {
        "bootstrap.servers": "h:1", "socket.timeout.ms": "9000", "reconnect.backoff.ms": "10"}


def test_driver_admin_clients_are_kept_per_configuration_bounded_and_reaped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    confs = [admin_config({"bootstrap.servers": f"h:{port}"}) for port in range(1, kafka_io.ADMIN_CLIENTS_MAX + 2)]
    first = kafka_io.admin_client(confs[0])
    assert kafka_io.admin_client(dict(confs[0])) is first  # the same options: the same client
    assert kafka_io.admin_client(confs[1]) is not first
    for conf in confs[1:]:
        kafka_io.admin_client(conf)
    assert kafka_io.admin_client(confs[0]) is not first  # the least recently used went past the cap
    assert len(kafka_io._admin_clients) == kafka_io.ADMIN_CLIENTS_MAX
    kafka_io.forget_admin_client(confs[0])
    assert kafka_io._admin_key(confs[0]) not in kafka_io._admin_clients
    # Idle clients are dropped, and the reaper ends with the last of them.
    monkeypatch.setattr(kafka_io, "ADMIN_CLIENT_IDLE_S", 0.0)
    monkeypatch.setattr(kafka_io, "ADMIN_REAPER_INTERVAL_S", 0.05)
    with kafka_io._admin_clients_lock:
        kafka_io._admin_clients.clear()
    kafka_io.admin_client(confs[0])
    reaper = kafka_io._admin_reaper
    assert reaper is not None
    reaper.join(10)
    assert not reaper.is_alive() and not kafka_io._admin_clients


def test_a_metadata_block_that_fails_drops_its_client() -> None:
    conf = {"bootstrap.servers": "127.0.0.1:1"}
    with pytest.raises(ValueError, match="planning failed"), Metadata(conf):
        assert kafka_io._admin_key(admin_config(conf)) in kafka_io._admin_clients
        raise ValueError("planning failed")
    assert kafka_io._admin_key(admin_config(conf)) not in kafka_io._admin_clients


def test_a_kept_admin_client_answers_the_next_queries(kafka_bootstrap: str,
                                                      known_topic: tuple[str, float, float]) -> None:
    topic = known_topic[0]
    tps = [TopicPartition(topic, p) for p in range(3)]
    with Metadata({"bootstrap.servers": kafka_bootstrap}) as md:
        client = md._admin
        assert md.partitions(Subscription(topics=(topic,))) == tps
    with Metadata({"bootstrap.servers": kafka_bootstrap}) as md:  # assign: no listing asked, one made anyway
        assert md._admin is client
        assert md.latest(tps) == dict.fromkeys(tps, 10) and md.earliest(tps) == dict.fromkeys(tps, 0)


def test_reader_settings_from_the_kafka_options() -> None:
    assert ReaderConf.of({"bootstrap.servers": "h:1"}) == ReaderConf("h:1")
    assert ReaderConf.of({"bootstrap.servers": "h:1"}).check_crcs
    assert not ReaderConf.of({"bootstrap.servers": "h:1", "check.crcs": "False"}).check_crcs
    # Spaces around a value are accepted on the driver and read the same way in the tasks.
    check_reader_options({"check.crcs": " false ", "fetch.wait.max.ms": " 5"})
    assert not ReaderConf.of({"bootstrap.servers": "h:1", "check.crcs": " false "}).check_crcs
    assert ReaderConf.of({"bootstrap.servers": "h:1", "isolation.level": "read_committed"}).read_committed
    assert not ReaderConf.of({"bootstrap.servers": "h:1", "isolation.level": "read_uncommitted"}).read_committed
    assert ReaderConf.of({"bootstrap.servers": "h:1", "max.partition.fetch.bytes": "1024",
                          "socket.timeout.ms": "2500"}) == ReaderConf("h:1", partition_fetch_bytes=1024,
                                                                      timeout_s=2.5)


def test_offsets_json_is_canonical_and_limits_split_by_backlog() -> None:
    offsets = {TopicPartition("b", 10): 1, TopicPartition("b", 9): 2, TopicPartition("a", 0): 3}
    assert json.dumps(offsets_to_json(offsets)) == '{"a": {"0": 3}, "b": {"9": 2, "10": 1}}'
    begin = {TopicPartition("t", 0): 0, TopicPartition("t", 1): 100, TopicPartition("t", 2): 7}
    latest = {TopicPartition("t", 0): 900, TopicPartition("t", 1): 199, TopicPartition("t", 2): 8}
    # Backlogs 900, 99, 1 share 100 offsets: 90, 9, and the 0.1 share rounded up so nobody starves.
    assert rate_limit(begin, latest, 100) == {TopicPartition("t", 0): 90, TopicPartition("t", 1): 109,
                                              TopicPartition("t", 2): 8}
    assert rate_limit(begin, latest, 5000) == latest
    pieces = split_ranges([OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 5, 5)], 3)
    assert pieces == [OffsetRange("t", 0, 0, 4), OffsetRange("t", 0, 4, 7), OffsetRange("t", 0, 7, 10)]


def run_available_now(insync: SparkSession, bootstrap: str, topic: str, checkpoint: Path,
                      **options: str) -> list[list[Row]]:
    """One Trigger.AvailableNow run; returns the rows of each micro-batch."""
    batches: list[list[Row]] = []
    stream = (insync.readStream.format("insync").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).options(**options).load())
    query = (stream.writeStream.foreachBatch(lambda df, _batch_id: batches.append(df.collect()))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish"
    if query.exception() is not None:
        raise query.exception()  # type: ignore[misc]
    return batches


def test_stream_available_now_resumes_from_checkpoint_without_gaps_or_repeats(
        insync: SparkSession, kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = create_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, [(i % 2, None, b"a%d" % i, None) for i in range(10)])
    first = run_available_now(insync, kafka_bootstrap, topic, tmp_path / "cp", startingOffsets="earliest",
                              maxOffsetsPerTrigger="6")
    assert len([b for b in first if b]) == 2 and all(len(b) <= 6 for b in first)  # 10 records, <= 6 a batch
    produce(kafka_bootstrap, topic, [(i % 2, None, b"b%d" % i, None) for i in range(7)])
    second = run_available_now(insync, kafka_bootstrap, topic, tmp_path / "cp", startingOffsets="earliest",
                               maxOffsetsPerTrigger="6")
    first_rows = [r for b in first for r in b]
    second_rows = [r for b in second for r in b]
    assert sorted(r.value for r in first_rows) == sorted(b"a%d" % i for i in range(10))
    assert sorted(r.value for r in second_rows) == sorted(b"b%d" % i for i in range(7))
    positions = sorted((r.partition, r.offset) for r in first_rows + second_rows)
    assert positions == [(0, o) for o in range(9)] + [(1, o) for o in range(8)]


def test_stream_picks_up_partitions_added_to_its_topic_from_their_earliest_offset(
        insync: SparkSession, kafka_bootstrap: str, tmp_path: Path) -> None:
    """As Spark's Kafka source: a partition that appears between micro-batches is read from its start."""
    from confluent_kafka.admin import NewPartitions  # type: ignore[attr-defined]

    topic = create_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, [(0, None, b"old%d" % i, None) for i in range(3)])
    first = [r.value for b in run_available_now(insync, kafka_bootstrap, topic, tmp_path / "cp") for r in b]
    assert first == []  # a stream starts at latest
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_partitions([NewPartitions(topic, 2)])[topic].result(timeout=10)
    wait_until(lambda: [r.leader >= 0 for r in describe_rows(kafka_bootstrap, [topic])] == [True, True], 10,
               "a leader for the new partition")
    produce(kafka_bootstrap, topic, [(0, None, b"new0", None), (1, None, b"new1-a", None), (1, None, b"new1-b", None)])
    second = [r for b in run_available_now(insync, kafka_bootstrap, topic, tmp_path / "cp") for r in b]
    assert sorted((r.partition, r.offset, r.value) for r in second) == [
        (0, 3, b"new0"), (1, 0, b"new1-a"), (1, 1, b"new1-b")]


def test_batch_sink_writes_every_row(insync: SparkSession, kafka_bootstrap: str) -> None:
    topic, other = create_topic(kafka_bootstrap, 2), create_topic(kafka_bootstrap, 1)
    rows = [(b"k%d" % i, f"v{i}", i % 2, [("i", b"%d" % i)]) for i in range(20)]
    df = insync.createDataFrame(rows, "key binary, value string, partition int, "
                                      "headers array<struct<key: string, value: binary>>")
    # One record per batch only for Tansu's ListOffsets (module docstring); the sink's defaults batch.
    tansu = {"kafka.batch.num.messages": "1", "kafka.linger.ms": "0"}
    (df.write.format("insync").option("kafka.bootstrap.servers", kafka_bootstrap).option("topic", topic)
     .options(**tansu).mode("append").save())
    routed = insync.createDataFrame([(topic if i < 3 else other, b"r%d" % i) for i in range(5)],
                                    "topic string, value binary")
    routed.write.format("insync").option("kafka.bootstrap.servers", kafka_bootstrap).options(**tansu) \
        .mode("append").save()
    back = read(insync, kafka_bootstrap, subscribe=f"{topic},{other}", includeHeaders="true").collect()
    assert sorted((r.partition, r.key, r.value, r.headers[0].value) for r in back if r.headers) == sorted(
        (i % 2, b"k%d" % i, b"v%d" % i, b"%d" % i) for i in range(20))
    routed_back = sorted((r.topic, r.value) for r in back if not r.headers)
    assert routed_back == sorted([(topic, b"r0"), (topic, b"r1"), (topic, b"r2"), (other, b"r3"), (other, b"r4")])


def test_stream_sink_copies_a_topic(insync: SparkSession, kafka_bootstrap: str, tmp_path: Path,
                                    known_topic: tuple[str, float, float]) -> None:
    assert "at-least-once" in (InsyncStreamWriter.__doc__ or "").lower()
    source, target = known_topic[0], create_topic(kafka_bootstrap, 1)
    stream = (insync.readStream.format("insync").option("kafka.bootstrap.servers", kafka_bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest").load())
    query = (stream.select("key", "value").writeStream.format("insync")
             .option("kafka.bootstrap.servers", kafka_bootstrap).option("topic", target)
             .option("kafka.batch.num.messages", "1").option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(QUERY_TIMEOUT_S) and query.exception() is None
    copied = read(insync, kafka_bootstrap, subscribe=target).collect()
    assert sorted((r.key or b"", r.value or b"") for r in copied) == sorted(
        (key or b"", value or b"") for _, key, value, _ in KNOWN)


def test_loss_when_stalled_behind_log_start_truncated_or_slow() -> None:
    r = OffsetRange("t", 3, 0, 50)
    # Retention or DeleteRecords moved the log start to 20: [5, 20) is gone, known at once.
    assert loss_when_stalled(r, 5, low=20, high=60, timed_out=False) == DataLoss("t", 3, 5, 20, (
        "were deleted (the log now starts at 20: retention or DeleteRecords)"))
    assert loss_when_stalled(r, 5, low=80, high=90, timed_out=False).end == 50  # type: ignore[union-attr]
    # The high watermark went back to 30: waiting first (a new leader may still catch up), then truncation.
    assert loss_when_stalled(r, 35, low=0, high=30, timed_out=False) is None
    truncated = loss_when_stalled(r, 35, low=0, high=30, timed_out=True)
    assert truncated is not None and (truncated.start, truncated.end, truncated.skipped) == (35, 50, 15)
    with pytest.raises(TimeoutError, match=r"offsets \[35, 50\)"):
        loss_when_stalled(r, 35, low=0, high=60, timed_out=True)
    assert "topic 't' partition 3: offsets [35, 50)" in truncated.message()


class _CuttingBroker:
    """A broker that, like Kafka given a batch larger than the fetch size and another partition first, answers
    with only the start of the batch. insync's broker always returns whole batches, so this stands in for it."""

    def __init__(self, batch: bytes) -> None:
        self.batch = batch

    def fetch(self, offset: int) -> FetchResult:
        return FetchResult(errors.NONE, self.batch[:100], 1, 0)

    def prefetch(self, offset: int) -> None:
        raise AssertionError("nothing to prefetch past an incomplete batch")


def test_task_refuses_a_batch_larger_than_its_fetch_size() -> None:
    batch = build_batch([(b"k", b"v" * 500)], base_offset=0)
    fetch = RangeFetch(OffsetRange("t", 0, 0, 1), {"bootstrap.servers": "127.0.0.1:9"}, include_headers=False,
                       fail_on_data_loss=True, poll_timeout_ms=1000)
    with pytest.raises(FetchError, match="at offset 0 is larger than kafka.max.partition.fetch.bytes"):
        list(fetch._read(_CuttingBroker(batch)))  # type: ignore[arg-type]  # duck-typed PartitionFetcher


class _UnreachableLeader:
    """Every fetch fails at once (a lost connection, no leader to be found): counts how often it is asked."""

    def __init__(self) -> None:
        self.fetches = 0

    def fetch(self, offset: int) -> FetchResult:
        self.fetches += 1
        return FetchResult(errors.BY_NAME["NETWORK_EXCEPTION"], b"", -1, -1)

    def watermarks(self) -> None:
        return None


def test_task_without_a_leader_backs_off_and_times_out() -> None:
    fetch = RangeFetch(OffsetRange("t", 0, 0, 10), {"bootstrap.servers": "127.0.0.1:9"}, include_headers=False,
                       fail_on_data_loss=True, poll_timeout_ms=500)
    broker = _UnreachableLeader()
    with pytest.raises(TimeoutError, match="kafkaConsumer.pollTimeoutMs"):
        list(fetch._read(broker))  # type: ignore[arg-type]  # duck-typed PartitionFetcher
    assert 5 <= broker.fetches <= 30  # paced by the retry backoff, not a busy loop


def test_task_reports_truncation_or_skips_and_counts(kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, [(0, None, b"x%d" % i, None) for i in range(10)])
    conf = {"bootstrap.servers": kafka_bootstrap}
    # The driver planned [8, 15) but the log ends at 10: as if the records [10, 15) were truncated.
    planned = OffsetRange(topic, 0, 8, 15)
    strict = RangeFetch(planned, conf, include_headers=False, fail_on_data_loss=True, poll_timeout_ms=1000)
    with pytest.raises(DataLossError, match=rf"topic '{topic}' partition 0: offsets \[10, 15\) were truncated"):
        list(strict.batches())
    lenient = RangeFetch(planned, conf, include_headers=False, fail_on_data_loss=False, poll_timeout_ms=1000)
    batches = list(lenient.batches())
    assert [o for b in batches for o in b.column("offset").to_pylist()] == [8, 9]
    assert [(loss.start, loss.end, loss.skipped) for loss in lenient.losses] == [(10, 15, 5)]


def test_stream_offsets_going_back_fail_the_query_or_are_skipped(insync: SparkSession, kafka_bootstrap: str,
                                                                 tmp_path: Path) -> None:
    topic = create_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, [(0, None, b"old%d" % i, None) for i in range(5)])
    checkpoint = tmp_path / "cp"
    assert sum(map(len, run_available_now(insync, kafka_bootstrap, topic, checkpoint,
                                          startingOffsets="earliest"))) == 5
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.delete_topics([topic]).values():
        future.result(10)
    create_topic(kafka_bootstrap, 1, name=topic)
    produce(kafka_bootstrap, topic, [(0, None, b"new%d" % i, None) for i in range(2)])
    with pytest.raises(StreamingQueryException, match=rf"topic '{topic}' partition 0: offsets from 5 went back: "
                                                      "the high watermark is 2"):
        run_available_now(insync, kafka_bootstrap, topic, checkpoint)
    assert sum(map(len, run_available_now(insync, kafka_bootstrap, topic, checkpoint,
                                          failOnDataLoss="false"))) == 0
    produce(kafka_bootstrap, topic, [(0, None, b"new%d" % i, None) for i in range(2, 5)])
    rows = [r for b in run_available_now(insync, kafka_bootstrap, topic, checkpoint, failOnDataLoss="false")
            for r in b]
    assert [(r.offset, r.value) for r in by_position(rows)] == [(o, b"new%d" % o) for o in range(2, 5)]


def test_stream_reader_counts_partitions_gone_or_gone_back() -> None:
    options = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                                    "failondataloss": "false"}, streaming=True)
    reader = InsyncStreamReader(options)
    begin = {TopicPartition("t", 0): 10, TopicPartition("t", 1): 4, TopicPartition("t", 2): 7}
    latest = {TopicPartition("t", 0): 12, TopicPartition("t", 1): 2}
    assert reader._check_losses(begin, latest) == latest  # t-2 dropped, t-1 follows the log back to 2
    assert reader.data_losses == 2
    strict = InsyncStreamReader(parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t"}, True))
    with pytest.raises(DataLossError, match="partition 1: offsets from 4 went back: the high watermark is 2"):
        strict._check_losses(begin, latest)
    with pytest.raises(DataLossError, match="partition 2: offsets from 7 are gone"):
        strict._check_losses(begin, {TopicPartition("t", 0): 12, TopicPartition("t", 1): 4})


def test_benchmark_reads_the_same_records_from_both_sides(insync: SparkSession, kafka_bootstrap: str) -> None:
    result = run_source_bench(insync, kafka_bootstrap, records=2_000, size=100, partitions=2, rounds=1)
    assert (result.records, result.spark_partitions) == (2_000, 2)
    assert result.insync_rows_per_s > 0 and result.parquet_rows_per_s > 0 and result.floor_rows_per_s > 0
    assert result.ratio > 0 and result.median_ratio > 0 and result.floor_ratio > 0 and result.ceiling_ratio > 0
    assert result.insync_seconds <= result.insync_median_seconds
    assert result.ceiling_seconds <= result.ceiling_median_seconds
    floor = insync.read.format("insync-floor").options(rows="2001", size="100", partitions="2").load()
    assert floor.count() == 2001 and {len(r.value) for r in floor.select("value").collect()} == {100}
    with ByteSender() as port:  # the ceiling reader receives every byte it asks for, and yields the floor's rows
        ceiling = insync.read.format("insync-ceiling").options(rows="2001", size="100", partitions="2",
                                                               port=str(port)).load()
        assert ceiling.count() == 2001
    assert json.loads(result.to_json())["record_bytes"] == 100


def test_stream_resumed_behind_the_log_start_after_delete_records(insync: SparkSession, kafka_bootstrap: str,
                                                                  tmp_path: Path) -> None:
    """Retention or DeleteRecords moved the log start past the checkpoint: data loss, per failOnDataLoss."""
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    topic = create_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, [(0, None, b"a%d" % i, None) for i in range(5)])
    checkpoint = tmp_path / "cp"
    assert sum(map(len, run_available_now(insync, kafka_bootstrap, topic, checkpoint,
                                          startingOffsets="earliest"))) == 5
    produce(kafka_bootstrap, topic, [(0, None, b"a%d" % i, None) for i in range(5, 12)])
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.delete_records([KafkaTopicPartition(topic, 0, 9)]).values():
        assert future.result(10).low_watermark == 9
    with pytest.raises(StreamingQueryException, match=rf"{topic}.*partition 0.*5"):
        run_available_now(insync, kafka_bootstrap, topic, checkpoint)
    rows = [r for b in run_available_now(insync, kafka_bootstrap, topic, checkpoint, failOnDataLoss="false")
            for r in b]
    assert [(r.offset, r.value) for r in by_position(rows)] == [(o, b"a%d" % o) for o in range(9, 12)]
