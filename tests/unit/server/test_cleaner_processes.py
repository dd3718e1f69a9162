"""The log cleaner's worker processes on real files: a compacted log is cleaned off the event loop, the swap happens
in `LogManager.clean`, deleting a log stops its clean in the worker first, and a worker that dies is counted."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from cleaner_helpers import NO_PRODUCERS

from insync.config import BrokerConfig, LogConfig
from insync.protocol.records import RecordSpec, build_batch, iter_records
from insync.server.cleaner_processes import CleanerProcesses
from insync.storage.disk import RealDisk
from insync.storage.log_manager import LogManager
from insync.types import TopicPartition
from insync.waiting import wait_until

TP = TopicPartition("t", 0)
COMPACTED = LogConfig(cleanup_policy=("compact",), segment_bytes=400, min_cleanable_dirty_ratio=0.01)


@pytest.fixture
def cleaning(tmp_path: Path) -> Iterator[tuple[LogManager, CleanerProcesses]]:
    config = BrokerConfig({"log.cleaner.backoff.ms": "10", "log.cleaner.dedupe.buffer.size": str(1 << 20),
                           "log.cleaner.io.max.bytes.per.second": "2000"})
    processes = CleanerProcesses(config.cleaner, RealDisk())
    manager = LogManager.open(tmp_path, config, processes.disk, executor=processes)
    processes.start()
    try:
        yield manager, processes
    finally:
        processes.close()
        manager.close()


def _fill(manager: LogManager, records: int, value: bytes) -> int:
    """A compacted log of `records` over three keys; its end offset."""
    log = manager.get_or_create(TP, COMPACTED)
    for i in range(records):
        log.append_as_leader(build_batch([RecordSpec(b"k%d" % (i % 3), value, timestamp=i)]), 0)
    return log.log_end_offset


def _slow_clean(manager: LogManager, processes: CleanerProcesses) -> None:
    """A clean handed to a worker that reads and writes 2 KB a second: of the 400 KB log, it takes minutes."""
    manager.clean(1000, {TP: _fill(manager, 400, b"v" * 1000)}, NO_PRODUCERS)
    assert processes.room() == 0


def test_a_worker_cleans_and_the_owner_swaps_in(cleaning: tuple[LogManager, CleanerProcesses],
                                                 tmp_path: Path) -> None:
    manager, _ = cleaning
    end = _fill(manager, 60, b"v")  # under the throttle's first check: not slowed
    wait_until(lambda: manager.clean(1000, {TP: end}, NO_PRODUCERS) > 0, 30, "a clean swapped in")
    log = manager.get(TP)
    assert log is not None
    records = list(iter_records(log.read(0, 1 << 20).records))
    assert records and records[0].offset > 0  # the first records went
    assert not [name for name in (tmp_path / "t-0").iterdir() if name.suffix in (".cleaned", ".swap")]
    assert (tmp_path / "cleaner-offset-checkpoint").exists()
    manager.delete(TP)
    assert manager.get(TP) is None


def test_deleting_a_log_stops_its_clean_in_the_worker(cleaning: tuple[LogManager, CleanerProcesses]) -> None:
    manager, processes = cleaning
    _slow_clean(manager, processes)
    [pid] = processes.pids()
    manager.delete(TP)  # abort_and_wait: the worker is stopped at once, and may be started again
    assert manager.get(TP) is None and _gone(pid)
    assert processes.room() == 1 and processes.dead_threads == 0 and processes.pids() == []


def test_a_worker_that_dies_counts_as_a_dead_thread_and_its_clean_is_dropped(
        cleaning: tuple[LogManager, CleanerProcesses], tmp_path: Path) -> None:
    manager, processes = cleaning
    _slow_clean(manager, processes)
    [pid] = processes.pids()
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    wait_until(lambda: os.getpriority(os.PRIO_PROCESS, pid) > ours, 30, "the worker niced")  # once spawned
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: processes.completed() or processes.dead_threads, 10, "the dead worker noticed")
    assert processes.dead_threads == 1 and processes.room() == 0 and processes.pids() == []
    assert manager.get(TP) is not None
    assert not [p for p in (tmp_path / "t-0").iterdir() if p.name.endswith((".swap", ".cleaned"))]


def test_a_worker_that_dies_between_jobs_is_counted_and_not_handed_a_job(
        cleaning: tuple[LogManager, CleanerProcesses]) -> None:
    manager, processes = cleaning
    end = _fill(manager, 60, b"v")
    wait_until(lambda: manager.clean(1000, {TP: end}, NO_PRODUCERS) > 0, 30, "a clean")
    [pid] = processes.pids()
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: processes.room() == 0, 10, "the idle worker's death noticed")
    assert processes.dead_threads == 1 and processes.pids() == []
    manager.clean(1000, {TP: end}, NO_PRODUCERS)  # no room: nothing is submitted, nothing raises


def _gone(pid: int) -> bool:
    """The process has ended (reaped, or a zombie not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
