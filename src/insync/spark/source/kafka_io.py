"""The Kafka side of the `insync` Spark data source: metadata and offsets on the driver, reads and writes in tasks.

The driver uses confluent-kafka's `AdminClient` for topic listing and ListOffsets (earliest, latest: the high
watermark, and timestamps), keeping its clients between queries (`admin_client`). A task reads exactly one
`OffsetRange` `[start, end)` of one partition (`RangeFetch`) with its own Fetch requests to the leader
(`fetch_client`), and `arrow_records` turns each response into one Arrow record batch with Spark's Kafka source
schema, since a client library's Python object per record would cost more than the rest of the read. Both speak
only the Kafka protocol, so any Kafka-compatible broker works. Offsets missing inside the range are normal
(compaction, transaction markers); data loss is when the range is no longer there: `start` behind the log start
(retention, DeleteRecords), or the log end back below `end` (truncation after a leader change). Loss is a
`DataLoss`; with `failOnDataLoss` the task raises `DataLossError`, else it logs, counts and skips to what still
exists. With `kafka.isolation.level=read_committed` "latest" is the last stable offset, on the driver and in
the tasks, and aborted transactions are left out (more gaps). The sink's writes are in `sink_io`.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import IsolationLevel
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]  # public, not in stubs

from insync import errors, limits, malloc
from insync.spark.source import arrow_records, fetch_client
from insync.spark.source.client_security import ReaderSecurity
from insync.types import TopicPartition

log = logging.getLogger(__name__)

HEADER_TYPE = arrow_records.HEADER_TYPE
ADMIN_RECONNECT_BACKOFF_MS = "10"
ADMIN_TIMEOUT_S = 30.0  # one metadata or ListOffsets round on the driver (less with kafka.socket.timeout.ms)
OFFSET_INVALID = -1001  # librdkafka's RD_KAFKA_OFFSET_INVALID
WATERMARK_CHECK_INTERVAL_S = 1.0  # how often a task with nothing to read asks where the log starts and ends
RETRY_BACKOFF_S = 0.1  # the least time between two fetches that made no progress


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The exact Arrow schema of the batches a task yields (Spark rejects large_binary, int32 offsets, ...)."""
    fields = [("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
              ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32())]
    if include_headers:
        fields.append(("headers", pa.list_(HEADER_TYPE)))
    return pa.schema(fields)


class DataLossError(Exception):
    """Offsets a query needs are gone (retention, DeleteRecords, truncation) and failOnDataLoss is true."""


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets `[start, end)` of one partition: the unit of work of one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        assert 0 <= self.start <= self.end, self

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class DataLoss:
    """Offsets `[start, end)` of a partition that a query wanted and can no longer read (`end` None: unknown)."""

    topic: str
    partition: int
    start: int
    end: int | None
    reason: str

    @property
    def skipped(self) -> int:
        return 0 if self.end is None else max(0, self.end - self.start)

    def message(self) -> str:
        span = f"[{self.start}, {self.end})" if self.end is not None else f"from {self.start}"
        return f"data loss in topic {self.topic!r} partition {self.partition}: offsets {span} {self.reason}"


def report_data_loss(loss: DataLoss, fail_on_data_loss: bool, skipped_so_far: int = 0) -> int:
    """Raise for `failOnDataLoss=true`, else log the loss and return the new count of skipped offsets."""
    if fail_on_data_loss:
        raise DataLossError(f"{loss.message()}. Set failOnDataLoss=false to skip lost offsets and go on.")
    total = skipped_so_far + loss.skipped
    skipped = f"{loss.skipped} offsets" if loss.end is not None else "an unknown number of offsets"
    log.warning("insync source: %s; skipped %s (failOnDataLoss=false), %d offsets in all", loss.message(),
                skipped, total)
    return total


