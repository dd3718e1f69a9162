"""The log cleaner of one log dir (Kafka's LogCleaner and LogCleanerManager): which compacted log to clean, when
a clean is swapped in, and the `cleaner-offset-checkpoint` file.

The log's owner (the broker) calls `tick` with each partition's last stable offset and its `ProducerStates` (last
offsets and aborted-transaction index, which the replication layer keeps). A tick swaps in the cleans its executor
finished, then, while the executor has room, picks the filthiest compacted log (`cleaner_plan`) and hands it a
`CleanJob` to run (`cleaner.run_clean`): the server's executor in `log.cleaner.threads` worker processes with their
own file handles, `InlineExecutor` at once. A job only reads old segments and writes `.cleaned` files; the swap and the
checkpoint happen in `tick`, and only when the log has not been truncated, trimmed or closed since the job was
taken (its cleaning generation): otherwise the work is dropped, as Kafka aborts a clean. Before the swap the index
forgets the aborted transactions the clean left without records, so none outlives its marker, even across a crash.
`abort_and_wait` (before a log is deleted) makes a running job stop at its next batch and waits for it. Without
room (`log.cleaner.threads=0`, `log.cleaner.enable=false`) nothing is cleaned, as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from insync.config import LONG_MAX, CleanerConfig
from insync.errors import KafkaException
from insync.protocol.control_records import AbortedTxn
from insync.storage.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    CheckpointError,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from insync.storage.cleaner import CleaningAborted, CleanJob, PreparedClean, run_clean
from insync.storage.cleaner_plan import (
    LogToClean,
    cleanable_offsets,
    is_cleanable,
    log_to_clean,
    max_compaction_delay_ms,
)
from insync.storage.disk import Disk
from insync.storage.log import Log
from insync.storage.log_reads import segment_infos
from insync.storage.offset_map import OffsetMap
from insync.types import TopicPartition

logger = logging.getLogger("insync.storage")

ABORT_WAIT_S = 30.0
# Kafka caps each thread's share of the dedupe buffer at 2 GiB (an int-indexed buffer).
MAP_BYTES_PER_THREAD_MAX = 2**31 - 1

Outcome = PreparedClean | BaseException


class ProducerStates(Protocol):
    """What the cleaner asks of each partition's producer state, which the replication layer keeps (Kafka's
    cleaner asks the log: its active producers' last records, its aborted transactions, its transaction index)."""

    def producer_last_offsets(self, tp: TopicPartition) -> Mapping[int, int]:
        """Each producer's last offset in the log: the cleaner keeps that batch (its last sequence)."""

    def aborted_transactions(self, tp: TopicPartition, below_offset: int) -> Sequence[AbortedTxn]:
        """The aborted transactions of the log's index that start below `below_offset`."""

    def forget_aborted_transactions(self, tp: TopicPartition, emptied: Sequence[AbortedTxn]) -> bool:
        """Drop `emptied` from the log's index, durably, before the clean that left them without records is
        swapped in (their markers may go in a later clean); False when the partition is not here to ask."""


class CleanExecutor(Protocol):
    """Runs clean jobs (`run_clean`) somewhere and hands back what they gave."""

    def room(self) -> int:
        """How many more jobs it would run now."""

    def submit(self, job: CleanJob, check_done: Callable[[], None]) -> None: ...

    def completed(self) -> list[tuple[CleanJob, Outcome]]:
        """What finished since the last call."""

    def wait(self, tp: TopicPartition, timeout_s: float) -> bool:
        """Wait for the job of `tp` to finish (False on timeout)."""


class InlineExecutor:
    """Cleans on the caller's thread, through the log's own disk, as soon as a job is given."""

    def __init__(self, disk: Disk, offset_map: OffsetMap) -> None:
        self.disk, self.offset_map = disk, offset_map
        self._completed: list[tuple[CleanJob, Outcome]] = []

    def room(self) -> int:
        return 1

    def submit(self, job: CleanJob, check_done: Callable[[], None]) -> None:
        self._completed.append((job, run_clean(job, self.disk, self.offset_map, lambda _bytes: None, check_done)))

    def completed(self) -> list[tuple[CleanJob, Outcome]]:
        done, self._completed = self._completed, []
        return done

    def wait(self, tp: TopicPartition, timeout_s: float) -> bool:
        return True


