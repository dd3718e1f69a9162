"""Moving a replica to another log dir of its broker: copy while it is written, then swap (Kafka's
`ReplicaAlterLogDirsThread` and `LogManager.replaceCurrentWithFutureLog`).

The owner (`LogManager.move_replicas`) calls `copy_step` on the event loop with a byte budget from `MoveThrottle`
(`replica.alter.log.dirs.io.max.bytes.per.second`). A step first makes the future copy agree with the current log
the way a follower agrees with its leader: whatever the current log no longer holds (truncated by a new leader,
compared by leader epoch) is truncated from the copy, and its log start follows the current one. Then it appends
whole batches from the current log, offsets and epochs as they are. Because appends to the current log and the
steps both run on the event loop, "caught up" (same log start, same end) is exact when `swap` runs, and nothing
is written between the check and the swap. `swap` flushes the copy, renames the current log `-delete`, renames
the copy to the partition's name and reopens it into the same `Log` object, so the partition, its readers and its
producer table keep their reference. A crash between the two renames leaves a future copy beside a `-delete` one,
which start-up promotes (`log_dir_layout.plan_start_up`); before the first, the current log still serves.
"""

from __future__ import annotations

import logging
import os

from insync import errors
from insync.clock import Clock
from insync.config import LONG_MAX
from insync.errors import KafkaException
from insync.storage.disk import Disk
from insync.storage.leader_epoch import UNDEFINED_EPOCH
from insync.storage.log import Log
from insync.storage.log_dir_layout import LogKind, delete_name, parse_log_name

logger = logging.getLogger("insync.storage")

STEP_READS_MAX = 64  # reads of the current log per step, each at most a segment's worth of whole batches
EPOCH_ROUNDS_MAX = 8  # rounds of epoch comparison before the copy is restarted from scratch
BURST_MS = 1000  # a throttle saves up to this long's worth of bytes while nothing moves
DELETE_FILES_MAX = 100_000  # files in one partition directory, far above what a log holds


