"""`PartitionFetcher` against live Kafka-protocol brokers: a local insync cluster and Tansu.

Records are produced with confluent_kafka, read back with the fetcher and decoded with `arrow_records.decode`,
which the property test in test_arrow_records checks against the reference decoder. What a Spark task relies
on: every record once and in order across fetches cut at a byte limit, OFFSET_OUT_OF_RANGE and retriable
trouble (unknown topic, nothing listening) answered as results rather than raised, and the watermarks.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # public, not in stubs

from insync import errors
from insync.chaos import cluster
from insync.chaos.cluster import ClusterSpec
from insync.spark.source import fetch_client
from insync.spark.source.arrow_records import decode
from insync.spark.source.fetch_client import FetchResult, PartitionFetcher
from insync.waiting import wait_until

WAIT_S = 10.0
Known = list[tuple[bytes | None, bytes | None, list[tuple[str, str | bytes | None]] | None]]

# Null keys, a tombstone, headers (one with a null value) on every fourth record, values of varied size.
KNOWN: Known = [
    (None if i % 5 == 0 else b"key-%d" % i, None if i == 17 else b"v%d-" % i + b"x" * (i * 7),
     [("n", b"%d" % i), ("tag", None)] if i % 4 == 0 else None)
    for i in range(60)
]


@pytest.fixture(scope="module")
def kafka_bootstrap(insync_cluster: ClusterSpec) -> str:
    return insync_cluster.bootstrap


def create_topic(bootstrap: str) -> str:
    topic = f"fc-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(WAIT_S)
    return topic


def produce(bootstrap: str, topic: str, records: Known, **config: object) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    for key, value, headers in records:
        producer.produce(topic, value, key, partition=0, headers=headers)
    assert producer.flush(WAIT_S) == 0


def fetcher(bootstrap: str, topic: str, **overrides: float) -> PartitionFetcher:
    options = {"partition_max_bytes": 1024, "max_wait_ms": 100, "timeout_s": 5.0} | overrides
    return PartitionFetcher(bootstrap, topic, 0, partition_max_bytes=int(options["partition_max_bytes"]),
                            max_wait_ms=int(options["max_wait_ms"]), timeout_s=options["timeout_s"])


def fetch_ok(reader: PartitionFetcher, offset: int) -> FetchResult:
    """A fetch, retried while the answer is retriable (a topic just created may not have its leader yet)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        result = reader.fetch(offset)
        if result.error is errors.NONE or not result.error.retriable or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def read_all(reader: PartitionFetcher, end: int) -> tuple[list[tuple[int, bytes | None, bytes | None, object]], int]:
    """(offset, key, value, headers) of every record in [0, end), fetch after fetch as a Spark task reads; and
    how many fetches that took."""
    rows: list[tuple[int, bytes | None, bytes | None, object]] = []
    offset = fetches = 0
    deadline = time.monotonic() + WAIT_S
    while offset < end:
        assert time.monotonic() < deadline, f"stuck at offset {offset} of {end}"
        result = fetch_ok(reader, offset)
        fetches += 1
        assert result.error is errors.NONE, result.error
        assert result.high_watermark >= end
        decoded = decode(result.records, offset, end, include_headers=True)
        assert decoded.next_offset >= offset
        assert decoded.headers is not None
        rows += zip(decoded.offsets.to_pylist(), decoded.keys.to_pylist(), decoded.values.to_pylist(),
                    decoded.headers.to_pylist(), strict=True)
        offset = decoded.next_offset
    return rows, fetches


def expected(records: Known) -> list[tuple[int, bytes | None, bytes | None, object]]:
    return [(offset, key, value, [{"key": k, "value": v} for k, v in headers] if headers else None)
            for offset, (key, value, headers) in enumerate(records)]


@pytest.fixture(scope="module")
def known_topic(kafka_bootstrap: str) -> str:
    topic = create_topic(kafka_bootstrap)
    # Small batches, so a 1 KiB fetch ends inside one: the partial batch is left for the next fetch.
    produce(kafka_bootstrap, topic, KNOWN[:30], **{"compression.type": "lz4", "batch.num.messages": 6})
    produce(kafka_bootstrap, topic, KNOWN[30:], **{"batch.num.messages": 3})
    return topic


def test_reads_every_record_in_order(kafka_bootstrap: str, known_topic: str) -> None:
    with fetcher(kafka_bootstrap, known_topic) as reader:
        first = fetch_ok(reader, 0)
        assert first.error is errors.NONE and first.high_watermark == len(KNOWN) and first.log_start_offset == 0
        rows, fetches = read_all(reader, len(KNOWN))
        assert rows == expected(KNOWN)
        assert fetches > 3, "partition_max_bytes bounds each response"


