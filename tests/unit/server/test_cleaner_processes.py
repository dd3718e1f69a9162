"""The log cleaner's worker processes on real files: a compacted log is cleaned off the event loop, the swap happens
in `LogManager.clean`, deleting a log stops its clean in the worker first, and a worker that dies is counted."""

from __future__ import annotations

import os
import signal
from pathlib import Path

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


def _manager(tmp_path: Path) -> tuple[LogManager, CleanerProcesses]:
    config = BrokerConfig({"log.cleaner.backoff.ms": "10", "log.cleaner.dedupe.buffer.size": str(1 << 20)})
    processes = CleanerProcesses(config.cleaner, RealDisk())
    manager = LogManager.open(tmp_path, config, processes.disk, executor=processes)
    processes.start()
    return manager, processes


def test_a_worker_cleans_and_the_owner_swaps_in(tmp_path: Path) -> None:
    manager, processes = _manager(tmp_path)
    try:
        log = manager.get_or_create(TP, COMPACTED)
        for i in range(60):
            log.append_as_leader(build_batch([RecordSpec(b"k%d" % (i % 3), b"v%d" % i, timestamp=i)]), 0)
        end = log.log_end_offset
        wait_until(lambda: manager.clean(1000, {TP: end}, NO_PRODUCERS) > 0, 10, "a clean swapped in")
        records = list(iter_records(log.read(0, 1 << 20).records))
        assert records and records[0].offset > 0  # the first records went
        assert not [name for name in (tmp_path / "t-0").iterdir() if name.suffix in (".cleaned", ".swap")]
        assert (tmp_path / "cleaner-offset-checkpoint").exists()
        manager.delete(TP)
        assert manager.get(TP) is None
    finally:
        processes.close()
        manager.close()


def _slow_manager(tmp_path: Path) -> tuple[LogManager, CleanerProcesses]:
    """A manager whose cleaner reads and writes 2 KB a second: a clean of the 400 KB log below takes minutes."""
    config = BrokerConfig({"log.cleaner.backoff.ms": "10", "log.cleaner.dedupe.buffer.size": str(1 << 20),
                           "log.cleaner.io.max.bytes.per.second": "2000"})
    processes = CleanerProcesses(config.cleaner, RealDisk())
    manager = LogManager.open(tmp_path, config, processes.disk, executor=processes)
    processes.start()
    log = manager.get_or_create(TP, COMPACTED)
    for i in range(400):
        log.append_as_leader(build_batch([RecordSpec(b"k%d" % (i % 3), b"v" * 1000, timestamp=i)]), 0)
    manager.clean(1000, {TP: log.log_end_offset}, NO_PRODUCERS)  # hands the job to a worker
    assert processes.room() == 0
    return manager, processes


def test_deleting_a_log_stops_its_clean_in_the_worker(tmp_path: Path) -> None:
    manager, processes = _slow_manager(tmp_path)
    try:
        [pid] = processes.pids()
        manager.delete(TP)  # abort_and_wait: the worker is stopped at once, and may be started again
        assert manager.get(TP) is None and _gone(pid)
        assert processes.room() == 1 and processes.dead_threads == 0 and processes.pids() == []
    finally:
        processes.close()
        manager.close()


def test_a_worker_that_dies_counts_as_a_dead_thread_and_its_clean_is_dropped(tmp_path: Path) -> None:
    manager, processes = _slow_manager(tmp_path)
    try:
        [pid] = processes.pids()
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        wait_until(lambda: os.getpriority(os.PRIO_PROCESS, pid) > ours, 30, "the worker niced")  # once spawned
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: processes.completed() or processes.dead_threads, 10, "the dead worker noticed")
        assert processes.dead_threads == 1 and processes.room() == 0 and processes.pids() == []
        assert manager.get(TP) is not None
        assert not [p for p in (tmp_path / "t-0").iterdir() if p.name.endswith((".swap", ".cleaned"))]
    finally:
        processes.close()
        manager.close()


def test_a_worker_that_dies_between_jobs_is_counted_and_not_handed_a_job(tmp_path: Path) -> None:
    manager, processes = _manager(tmp_path)
    try:
        log = manager.get_or_create(TP, COMPACTED)
        for i in range(60):
            log.append_as_leader(build_batch([RecordSpec(b"k%d" % (i % 3), b"v%d" % i, timestamp=i)]), 0)
        wait_until(lambda: manager.clean(1000, {TP: log.log_end_offset}, NO_PRODUCERS) > 0, 30, "a clean")
        [pid] = processes.pids()
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: processes.room() == 0, 10, "the idle worker's death noticed")
        assert processes.dead_threads == 1 and processes.pids() == []
        manager.clean(1000, {TP: log.log_end_offset}, NO_PRODUCERS)  # no room: nothing is submitted, nothing raises
    finally:
        processes.close()
        manager.close()


def _gone(pid: int) -> bool:
    """The process has ended (reaped, or a zombie not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
