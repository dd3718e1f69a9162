"""A log directory's producer-state snapshot files: `<offset>.snapshot`, each the replication layer's bytes for the
batches below `offset`, opaque here. A snapshot is written atomically (a temporary file, fsynced, renamed over),
and only the newest `PRODUCER_SNAPSHOTS_KEPT` stay. The log decides when one is taken (a roll, a close) and which
go when its ends move; the files live in its directory beside the segments.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from insync.storage.disk import Disk

_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")
PRODUCER_SNAPSHOTS_KEPT = 2


class ProducerSnapshotFiles:
    def __init__(self, disk: Disk, directory: str) -> None:
        self.disk = disk
        self.directory = directory
        # `source(offset)`: the snapshot bytes for the batches below `offset`, asked when one is taken
        self.source: Callable[[int], bytes] | None = None

    def offsets(self) -> list[int]:
        """Offsets of the snapshot files in the directory, ascending."""
        names = (_SNAPSHOT_NAME.match(name) for name in self.disk.listdir(self.directory))
        return sorted(int(match.group(1)) for match in names if match)

    def read(self, offset: int) -> bytes:
        return self.disk.read_file(self._path(offset))

    def write(self, offset: int, data: bytes) -> None:
        """Replace the snapshot at `offset` atomically, then keep only the newest few."""
        assert offset >= 0, offset
        path = self._path(offset)
        self.disk.write_file(path + ".tmp", data)
        self.disk.fsync(path + ".tmp")
        self.disk.rename(path + ".tmp", path)
        stale = set(self.offsets()[:-PRODUCER_SNAPSHOTS_KEPT])
        self.delete_where(lambda snapshot: snapshot in stale)
        assert len(self.offsets()) <= PRODUCER_SNAPSHOTS_KEPT

    def take(self, end_offset: int) -> None:
        """Snapshot the batches below `end_offset` (the log's end), if a source is set."""
        if self.source is not None:
            self.write(end_offset, self.source(end_offset))

    def delete(self, offset: int) -> None:
        self.disk.remove(self._path(offset))

    def delete_where(self, doomed: Callable[[int], bool]) -> None:
        for offset in self.offsets():
            if doomed(offset):
                self.delete(offset)

    def _path(self, offset: int) -> str:
        return f"{self.directory}/{offset:020d}.snapshot"