@dataclass(frozen=True, slots=True)
class Subscription:
    """Which partitions a query reads: exactly one of `subscribe`, `subscribePattern` or `assign`."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def __post_init__(self) -> None:
        kinds = sum((bool(self.topics), self.pattern is not None, bool(self.assigned)))
        assert kinds == 1, self


def admin_config(client_conf: Mapping[str, str]) -> dict[str, str | int | float | bool]:
    """The driver's AdminClient configuration: the user's `kafka.*` options but those only the tasks use, and a
    short `reconnect.backoff.ms` unless they set one. librdkafka holds back a request made before any broker
    connection is up for half that backoff (its pacing of new connections: 50 ms at the default 100 ms), and
    every query of a fresh client is such a request, and each batch read plans with one new client. The
    backoff also paces reconnects to a broker that is down, which grow from it exponentially up to
    `reconnect.backoff.max.ms`."""
    return {"reconnect.backoff.ms": ADMIN_RECONNECT_BACKOFF_MS,
            **{k: v for k, v in client_conf.items() if k not in READER_ONLY_OPTIONS}}


# AdminClients kept per process, by their configuration. A new client's first query waits for a reconnect: once
# the bootstrap connection has told librdkafka (2.10+) the brokers' ids, it retires that connection, fails the
# request it carried and sends it again on a new one after its reconnect pacing. pyspark reuses its planning
# and streaming-source processes, so a kept client answers each next query in about a millisecond. A client
# idle for `ADMIN_CLIENT_IDLE_S` is dropped (a reaper thread, which ends when none is left), so a process does
# not keep reconnecting, and logging that it cannot, to a cluster it stopped using.
ADMIN_CLIENTS_MAX = 4
ADMIN_CLIENT_IDLE_S = 30.0
ADMIN_REAPER_INTERVAL_S = 5.0
_AdminKey = tuple[tuple[str, str | int | float | bool], ...]
_admin_clients: OrderedDict[_AdminKey, tuple[AdminClient, float]] = OrderedDict()
_admin_clients_lock = threading.Lock()
_admin_reaper: threading.Thread | None = None


def _admin_key(conf: Mapping[str, str | int | float | bool]) -> _AdminKey:
    return tuple(sorted(conf.items()))


def admin_client(conf: Mapping[str, str | int | float | bool]) -> AdminClient:
    """This process's AdminClient for `conf`: made on first use, kept while used (the `ADMIN_CLIENTS_MAX` most
    recently used, each until idle for `ADMIN_CLIENT_IDLE_S`; dropping one stops its threads)."""
    global _admin_reaper
    key = _admin_key(conf)
    dropped = []  # destroyed outside the lock: librdkafka may take a while to stop a client's threads
    with _admin_clients_lock:
        kept = _admin_clients.pop(key, None)
        client = AdminClient(dict(conf)) if kept is None else kept[0]
        while len(_admin_clients) >= ADMIN_CLIENTS_MAX:  # bounded by the cap
            dropped.append(_admin_clients.popitem(last=False))
        _admin_clients[key] = (client, time.monotonic())
        if _admin_reaper is None:
            _admin_reaper = threading.Thread(target=_reap_admin_clients, name="insync-admin-reaper", daemon=True)
            _admin_reaper.start()
    del dropped
    return client


def forget_admin_client(conf: Mapping[str, str | int | float | bool]) -> None:
    with _admin_clients_lock:
        _admin_clients.pop(_admin_key(conf), None)


def _reap_admin_clients() -> None:
    global _admin_reaper
    while True:  # bounded: ends once no client is kept, and each client goes after its idle time
        time.sleep(ADMIN_REAPER_INTERVAL_S)
        with _admin_clients_lock:
            now = time.monotonic()
            idle = [k for k, (_, used) in _admin_clients.items() if now - used >= ADMIN_CLIENT_IDLE_S]
            dropped = [_admin_clients.pop(k) for k in idle]  # destroyed below, outside the lock
            done = not _admin_clients
            if done:
                _admin_reaper = None
        del dropped
        if done:
            return


class Metadata:
    """Driver-side queries for one `with` block, through the process's AdminClient for these options
    (`admin_client`); a block that raises drops that client, so the next one starts afresh. The first query of a
    block that is not a topic listing lists the topics anyway: ListOffsets goes to the leaders the client last
    heard of, and a kept client may have heard of them before a leader changed."""

    def __init__(self, client_conf: Mapping[str, str]) -> None:
        assert "bootstrap.servers" in client_conf, client_conf
        self._conf = admin_config(client_conf)
        self._isolation = (IsolationLevel.READ_COMMITTED if reads_committed(client_conf)
                           else IsolationLevel.READ_UNCOMMITTED)
        self._admin = admin_client(self._conf)
        self._fresh = False  # the client's metadata was refreshed in this block
        self.leaders: dict[TopicPartition, tuple[str, int]] = {}  # (host, port) of each leader, from the listing
        # How long one listing or one leader's ListOffsets may take: a leader that does not answer within the
        # socket timeout is not going to, and the partitions of the others should not wait for it.
        socket_timeout_ms = client_conf.get("socket.timeout.ms", "").strip()
        self.timeout_s = min(ADMIN_TIMEOUT_S, int(socket_timeout_ms) / 1000) if socket_timeout_ms else ADMIN_TIMEOUT_S

    def __enter__(self) -> Metadata:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is not None:
            forget_admin_client(self._conf)

    def _list_topics(self) -> dict[str, Any]:
        listing = self._admin.list_topics(timeout=self.timeout_s)
        topics: dict[str, Any] = listing.topics
        self._fresh = True
        brokers = {b.id: (str(b.host), int(b.port)) for b in listing.brokers.values()}
        self.leaders = {TopicPartition(t, p.id): brokers[p.leader] for t, m in topics.items() if m.error is None
                        for p in m.partitions.values() if p.leader in brokers}
        return topics

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        """The partitions a subscription covers now, sorted; topics that do not exist contribute none."""
        if subscription.assigned:
            return sorted(subscription.assigned)  # an offsets query lists the topics before asking the leaders
        topics = self._list_topics()
        if subscription.pattern is not None:
            regex = re.compile(subscription.pattern)
            # Kafka's pattern subscription matches whole names and leaves internal topics out.
            names = [t for t in topics if regex.fullmatch(t) and not t.startswith("__")]
        else:
            names = [t for t in subscription.topics if t in topics]
        found = [TopicPartition(t, p) for t in names if topics[t].error is None for p in topics[t].partitions]
        assert len(found) <= limits.SPARK_SOURCE_PARTITIONS_MAX, f"{len(found)} partitions"
        return sorted(found)

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log start offset of each partition."""
        return _answered(*self._list_offsets(tps, "earliest"))

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark of each partition: the end of committed data, what consumers may read (under
        read_committed the last stable offset: the end of decided transactions)."""
        return _answered(*self._list_offsets(tps, "latest"))

    def latest_answered(self, tps: Iterable[TopicPartition]) -> tuple[dict[TopicPartition, int],
                                                                       dict[TopicPartition, str]]:
        """The latest offsets (as `latest`) of the partitions whose leaders answered, and why each of the others
        did not."""
        return self._list_offsets(tps, "latest")

    def for_timestamp(self, tps: Iterable[TopicPartition], timestamp_ms: int) -> dict[TopicPartition, int]:
        """The first offset whose timestamp is >= `timestamp_ms`; the high watermark where no record is that new."""
        wanted = list(tps)
        found = _answered(*self._list_offsets(wanted, timestamp_ms))
        missing = [tp for tp, offset in found.items() if offset < 0]
        return found | self.latest(missing) if missing else found

    def _list_offsets(self, tps: Iterable[TopicPartition], spec: str | int) -> tuple[dict[TopicPartition, int],
                                                                                    dict[TopicPartition, str]]:
        """ListOffsets for "earliest", "latest" or a timestamp (ms), batched per broker by the AdminClient: the
        offsets of the partitions whose leader answered within `timeout_s`, and the others with the reason."""
        make: Callable[[], OffsetSpec]
        if spec == "earliest":
            make = OffsetSpec.earliest
        elif spec == "latest":
            make = OffsetSpec.latest
        else:
            assert isinstance(spec, int) and spec >= 0, spec
            make = partial(OffsetSpec.for_timestamp, spec)
        request = {CkTopicPartition(tp.topic, tp.partition): make() for tp in tps}  # type: ignore[no-untyped-call]
        if not request:
            return {}, {}
        if not self._fresh:
            self._list_topics()
        futures = self._admin.list_offsets(request, isolation_level=self._isolation,
                                           request_timeout=self.timeout_s)
        result: dict[TopicPartition, int] = {}
        failed: dict[TopicPartition, str] = {}
        for ck_tp, future in futures.items():
            tp = TopicPartition(ck_tp.topic, ck_tp.partition)
            try:
                offset = future.result().offset
            except Exception as exc:  # noqa: BLE001 - the partition's own error, told to the caller
                failed[tp] = f"ListOffsets failed: {exc}"
                continue
            # librdkafka reports a leader that did not answer in time as an invalid offset, not as an error; a
            # timestamp lookup answers -1 when no record is that new.
            if offset == OFFSET_INVALID or (offset < 0 and not isinstance(spec, int)):
                failed[tp] = f"its leader did not answer ListOffsets within {self.timeout_s:g} s"
            else:
                result[tp] = offset
        assert len(result) + len(failed) == len(request), (len(result), len(failed), len(request))
        return result, failed


class OffsetsUnanswered(RuntimeError):
    """A partition's leader did not answer ListOffsets (in time) where the query cannot go on without it."""


