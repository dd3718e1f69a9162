"""Every partition log of a broker's log dirs (JBOD), and the offset checkpoint files at each dir's root.

`LogManager.open` lists every log dir; a dir that cannot be created or listed is offline (Kafka starts with the
others), and start-up fails only when all are. `log_dir_layout.plan_start_up` says what the names found mean:
`-delete` copies are deleted, a future copy left alone by a crash mid-swap is promoted, a duplicate is refused.
Each dir's `recovery-point-offset-checkpoint` and `log-start-offset-checkpoint` hold its own logs, future copies
included, as in Kafka. A garbled recovery-point checkpoint recovers its logs from their first segment (slower,
never wrong); a garbled log-start checkpoint falls back to each first segment's base offset (deleted records
become readable again, none lost); both are logged. Each dir's high watermark checkpoint is read strictly
(`read_high_watermarks` raises `CheckpointError`): a guessed high watermark could expose uncommitted data. A new
log goes to the online dir with the fewest logs, or to the dir AlterReplicaLogDirs asked for before it existed;
moves between dirs are `replica_moves.ReplicaMoves`. An I/O error in a dir's logs, checkpoints or start-up load goes to
`failure_channel` (Kafka's LogDirFailureChannel); `handle_log_dir_failure` then takes that dir's logs offline.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping, Sequence
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
    OffsetLines,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from insync.storage.disk import Disk, RealDisk
from insync.storage.leader_epoch import EpochCheckpoints
from insync.storage.log import Log
from insync.storage.log_cleaner import (
    CleanExecutor,
    InlineExecutor,
    LogCleaner,
    ProducerStates,
    map_bytes_per_thread,
)
from insync.storage.log_dir_failure import LogDirFailureChannel
from insync.storage.log_dir_layout import (
    LogDirLayoutError,
    LogKind,
    StartUpPlan,
    next_log_dir,
    parse_log_name,
    plan_start_up,
)
from insync.storage.offset_map import OffsetMap
from insync.storage.replica_move import delete_log_dir
from insync.storage.replica_moves import ReplicaMoves
from insync.types import TopicPartition

logger = logging.getLogger("insync.storage")


def tp_of(name: str) -> TopicPartition | None:
    """The partition a directory name stands for, or None for anything else (checkpoints, events.jsonl, a
    future or `-delete` copy)."""
    parsed = parse_log_name(name)
    return parsed.topic_partition if parsed is not None and parsed.kind is LogKind.CURRENT else None


def parent_dir(log: Log) -> str:
    return _parent_of(log.directory)


@functools.lru_cache(maxsize=2 * PARTITIONS_PER_BROKER_MAX)
def _parent_of(directory: str) -> str:
    # Each checkpoint asks it of every log: posixpath.dirname was most of a 10,000-log broker's checkpoint.
    return os.path.dirname(directory)


class LogManager:
    def __init__(self, log_dirs: tuple[str, ...], config: LogConfig, disk: Disk, clock: Clock,
                 owns_disk: bool) -> None:
        assert log_dirs and len(set(log_dirs)) == len(log_dirs), log_dirs
        self.log_dirs = log_dirs
        self.config = config
        self.disk = disk
        self.clock = clock
        self._logs: dict[TopicPartition, Log] = {}
        self._compacted: dict[TopicPartition, Log] | None = None  # `compacted_logs`, found again after a change
        self._owns_disk = owns_disk
        self.preferred_dirs: dict[TopicPartition, str] = {}  # AlterReplicaLogDirs before the log exists
        self.cleaner: LogCleaner | None = None  # set by open()
        self.moves = ReplicaMoves(self)
        self.failure_channel = LogDirFailureChannel()
        self.epoch_checkpoints = EpochCheckpoints(disk)  # the broker batches a metadata update's epoch files
        # What each checkpoint file last held when written: an unchanged one is not written again (an idle broker
        # with thousands of partitions would rewrite and fsync the same lines every interval), a changed one has
        # only its changed lines formatted again.
        self._written: dict[str, OffsetLines] = {}

    @property
    def offline_dirs(self) -> frozenset[str]:
        return frozenset(d for d in self.log_dirs if self.failure_channel.is_offline(d))

    @property
    def log_dir(self) -> str:
        """The first log dir: where the broker keeps what is not a partition's (events, its clean-shutdown
        marker, the power-loss journal)."""
        return self.log_dirs[0]

    @classmethod
    def open(cls, log_dirs: str | Path | Sequence[str | Path], config: BrokerConfig | LogConfig,
             disk: Disk | None = None, clock: Clock | None = None, executor: CleanExecutor | None = None
             ) -> LogManager:
        """`executor` runs the log cleaner's jobs (the server's threads); without one they run inline, in
        `clean` (tests, the simulator). Raises LogDirLayoutError when no dir is online or start-up finds copies
        it cannot choose between."""
        given = [log_dirs] if isinstance(log_dirs, (str, Path)) else list(log_dirs)
        paths = tuple(dict.fromkeys(str(d).rstrip("/") or "/" for d in given))
        log_config = config.log_config() if isinstance(config, BrokerConfig) else config
        cleaner_config = config.cleaner if isinstance(config, BrokerConfig) else BrokerConfig().cleaner
        manager = cls(paths, log_config, disk or RealDisk(), clock or SystemClock(), owns_disk=disk is None)
        if isinstance(config, BrokerConfig):
            manager.moves.set_rate(config.storage.alter_log_dirs_bytes_per_s)
        listings = manager._list_dirs()
        manager.cleaner = LogCleaner(tuple(listings), manager.disk, cleaner_config,
                                     executor or _inline_executor(manager.disk, cleaner_config), manager.dir_of)
        plan = plan_start_up(listings)
        manager._settle(plan)
        for log_dir in listings:
            try:
                manager._open_logs(log_dir, plan)
            except (OSError, KafkaException) as exc:
                if isinstance(exc, KafkaException) and exc.error is not errors.KAFKA_STORAGE_ERROR:
                    raise
                # Kafka's loadLogs: the dir is offline, the broker goes on with the others (or halts)
                manager.failure_channel.maybe_add_offline_log_dir(log_dir, f"Error while loading log dir {log_dir}",
                                                                  exc)
        return manager

    def _list_dirs(self) -> dict[str, list[str]]:
        listings: dict[str, list[str]] = {}
        for path in self.log_dirs:
            try:
                self.disk.mkdir(path)
                listings[path] = self.disk.listdir(path)
            except OSError as exc:
                self.failure_channel.maybe_add_offline_log_dir(path, f"Error while listing log dir {path}", exc)
        if not listings:
            raise LogDirLayoutError(f"every log dir is offline: {', '.join(self.log_dirs)}")
        return listings

    def _settle(self, plan: StartUpPlan) -> None:
        """Delete the `-delete` copies and promote future copies a crash left alone (see `log_dir_layout`)."""
        for log_dir, name in plan.delete:
            delete_log_dir(self.disk, f"{log_dir}/{name}")
        for tp, (log_dir, name) in sorted(plan.promote.items()):
            logger.warning("Serving %s/%s as %s: the move that copied it was swapping it in", log_dir, name, tp)
            self.disk.rename_dir(f"{log_dir}/{name}", f"{log_dir}/{tp}")
            plan.current[tp] = (log_dir, str(tp))

    def _open_logs(self, log_dir: str, plan: StartUpPlan) -> None:
        recovery_points = self._read_or_default(log_dir, RECOVERY_POINT_CHECKPOINT, "recovering every log in full")
        log_starts = self._read_or_default(log_dir, LOG_START_OFFSET_CHECKPOINT, "log start offsets restart at "
                                           "the first segment of each log")
        for found, is_future in ((plan.current, False), (plan.future, True)):
            for tp, (where, name) in sorted(found.items()):
                if where != log_dir:
                    continue
                assert len(self._logs) < PARTITIONS_PER_BROKER_MAX
                log = Log.open(f"{log_dir}/{name}", self.config, self.disk, clock=self.clock,
                               recovery_point=recovery_points.get(tp), log_start_offset=log_starts.get(tp),
                               epoch_writer=self.epoch_checkpoints)
                log.failure_channel = self.failure_channel
                if is_future:
                    self.moves.resume(tp, log)
                else:
                    self._logs[tp] = log
                    self._compacted = None

    def _read_or_default(self, log_dir: str, name: str, default_text: str) -> dict[TopicPartition, int]:
        try:
            return read_offset_checkpoint(self.disk, f"{log_dir}/{name}")
        except CheckpointError as exc:
            logger.warning("Ignoring %s in %s: %s; %s", name, log_dir, exc, default_text)
            return {}

    def online_dirs(self) -> tuple[str, ...]:
        return tuple(d for d in self.log_dirs if d not in self.offline_dirs)

    def dir_of(self, tp: TopicPartition) -> str | None:
        """The log dir holding the partition's current log, or None without one."""
        log = self._logs.get(tp)
        return None if log is None else parent_dir(log)

    def logs_in(self, log_dir: str) -> dict[TopicPartition, Log]:
        """The current and future logs of one dir: what its checkpoint files list."""
        if self.log_dirs == (log_dir,):  # no other dir, so no future log either
            return dict(self._logs)
        found = {tp: log for tp, log in self._logs.items() if parent_dir(log) == log_dir}
        found.update((tp, log) for tp, log in self.moves.future_logs().items() if parent_dir(log) == log_dir)
        return found

    def _next_log_dir(self, tp: TopicPartition) -> str:
        online = self.online_dirs()
        preferred = self.preferred_dirs.pop(tp, None)
        if preferred in online:
            return preferred
        if len(online) == 1:  # counting every log per create would make creating n partitions quadratic
            return online[0]
        counts = {log_dir: 0 for log_dir in online}
        for log in [*self._logs.values(), *self.moves.future_logs().values()]:
            if parent_dir(log) in counts:
                counts[parent_dir(log)] += 1
        return next_log_dir(online, counts)

    def get(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def get_or_create(self, tp: TopicPartition, config: LogConfig | None = None) -> Log:
        """The partition's log, created empty when missing; `config` (topic overrides) replaces the old one."""
        log = self._logs.get(tp)
        if log is None:
            assert len(self._logs) < PARTITIONS_PER_BROKER_MAX
            log = Log.open(f"{self._next_log_dir(tp)}/{tp}", config or self.config, self.disk, clock=self.clock,
                           epoch_writer=self.epoch_checkpoints)
            log.failure_channel = self.failure_channel
            self._logs[tp] = log
            self._compacted = None
        elif config is not None:
            log.config = config
            self._compacted = None
        return log

    def compacted_logs(self) -> Mapping[TopicPartition, Log]:
        """The logs whose cleanup.policy compacts, the cleaner's only work: kept between changes of the logs or
        their configs, so that the cleaner's check every half second costs the compacted logs, not every log."""
        if self._compacted is None:
            self._compacted = {tp: log for tp, log in self._logs.items() if log.config.compact}
        return self._compacted

    def delete(self, tp: TopicPartition) -> None:
        """Remove the partition's directory and everything in it, once its cleaning has stopped; a future copy
        goes first, so a crash in between leaves the current log, never a future copy alone."""
        assert self.cleaner is not None
        self.cleaner.abort_and_wait(tp)
        self.cleaner.forget(tp)
        self.moves.cancel(tp)
        self.preferred_dirs.pop(tp, None)
        log = self._logs.pop(tp, None)
        self._compacted = None
        if log is not None:
            self.epoch_checkpoints.forget(log.leader_epoch_cache)
            delete_log_dir(self.disk, log.directory)

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def checkpoint_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """Each online dir's `replication-offset-checkpoint`, with the current logs it holds."""
        online = self.online_dirs()
        if len(self.log_dirs) == 1 and online:  # one dir holds every log: no need to ask each where it is
            self._write_checkpoint(online[0], REPLICATION_OFFSET_CHECKPOINT,
                                   {tp: hw for tp, hw in high_watermarks.items() if tp in self._logs})
            return
        for log_dir in online:
            self._write_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT,
                                   {tp: hw for tp, hw in high_watermarks.items() if self.dir_of(tp) == log_dir})

    def _write_checkpoint(self, log_dir: str, name: str, offsets: Mapping[TopicPartition, int]) -> None:
        """A checkpoint that cannot be written takes its dir offline, as Kafka's does."""
        if self.failure_channel.is_offline(log_dir):
            return
        path = f"{log_dir}/{name}"
        written = self._written.pop(path, None) or OffsetLines()  # back only once written: a failed write forgets
        if written.offsets == offsets:
            self._written[path] = written
            return
        try:
            write_offset_checkpoint(self.disk, path, offsets, written)
            self._written[path] = written
        except OSError as exc:
            self.failure_channel.maybe_add_offline_log_dir(
                log_dir, f"Disk error while writing {name} in directory {log_dir}", exc)

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """Take every log of `log_dir`, future copies included, offline (Kafka's LogManager.handleLogDirFailure);
        returns the partitions whose current log is there."""
        assert self.failure_channel.is_offline(log_dir), log_dir
        offline = sorted(tp for tp, log in self._logs.items() if parent_dir(log) == log_dir)
        for tp in offline:
            self._logs[tp].offline = True
        for future in self.moves.future_logs().values():
            if parent_dir(future) == log_dir:
                future.offline = True  # its move stops at its next step
        if offline:
            self.stop_cleaning()
        logger.warning("Logs for partitions %s are offline due to failure on log directory %s",
                       ",".join(map(str, offline)), log_dir)
        return offline

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        """Every online dir's HW checkpoint (empty when missing). Raises CheckpointError, naming file and line,
        when one is garbled."""
        found: dict[TopicPartition, int] = {}
        for log_dir in self.online_dirs():
            found.update(read_offset_checkpoint(self.disk, f"{log_dir}/{REPLICATION_OFFSET_CHECKPOINT}"))
        return found

    def checkpoint_recovery_points_and_log_starts(self) -> None:
        """Flush what rolled since the last time (`Log.flush_sealed`), then write both checkpoints of each online
        dir. A log that fails its fsync goes offline (Log's rule) and keeps its recovery point; the others are
        written."""
        for log in [*self._logs.values(), *self.moves.future_logs().values()]:
            if not log.offline:
                try:
                    log.flush_sealed()
                except KafkaException as exc:
                    logger.error("Not moving the recovery point of %s: %s", log.directory, exc)
        for log_dir in self.online_dirs():
            logs = self.logs_in(log_dir)
            self._write_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT,
                                   {tp: log.recovery_point for tp, log in logs.items()})
            self._write_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT,
                                   {tp: log.log_start_offset for tp, log in logs.items()})

    def apply_retention(self, high_watermarks: Mapping[TopicPartition, int]) -> int:
        """Retention on every log with a high watermark in `high_watermarks`, never past it; a log without one
        (not hosted as a partition yet, after a restart) keeps everything. Returns the segments deleted. Record
        timestamps are compared with the wall clock, as Kafka does: retention.ms is an age, not an interval."""
        now_ms = self.clock.now_ms()
        deleted = 0
        for tp, log in self._logs.items():
            high_watermark = high_watermarks.get(tp)
            if high_watermark is not None and not log.offline:
                deleted += log.apply_retention(now_ms, high_watermark)
        return deleted

    def clean(self, now_ms: int, stable_offsets: Mapping[TopicPartition, int], producers: ProducerStates) -> int:
        """The log cleaner's turn (`LogCleaner.tick`): swap in finished cleans, start the next. A log without a
        stable offset (not hosted as a partition) is not cleaned. Returns the cleans swapped in. `now_ms` paces
        the cleaner's picks; the compaction lags and the delete horizon compare record timestamps with the wall
        clock."""
        assert self.cleaner is not None
        moving = self.moves.future_logs()  # paused while they move, as Kafka's abortAndPauseCleaning
        logs = self.compacted_logs()
        if moving or any(log.offline for log in logs.values()):
            logs = {tp: log for tp, log in logs.items() if tp not in moving and not log.offline}
        return self.cleaner.tick(now_ms, self.clock.now_ms(), logs, stable_offsets, producers)

    def flush(self) -> None:
        for log in [*self._logs.values(), *self.moves.future_logs().values()]:
            if not log.offline:
                log.flush()

    def stop_cleaning(self) -> None:
        """Have the cleans in progress stop at their next batch, before the cleaner's threads are joined."""
        assert self.cleaner is not None
        self.cleaner.abort_all()

    def close(self) -> None:
        """Flush every log and write the checkpoints, so the next open trusts all the data."""
        for log in [*self._logs.values(), *self.moves.future_logs().values()]:
            if not log.offline:  # an offline log is left as it is, for recovery at the next start
                log.close()
        self.checkpoint_recovery_points_and_log_starts()
        if self._owns_disk and isinstance(self.disk, RealDisk):
            self.disk.close()


def _inline_executor(disk: Disk, config: CleanerConfig) -> InlineExecutor:
    return InlineExecutor(disk, OffsetMap(map_bytes_per_thread(config), config.dedupe_buffer_load_factor))
