"""What one round of a broker's periodic checkpoints costs with N logs: the high-watermark checkpoint with a few
offsets moved since the last (as the events topic's move each interval), then the recovery points and log starts.
CPU time on MemoryDisk, so the Python, not the disk. Usage: checkpoints.py [LOGS] (default 10,000)."""

from __future__ import annotations

import sys
import time

from insync.config import BrokerConfig
from insync.storage.disk import MemoryDisk
from insync.storage.log_manager import LogManager
from insync.types import TopicPartition

ROUNDS = 30


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    manager = LogManager.open(["/data"], BrokerConfig(), disk=MemoryDisk())
    partitions = [TopicPartition(f"topic-{i % 5}", i // 5) for i in range(count)]
    for tp in partitions:
        manager.get_or_create(tp)
    high_watermarks = {tp: 100 + i for i, tp in enumerate(partitions)}
    manager.checkpoint_high_watermarks(high_watermarks)
    manager.checkpoint_recovery_points_and_log_starts()
    started = time.process_time()
    for step in range(ROUNDS):
        high_watermarks[partitions[step]] += 1
        manager.checkpoint_high_watermarks(dict(high_watermarks))
    high_watermark_ms = (time.process_time() - started) / ROUNDS * 1000
    started = time.process_time()
    for _ in range(ROUNDS):
        manager.checkpoint_recovery_points_and_log_starts()
    recovery_ms = (time.process_time() - started) / ROUNDS * 1000
    print(f"{count} logs: high-watermark checkpoint {high_watermark_ms:.1f} ms, "
          f"recovery points and log starts {recovery_ms:.1f} ms (CPU time per checkpoint)")


if __name__ == "__main__":
    main()
