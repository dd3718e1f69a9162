"""A crash at each step of swapping cleaned segments in: each group of segments is either old or cleaned in the
reopened log, every record at its offset, and no file of the swap is left."""

from __future__ import annotations

import pytest
from cleaner_helpers import DIR, NO_PRODUCERS, TP, cleaner_of, compacted_log, consumed, last_values, produce

from insync.clock import ManualClock
from insync.storage.disk import MemoryDisk
from insync.storage.log import Log


class CrashingDisk(MemoryDisk):
    """Fails (as a power cut would stop it) at the n-th rename or removal, then loses what was not fsynced."""

    def __init__(self) -> None:
        super().__init__()
        self.countdown: int | None = None

    def _step(self) -> None:
        if self.countdown is not None:
            self.countdown -= 1
            if self.countdown < 0:
                self.crash()
                raise OSError("crash")

    def rename(self, source: str, target: str) -> None:
        self._step()
        super().rename(source, target)

    def remove(self, path: str) -> None:
        self._step()
        super().remove(path)


def _prepared() -> tuple[CrashingDisk, ManualClock, Log]:
    disk, clock = CrashingDisk(), ManualClock()
    log = compacted_log(disk, clock, segment_bytes=600)
    produce(log, clock, [(b"k%d" % (i % 4), b"v%d" % i) for i in range(40)])
    log.flush()
    return disk, clock, log


def _steps() -> int:
    disk, clock, log = _prepared()
    disk.countdown = 10_000
    cleaner_of(disk).tick(clock.now_ms(), clock.now_ms(), {TP: log}, {TP: log.log_end_offset}, NO_PRODUCERS)
    return 10_000 - disk.countdown


@pytest.mark.parametrize("crash_at", range(_steps()))
def test_a_crash_at_any_step_of_a_swap_recovers_to_one_side(crash_at: int) -> None:
    disk, clock, log = _prepared()
    before = consumed(log)
    clean_disk, clean_clock, clean_log = _prepared()
    cleaner_of(clean_disk).tick(clean_clock.now_ms(), clean_clock.now_ms(), {TP: clean_log}, {TP: clean_log.log_end_offset},
                                NO_PRODUCERS)
    after = consumed(clean_log)
    assert before != after
    disk.countdown = crash_at
    # The crash takes the log offline, or fails the checkpoint's write: the owner goes on either way.
    cleaner_of(disk).tick(clock.now_ms(), clock.now_ms(), {TP: log}, {TP: log.log_end_offset}, NO_PRODUCERS)
    disk.countdown = None
    reopened = Log.open(DIR, log.config, disk, clock=clock)
    found = consumed(reopened)
    # Each group is swapped atomically: every record the clean keeps is there, the others may be, at their offsets.
    assert set(after) <= set(found) <= set(before) and found == sorted(found)
    assert last_values(found) == last_values(before)
    names = disk.listdir(DIR)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
    assert reopened.log_end_offset == 40
