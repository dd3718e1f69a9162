"""The leader epoch cache: which leader epoch started at which offset, as Kafka's `LeaderEpochFileCache`.

Entries are (epoch, start_offset) pairs, both strictly increasing. The leader assigns (new epoch, its LEO) when
it takes over and on its first append in the epoch; a follower assigns the epoch of each batch it copies that is
newer than the latest. `end_offset_for` answers OffsetsForLeaderEpoch (REFERENCE.md 8), and the two truncations
keep the cache in step with the log. Every change is persisted at once to `leader-epoch-checkpoint` (through
the `Disk`, via `checkpoint.py`): epochs change rarely, and a stale file after a crash is repaired by
`truncate_from_end` and by the epochs found in batches during recovery.
"""

from __future__ import annotations

import bisect

from insync.limits import LEADER_EPOCH_ENTRIES_MAX
from insync.storage.checkpoint import read_epoch_checkpoint, write_epoch_checkpoint
from insync.storage.disk import Disk

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, disk: Disk, path: str, entries: list[tuple[int, int]] | None = None) -> None:
        self._disk = disk
        self._path = path
        self._epochs: list[int] = []
        self._start_offsets: list[int] = []
        for epoch, start_offset in entries or []:
            assert not self._epochs or (epoch > self._epochs[-1] and start_offset >= self._start_offsets[-1])
            self._epochs.append(epoch)
            self._start_offsets.append(start_offset)

    @classmethod
    def load(cls, disk: Disk, path: str) -> LeaderEpochCache:
        """Read the checkpoint (missing file: empty cache). Raises CheckpointError when it is garbled."""
        return cls(disk, path, read_epoch_checkpoint(disk, path))

    @property
    def epoch_entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._start_offsets, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def start_offset_of(self, epoch: int) -> int | None:
        index = bisect.bisect_left(self._epochs, epoch)
        return self._start_offsets[index] if index < len(self._epochs) and self._epochs[index] == epoch else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`. As Kafka, entries that contradict it are dropped:
        those with an epoch >= `epoch` or a start offset >= `start_offset`."""
        assert epoch >= 0 and start_offset >= 0, (epoch, start_offset)
        if self._epochs and self._epochs[-1] == epoch and self._start_offsets[-1] <= start_offset:
            return  # already known; a later offset in the same epoch changes nothing
        keep = len(self._epochs)
        while keep > 0 and (self._epochs[keep - 1] >= epoch or self._start_offsets[keep - 1] >= start_offset):
            keep -= 1
        del self._epochs[keep:], self._start_offsets[keep:]
        self._epochs.append(epoch)
        self._start_offsets.append(start_offset)
        assert len(self._epochs) <= LEADER_EPOCH_ENTRIES_MAX, "leader epoch cache overflow"
        self._persist()

    def assign_newer(self, epoch_starts: list[tuple[int, int]]) -> None:
        """Assign each (epoch, start offset) whose epoch is newer than the latest: what batches appended or
        recovered tell the cache (an older epoch than the latest is not recorded)."""
        for epoch, start_offset in epoch_starts:
            latest = self.latest_epoch
            if latest is None or epoch > latest:
                self.assign(epoch, start_offset)

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (epoch, end offset), or (-1, -1) when nothing is known (REFERENCE.md 8)."""
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, epoch)  # first entry with a larger epoch
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            # Older than anything known: Kafka answers the requested epoch and the first start offset.
            return epoch, self._start_offsets[0]
        return self._epochs[higher - 1], self._start_offsets[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after `end_offset` (the log was truncated there)."""
        keep = bisect.bisect_left(self._start_offsets, end_offset)
        if keep < len(self._epochs):
            del self._epochs[keep:], self._start_offsets[keep:]
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: drop epochs wholly below it, and move the start of the epoch
        that contains it up to it."""
        floor = bisect.bisect_right(self._start_offsets, start_offset) - 1
        if floor < 0 or (floor == 0 and self._start_offsets[0] == start_offset):
            return
        del self._epochs[:floor], self._start_offsets[:floor]
        self._start_offsets[0] = start_offset
        self._persist()

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._start_offsets.clear()
            self._persist()

    def _persist(self) -> None:
        write_epoch_checkpoint(self._disk, self._path, self.epoch_entries)