class MoveThrottle:
    """A token bucket: `budget` is what may be copied now at `rate` bytes per second, never more than a second's
    worth; a batch copied over the budget is paid back before the next step copies."""

    def __init__(self, rate_bytes_per_s: int, now_ms: int) -> None:
        assert rate_bytes_per_s >= 0, rate_bytes_per_s
        self.rate_bytes_per_s = rate_bytes_per_s
        self._tokens = 0
        self._last_ms = now_ms

    def budget(self, now_ms: int, step_bytes_max: int) -> int:
        if self.rate_bytes_per_s >= LONG_MAX:
            return step_bytes_max
        elapsed_ms = max(0, now_ms - self._last_ms)
        self._last_ms = now_ms
        burst = self.rate_bytes_per_s * BURST_MS // 1000
        self._tokens = min(burst, self._tokens + self.rate_bytes_per_s * elapsed_ms // 1000)
        return max(0, min(self._tokens, step_bytes_max))

    def spend(self, copied_bytes: int) -> None:
        assert copied_bytes >= 0
        if self.rate_bytes_per_s < LONG_MAX:
            self._tokens -= copied_bytes


def copy_step(current: Log, future: Log, max_bytes: int) -> int:
    """Bring `future` closer to `current` (see the module docstring); returns the bytes copied. With a budget
    of at least one byte, at least one batch is copied when any is missing."""
    assert current is not future and max_bytes >= 0
    _follow_truncation(current, future)
    if future.log_end_offset < current.log_start_offset:
        future.truncate_fully_and_start_at(current.log_start_offset)
    elif future.log_start_offset < current.log_start_offset:
        future.delete_records_before(current.log_start_offset)
    copied = 0
    for _ in range(STEP_READS_MAX):
        if copied >= max_bytes or future.log_end_offset >= current.log_end_offset:
            break
        read = current.read(future.log_end_offset, max_bytes - copied, min_one_batch=True)
        if not read.records:
            break
        future.append_as_follower(read.records)
        copied += len(read.records)
    assert future.log_end_offset <= current.log_end_offset, (future.log_end_offset, current.log_end_offset)
    return copied


def _follow_truncation(current: Log, future: Log) -> None:
    """Truncate from `future` what `current` does not hold at the same offsets, by leader epoch (KIP-101/279)."""
    for _ in range(EPOCH_ROUNDS_MAX):
        epoch = future.latest_epoch()
        if future.log_end_offset == future.log_start_offset or epoch is None:
            if future.log_end_offset > current.log_end_offset:
                future.truncate_to(current.log_end_offset)
            return
        found_epoch, end_offset = current.end_offset_for_epoch(epoch)
        if found_epoch == UNDEFINED_EPOCH:
            future.truncate_fully_and_start_at(current.log_start_offset)
            return
        target = min(end_offset, current.log_end_offset)
        if target >= future.log_end_offset:
            return
        future.truncate_to(target)
    future.truncate_fully_and_start_at(current.log_start_offset)


def caught_up(current: Log, future: Log) -> bool:
    return (future.log_end_offset == current.log_end_offset
            and future.log_start_offset == current.log_start_offset)


def swap(disk: Disk, clock: Clock, current: Log, future: Log, token: str) -> str:
    """Serve `future`'s copy as `current` (which must be caught up); returns the `-delete` directory that now
    holds the old copy, for the caller to delete."""
    assert caught_up(current, future), (current.directory, future.directory)
    for epoch, start_offset in current.leader_epoch_cache.epoch_entries:
        latest = future.latest_epoch()
        if latest is None or epoch > latest:  # a leader's epoch with no batch yet: only the cache knows it
            future.leader_epoch_cache.assign(epoch, start_offset)
    future.flush()  # everything the copy holds is durable before the old copy stops being the one served
    name = os.path.basename(current.directory)
    parsed = parse_log_name(name)
    assert parsed is not None and parsed.kind is LogKind.CURRENT, current.directory
    doomed = f"{os.path.dirname(current.directory)}/{delete_name(parsed.topic_partition, token)}"
    target = f"{os.path.dirname(future.directory)}/{name}"
    try:
        disk.rename_dir(current.directory, doomed)
    except OSError as exc:
        raise KafkaException(errors.KAFKA_STORAGE_ERROR, f"renaming {current.directory}: {exc}") from exc
    try:
        disk.rename_dir(future.directory, target)
    except OSError as exc:
        disk.rename_dir(doomed, current.directory)  # the old copy serves on, under its own name
        raise KafkaException(errors.KAFKA_STORAGE_ERROR, f"renaming {future.directory}: {exc}") from exc
    reopened = Log.open(target, current.config, disk, clock=clock, recovery_point=future.log_end_offset,
                        log_start_offset=future.log_start_offset)
    _adopt(current, reopened)
    assert current.directory == target and current.log_end_offset == reopened.log_end_offset
    return doomed


def _adopt(log: Log, reopened: Log) -> None:
    """Point `log` at `reopened`'s files, keeping its config, listeners and producer snapshot source."""
    source = log.producer_snapshots.source
    log.directory = reopened.directory
    log.segments = reopened.segments
    log.leader_epoch_cache = reopened.leader_epoch_cache
    log.producer_snapshots = reopened.producer_snapshots
    log.producer_snapshots.source = source
    log.log_start_offset = reopened.log_start_offset
    log.recovery_point = reopened.recovery_point
    log.cleaning_generation += 1  # a clean prepared on the old files is void


def delete_log_dir(disk: Disk, directory: str) -> None:
    """Remove a partition directory and its files; a failure is logged, the leftover deleted at next start-up."""
    try:
        if not disk.exists(directory):
            return
        for name in disk.listdir(directory)[:DELETE_FILES_MAX]:
            disk.remove(f"{directory}/{name}")
        disk.rmdir(directory)
    except (OSError, KafkaException) as exc:
        logger.error("Could not delete %s: %s", directory, exc)
