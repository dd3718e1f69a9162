"""`driver_reader` without a broker: one fetch's outcome (records up to the high watermark, no progress and why,
data loss, a batch too large), a micro-batch that leaves out the partition whose fetch has not answered and takes
its records in a later one from the same position, and a fetch's error raised on the driver."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from insync import errors
from insync.protocol.records import build_batch
from insync.spark.source import driver_reader, fetch_client
from insync.spark.source.driver_reader import DriverStreamReader, Fetched, fetch_once
from insync.spark.source.fetch_client import FetchResult
from insync.spark.source.kafka_io import DataLossError, arrow_schema
from insync.spark.source.options import parse_source_options
from insync.types import TopicPartition

TP = TopicPartition("events", 0)
SCHEMA = arrow_schema(False)


def records(first: int, count: int) -> bytes:
    return build_batch([(None, f"r{first + i}".encode()) for i in range(count)], base_offset=first,
                       base_timestamp=1_000)


class Fetcher:
    """Answers each fetch with the next of `results`, and `watermarks` with `marks`; `gate`, when given, holds
    every fetch until it is set (a leader that does not answer)."""

    def __init__(self, results: list[FetchResult], marks: tuple[int, int] | None = None,
                 gate: threading.Event | None = None) -> None:
        self.results, self.marks, self.gate = list(results), marks, gate
        self.asked: list[int] = []

    def fetch(self, offset: int) -> FetchResult:
        if self.gate is not None:
            assert self.gate.wait(10)
        self.asked.append(offset)
        return self.results.pop(0)

    def watermarks(self) -> tuple[int, int] | None:
        return self.marks


def ok(buf: bytes, high: int) -> FetchResult:
    return FetchResult(errors.NONE, buf, high, 0)


def failed(error: Any) -> FetchResult:
    return FetchResult(error, b"", -1, -1)


def fetch(fetcher: Fetcher, position: int | None) -> Fetched:
    return fetch_once(fetcher, TP, position, SCHEMA, True)  # type: ignore[arg-type]  # a stand-in fetcher


def test_a_fetch_reads_committed_records_from_its_position() -> None:
    got = fetch(Fetcher([ok(records(5, 3) + records(8, 2), high=10)]), 6)  # from inside the first batch
    assert (got.start, got.end, got.loss) == (6, 10, None)
    assert got.batch is not None and got.batch.column("offset").to_pylist() == [6, 7, 8, 9]
    assert got.batch.column("value").to_pylist() == [b"r6", b"r7", b"r8", b"r9"]
    # A batch past the high watermark: its committed records only, and the next fetch starts at the watermark.
    got = fetch(Fetcher([ok(records(10, 4), high=12)]), 10)
    assert got.end == 12 and got.batch is not None and got.batch.column("offset").to_pylist() == [10, 11]
    # Nothing new: no records, the position stays (an empty answer is an answer).
    assert fetch(Fetcher([ok(b"", high=12)]), 12) == Fetched(12, 12, None)


def test_a_fetch_that_makes_no_progress_says_why() -> None:
    got = fetch(Fetcher([failed(errors.BY_NAME["NOT_LEADER_OR_FOLLOWER"])]), 3)
    assert got.end is None and "NOT_LEADER_OR_FOLLOWER" in got.reason
    got = fetch(Fetcher([failed(errors.OFFSET_OUT_OF_RANGE)], marks=None), 3)
    assert got.end is None and "did not answer ListOffsets" in got.reason
    got = fetch(Fetcher([failed(errors.OFFSET_OUT_OF_RANGE)], marks=(0, 9)), 3)
    assert got.end is None and "in range now" in got.reason
    # A partition new to the query starts at its log start, once its leader tells where that is.
    assert fetch(Fetcher([], marks=(4, 9)), None) == Fetched(None, 4)
    assert fetch(Fetcher([], marks=None), None).end is None


def test_out_of_range_offsets_are_data_loss_and_reading_goes_on_from_what_exists() -> None:
    behind = fetch(Fetcher([failed(errors.OFFSET_OUT_OF_RANGE)], marks=(7, 20)), 3)
    assert behind.end == 7 and behind.loss is not None and behind.loss.skipped == 4
    assert "were deleted (the log now starts at 7" in behind.loss.message()
    ahead = fetch(Fetcher([failed(errors.OFFSET_OUT_OF_RANGE)], marks=(0, 5)), 9)
    assert ahead.end == 5 and ahead.loss is not None and "went back" in ahead.loss.message()


def test_a_batch_larger_than_a_fetch_is_an_error_naming_the_option() -> None:
    cut = records(0, 3)[:-5]  # the broker's byte limit cut the only batch
    with pytest.raises(fetch_client.FetchError, match="kafka.max.partition.fetch.bytes"):
        fetch(Fetcher([ok(cut, high=3)]), 0)


def reader(fetchers: dict[int, Fetcher], fail_on_data_loss: bool = False,
           poll_timeout_ms: int = 60_000) -> DriverStreamReader:
    options = parse_source_options({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "events",
                                    "reader": "driver", "failOnDataLoss": str(fail_on_data_loss).lower(),
                                    "kafkaConsumer.pollTimeoutMs": str(poll_timeout_ms)}, streaming=True)
    r = DriverStreamReader(options)
    r._list = lambda: None  # type: ignore[method-assign]  # no broker to list: the partitions are those of `start`
    r.fetchers = {TopicPartition("events", p): f for p, f in fetchers.items()}  # type: ignore[misc]
    return r


def test_a_micro_batch_leaves_out_a_partition_that_has_not_answered_and_a_later_one_takes_its_records(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver_reader, "READ_WAIT_S", 0.2)
    gate = threading.Event()
    slow = Fetcher([ok(records(0, 2), high=2), ok(b"", high=2)], gate=gate)
    r = reader({0: slow, 1: Fetcher([ok(records(0, 1), high=1), ok(b"", high=1), ok(b"", high=1)])})
    start = {"events": {"0": 0, "1": 0}}
    batches, end = r.read(start)
    assert end == {"events": {"0": 0, "1": 1}} and [b.num_rows for b in batches] == [1]
    gate.set()  # the leader answers the fetch it was sent
    assert r.jobs[TopicPartition("events", 0)].done.wait(5)
    batches, end = r.read(end)
    assert end == {"events": {"0": 2, "1": 1}} and [b.column("partition")[0].as_py() for b in batches] == [0]
    assert slow.asked == [0]  # one fetch: the records it brought are taken, not fetched again
    batches, again = r.read(end)
    assert again is end and list(batches) == []  # nothing new: the very offsets Spark gave, so no batch is planned


def test_a_fetch_error_and_data_loss_under_fail_on_data_loss_fail_the_query() -> None:
    cut = records(0, 3)[:-5]
    with pytest.raises(fetch_client.FetchError):
        reader({0: Fetcher([ok(cut, high=3)])}).read({"events": {"0": 0}})
    lost = reader({0: Fetcher([failed(errors.OFFSET_OUT_OF_RANGE)], marks=(7, 20))}, fail_on_data_loss=True)
    with pytest.raises(DataLossError, match="failOnDataLoss=false"):
        lost.read({"events": {"0": 3}})


def test_a_query_no_partition_answers_fails_after_the_poll_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver_reader, "READ_WAIT_S", 0.05)
    down = errors.BY_NAME["NETWORK_EXCEPTION"]
    r = reader({0: Fetcher([failed(down)] * 3)}, poll_timeout_ms=1)
    start = {"events": {"0": 0}}
    batches, end = r.read(start)  # the first silence is told, not yet fatal
    assert end is start and list(batches) == []
    time.sleep(0.01)  # past the 1 ms timeout (the stand-in answers at once)
    with pytest.raises(TimeoutError, match="kafkaConsumer.pollTimeoutMs=1"):
        r.read(start)


def test_a_listing_no_broker_answers_keeps_the_partitions_known() -> None:
    options = parse_source_options({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "events",
                                    "reader": "driver", "kafka.socket.timeout.ms": "200", "kafka.log_level": "0"},
                                   streaming=True)
    assert DriverStreamReader(options)._list() is None


def test_a_partition_that_did_not_answer_is_not_waited_for_again(monkeypatch: pytest.MonkeyPatch) -> None:
    waited: list[float | None] = []

    class Recording(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waited.append(timeout)
            return super().wait(timeout)

    monkeypatch.setattr(driver_reader, "threading", SimpleNamespace(Event=Recording, Thread=threading.Thread))
    gate = threading.Event()
    r = reader({0: Fetcher([ok(records(0, 1), high=1), ok(b"", high=1)], gate=gate),
                1: Fetcher([ok(records(0, 1), high=1), ok(b"", high=1)])})
    r.unanswered.skipped[TP] = 1  # partition 0 did not answer the last micro-batch
    batches, end = r.read({"events": {"0": 0, "1": 0}})
    assert len(waited) == 1 and end == {"events": {"0": 0, "1": 1}}  # partition 1's fetch only
    gate.set()  # partition 0's leader answers: the next micro-batch takes its records
    assert r.jobs[TP].done.wait(5)
    assert r.read(end)[1] == {"events": {"0": 1, "1": 1}}


def test_a_fetch_from_another_position_than_the_batch_starts_at_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver_reader, "READ_WAIT_S", 0.05)
    gate = threading.Event()
    r = reader({0: Fetcher([ok(records(0, 2), high=2), ok(records(5, 1), high=6)], gate=gate)})
    assert r.read({"events": {"0": 0}})[1] == {"events": {"0": 0}}  # its fetch from 0 is held
    gate.set()
    assert r.jobs[TP].done.wait(5)
    batches, end = r.read({"events": {"0": 5}})  # Spark asks from elsewhere: the records from 0 are not these
    assert end == {"events": {"0": 5}} and list(batches) == []
    batches, end = r.read(end)
    assert end == {"events": {"0": 6}} and [b.column("offset").to_pylist() for b in batches] == [[5]]