def _answered(offsets: dict[TopicPartition, int], failed: Mapping[TopicPartition, str]) -> dict[TopicPartition, int]:
    if failed:
        tp, reason = min(failed.items())
        others = f" (and {len(failed) - 1} more partitions)" if len(failed) > 1 else ""
        raise OffsetsUnanswered(f"no offsets for {tp}{others}: {reason}")
    return offsets


# What a task fetches at a time. Large fetches: a task reads one partition, and per-fetch overhead dominates
# with small ones; the Arrow batch a fetch becomes is at most about this big.
PARTITION_FETCH_BYTES = 8 * 1024 * 1024
ARROW_BATCH_ROWS = 4096  # rows per batch handed to Spark (slices of a fetch, no copy): Spark takes them fastest
FETCH_WAIT_MS = 500  # how long a broker may hold a fetch with nothing to return
FETCH_TIMEOUT_S = 30.0  # connect and per-request socket timeout
# Client settings a task's reader honours besides bootstrap.servers; the other kafka.* options configure the
# driver's metadata client.
READER_NUMERIC_OPTIONS = ("max.partition.fetch.bytes", "fetch.wait.max.ms", "socket.timeout.ms")
READER_BOOLEAN_OPTIONS = ("check.crcs",)
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")  # Kafka's values of isolation.level, its default first
# Consumer settings the driver's AdminClient does not take (librdkafka would warn that it ignores them): the
# tasks honour them, and the driver passes isolation.level to each ListOffsets itself.
READER_ONLY_OPTIONS = ("max.partition.fetch.bytes", "fetch.wait.max.ms", "check.crcs", "isolation.level")


