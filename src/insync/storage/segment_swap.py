"""Replacing segments by a cleaned one atomically, and finishing or undoing a replacement a crash interrupted.

Kafka's protocol (`LocalLog.replaceSegments`, `LogLoader`): the cleaner writes the new segment's three files with
the suffix `.cleaned` and fsyncs them; renaming them to `.swap` (the `.log` last) is the point of no return; the
old segments' files are then renamed to `.deleted` and removed, and the `.swap` files renamed to their live names.
At open, before the segments load: `.deleted` and `.cleaned` files are removed (a `.cleaned` segment never
replaced anything: the old ones are whole), an index `.swap` without its `.log.swap` is removed, and a `.log.swap`
completes its replacement: the live segments whose base lies in [its base, its next offset) go, and the `.swap`
files take their live names.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from insync.limits import SEGMENTS_PER_PARTITION_MAX
from insync.storage.disk import Disk
from insync.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, BatchScan, LogSegment

logger = logging.getLogger("insync.storage")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"

_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex)(\.cleaned|\.swap|\.deleted)?$")


def swap_in(cleaned: LogSegment, old: Sequence[LogSegment]) -> None:
    """Replace `old` (consecutive segments, the first with the cleaned one's base) by `cleaned`, whose files carry
    `.cleaned` and are fsynced. Every step leaves a state `recover_swaps` finishes or undoes."""
    assert old and cleaned.file_suffix == CLEANED_SUFFIX and cleaned.base_offset == old[0].base_offset
    cleaned.rename_suffix(SWAP_SUFFIX)
    for segment in old:
        segment.rename_suffix(DELETED_SUFFIX)
        segment.delete()
    cleaned.rename_suffix("")


def recover_swaps(disk: Disk, directory: str) -> None:
    """Finish every replacement whose `.log.swap` exists, and remove what the others left."""
    names = disk.listdir(directory)
    assert len(names) <= 4 * SEGMENTS_PER_PARTITION_MAX, directory
    found = [(m.group(1), m.group(2), m.group(3) or "", name) for name in names if (m := _FILE.match(name))]
    swapped = {base for base, kind, suffix, _ in found if kind == "log" and suffix == SWAP_SUFFIX}
    for base, _, suffix, name in found:
        if suffix in (DELETED_SUFFIX, CLEANED_SUFFIX) or (suffix == SWAP_SUFFIX and base not in swapped):
            disk.remove(f"{directory}/{name}")
    live = sorted(int(base) for base, kind, suffix, _ in found if kind == "log" and not suffix)
    for base in sorted(swapped):
        _complete(disk, directory, int(base), live)


def _complete(disk: Disk, directory: str, base: int, live: list[int]) -> None:
    swap_log = f"{directory}/{base:020d}{LOG_SUFFIX}{SWAP_SUFFIX}"
    next_offset = base
    for _, header in BatchScan(disk, swap_log, 0, disk.size(swap_log), verify_crc=False):
        next_offset = header.next_offset
    replaced = [b for b in live if base <= b < max(next_offset, base + 1)]
    logger.warning("Completing the swap of cleaned segment %d of %s: replacing segments %s", base, directory,
                   replaced)
    for old in replaced:
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            path = f"{directory}/{old:020d}{suffix}"
            if disk.exists(path):
                disk.remove(path)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):
        path = f"{directory}/{base:020d}{suffix}"
        if disk.exists(path + SWAP_SUFFIX):
            disk.rename(path + SWAP_SUFFIX, path)