def map_bytes_per_thread(config: CleanerConfig) -> int:
    return min(config.dedupe_buffer_bytes // max(config.threads, 1), MAP_BYTES_PER_THREAD_MAX)


@dataclass(slots=True)
class CleanerMetrics:
    """Kafka's `kafka.log:type=LogCleaner` and `type=LogCleanerManager` gauges, as of the last clean."""

    max_dirty_percent: int = 0  # the dirtiest compacted log's cleanable ratio, at the last pick
    max_clean_time_secs: int = 0
    cleaner_recopy_percent: int = 0  # bytes written over bytes read by the last clean
    max_buffer_utilization_percent: int = 0
    max_compaction_delay_secs: int = 0
    time_of_last_run_ms: int = 0
    cleans: int = 0
    aborted: int = 0


class LogCleaner:
    """`dir_of(tp)`: the log dir a partition's log is in now; each dir's `cleaner-offset-checkpoint` holds the
    checkpoints of its own logs, as Kafka keeps them."""

    def __init__(self, log_dirs: tuple[str, ...], disk: Disk, config: CleanerConfig, executor: CleanExecutor,
                 dir_of: Callable[[TopicPartition], str | None]) -> None:
        self.log_dirs, self.disk, self.config, self.executor = log_dirs, disk, config, executor
        self._dir_of = dir_of
        self.checkpoints: dict[TopicPartition, int] = {}
        for log_dir in log_dirs:
            self.checkpoints.update(self._read_checkpoints(log_dir))
        self.metrics = CleanerMetrics()
        self.uncleanable: set[TopicPartition] = set()
        self._in_progress: dict[TopicPartition, CleanJob] = {}
        self._aborting: set[TopicPartition] = set()
        self._next_pick_ms = 0

    def _read_checkpoints(self, log_dir: str) -> dict[TopicPartition, int]:
        try:
            return read_offset_checkpoint(self.disk, f"{log_dir}/{CLEANER_OFFSET_CHECKPOINT}")
        except CheckpointError as exc:
            logger.warning("Ignoring %s: %s; compacted logs are cleaned from their start", CLEANER_OFFSET_CHECKPOINT,
                           exc)
            return {}

    def write_checkpoints(self) -> None:
        """Written whole at each change, one file per log dir; a failed write costs only work (the next clean maps
        from further back). An entry whose log is gone is dropped."""
        by_dir: dict[str, dict[TopicPartition, int]] = {log_dir: {} for log_dir in self.log_dirs}
        for tp, offset in self.checkpoints.items():
            log_dir = self._dir_of(tp)
            if log_dir in by_dir:
                by_dir[log_dir][tp] = offset
        for log_dir, checkpoints in by_dir.items():
            try:
                write_offset_checkpoint(self.disk, f"{log_dir}/{CLEANER_OFFSET_CHECKPOINT}", checkpoints)
            except OSError as exc:
                logger.error("Could not write %s in %s: %s", CLEANER_OFFSET_CHECKPOINT, log_dir, exc)

    def tick(self, now_ms: int, wall_ms: int, logs: Mapping[TopicPartition, Log],
             stable_offsets: Mapping[TopicPartition, int], producers: ProducerStates) -> int:
        """Swap in finished cleans, then give the filthiest log to the executor while it has room. Returns the
        cleans swapped in. `now_ms` paces the picks (an interval); `wall_ms` is what record timestamps are
        compared with (an age)."""
        applied = self._drain(logs, producers)
        if self.config.enable and self.executor.room() > 0 and now_ms >= self._next_pick_ms:
            job = self.grab_filthiest(wall_ms, logs, stable_offsets, producers)
            if job is None:
                self._next_pick_ms = now_ms + self.config.backoff_ms
            else:
                self._in_progress[job.topic_partition] = job
                self.executor.submit(job, self._check_done(job.topic_partition))
                applied += self._drain(logs, producers)
        return applied

    def _drain(self, logs: Mapping[TopicPartition, Log], producers: ProducerStates) -> int:
        return sum(self._finish(job, outcome, logs.get(job.topic_partition), producers)
                   for job, outcome in self.executor.completed())

    def _check_done(self, tp: TopicPartition) -> Callable[[], None]:
        def check_done() -> None:  # asked by the executor between batches or when it looks at the job
            if tp in self._aborting:
                raise CleaningAborted(str(tp))

        return check_done

    def _finish(self, job: CleanJob, result: Outcome, log: Log | None, producers: ProducerStates) -> int:
        tp = job.topic_partition
        self._in_progress.pop(tp, None)
        void = (log is None or log.offline or log.cleaning_generation != job.generation or tp in self._aborting
                or not _still_holds(log, job))
        self._aborting.discard(tp)
        if isinstance(result, BaseException) or void or log is None:
            self._drop(job, result, void)
            return 0
        if not _forget_emptied(result, producers):
            self._drop(job, result, True)
            return 0
        try:
            for old, cleaned in result.replacements:
                log.replace_segments(cleaned, old)
        except KafkaException as exc:  # an I/O error took the log offline; its reopening finishes or undoes it
            logger.error("Swapping cleaned segments into %s failed: %s", tp, exc)
            self.metrics.aborted += 1
            return 0
        self.checkpoints[tp] = result.end_offset
        self.write_checkpoints()
        self._record(result)
        logger.info("Cleaned log %s up to offset %d: %d of %d bytes kept in %.3f s", tp, result.end_offset,
                    result.stats.filtered.bytes_retained, result.stats.filtered.bytes_read, result.stats.elapsed_s)
        return 1

    def _drop(self, job: CleanJob, result: Outcome, void: bool) -> None:
        self.metrics.aborted += 1
        if isinstance(result, PreparedClean):
            for _, cleaned in result.replacements:
                cleaned.use_disk(self.disk)
                cleaned.delete()
        elif not void and not isinstance(result, CleaningAborted):
            self.uncleanable.add(job.topic_partition)  # Kafka's uncleanable partition: not tried again
            logger.error("Unexpected error cleaning log %s; marking it uncleanable: %s", job.topic_partition, result)

    def _record(self, result: PreparedClean) -> None:
        stats, metrics = result.stats, self.metrics
        metrics.cleans += 1
        metrics.max_clean_time_secs = int(stats.elapsed_s)
        read = stats.filtered.bytes_read
        metrics.cleaner_recopy_percent = int(100 * stats.filtered.bytes_retained / read) if read else 0
        metrics.max_buffer_utilization_percent = int(100 * stats.buffer_utilization)

    # --- Choosing ---------------------------------------------------------------------------------------------

    def grab_filthiest(self, now_ms: int, logs: Mapping[TopicPartition, Log],
                       stable_offsets: Mapping[TopicPartition, int], producers: ProducerStates) -> CleanJob | None:
        """Kafka's `grabFilthiestCompactedLog`: the compacted log with the largest cleanable ratio among those
        past `min.cleanable.dirty.ratio` or `max.compaction.lag.ms`, as a job."""
        self.metrics.time_of_last_run_ms = now_ms
        candidates: list[tuple[LogToClean, Log]] = []
        delays = [0]
        for tp, log in logs.items():
            stable = stable_offsets.get(tp)
            if not self._may_clean(tp, log) or stable is None:
                continue
            try:
                candidate, delay_ms = self._candidate(now_ms, tp, log, min(stable, log.log_end_offset))
            except (KafkaException, OSError) as exc:  # Kafka's LogCleaningException: the log is left alone
                self.uncleanable.add(tp)
                logger.error("Failed to calculate log cleaning stats for partition %s: %s", tp, exc)
                continue
            delays.append(delay_ms)
            if candidate.total_bytes > 0:
                candidates.append((candidate, log))
        self.metrics.max_compaction_delay_secs = max(delays) // 1000
        self.metrics.max_dirty_percent = int(100 * max((c.cleanable_ratio for c, _ in candidates), default=0.0))
        cleanable = [(c, log) for c, log in candidates if is_cleanable(c, log.config.min_cleanable_dirty_ratio)]
        if not cleanable:
            return None
        chosen, log = max(cleanable, key=lambda pair: pair[0].cleanable_ratio)
        tp = chosen.topic_partition
        return _job(now_ms, chosen, log, producers.producer_last_offsets(tp),
                    producers.aborted_transactions(tp, chosen.first_uncleanable_offset))

    def _may_clean(self, tp: TopicPartition, log: Log) -> bool:
        return (log.config.compact and not log.offline and tp not in self._in_progress
                and tp not in self.uncleanable)

    def _candidate(self, now_ms: int, tp: TopicPartition, log: Log, stable: int) -> tuple[LogToClean, int]:
        config = log.config
        self._follow_truncation(tp, log)
        infos = segment_infos(log.segments, first_batch_timestamps=config.max_compaction_lag_ms < LONG_MAX)
        stable = max(stable, log.log_start_offset)
        offsets = cleanable_offsets(infos, log.log_start_offset, log.log_end_offset, self.checkpoints.get(tp),
                                    stable, now_ms, config.min_compaction_lag_ms)
        if offsets.force_update_checkpoint:
            self.checkpoints[tp] = offsets.first_dirty_offset
            self.write_checkpoints()
        delay_ms = max_compaction_delay_ms(infos, offsets.first_dirty_offset, now_ms, config.max_compaction_lag_ms)
        return log_to_clean(tp, infos, offsets, delay_ms > 0), delay_ms

    def _follow_truncation(self, tp: TopicPartition, log: Log) -> None:
        """Kafka's `maybeTruncateCheckpoint`: a log truncated below its checkpoint is dirty again from there."""
        truncated_to, log.truncated_to = log.truncated_to, None
        checkpoint = self.checkpoints.get(tp)
        if truncated_to is not None and checkpoint is not None and checkpoint > truncated_to:
            self.checkpoints[tp] = truncated_to
            self.write_checkpoints()

    # --- Aborting --------------------------------------------------------------------------------------------

    def abort_and_wait(self, tp: TopicPartition) -> None:
        """Stop a clean of `tp` (before its log is deleted) and wait for it to let go of the files, as Kafka's
        `abortCleaning` does; what it did is dropped."""
        if tp not in self._in_progress:
            return
        self._aborting.add(tp)
        if not self.executor.wait(tp, ABORT_WAIT_S):
            logger.error("The cleaner of %s did not stop within %.0f s", tp, ABORT_WAIT_S)

    def abort_all(self) -> None:
        """Have every running clean stop at its next batch (the broker is stopping); nothing they did is kept."""
        self._aborting.update(self._in_progress)

    def forget(self, tp: TopicPartition) -> None:
        """The log is gone: drop its checkpoint (Kafka's `updateCheckpoints` removing the partition)."""
        self.uncleanable.discard(tp)
        if self.checkpoints.pop(tp, None) is not None:
            self.write_checkpoints()


def _job(now_ms: int, chosen: LogToClean, log: Log, producers: Mapping[int, int],
         aborted: Sequence[AbortedTxn]) -> CleanJob:
    below = [i for i, segment in enumerate(log.segments[:-1]) if segment.base_offset < chosen.first_uncleanable_offset]
    infos = segment_infos(log.segments, first_batch_timestamps=False)
    config = log.config
    return CleanJob(chosen.topic_partition, log.directory, tuple(log.segments[i] for i in below),
                    tuple(infos[i] for i in below), chosen.first_dirty_offset, chosen.first_uncleanable_offset, now_ms,
                    config.segment_bytes, config.index_size_max_bytes, config.index_interval_bytes,
                    config.delete_retention_ms, dict(producers), tuple(aborted), log.cleaning_generation)


def _forget_emptied(result: PreparedClean, producers: ProducerStates) -> bool:
    """The index forgets the aborted transactions the clean left without records, or the clean is dropped: a marker
    the swap removes must not outlive its index entry (a consumer would skip its producer's later records)."""
    tp, emptied = result.job.topic_partition, result.emptied_aborted_txns
    if not emptied:
        return True
    try:
        if producers.forget_aborted_transactions(tp, emptied):
            return True
        logger.warning("Dropping the clean of %s: its partition's producer state is gone", tp)
    except (KafkaException, OSError) as exc:
        logger.error("Dropping the clean of %s: its aborted-transaction index could not be rewritten: %s", tp, exc)
    return False


def _still_holds(log: Log, job: CleanJob) -> bool:
    """The log still has the segments the job read (not a new log of the same partition, created since)."""
    held = {id(segment) for segment in log.segments}
    return all(id(segment) in held for segment in job.segments)