def check_reader_options(client_conf: Mapping[str, str]) -> None:
    """Refuse settings the tasks' reader cannot honour. Raises ValueError naming the option."""
    for name in READER_NUMERIC_OPTIONS:
        if name in client_conf and not client_conf[name].strip().isdigit():
            raise ValueError(f"option kafka.{name} must be a non-negative integer, got {client_conf[name]!r}")
    for name in READER_BOOLEAN_OPTIONS:
        if name in client_conf and client_conf[name].strip().lower() not in ("true", "false"):
            raise ValueError(f"option kafka.{name} must be true or false, got {client_conf[name]!r}")
    level = client_conf.get("isolation.level", ISOLATION_LEVELS[0]).strip()
    if level not in ISOLATION_LEVELS:
        raise ValueError(f"option kafka.isolation.level must be one of {list(ISOLATION_LEVELS)}, "
                         f"got {client_conf['isolation.level']!r}")


def reads_committed(client_conf: Mapping[str, str]) -> bool:
    """kafka.isolation.level=read_committed (checked on the driver by `check_reader_options`)."""
    return client_conf.get("isolation.level", ISOLATION_LEVELS[0]).strip() == "read_committed"


@dataclass(frozen=True, slots=True)
class ReaderConf:
    """The reader's settings from the kafka.* options (checked on the driver by `check_reader_options`)."""

    bootstrap_servers: str
    partition_fetch_bytes: int = PARTITION_FETCH_BYTES
    fetch_wait_ms: int = FETCH_WAIT_MS
    timeout_s: float = FETCH_TIMEOUT_S
    check_crcs: bool = True  # Kafka's consumer option: verify each batch's CRC32C (on by default, as in Kafka)
    security: ReaderSecurity = ReaderSecurity()
    read_committed: bool = False  # kafka.isolation.level=read_committed

    @classmethod
    def of(cls, client_conf: Mapping[str, str]) -> ReaderConf:
        return cls(client_conf["bootstrap.servers"],
                   int(client_conf.get("max.partition.fetch.bytes", PARTITION_FETCH_BYTES)),
                   int(client_conf.get("fetch.wait.max.ms", FETCH_WAIT_MS)),
                   int(client_conf.get("socket.timeout.ms", FETCH_TIMEOUT_S * 1000)) / 1000,
                   client_conf.get("check.crcs", "true").strip().lower() == "true",  # as the options' `_bool`
                   ReaderSecurity.of(client_conf), reads_committed(client_conf))


