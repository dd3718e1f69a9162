"""The log cleaner end to end on a memory disk: what a consumer reads after a clean, tombstones, the lag rules,
passes with a small offset map, and the checkpoint."""

from __future__ import annotations

from collections.abc import Callable

from cleaner_helpers import (
    CONFIG,
    DIR,
    NO_PRODUCERS,
    TP,
    Producers,
    batch_offsets,
    cleaner_of,
    compacted_log,
    consumed,
    last_values,
    produce,
)

from insync.clock import ManualClock
from insync.storage.checkpoint import CLEANER_OFFSET_CHECKPOINT, read_offset_checkpoint
from insync.storage.cleaner import CleaningAborted, CleanJob, run_clean
from insync.storage.disk import MemoryDisk
from insync.storage.log import Log
from insync.storage.log_cleaner import InlineExecutor, LogCleaner
from insync.storage.offset_map import ENTRY_BYTES, OffsetMap
from insync.types import TopicPartition


def clean(cleaner: LogCleaner, log: Log, clock: ManualClock, stable: int | None = None) -> bool:
    """One tick of the cleaner with an inline executor: True when it cleaned the log."""
    stable_offset = log.log_end_offset if stable is None else stable
    return cleaner.tick(clock.now_ms(), clock.now_ms(), {TP: log}, {TP: stable_offset}, NO_PRODUCERS) == 1


def keyed(count: int, keys: int) -> list[tuple[bytes, bytes | None]]:
    return [(b"k%d" % (i % keys), b"v%d" % i) for i in range(count)]


def test_a_clean_keeps_the_last_record_of_each_key_at_its_offset() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    log = compacted_log(disk, clock)
    produce(log, clock, keyed(40, 5))
    before = consumed(log)
    cleaner = cleaner_of(disk)
    assert clean(cleaner, log, clock)
    after = consumed(log)
    active_base = log.active_segment.base_offset
    # Below the active segment, one record a key, the last one below it; the active segment is untouched.
    below = last_values([r for r in before if r[0] < active_base])
    assert [r for r in after if r[0] < active_base] == sorted(
        (offset, key, value) for key, (offset, value) in below.items())
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    assert last_values(after) == last_values(before)  # a consumer from the start ends with every last value
    assert log.log_end_offset == 40 and cleaner.checkpoints[TP] == active_base
    assert read_offset_checkpoint(disk, f"/logs/{CLEANER_OFFSET_CHECKPOINT}") == {TP: active_base}
    reopened = Log.open(DIR, log.config, disk, clock=clock)
    assert consumed(reopened) == after


def test_never_past_the_high_watermark_nor_into_the_active_segment() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    log = compacted_log(disk, clock)
    produce(log, clock, keyed(40, 5))
    before = consumed(log)
    cleaner = cleaner_of(disk)
    assert clean(cleaner, log, clock, stable=10)
    after = consumed(log)
    bound = cleaner.checkpoints[TP]
    assert bound <= 10 and [r for r in after if r[0] >= bound] == [r for r in before if r[0] >= bound]


def test_tombstones_stay_for_delete_retention_after_the_first_clean() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    log = compacted_log(disk, clock, delete_retention_ms=1000)
    produce(log, clock, [(b"a", b"1"), (b"b", b"1"), (b"a", None)] + keyed(12, 3))
    cleaner = cleaner_of(disk)
    assert clean(cleaner, log, clock)
    assert (2, b"a", None) in consumed(log) and (0, b"a", b"1") not in consumed(log)
    produce(log, clock, keyed(12, 3))  # dirty again
    clock.advance(999)
    assert clean(cleaner, log, clock)
    assert (2, b"a", None) in consumed(log)  # the horizon (first clean + 1000 ms) has not passed
    produce(log, clock, keyed(12, 3))
    clock.advance(1)
    assert clean(cleaner, log, clock)
    assert not [r for r in consumed(log) if r[1] == b"a"] and (1, b"b", b"1") in consumed(log)


def test_min_compaction_lag_keeps_young_segments_dirty() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    log = compacted_log(disk, clock, min_compaction_lag_ms=10_000)
    produce(log, clock, keyed(20, 5))
    clock.advance(10_001)
    produce(log, clock, keyed(20, 5))
    young = next(s.base_offset for s in log.segments if s.max_timestamp > clock.now_ms() - 10_000)
    cleaner = cleaner_of(disk)
    before = consumed(log)
    assert clean(cleaner, log, clock)
    assert cleaner.checkpoints[TP] <= young
    assert [r for r in consumed(log) if r[0] >= young] == [r for r in before if r[0] >= young]


def test_max_compaction_lag_cleans_below_the_dirty_ratio() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    log = compacted_log(disk, clock, min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=5_000)
    produce(log, clock, keyed(20, 5))
    cleaner = cleaner_of(disk)
    assert clean(cleaner, log, clock)  # everything dirty: the ratio is 1.0
    produce(log, clock, keyed(6, 5))
    assert not clean(cleaner, log, clock)  # a little dirty: below 0.99
    clock.advance(5_001)
    produce(log, clock, keyed(12, 5))
    assert clean(cleaner, log, clock)  # the oldest dirty record is older than max.compaction.lag.ms
    assert cleaner.metrics.max_compaction_delay_secs == 0


