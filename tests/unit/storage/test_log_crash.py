"""Crash at every step of a random workload on MemoryDisk, with and without a torn tail, then reopen.

After each step a copy of the disk crashes (keeping only fsynced bytes, maybe a torn part of the last write)
and the log reopens on it, from the recovery point the broker would have checkpointed or from scratch. The
recovered log must be a prefix of what was appended, hold everything flushed, and have indexes that agree
with the data. The seed is the test parameter: a failure names its reproducer.
"""

from __future__ import annotations

import copy
import logging
import random

import pytest
from storage_helpers import DIR, all_batches, check_structure

from insync.clock import ManualClock
from insync.config import LogConfig
from insync.protocol.records import RecordSpec, build_batch, iter_batches
from insync.storage.disk import MemoryDisk
from insync.storage.log import Log

STEPS = 50


class Workload:
    """A log plus the batches it should hold (base offset -> bytes), driven by a seeded random generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.disk = MemoryDisk()
        self.clock = ManualClock()
        self.config = LogConfig(segment_bytes=self.rng.choice([150, 400, 2000]),
                                index_interval_bytes=self.rng.choice([0, 120, 4096]),
                                flush_interval_messages=self.rng.choice([3, 10, 2**62]))
        self.log = Log.open(DIR, self.config, self.disk, clock=self.clock)
        self.epoch = 0

    def step(self) -> None:
        action = self.rng.random()
        log = self.log
        if action < 0.6:
            self.clock.advance(5)
            count = self.rng.randint(1, 4)
            specs = [RecordSpec(b"k", bytes(self.rng.randrange(40)), timestamp=self.clock.now_ms() + i)
                     for i in range(count)]
            self.epoch += int(self.rng.random() < 0.2)
            log.append_as_leader(build_batch(specs, base_timestamp=self.clock.now_ms()), self.epoch)
        elif action < 0.75:
            log.flush()
        elif action < 0.83:
            log.roll()
        elif action < 0.92:
            log.truncate_to(self.rng.randint(log.log_start_offset, log.log_end_offset))
        else:
            log.delete_records_before(self.rng.randint(log.log_start_offset, log.log_end_offset))


@pytest.mark.parametrize("torn_tail", [False, True])
@pytest.mark.parametrize("seed", range(16))
def test_crash_at_every_step_recovers_a_prefix(seed: int, torn_tail: bool) -> None:
    workload = Workload(seed)
    logging.getLogger("insync.storage").setLevel(logging.ERROR)  # recovery warnings are expected here
    for step in range(STEPS):
        workload.step()
        log = workload.log
        written = dict(all_batches(log))
        flushed_end = log.recovery_point
        crashed = copy.deepcopy(workload.disk)
        crashed.crash(torn_tail=torn_tail, rng=random.Random(seed * 1000 + step))
        # Alternate between the checkpointed recovery point and no checkpoint (full recovery).
        recovery_point = flushed_end if step % 2 else None
        recovered = Log.open(DIR, workload.config, crashed, clock=workload.clock, recovery_point=recovery_point,
                             log_start_offset=log.log_start_offset)
        context = f"seed={seed} step={step} torn={torn_tail}"
        assert recovered.log_end_offset >= flushed_end, f"{context}: lost flushed data"
        assert recovered.log_end_offset <= log.log_end_offset, context
        got = all_batches(recovered)
        assert got == list(written.items())[: len(got)], f"{context}: not a prefix of what was appended"
        if got:
            last = next(h for _, h in iter_batches(got[-1][1]))
            assert recovered.log_end_offset == last.next_offset, context
        else:  # nothing readable survived (the log may restart at its start offset): an empty log
            assert recovered.log_end_offset == recovered.log_start_offset, context
        check_structure(recovered)
        epochs = [h.partition_leader_epoch for _, d in got for _, h in iter_batches(d)]
        if epochs:
            assert recovered.latest_epoch() == max(epochs), context
        # The recovered log takes appends again.
        recovered.append_as_leader(build_batch([(b"after", b"crash")]), leader_epoch=workload.epoch + 1)
        check_structure(recovered)
