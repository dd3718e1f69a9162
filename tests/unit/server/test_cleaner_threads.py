"""The log cleaner's threads on real files: a compacted log is cleaned off the caller's thread, the swap happens
in `LogManager.clean`, and deleting a log stops its clean first."""

from __future__ import annotations

from pathlib import Path

from cleaner_helpers import NO_PRODUCERS

from insync.config import BrokerConfig, LogConfig
from insync.protocol.records import RecordSpec, build_batch, iter_records
from insync.server.cleaner_threads import CleanerThreads
from insync.storage.disk import RealDisk
from insync.storage.log_manager import LogManager
from insync.types import TopicPartition
from insync.waiting import wait_until

TP = TopicPartition("t", 0)
COMPACTED = LogConfig(cleanup_policy=("compact",), segment_bytes=400, min_cleanable_dirty_ratio=0.01)


def _manager(tmp_path: Path) -> tuple[LogManager, CleanerThreads]:
    config = BrokerConfig({"log.cleaner.backoff.ms": "10", "log.cleaner.dedupe.buffer.size": str(1 << 20)})
    threads = CleanerThreads(config.cleaner, RealDisk())
    manager = LogManager.open(tmp_path, config, threads.disk, executor=threads)
    threads.start()
    return manager, threads


def test_a_thread_cleans_and_the_owner_swaps_in(tmp_path: Path) -> None:
    manager, threads = _manager(tmp_path)
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
        threads.close()
        manager.close()