class RangeFetch:
    """Reads one `OffsetRange` in a Spark task. `losses` lists what was skipped (failOnDataLoss=false).

    Each Fetch response becomes (at most) one Arrow batch: `arrow_records` decodes the records of the response
    straight into columns, so no Python object is made per record.
    """

    def __init__(self, offset_range: OffsetRange, client_conf: Mapping[str, str], *, include_headers: bool,
                 fail_on_data_loss: bool, poll_timeout_ms: int, leader: tuple[str, int] | None = None) -> None:
        assert poll_timeout_ms > 0, poll_timeout_ms
        self.range = offset_range
        self.leader = leader  # where the driver saw the partition's leader: asked first, no lookup
        self.conf = ReaderConf.of(client_conf)
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss
        self.poll_timeout_ms = poll_timeout_ms
        self.losses: list[DataLoss] = []
        self.rows = 0

    def batches(self) -> Iterator[pa.RecordBatch]:
        if self.range.size == 0:
            return
        malloc.keep_freed_buffers()  # fetch-sized buffers are reused instead of page-faulted in anew
        r, c = self.range, self.conf
        with fetch_client.PartitionFetcher(c.bootstrap_servers, r.topic, r.partition,
                                           partition_max_bytes=c.partition_fetch_bytes, max_wait_ms=c.fetch_wait_ms,
                                           timeout_s=c.timeout_s, security=c.security, leader=self.leader,
                                           read_committed=c.read_committed) as fetcher:
            yield from self._read(fetcher)

    def _read(self, fetcher: fetch_client.PartitionFetcher) -> Iterator[pa.RecordBatch]:
        r = self.range
        schema = arrow_schema(self.include_headers)
        next_offset = r.start
        progress_at = last_check_at = time.monotonic()
        while next_offset < r.end:  # bounded: progress, or the stall checks below end it by pollTimeoutMs
            started = time.monotonic()
            result = fetcher.fetch(next_offset)
            now = time.monotonic()
            if result.error is errors.NONE:
                scanned = arrow_records.scan(result.records, next_offset, check_crcs=self.conf.check_crcs)
                if next_offset < scanned.next_offset < r.end:
                    fetcher.prefetch(scanned.next_offset)  # the broker works on it while this one is decoded
                decoded = arrow_records.decode(result.records, next_offset, r.end, self.include_headers, scanned,
                                               result.aborted)
                if decoded.rows:
                    batch = self._emit(decoded, schema)
                    for start in range(0, batch.num_rows, ARROW_BATCH_ROWS):  # bounded by the batch's rows
                        yield batch.slice(start, ARROW_BATCH_ROWS)
                if decoded.next_offset > next_offset:
                    next_offset = decoded.next_offset
                    progress_at = now
                    continue
                if result.records:
                    raise fetch_client.FetchError(
                        f"a record batch of topic {r.topic!r} partition {r.partition} at offset {next_offset} is "
                        f"larger than kafka.max.partition.fetch.bytes={self.conf.partition_fetch_bytes} and the "
                        "broker returned only part of it: raise that option")
                if result.end_offset >= r.end:
                    break  # nothing from here to the end offset: the rest of the range are gaps
            stalled = min(now - progress_at, now - last_check_at) >= WATERMARK_CHECK_INTERVAL_S
            if result.error is errors.OFFSET_OUT_OF_RANGE or stalled:
                last_check_at = now
                skip_to = self._check_watermarks(fetcher, next_offset, stalled_s=now - progress_at)
                if skip_to is not None:
                    next_offset = skip_to
                    progress_at = now
                    continue
            if time.monotonic() - started < RETRY_BACKOFF_S:
                # No progress, and the broker did not hold the fetch (an error, a lost connection, a leader
                # still catching up): wait a little rather than spin.
                time.sleep(RETRY_BACKOFF_S)

    def _emit(self, decoded: arrow_records.Decoded, schema: pa.Schema) -> pa.RecordBatch:
        self.rows += decoded.rows
        return record_batch(decoded, self.range.topic, self.range.partition, schema)

    def _check_watermarks(self, fetcher: fetch_client.PartitionFetcher, next_offset: int,
                          stalled_s: float) -> int | None:
        """Where to continue after data loss (None: keep waiting). Raises on loss under failOnDataLoss."""
        r = self.range
        marks = fetcher.watermarks()
        if marks is None:  # the leader cannot be asked just now
            if stalled_s * 1000 >= self.poll_timeout_ms:
                raise TimeoutError(f"no leader of topic {r.topic!r} partition {r.partition} answered within "
                                   "kafkaConsumer.pollTimeoutMs")
            return None
        low, high = marks
        loss = loss_when_stalled(r, next_offset, low, high, stalled_s * 1000 >= self.poll_timeout_ms)
        if loss is None:
            return None
        already = sum(x.skipped for x in self.losses)
        report_data_loss(loss, self.fail_on_data_loss, already)
        self.losses.append(loss)
        assert loss.end is not None and loss.end > next_offset, (loss, next_offset)
        return loss.end


