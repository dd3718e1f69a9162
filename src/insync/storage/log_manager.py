"""Every partition log of one log dir, and the three offset checkpoint files at its root.

`LogManager.open` reads `recovery-point-offset-checkpoint` and `log-start-offset-checkpoint`, then opens each
`<topic>-<partition>` directory as a `Log` from those offsets. A garbled recovery-point checkpoint is not fatal:
every log is then recovered from its first segment (recovery point 0: slower, never wrong). A garbled log-start
checkpoint falls back to each log's first segment base offset (what Kafka does for a missing entry: records
deleted by DeleteRecords but still in that segment become readable again, none are lost). Both are logged on
`insync.storage`. The high watermark checkpoint (`replication-offset-checkpoint`) is read strictly:
`read_high_watermarks` raises `CheckpointError` and the caller decides, because a guessed high watermark
could expose uncommitted data. An I/O error in any log, checkpoint or load of the directory goes to
`failure_channel` (Kafka's LogDirFailureChannel); `handle_log_dir_failure` then takes every log offline.
Beyond the surface in the brief: `log_dir`, `disk`, and `tp_of(name)` (parse a partition directory name).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path

from insync import errors
from insync.clock import Clock, SystemClock
from insync.config import BrokerConfig, CleanerConfig, LogConfig
from insync.errors import KafkaException
from insync.limits import PARTITIONS_PER_BROKER_MAX
from insync.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from insync.storage.disk import Disk, RealDisk
from insync.storage.log import Log
from insync.storage.log_cleaner import (
    CleanExecutor,
    InlineExecutor,
    LogCleaner,
    Producers,
    map_bytes_per_thread,
)
from insync.storage.log_dir_failure import LogDirFailureChannel
from insync.storage.offset_map import OffsetMap
from insync.types import TopicPartition

logger = logging.getLogger("insync.storage")

_PARTITION_DIR = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d+)$")


def tp_of(name: str) -> TopicPartition | None:
    """The partition a directory name stands for, or None for anything else (checkpoints, events.jsonl)."""
    match = _PARTITION_DIR.match(name)
    if match is None:
        return None
    return TopicPartition(match.group("topic"), int(match.group("partition")))


class LogManager:
    def __init__(self, log_dir: str, config: LogConfig, disk: Disk, clock: Clock, owns_disk: bool) -> None:
        self.log_dir = log_dir
        self.config = config
        self.disk = disk
        self.clock = clock
        self._logs: dict[TopicPartition, Log] = {}
        self._owns_disk = owns_disk
        self.cleaner: LogCleaner | None = None  # set by open()
        self.failure_channel = LogDirFailureChannel()

    @classmethod
    def open(cls, log_dir: str | Path, config: BrokerConfig | LogConfig, disk: Disk | None = None,
             clock: Clock | None = None, executor: CleanExecutor | None = None) -> LogManager:
        """`executor` runs the log cleaner's jobs (the server's threads); without one they run inline, in
        `clean` (tests, the simulator)."""
        path = str(log_dir).rstrip("/") or "/"
        log_config = config.log_config() if isinstance(config, BrokerConfig) else config
        cleaner_config = config.cleaner if isinstance(config, BrokerConfig) else BrokerConfig().cleaner
        manager = cls(path, log_config, disk or RealDisk(), clock or SystemClock(), owns_disk=disk is None)
        manager.disk.mkdir(path)
        manager.cleaner = LogCleaner(path, manager.disk, cleaner_config,
                                     executor or _inline_executor(manager.disk, cleaner_config))
        recovery_points = manager._read_or_default(RECOVERY_POINT_CHECKPOINT, "recovering every log in full")
        log_starts = manager._read_or_default(LOG_START_OFFSET_CHECKPOINT, "log start offsets restart at the "
                                              "first segment of each log")
        try:
            manager._load_logs(log_config, recovery_points, log_starts)
        except (OSError, KafkaException) as exc:
            if isinstance(exc, KafkaException) and exc.error is not errors.KAFKA_STORAGE_ERROR:
                raise
            # Kafka's loadLogs: the directory is offline, the broker goes on with the others (or halts)
            manager.failure_channel.maybe_add_offline_log_dir(path, f"Error while loading log dir {path}", exc)
        return manager

    def _load_logs(self, log_config: LogConfig, recovery_points: Mapping[TopicPartition, int],
                   log_starts: Mapping[TopicPartition, int]) -> None:
        for name in self.disk.listdir(self.log_dir):
            tp = tp_of(name)
            if tp is None:
                continue
            assert len(self._logs) < PARTITIONS_PER_BROKER_MAX
            self._logs[tp] = Log.open(f"{self.log_dir}/{name}", log_config, self.disk, clock=self.clock,
                                      recovery_point=recovery_points.get(tp), log_start_offset=log_starts.get(tp))
            self._logs[tp].failure_channel = self.failure_channel

    def _read_or_default(self, name: str, default_text: str) -> dict[TopicPartition, int]:
        try:
            return read_offset_checkpoint(self.disk, f"{self.log_dir}/{name}")
        except CheckpointError as exc:
            logger.warning("Ignoring %s: %s; %s", name, exc, default_text)
            return {}

    def get(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def get_or_create(self, tp: TopicPartition, config: LogConfig | None = None) -> Log:
        """The partition's log, created empty when missing; `config` (topic overrides) replaces the old one."""
        log = self._logs.get(tp)
        if log is None:
            assert len(self._logs) < PARTITIONS_PER_BROKER_MAX
            log = Log.open(f"{self.log_dir}/{tp}", config or self.config, self.disk, clock=self.clock)
            log.failure_channel = self.failure_channel
            self._logs[tp] = log
        elif config is not None:
            log.update_config(config)
        return log

    def delete(self, tp: TopicPartition) -> None:
        """Remove the partition's directory and everything in it, once its cleaning has stopped."""
        assert self.cleaner is not None
        self.cleaner.abort_and_wait(tp)
        self.cleaner.forget(tp)
        log = self._logs.pop(tp, None)
        directory = f"{self.log_dir}/{tp}"
        if log is not None:
            directory = log.directory
        if not self.disk.exists(directory):
            return
        for name in self.disk.listdir(directory):
            self.disk.remove(f"{directory}/{name}")
        self.disk.rmdir(directory)

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def checkpoint_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        self._write_checkpoint(REPLICATION_OFFSET_CHECKPOINT,
                               {tp: hw for tp, hw in high_watermarks.items() if tp in self._logs})

    def _write_checkpoint(self, name: str, offsets: Mapping[TopicPartition, int]) -> None:
        """A checkpoint that cannot be written takes the directory offline, as Kafka's does."""
        if self.failure_channel.is_offline(self.log_dir):
            return
        try:
            write_offset_checkpoint(self.disk, f"{self.log_dir}/{name}", offsets)
        except OSError as exc:
            self.failure_channel.maybe_add_offline_log_dir(
                self.log_dir, f"Disk error while writing {name} in directory {self.log_dir}", exc)

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """Take every log of `log_dir` offline (Kafka's LogManager.handleLogDirFailure); returns their partitions."""
        assert self.failure_channel.is_offline(log_dir), log_dir
        offline = sorted(tp for tp, log in self._logs.items() if log.directory.startswith(f"{log_dir}/"))
        for tp in offline:
            self._logs[tp].offline = True
        if offline:
            self.stop_cleaning()
        logger.warning("Logs for partitions %s are offline due to failure on log directory %s",
                       ",".join(map(str, offline)), log_dir)
        return offline

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        """The HW checkpoint (empty when missing). Raises CheckpointError, naming file and line, when garbled."""
        return read_offset_checkpoint(self.disk, f"{self.log_dir}/{REPLICATION_OFFSET_CHECKPOINT}")

    def checkpoint_recovery_points_and_log_starts(self) -> None:
        """Flush what rolled since the last time (`Log.flush_sealed`), then write both checkpoints. A log that
        fails its fsync goes offline (Log's rule) and keeps its recovery point; the others are written."""
        for log in self._logs.values():
            if not log.offline:
                try:
                    log.flush_sealed()
                except KafkaException as exc:
                    logger.error("Not moving the recovery point of %s: %s", log.directory, exc)
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, {tp: log.recovery_point for tp, log in self._logs.items()})
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT,
                               {tp: log.log_start_offset for tp, log in self._logs.items()})

    def apply_retention(self, now_ms: int, high_watermarks: Mapping[TopicPartition, int]) -> int:
        """Retention on every log with a high watermark in `high_watermarks`, never past it; a log without one
        (not hosted as a partition yet, after a restart) keeps everything. Returns the segments deleted."""
        deleted = 0
        for tp, log in self._logs.items():
            high_watermark = high_watermarks.get(tp)
            if high_watermark is not None and not log.offline:
                deleted += log.apply_retention(now_ms, high_watermark)
        return deleted

    def clean(self, now_ms: int, stable_offsets: Mapping[TopicPartition, int], producers: Producers) -> int:
        """The log cleaner's turn (`LogCleaner.tick`): swap in finished cleans, start the next. A log without a
        stable offset (not hosted as a partition) is not cleaned. Returns the cleans swapped in."""
        assert self.cleaner is not None
        if any(log.offline for log in self._logs.values()):
            return self.cleaner.tick(now_ms, {tp: log for tp, log in self._logs.items() if not log.offline},
                                     stable_offsets, producers)
        return self.cleaner.tick(now_ms, self._logs, stable_offsets, producers)

    def flush(self) -> None:
        for log in self._logs.values():
            if not log.offline:
                log.flush()

    def stop_cleaning(self) -> None:
        """Have the cleans in progress stop at their next batch, before the cleaner's threads are joined."""
        assert self.cleaner is not None
        self.cleaner.abort_all()

    def close(self) -> None:
        """Flush every log and write the checkpoints, so the next open trusts all the data."""
        for log in self._logs.values():
            if not log.offline:  # an offline log is left as it is, for recovery at the next start
                log.close()
        self.checkpoint_recovery_points_and_log_starts()
        if self._owns_disk and isinstance(self.disk, RealDisk):
            self.disk.close()


def _inline_executor(disk: Disk, config: CleanerConfig) -> InlineExecutor:
    return InlineExecutor(disk, OffsetMap(map_bytes_per_thread(config), config.dedupe_buffer_load_factor))
