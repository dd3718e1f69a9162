"""The leader epoch cache: which leader epoch started at which offset, as Kafka's `LeaderEpochFileCache`.

Entries are (epoch, start_offset) pairs, both strictly increasing. The leader assigns (new epoch, its LEO) when
it takes over and on its first append in the epoch; a follower assigns the epoch of each batch it copies that is
newer than the latest. `end_offset_for` answers OffsetsForLeaderEpoch (REFERENCE.md 8), and the two truncations
keep the cache in step with the log. Every change is persisted to `leader-epoch-checkpoint` (through the `Disk`,
via `checkpoint.py`) at once, or with the others of an `EpochCheckpoints.batched` block at its end; a stale file
after a crash is repaired by `truncate_from_end` and by the epochs found in batches during recovery.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable, Iterator

from insync.limits import LEADER_EPOCH_ENTRIES_MAX
from insync.storage.checkpoint import epoch_checkpoint_bytes, read_epoch_checkpoint, write_epoch_checkpoint
from insync.storage.disk import Disk

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochCheckpoints:
    """How the leader epoch caches on one `Disk` write their files. Inside `batched()` a cache's change is noted,
    and every noted file is written when the outermost block ends, by one `Disk.replace_files` (whose fsyncs
    overlap): a broker applying a metadata update that moves a thousand leaderships writes each file once, and
    they are all durable before the update's outcome leaves the broker, as when each was written at once. A file
    that fails goes to its cache's `on_write_error` (its log then goes offline), else raises."""

    def __init__(self, disk: Disk) -> None:
        self.disk = disk
        self._depth = 0
        self._pending: dict[str, LeaderEpochCache] = {}

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if not self._depth and self._pending:
                self._flush()

    def write(self, cache: LeaderEpochCache) -> None:
        if self._depth:
            self._pending[cache.path] = cache  # bounded by the caches, one entry each
        else:
            write_epoch_checkpoint(self.disk, cache.path, cache.epoch_entries)

    def forget(self, cache: LeaderEpochCache) -> None:
        """Its log is being deleted: a noted change is not written."""
        self._pending.pop(cache.path, None)

    def _flush(self) -> None:
        caches = list(self._pending.values())
        self._pending.clear()
        results = self.disk.replace_files([(c.path, epoch_checkpoint_bytes(c.epoch_entries)) for c in caches])
        unhandled = []
        for cache, error in zip(caches, results, strict=True):
            if error is not None and cache.on_write_error is not None:
                cache.on_write_error(error)
            elif error is not None:
                unhandled.append(error)
        if unhandled:
            raise unhandled[0]


class LeaderEpochCache:
    def __init__(self, disk: Disk, path: str, entries: list[tuple[int, int]] | None = None,
                 writer: EpochCheckpoints | None = None) -> None:
        """`writer`: shared by the caches of a log manager, so it can batch their files; by default, each change
        is written at once."""
        self.path = path
        self._writer = writer or EpochCheckpoints(disk)
        self.on_write_error: Callable[[OSError], None] | None = None
        self._epochs: list[int] = []
        self._start_offsets: list[int] = []
        for epoch, start_offset in entries or []:
            assert not self._epochs or (epoch > self._epochs[-1] and start_offset >= self._start_offsets[-1])
            self._epochs.append(epoch)
            self._start_offsets.append(start_offset)

    @classmethod
    def load(cls, disk: Disk, path: str, writer: EpochCheckpoints | None = None) -> LeaderEpochCache:
        """Read the checkpoint (missing file: empty cache). Raises CheckpointError when it is garbled."""
        return cls(disk, path, read_epoch_checkpoint(disk, path), writer)

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
        self._writer.write(self)