def record_batch(decoded: arrow_records.Decoded, topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
    """The decoded records of one partition as one Arrow batch of `schema` (`arrow_schema`)."""
    rows = decoded.rows
    columns = [
        decoded.keys,
        decoded.values,
        pa.repeat(pa.scalar(topic, pa.string()), rows),
        pa.repeat(pa.scalar(partition, pa.int32()), rows),
        decoded.offsets,
        pc.multiply(decoded.timestamps_ms, 1000).cast(pa.timestamp("us", tz="UTC")),
        decoded.timestamp_types,
    ]
    if decoded.headers is not None:
        columns.append(decoded.headers)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def loss_when_stalled(r: OffsetRange, next_offset: int, low: int, high: int, timed_out: bool) -> DataLoss | None:
    """What a task receiving no records concludes from the partition's log start (`low`) and high watermark.

    Behind the log start: the offsets up to it are gone (retention, DeleteRecords) and it is certain at once.
    A high watermark below the range's end can be a new leader catching up, so it only counts as truncation
    once the task has waited `kafkaConsumer.pollTimeoutMs`; if the records are there and still do not come,
    that is a timeout, not data loss.
    """
    assert r.start <= next_offset < r.end, (r, next_offset)
    if next_offset < low:
        reason = f"were deleted (the log now starts at {low}: retention or DeleteRecords)"
        return DataLoss(r.topic, r.partition, next_offset, min(low, r.end), reason)
    if not timed_out:
        return None
    if high < r.end:
        reason = f"were truncated (the high watermark went back to {high})"
        return DataLoss(r.topic, r.partition, max(next_offset, high), r.end, reason)
    raise TimeoutError(f"no records from topic {r.topic!r} partition {r.partition} offsets "
                       f"[{next_offset}, {r.end}) within kafkaConsumer.pollTimeoutMs")
