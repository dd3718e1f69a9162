"""Appends until a real (tmpfs) file system is full: the failing append is refused with KAFKA_STORAGE_ERROR, the
directory goes offline, and recovery at the next open keeps exactly the appends that succeeded, cutting the torn
tail the failed write left."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from insync import errors
from insync.clock import ManualClock
from insync.config import LogConfig
from insync.errors import KafkaException
from insync.protocol.records import build_batch, iter_batches
from insync.storage.disk import RealDisk
from insync.storage.log import Log
from insync.storage.log_manager import LogManager
from insync.types import TopicPartition

small_disk = pytest.importorskip("insync.chaos.small_disk")
if small_disk.unavailable() is not None:
    pytest.skip(f"needs a small file system: {small_disk.unavailable()}", allow_module_level=True)

APPENDS_MAX = 10_000
TP = TopicPartition("t", 0)


def test_an_append_that_fills_the_disk_is_refused_and_recovery_keeps_every_acknowledged_batch(tmp_path: Path) -> None:
    root = tmp_path / "data"
    with small_disk.mounted([root], 1):
        config = LogConfig(segment_bytes=256 * 1024)
        manager = LogManager.open(root, config, RealDisk(), ManualClock())
        log = manager.get_or_create(TP)
        acknowledged = []
        value = os.urandom(3000)  # incompressible, so the disk fills in a few hundred appends
        for i in range(APPENDS_MAX):
            try:
                acknowledged.append(log.append_as_leader(build_batch([(b"k%d" % i, value)]), 0).last_offset)
            except KafkaException as exc:
                assert exc.error is errors.KAFKA_STORAGE_ERROR
                break
        assert acknowledged and len(acknowledged) < APPENDS_MAX, "the disk never filled"
        assert manager.failure_channel.take_new() == [str(root)]
        assert manager.handle_log_dir_failure(str(root)) == [TP] and log.offline
        written = sum(f.stat().st_size for f in (root / str(TP)).glob("*.log"))
        log.disk.close()  # the broker halts here: nothing flushed, nothing checkpointed

        recovered = Log.open(root / str(TP), config, RealDisk(), clock=ManualClock())
        assert recovered.log_end_offset == acknowledged[-1] + 1
        offsets = [h.base_offset for s in recovered.segments
                   for _, h in iter_batches(Path(s.log_path).read_bytes(), verify_crc=True)]
        assert offsets == list(range(len(acknowledged)))
        assert sum(s.size for s in recovered.segments) <= written  # a torn tail, if any, is cut
        recovered.disk.close()
