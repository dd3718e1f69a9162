"""Opening a log directory: its leader epoch cache and its segments, recovered (Kafka's LogLoader).

Segments wholly below the recovery point are trusted (their indexes reused, their epochs read from batch headers
only when the cache must be rebuilt); from the first one that is not, every batch is CRC-checked, a torn or corrupt
tail is cut and the indexes are rebuilt. A segment that does not end where its successor starts loses everything
after it. Leftovers of interrupted work are removed first: temporary checkpoint files, indexes without a segment.
"""

from __future__ import annotations

import logging
import re

from insync.config import LogConfig
from insync.limits import SEGMENTS_PER_PARTITION_MAX
from insync.storage.checkpoint import LEADER_EPOCH_CHECKPOINT, CheckpointError
from insync.storage.disk import Disk
from insync.storage.leader_epoch import EpochCheckpoints, LeaderEpochCache
from insync.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, BatchScan, LogSegment

logger = logging.getLogger("insync.storage")

_SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex)$")


def load_epoch_cache(disk: Disk, directory: str,
                     writer: EpochCheckpoints | None = None) -> tuple[LeaderEpochCache, bool]:
    """The directory's leader epoch cache, and whether it must be rebuilt from the batches (its file missing or
    garbled)."""
    epoch_path = f"{directory}/{LEADER_EPOCH_CHECKPOINT}"
    try:
        # Without the file (never written, or lost) the cache is rebuilt too: the batches hold the epochs.
        return LeaderEpochCache.load(disk, epoch_path, writer), not disk.exists(epoch_path)
    except CheckpointError as exc:
        logger.warning("Rebuilding the leader epoch cache of %s from its batches: %s", directory, exc)
        return LeaderEpochCache(disk, epoch_path, writer=writer), True


def load_segments(disk: Disk, directory: str, config: LogConfig, now_ms: int, epochs: LeaderEpochCache,
                  rebuild_epochs: bool, recovery_point: int, log_start_offset: int) -> list[LogSegment]:
    """The directory's segments, recovered from `recovery_point` on; the epochs met while recovering (and all of
    them when `rebuild_epochs`) go into `epochs`. An empty directory gets one segment at `log_start_offset`."""
    bases = _segment_bases(disk, directory)
    segments: list[LogSegment] = []
    for i, base in enumerate(bases):
        following = bases[i + 1] if i + 1 < len(bases) else None
        segment = None
        if following is not None and following <= recovery_point:
            segment = LogSegment.open_trusted(disk, directory, base, following, now_ms, config.index_interval_bytes)
            if segment is not None and rebuild_epochs:
                epochs.assign_newer(epoch_starts(segment))
        if segment is None:
            segment, starts = LogSegment.recover(disk, directory, base, now_ms, config.index_interval_bytes,
                                                 config.compact)
            epochs.assign_newer(starts)
        segments.append(segment)
        if following is not None:
            segment.seal()
            # A segment that does not end where its successor starts loses what follows it; in a compacted
            # log one may end short (a clean removed its last batches), so there, as in Kafka, only a torn or
            # overlapping one does.
            if (segment.next_offset != following if not config.compact
                    else segment.torn or segment.next_offset > following):
                _drop_segment_files(disk, directory, bases[i + 1:])
                break
    if not segments:
        segments.append(LogSegment.create(disk, directory, max(log_start_offset, 0), now_ms,
                                          config.index_interval_bytes))
    assert all(a.base_offset < b.base_offset for a, b in zip(segments, segments[1:], strict=False)), directory
    return segments


def _segment_bases(disk: Disk, directory: str) -> list[int]:
    bases: set[int] = set()
    for name in disk.listdir(directory):
        match = _SEGMENT_NAME.match(name)
        if match and match.group(2) == "log":
            bases.add(int(match.group(1)))
        elif name.endswith(".tmp"):
            disk.remove(f"{directory}/{name}")  # a checkpoint write that never got renamed
    for name in disk.listdir(directory):
        match = _SEGMENT_NAME.match(name)
        if match and int(match.group(1)) not in bases:
            disk.remove(f"{directory}/{name}")  # an index whose segment was deleted
    assert len(bases) <= SEGMENTS_PER_PARTITION_MAX, f"{directory}: too many segments"
    return sorted(bases)


def _drop_segment_files(disk: Disk, directory: str, bases: list[int]) -> None:
    logger.warning("Deleting segments %s of %s: they follow a truncated segment", bases, directory)
    for base in bases:
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            path = f"{directory}/{base:020d}{suffix}"
            if disk.exists(path):
                disk.remove(path)


def epoch_starts(segment: LogSegment) -> list[tuple[int, int]]:
    """(epoch, base offset) of each batch of a trusted segment that starts a newer epoch (headers only)."""
    starts: list[tuple[int, int]] = []
    for _, header in BatchScan(segment.disk, segment.log_path, 0, segment.size, verify_crc=False):
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (not starts or epoch > starts[-1][0]):
            starts.append((epoch, header.base_offset))
    return starts