@pytest.mark.parametrize(("fetch", "metadata", "list_offsets"), [(4, 1, 1), (7, 5, 2), (11, 9, 5)])
def test_older_protocol_versions_read_the_same(kafka_bootstrap: str, known_topic: str, fetch: int, metadata: int,
                                               list_offsets: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a Kafka 1.x/2.x broker offers (Fetch without flexible fields or topic ids, old Metadata and
    ListOffsets): the reader caps its versions there and reads exactly the same records and watermarks."""
    monkeypatch.setattr(fetch_client, "VERSIONS_MAX", {fetch_client.FETCH: fetch, fetch_client.METADATA: metadata,
                                                       fetch_client.LIST_OFFSETS: list_offsets})
    with fetcher(kafka_bootstrap, known_topic) as reader:
        rows, _ = read_all(reader, len(KNOWN))
        assert rows == expected(KNOWN)
        assert reader.watermarks() == (0, len(KNOWN))
        assert reader._leader is not None and reader._leader.versions == {
            fetch_client.FETCH: fetch, fetch_client.METADATA: metadata, fetch_client.LIST_OFFSETS: list_offsets}


def test_a_window_in_the_middle(kafka_bootstrap: str, known_topic: str) -> None:
    with fetcher(kafka_bootstrap, known_topic, partition_max_bytes=1 << 20) as reader:
        result = fetch_ok(reader, 25)
        assert result.error is errors.NONE
        decoded = decode(result.records, 25, 35, include_headers=False)
        assert decoded.offsets.to_pylist() == list(range(25, 35))
        assert decoded.values.to_pylist() == [value for _, value, _ in KNOWN[25:35]]


def test_watermarks(kafka_bootstrap: str, known_topic: str) -> None:
    with fetcher(kafka_bootstrap, known_topic) as reader:
        assert wait_until(reader.watermarks, WAIT_S, "the watermarks", interval_s=0.1) == (0, len(KNOWN))


def test_at_the_high_watermark_nothing_yet(kafka_bootstrap: str, known_topic: str) -> None:
    with fetcher(kafka_bootstrap, known_topic) as reader:
        started = time.monotonic()
        result = fetch_ok(reader, len(KNOWN))
        assert result.error is errors.NONE and result.records == b"" and result.high_watermark == len(KNOWN)
        assert time.monotonic() - started < WAIT_S


def test_past_the_high_watermark_is_a_result(kafka_bootstrap: str, known_topic: str) -> None:
    with fetcher(kafka_bootstrap, known_topic) as reader:
        result = fetch_ok(reader, len(KNOWN) + 5)
        assert result == type(result)(errors.OFFSET_OUT_OF_RANGE, b"", -1, -1)
        assert fetch_ok(reader, 0).error is errors.NONE  # the fetcher is still usable afterwards


def test_unknown_topic_is_retriable(kafka_bootstrap: str) -> None:
    with fetcher(kafka_bootstrap, f"missing-{uuid.uuid4().hex[:8]}") as reader:
        started = time.monotonic()
        result = reader.fetch(0)
        assert result.error.retriable and result.error in (errors.UNKNOWN_TOPIC_OR_PARTITION,
                                                           errors.LEADER_NOT_AVAILABLE), result.error
        assert result.records == b"" and result.high_watermark == -1
        assert reader.watermarks() is None
        assert time.monotonic() - started < WAIT_S


def test_nothing_listening_is_retriable_and_bounded() -> None:
    port = cluster.free_ports(1)[0]
    with fetcher(f"127.0.0.1:{port}", "any", timeout_s=2.0) as reader:
        started = time.monotonic()
        result = reader.fetch(0)
        assert result.error is errors.BY_NAME["NETWORK_EXCEPTION"] and result.error.retriable
        assert result.records == b""
        assert reader.watermarks() is None
        assert time.monotonic() - started < 5.0


def test_reads_from_tansu(tansu_bootstrap: str) -> None:
    """Another Kafka-protocol broker. Tansu answers ListOffsets(latest) with the newest batch's base offset + 1,
    so one record a batch keeps the high watermark unambiguous."""
    topic = create_topic(tansu_bootstrap)
    records = KNOWN[:20]
    produce(tansu_bootstrap, topic, records, **{"batch.num.messages": 1, "linger.ms": 0})
    with fetcher(tansu_bootstrap, topic) as reader:
        assert read_all(reader, len(records))[0] == expected(records)
        assert reader.watermarks() == (0, len(records))