def test_a_small_offset_map_cleans_in_passes() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    log = compacted_log(disk, clock)
    produce(log, clock, keyed(60, 30) + keyed(10, 30))
    before = consumed(log)
    tiny = OffsetMap(8 * ENTRY_BYTES, 1.0)  # eight keys a pass
    cleaner = LogCleaner(("/logs",), disk, CONFIG, InlineExecutor(disk, tiny), lambda _tp: "/logs")
    checkpoints = []
    while clean(cleaner, log, clock):
        checkpoints.append(cleaner.checkpoints[TP])
        assert len(checkpoints) < 20
    assert len(checkpoints) > 2 and checkpoints == sorted(checkpoints)
    active_base = log.active_segment.base_offset
    assert last_values(consumed(log)) == last_values(before)
    keys_below = [r[1] for r in consumed(log) if r[0] < checkpoints[-1]]
    assert len(keys_below) == len(set(keys_below)) or checkpoints[-1] < active_base


def test_offsets_and_batch_bounds_survive_a_clean() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    log = compacted_log(disk, clock)
    produce(log, clock, keyed(30, 3))
    before = {base: (last, count) for base, last, count in batch_offsets(log)}
    cleaner = cleaner_of(disk)
    assert clean(cleaner, log, clock)
    for base, last, count in batch_offsets(log):
        assert before[base][0] == last and count <= before[base][1]
    # The batch ending the round is kept, even emptied, so the cleaned section still ends where it did.
    assert max(last for _, last, _ in batch_offsets(log) if last < log.active_segment.base_offset) == \
        log.active_segment.base_offset - 1


def test_a_producers_last_batch_is_kept_empty() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    log = compacted_log(disk, clock)
    for sequence in range(3):
        produce(log, clock, [(b"p", b"%d" % sequence)], producer_id=7, producer_epoch=0, base_sequence=sequence)
    produce(log, clock, keyed(20, 2) + [(b"p", b"last")] + keyed(20, 2))
    cleaner = cleaner_of(disk)
    assert cleaner.tick(clock.now_ms(), clock.now_ms(), {TP: log}, {TP: log.log_end_offset}, Producers(last_offsets={7: 2})) == 1
    assert (2, 2, 0) in batch_offsets(log) and (1, 1, 1) not in batch_offsets(log)


class DeferredExecutor:
    """Runs a job only when the test says so, as a thread would later."""

    def __init__(self, disk: MemoryDisk) -> None:
        self.disk = disk
        self.pending: list[tuple[CleanJob, Callable[[], None]]] = []
        self.done: list[tuple[CleanJob, object]] = []

    def room(self) -> int:
        return 1 - len(self.pending)

    def submit(self, job: CleanJob, check_done: Callable[[], None]) -> None:
        self.pending.append((job, check_done))

    def run(self) -> None:
        for job, check_done in self.pending:
            self.done.append((job, run_clean(job, self.disk, OffsetMap(1 << 20, 0.9), lambda _n: None, check_done)))
        self.pending.clear()

    def completed(self) -> list[tuple[CleanJob, object]]:
        done, self.done = self.done, []
        return done

    def wait(self, tp: TopicPartition, timeout_s: float) -> bool:
        self.run()
        return True


def test_a_clean_of_a_log_truncated_meanwhile_is_dropped() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    log = compacted_log(disk, clock)
    produce(log, clock, keyed(40, 5))
    executor = DeferredExecutor(disk)
    cleaner = LogCleaner(("/logs",), disk, CONFIG, executor, lambda _tp: "/logs")  # type: ignore[arg-type]
    assert cleaner.tick(clock.now_ms(), clock.now_ms(), {TP: log}, {TP: log.log_end_offset}, NO_PRODUCERS) == 0
    assert executor.pending
    log.truncate_to(30)  # a follower truncating while its cleaner thread works
    before = consumed(log)
    executor.run()
    assert cleaner.tick(clock.now_ms(), clock.now_ms(), {TP: log}, {TP: log.log_end_offset}, NO_PRODUCERS) == 0
    assert consumed(log) == before and TP not in cleaner.checkpoints
    assert not [name for name in disk.listdir(DIR) if name.endswith(".cleaned")]
    assert cleaner.metrics.aborted == 1 and not cleaner.uncleanable


def test_deleting_a_log_aborts_its_clean_at_the_next_batch() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    log = compacted_log(disk, clock)
    produce(log, clock, keyed(40, 5))
    executor = DeferredExecutor(disk)
    cleaner = LogCleaner(("/logs",), disk, CONFIG, executor, lambda _tp: "/logs")  # type: ignore[arg-type]
    cleaner.tick(clock.now_ms(), clock.now_ms(), {TP: log}, {TP: log.log_end_offset}, NO_PRODUCERS)
    cleaner.abort_and_wait(TP)  # runs the job: its check_done raises at the first batch
    (_, outcome), = executor.done
    assert isinstance(outcome, CleaningAborted)
    assert cleaner.tick(clock.now_ms(), clock.now_ms(), {TP: log}, {TP: log.log_end_offset}, NO_PRODUCERS) == 0
    assert not cleaner.uncleanable


def test_a_truncation_below_the_checkpoint_brings_it_down() -> None:
    disk, clock = MemoryDisk(), ManualClock()
    log = compacted_log(disk, clock)
    produce(log, clock, keyed(40, 5))
    cleaner = cleaner_of(disk)
    assert clean(cleaner, log, clock)
    checkpoint = cleaner.checkpoints[TP]
    log.truncate_to(checkpoint - 5)  # a follower truncated to its leader's epoch end
    produce(log, clock, keyed(20, 5))
    cleaner.tick(clock.now_ms(), clock.now_ms(), {TP: log}, {TP: log.log_start_offset}, NO_PRODUCERS)  # nothing cleanable yet
    assert cleaner.checkpoints[TP] == checkpoint - 5
