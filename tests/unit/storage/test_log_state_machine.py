"""Hypothesis state machine: a Log under random appends, reads, truncations, rolls, DeleteRecords and reopens,
checked after every step against a list of batches."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from storage_helpers import DIR, all_batches, check_structure

from insync.clock import ManualClock
from insync.config import LogConfig
from insync.protocol.records import RecordSpec, build_batch, iter_batches, stamp
from insync.storage.disk import MemoryDisk
from insync.storage.log import Log

T0 = 1_700_000_000_000


class LogMachine(RuleBasedStateMachine):
    @initialize(segment_batches=st.integers(1, 4), index_interval=st.sampled_from([0, 100, 4096]))
    def open(self, segment_batches: int, index_interval: int) -> None:
        self.disk = MemoryDisk()
        self.clock = ManualClock(T0)
        self.config = LogConfig(segment_bytes=segment_batches * 150, index_interval_bytes=index_interval)
        self.log = Log.open(DIR, self.config, self.disk, clock=self.clock)
        self.model: list[tuple[int, bytes]] = []  # (base offset, stamped batch bytes)
        self.log_start = 0
        self.epoch = 0

    @property
    def model_end(self) -> int:
        if not self.model:
            return self.log.segments[0].base_offset if not self.model else 0
        base, data = self.model[-1]
        return base + next(h for _, h in iter_batches(data)).last_offset_delta + 1

    def _produced(self, count: int, value_bytes: int) -> bytes:
        self.clock.advance(7)
        specs = [RecordSpec(b"k", b"v" * value_bytes, timestamp=self.clock.now_ms() + i) for i in range(count)]
        return build_batch(specs, base_timestamp=self.clock.now_ms())

    @rule(count=st.integers(1, 4), value_bytes=st.integers(0, 60), new_epoch=st.booleans())
    def append_as_leader(self, count: int, value_bytes: int, new_epoch: bool) -> None:
        self.epoch += int(new_epoch)
        produced = self._produced(count, value_bytes)
        info = self.log.append_as_leader(produced, leader_epoch=self.epoch)
        expected = bytearray(produced)
        stamp(expected, 0, base_offset=info.first_offset, partition_leader_epoch=self.epoch)
        self.model.append((info.first_offset, bytes(expected)))

    @rule(counts=st.lists(st.integers(1, 3), min_size=1, max_size=3))
    def append_as_follower(self, counts: list[int]) -> None:
        """Batches copied from a leader, several per call, each in a newer epoch."""
        base, data = self.log.log_end_offset, b""
        for count in counts:
            self.epoch += 1
            one = build_batch([(b"f", b"x" * 10)] * count, base_offset=base, partition_leader_epoch=self.epoch,
                              base_timestamp=self.clock.now_ms())
            self.model.append((base, one))
            base, data = base + count, data + one
        info = self.log.append_as_follower(data)
        assert (info.batch_count, info.last_offset) == (len(counts), base - 1)

    @rule(data=st.data(), max_bytes=st.integers(1, 600), bounded=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, bounded: bool) -> None:
        end = self.log.log_end_offset
        offset = data.draw(st.integers(self.log_start, end))
        max_offset = data.draw(st.integers(offset, end)) if bounded else None
        result = self.log.read(offset, max_bytes, max_offset)
        assert result.log_end_offset == end and result.log_start_offset == self.log_start
        expected = [(b, d) for b, d in self.model
                    if b + next(h for _, h in iter_batches(d)).last_offset_delta >= offset
                    and (max_offset is None or b < max_offset)]
        if max_offset is not None and offset >= max_offset:
            expected = []  # nothing at or past the bound, not even the batch holding `offset`
        got = [(h.base_offset, bytes(result.records[p : p + h.size])) for p, h in iter_batches(result.records)]
        assert got == expected[: len(got)]
        if expected and offset < end:
            assert got, "at least one batch (KIP-74)"
            if len(got) < len(expected):
                size = sum(len(d) for _, d in expected[: len(got) + 1])
                boundary = result.next_offset in {s.base_offset for s in self.log.segments}
                assert size > max_bytes or boundary, "stopped early without reason"
            assert sum(len(d) for _, d in got) <= max_bytes or len(got) == 1
        else:
            assert not got and result.next_offset == offset

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(max(0, self.log_start - 2), self.log.log_end_offset + 2))
        first_base, end = self.log.segments[0].base_offset, self.log.log_end_offset
        self.log.truncate_to(offset)
        if offset >= end:
            return
        kept = [(b, d) for b, d in self.model if b + next(h for _, h in iter_batches(d)).last_offset_delta < offset]
        kept_end = self._end_of(kept[-1]) if kept else first_base
        if offset < self.log_start or kept_end < self.log_start:
            self.model, self.log_start = [], offset
        else:
            self.model = kept

    @staticmethod
    def _end_of(entry: tuple[int, bytes]) -> int:
        return entry[0] + next(h for _, h in iter_batches(entry[1])).last_offset_delta + 1

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.log.log_end_offset))
        self.log_start = max(self.log_start, offset)
        assert self.log.delete_records_before(offset) == self.log_start

    @rule()
    def roll(self) -> None:
        segments, rolls = len(self.log.segments), self.log.active_segment.size > 0
        self.log.roll()
        assert len(self.log.segments) == segments + int(rolls)

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        if clean:
            self.log.close()
        self.log = Log.open(DIR, self.config, self.disk, clock=self.clock, recovery_point=self.log.recovery_point,
                            log_start_offset=self.log.log_start_offset)

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.log.log_end_offset

    @invariant()
    def matches_model(self) -> None:
        assert self.log.log_start_offset == self.log_start
        visible = [(b, d) for b, d in self.model
                   if b + next(h for _, h in iter_batches(d)).last_offset_delta >= self.log_start]
        assert all_batches(self.log) == visible
        if self.model:
            assert self.log.log_end_offset == self.model_end
        check_structure(self.log)
        epochs: list[tuple[int, int]] = []
        for base, data in visible:
            epoch = next(h for _, h in iter_batches(data)).partition_leader_epoch
            if not epochs or epoch > epochs[-1][0]:
                epochs.append((epoch, max(base, self.log_start)))
        cached = self.log.leader_epoch_cache.epoch_entries
        assert [e for e, _ in cached][-len(epochs):] == [e for e, _ in epochs] if epochs else True
        assert cached[len(cached) - len(epochs):] == epochs


LogMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
test_log_state_machine = LogMachine.TestCase
