"""Power loss on a real disk: a `RealDisk` that journals what is durable, and the cut a crash makes from it.

A broker started with `fault.injection.power.loss.enable=true` does its I/O through `JournalingDisk`. Beside
each write it appends to a journal (`JOURNAL_FILE` in its first log dir) the durable size of the file it touched:
0 for a file it created or replaced, the file's size after an `fsync`, the smaller of the two after a truncate.
The journal itself is not fsynced: the fault kills the process (SIGKILL), which loses no page cache.
`lose_unsynced(journal)` is the power cut, run by the harness (`chaos/power.py`) while the broker is dead: every
file the journal names is cut back to its durable size (as LazyFS does for Jepsen); with `torn_tail` each keeps
a random prefix of what it lost, a write the disk had half made. Files the journal never names were durable when
the broker started; metadata operations are durable at once, as in `MemoryDisk.crash`. The journal is cleared
when the disk is made, so it only ever describes the running broker's writes.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from insync.storage.disk import RealDisk

JOURNAL_FILE = "durable.journal"
JOURNAL_LINES_MAX = 50_000_000  # a bound on the replay loop: far more than a chaos run writes


class JournalingDisk(RealDisk):
    """A `RealDisk` recording, per file, how many of its bytes an fsync has made durable."""

    def __init__(self, journal_path: str) -> None:
        super().__init__()
        self.journal_path = journal_path
        self._durable: dict[str, int] = {}  # files this process changed -> their durable size
        self._journal = os.open(journal_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)

    def close(self) -> None:
        super().close()
        if self._journal >= 0:
            os.close(self._journal)
            self._journal = -1

    def _record(self, *entry: str | int) -> None:
        os.write(self._journal, (json.dumps(entry) + "\n").encode())

    def _set(self, path: str, size: int) -> None:
        self._durable[path] = size
        self._record("size", path, size)

    def _touch(self, path: str) -> None:
        """Before the first change to `path`: what it holds now is durable (it predates this process)."""
        if path not in self._durable:
            self._set(path, os.path.getsize(path) if os.path.exists(path) else 0)

    def append(self, path: str, data: bytes | bytearray | memoryview) -> int:
        self._touch(path)
        return super().append(path, data)

    def write_file(self, path: str, data: bytes) -> None:
        super().write_file(path, data)
        self._set(path, 0)  # replaced, and nothing of the new content is durable yet

    def truncate(self, path: str, size: int) -> None:
        self._touch(path)
        super().truncate(path, size)
        self._set(path, min(size, self._durable[path]))

    def fsync(self, path: str) -> None:
        super().fsync(path)
        self._set(path, os.path.getsize(path))

    def rename(self, source: str, target: str) -> None:
        self._touch(source)
        super().rename(source, target)
        self._durable[target] = self._durable.pop(source)
        self._record("rename", source, target)

    def rename_dir(self, source: str, target: str) -> None:
        super().rename_dir(source, target)
        prefix = source.rstrip("/") + "/"
        for path in [path for path in self._durable if path.startswith(prefix)]:
            self._durable[target.rstrip("/") + "/" + path[len(prefix):]] = self._durable.pop(path)
        self._record("rename_dir", source, target)

    def remove(self, path: str) -> None:
        super().remove(path)
        self._durable.pop(path, None)
        self._record("remove", path)

    def replace_files(self, files: Sequence[tuple[str, bytes]]) -> list[OSError | None]:
        for path, _ in files:
            self._touch(path)
        results = super().replace_files(files)
        for (path, data), error in zip(files, results, strict=True):
            if error is None:  # fsynced before it was renamed into place: durable whole
                self._set(path, len(data))
        return results


def durable_sizes(journal_text: str) -> dict[str, int]:
    """Replay a journal: each file it names -> its durable size when the journal ends."""
    sizes: dict[str, int] = {}
    for number, line in enumerate(journal_text.splitlines()[:JOURNAL_LINES_MAX], 1):
        try:
            kind, *args = json.loads(line)
            if kind == "size":
                sizes[str(args[0])] = int(args[1])
            elif kind == "rename":
                sizes[str(args[1])] = sizes.pop(str(args[0]))
            elif kind == "rename_dir":
                prefix, target = str(args[0]).rstrip("/") + "/", str(args[1]).rstrip("/") + "/"
                sizes = {target + name[len(prefix):] if name.startswith(prefix) else name: size
                         for name, size in sizes.items()}
            elif kind == "remove":
                sizes.pop(str(args[0]), None)
            else:
                raise ValueError(f"unknown entry {kind!r}")
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise ValueError(f"journal line {number} is not an entry: {exc}") from None
    return sizes


@dataclass(frozen=True, slots=True)
class PowerCut:
    files_cut: int
    bytes_lost: int


def lose_unsynced(journal_path: str | Path, torn_tail: bool = False, rng: random.Random | None = None) -> PowerCut:
    """Cut every file the journal names back to its durable size (see the module docstring); removes the
    journal. Run only while the process that wrote it is dead."""
    path = Path(journal_path)
    if not path.exists():
        return PowerCut(0, 0)
    rng = rng or random.Random()
    files_cut = bytes_lost = 0
    for name, durable in sorted(durable_sizes(path.read_text()).items()):
        if not os.path.exists(name):
            continue
        unflushed = os.path.getsize(name) - durable
        if unflushed <= 0:
            continue
        keep = rng.randint(0, unflushed - 1) if torn_tail else 0
        os.truncate(name, durable + keep)
        files_cut += 1
        bytes_lost += unflushed - keep
    path.unlink()
    return PowerCut(files_cut, bytes_lost)


def open_disk(log_dir: str, power_loss: bool) -> RealDisk:
    """The broker's disk: a `JournalingDisk` writing its journal in `log_dir` when `power_loss`, else a plain one."""
    if not power_loss:
        return RealDisk()
    os.makedirs(log_dir, exist_ok=True)
    return JournalingDisk(os.path.join(log_dir, JOURNAL_FILE))
