"""`.option("reader", "driver")`: a stream of the `insync` source read on the driver, for small topics that must
keep flowing while one partition's leader does not answer (the monitor's `__insync_events`).

pyspark 4's `SimpleDataSourceStreamReader`: at each trigger `read(start)` returns the records read and the
offsets read up to, and Spark plans the micro-batch from those. The end is what was actually read, so a
partition whose leader does not answer within `READ_WAIT_S` stays where it is, nothing lost or read twice; the
tasks reader instead plans ranges a task must read whole, so a silent leader holds every micro-batch until
leadership moves. Each partition has at most one fetch at a time, in a thread of its own (`_Job`); one still
running is taken by a later `read` from the position it began at. A fetch is one Fetch answered at once, up to
the high watermark. A partition new to the query enters at its log start with no records, so every micro-batch
is known from its offsets alone, which a replay (`kafka_io.RangeFetch` in a task) needs. Data loss is reported
as the tasks reader reports it (`failOnDataLoss`). `maxOffsetsPerTrigger`, `minPartitions` and
Trigger.AvailableNow are not supported here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import SimpleDataSourceStreamReader

from insync import errors
from insync.spark.source import arrow_records, fetch_client, kafka_io, planning
from insync.spark.source.kafka_io import DataLoss, Metadata, OffsetRange, ReaderConf
from insync.spark.source.offsets import OffsetsJson, offsets_from_json, offsets_to_json, start_offsets
from insync.spark.source.options import SourceOptions
from insync.spark.source.tasks import RangePartition, ReadSettings, read_partition
from insync.types import TopicPartition

READ_WAIT_S = 0.5  # how long a micro-batch waits for its slowest partition; what comes later goes in the next one
T = TypeVar("T")
Listing = tuple[list[TopicPartition], dict[TopicPartition, tuple[str, int]]]


@dataclass(frozen=True, slots=True)
class Fetched:
    """What one fetch of a partition found: its records from `start` and where the next fetch starts (None: no
    progress, `reason` says why). `start` None: a partition new to the query, `end` its log start."""

    start: int | None
    end: int | None
    batch: pa.RecordBatch | None = None
    reason: str = ""
    loss: DataLoss | None = None


class _Job(Generic[T]):
    """One call in a daemon thread of its own: a fetch stuck on a broker that does not answer holds only it."""

    def __init__(self, start: int | None, call: Callable[[], T]) -> None:
        self.start = start
        self.result: T | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._call = call
        threading.Thread(target=self._run, name="insync-driver-read", daemon=True).start()

    def _run(self) -> None:
        try:
            self.result = self._call()
        except BaseException as exc:  # noqa: BLE001 - handed to the driver's `read`, which raises it
            self.error = exc
        finally:
            self.done.set()

    def outcome(self) -> T | None:
        if self.error is not None:
            raise self.error
        return self.result


class DriverStreamReader(SimpleDataSourceStreamReader):
    """reader=driver (see the module doc). Threads and connections are made at the first `read`: a replay task
    makes this reader only to call `readBetweenOffsets`."""

    def __init__(self, options: SourceOptions) -> None:
        assert options.driver_reader, options
        self.options = options
        self.conf = ReaderConf.of(options.client_conf)
        self.schema = kafka_io.arrow_schema(options.include_headers)
        self.unanswered = planning.Unanswered(options.poll_timeout_ms)
        self.skipped_offsets = 0
        self.listed: list[TopicPartition] = []
        self.leaders: dict[TopicPartition, tuple[str, int]] = {}
        self.jobs: dict[TopicPartition, _Job[Fetched]] = {}
        self.listing: _Job[Listing | None] | None = None
        self.fetchers: dict[TopicPartition, fetch_client.PartitionFetcher] = {}

    def initialOffset(self) -> OffsetsJson:
        with Metadata(self.options.client_conf) as md:
            tps = md.partitions(self.options.subscription)
            return offsets_to_json(start_offsets(md, tps, self.options, streaming=True))

    def read(self, start: OffsetsJson) -> tuple[Iterator[pa.RecordBatch], OffsetsJson]:
        begin = offsets_from_json(start)
        if self.listing is None:
            self.listing = _Job(None, self._list)
        started = []
        for tp in sorted(set(begin) | set(self.listed)):
            if tp not in self.jobs:
                job = self.jobs.setdefault(tp, _Job(begin.get(tp), self._fetch_call(tp, begin.get(tp))))
                if tp not in self.unanswered.skipped:
                    started.append(job)
        # Only the fetches started now are waited for, and not those of partitions that did not answer the last
        # time: a fetch still running from an earlier micro-batch has had a trigger interval already, and waiting
        # again and again for a leader that does not answer would slow the batches of all the others.
        deadline = time.monotonic() + READ_WAIT_S
        for job in started:  # bounded: one wait each, all within the deadline
            job.done.wait(max(0.0, deadline - time.monotonic()))
        self._take_listing()
        end, batches, unanswered = dict(begin), [], {}
        for tp in sorted(set(begin) | set(self.listed)):
            fetched = self._take(tp, begin.get(tp))
            if fetched is None or fetched.end is None:
                unanswered[tp] = fetched.reason if fetched is not None else f"no answer within {READ_WAIT_S} s"
                continue
            if fetched.loss is not None:
                self.skipped_offsets = kafka_io.report_data_loss(fetched.loss, self.options.fail_on_data_loss,
                                                                 self.skipped_offsets)
            end[tp] = fetched.end
            if fetched.batch is not None:
                batches.append(fetched.batch)
        self._tell(unanswered, answered=len(unanswered) < len(set(begin) | set(self.listed)))
        return iter(batches), (start if end == begin else offsets_to_json(end))

    def _tell(self, unanswered: dict[TopicPartition, str], answered: bool) -> None:
        """Log the partitions that did not answer (and those answering again); fail the query once no partition
        has answered for `kafkaConsumer.pollTimeoutMs`, as the tasks reader does."""
        if answered or not unanswered:
            self.unanswered.hold({}, {}, unanswered)
        else:
            self.unanswered.nothing(min(unanswered.items())[1], time.monotonic())

    def _take(self, tp: TopicPartition, position: int | None) -> Fetched | None:
        """The fetch of `tp` from `position` if it is done (None: still running); a fetch from another position
        is dropped once done (its records are not this micro-batch's)."""
        job = self.jobs.get(tp)
        if job is None or not job.done.is_set():
            return None
        del self.jobs[tp]
        return job.outcome() if job.start == position else None

    def _take_listing(self) -> None:
        if self.listing is not None and self.listing.done.is_set():
            listed, self.listing = self.listing.outcome(), None
            if listed is not None:  # None: no broker answered the listing; the partitions known stay
                self.listed, self.leaders = listed

    def _list(self) -> Listing | None:
        try:
            with Metadata(self.options.client_conf) as md:
                return md.partitions(self.options.subscription), md.leaders
        except Exception:  # noqa: BLE001 - librdkafka's errors have no common type; the next read lists again
            return None

    def _fetch_call(self, tp: TopicPartition, position: int | None) -> Callable[[], Fetched]:
        if tp not in self.fetchers:
            c = self.conf
            self.fetchers[tp] = fetch_client.PartitionFetcher(
                c.bootstrap_servers, tp.topic, tp.partition, partition_max_bytes=c.partition_fetch_bytes,
                max_wait_ms=0, timeout_s=c.timeout_s, security=c.security, leader=self.leaders.get(tp),
                read_committed=c.read_committed)
        fetcher = self.fetchers[tp]
        return lambda: fetch_once(fetcher, tp, position, self.schema, self.conf.check_crcs)

    def readBetweenOffsets(self, start: OffsetsJson, end: OffsetsJson) -> Iterator[pa.RecordBatch]:
        """A micro-batch again, after a restart: exactly its ranges (in a task)."""
        begin, stop = offsets_from_json(start), offsets_from_json(end)
        settings = ReadSettings.of(self.options)
        for tp, last in sorted(stop.items()):
            # A partition enters the offsets before it has records (see the module doc); an end below the start
            # went back (data loss, reported when it was read).
            first = begin.get(tp, last)
            if first < last:
                yield from read_partition(RangePartition(OffsetRange(tp.topic, tp.partition, first, last),
                                                         settings, None))

    def commit(self, end: OffsetsJson) -> None:
        """Spark's checkpoint holds the position; like Spark's Kafka source, nothing is committed to Kafka."""


def fetch_once(fetcher: fetch_client.PartitionFetcher, tp: TopicPartition, position: int | None,
               schema: pa.Schema, check_crcs: bool) -> Fetched:
    """One Fetch of `tp` from `position` (None: where the log starts), records up to the high watermark (under
    read_committed: the last stable offset, aborted transactions left out)."""
    if position is None:
        marks = fetcher.watermarks()
        return Fetched(None, None, reason="its leader did not answer ListOffsets") if marks is None else Fetched(
            None, marks[0])
    result = fetcher.fetch(position)
    if result.error is errors.OFFSET_OUT_OF_RANGE:
        return _out_of_range(fetcher, tp, position)
    if result.error is not errors.NONE:
        return Fetched(position, None, reason=f"Fetch failed: {result.error.name}")
    high = max(position, result.end_offset)  # a new leader's high watermark can be behind what was read
    scanned = arrow_records.scan(result.records, position, check_crcs=check_crcs)
    decoded = arrow_records.decode(result.records, position, high, "headers" in schema.names, scanned,
                                   result.aborted)
    if decoded.next_offset == position and result.records:
        raise fetch_client.FetchError(
            f"a record batch of topic {tp.topic!r} partition {tp.partition} at offset {position} is larger than "
            "kafka.max.partition.fetch.bytes and the broker returned only part of it: raise that option")
    batch = kafka_io.record_batch(decoded, tp.topic, tp.partition, schema) if decoded.rows else None
    # A batch that ends past the high watermark is read again from there next time (decode keeps its offsets).
    return Fetched(position, min(decoded.next_offset, high), batch)


def _out_of_range(fetcher: fetch_client.PartitionFetcher, tp: TopicPartition, position: int) -> Fetched:
    marks = fetcher.watermarks()
    if marks is None:
        return Fetched(position, None, reason="OFFSET_OUT_OF_RANGE, and its leader did not answer ListOffsets")
    low, high = marks
    if position < low:
        reason = f"were deleted (the log now starts at {low}: retention or DeleteRecords)"
        return Fetched(position, low, loss=DataLoss(tp.topic, tp.partition, position, low, reason))
    if position > high:
        reason = (f"went back: the high watermark is {high} but this query had read up to {position} (truncation, "
                  f"or the topic was re-created); continuing from {high}")
        return Fetched(position, high, loss=DataLoss(tp.topic, tp.partition, position, None, reason))
    return Fetched(position, None, reason="OFFSET_OUT_OF_RANGE, but the offset is in range now")
