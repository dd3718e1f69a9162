"""The file interface storage does all its I/O through: a real disk, and an in-memory one for tests and sim.

`Disk` is deliberately small and path-based: append, `pread`, truncate, fsync, and `write_file` + `fsync` +
`rename` for checkpoints; `space` for DescribeLogDirs. There are no file handles in the interface; `RealDisk`
caches one OS file descriptor per path (LRU, `OPEN_FILES_MAX`) so the hot path is a single system call.
Faults, on both disks (`FaultHooks`): `set_io_error(path_prefix, on_read, on_write)` makes matching operations
raise `OSError(EIO)` (`InjectedIOError`); with `set_slow_reads(path_prefix, ms)` both disks return at once and
`read_latency_ms(path)` reports the latency the driver charges (the simulator on its clock, the server by
completing that fetch later, `CompleteAfter`), so a slow read delays only that partition's fetches, as one stuck
Kafka request handler would (seed 000), without stalling heartbeats or other partitions.
Crashes (`MemoryDisk.crash`): every file keeps only the bytes present at its last `fsync` (with `torn_tail`, a
random prefix of the last unflushed append too). Metadata operations are durable at once, like a journaling
file system that orders metadata; truncation also shortens the durable image, so cut data never reappears.
"""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

OPEN_FILES_MAX = 512
REPLACE_THREADS_MAX = 16
MEMORY_VOLUME_BYTES = 1 << 40  # what `MemoryDisk.space` reports as the volume's size


@dataclass(frozen=True, slots=True)
class DiskSpace:
    total_bytes: int
    usable_bytes: int  # what a non-root writer may still use, as Java's FileStore.getUsableSpace


class Disk(Protocol):
    def exists(self, path: str) -> bool: ...

    def mkdir(self, path: str) -> None:
        """Create a directory and its parents; no error if it exists."""

    def listdir(self, path: str) -> list[str]:
        """Names (not paths) of the entries of a directory, sorted."""

    def rmdir(self, path: str) -> None:
        """Remove an empty directory."""

    def size(self, path: str) -> int: ...

    def append(self, path: str, data: bytes | bytearray | memoryview) -> int:
        """Append to a file, creating it when missing; returns the position the data was written at."""

    def pread(self, path: str, position: int, length: int) -> bytes:
        """Up to `length` bytes from `position` (fewer at the end of the file)."""

    def read_file(self, path: str) -> bytes: ...

    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a file with `data` (not durable until `fsync`)."""

    def truncate(self, path: str, size: int) -> None: ...

    def fsync(self, path: str) -> None: ...

    def rename_dir(self, source: str, target: str) -> None:
        """Move a directory and everything in it (a log moving between names, `replica_move`); durable at once."""

    def rename(self, source: str, target: str) -> None:
        """Atomically replace `target` with `source`."""

    def replace_files(self, files: Sequence[tuple[str, bytes]]) -> list[OSError | None]:
        """Durably create or replace each file (paths distinct) as `write_file` + `fsync` + `rename` of `path.tmp`
        would, all before returning; one file's error does not stop the others and is its result (None: done)."""

    def remove(self, path: str) -> None: ...

    def read_latency_ms(self, path: str) -> int:
        """Latency a slow-read fault adds to reads of `path` (0 when none)."""

    def space(self, path: str) -> DiskSpace:
        """The size of the volume holding `path` and what of it is free to use (DescribeLogDirs v4)."""


class InjectedIOError(OSError):
    """An I/O error `FaultHooks` injected on a path prefix: a failing partition (seed 002), so it fails that log
    alone, where an error from the file system takes the whole log directory offline (`log_dir_failure`)."""


@dataclass(slots=True)
class FaultHooks:
    """Slow reads and I/O errors by path prefix; shared by both disks."""

    slow_reads_ms: dict[str, int] = field(default_factory=dict)
    io_errors: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    full: set[str] = field(default_factory=set)

    def set_slow_reads(self, path_prefix: str, ms: int) -> None:
        assert ms >= 0
        self.slow_reads_ms[path_prefix] = ms

    def set_io_error(self, path_prefix: str, on_read: bool = True, on_write: bool = True) -> None:
        self.io_errors[path_prefix] = (on_read, on_write)

    def set_full(self, path_prefix: str) -> None:
        """Writes under `path_prefix` fail with ENOSPC, as on a full file system: the whole log dir goes offline."""
        self.full.add(path_prefix)

    def clear_faults(self) -> None:
        self.slow_reads_ms.clear()
        self.io_errors.clear()
        self.full.clear()

    def read_latency_ms(self, path: str) -> int:
        if not self.slow_reads_ms:
            return 0
        return max((ms for prefix, ms in self.slow_reads_ms.items() if path.startswith(prefix)), default=0)

    def check(self, path: str, *, write: bool) -> None:
        if write and self.full and any(path.startswith(prefix) for prefix in self.full):
            raise OSError(errno.ENOSPC, "No space left on device", path)
        if not self.io_errors:
            return
        for prefix, (on_read, on_write) in self.io_errors.items():
            if path.startswith(prefix) and (on_write if write else on_read):
                raise InjectedIOError(errno.EIO, f"injected I/O error ({'write' if write else 'read'})", path)


class _FaultInjecting:
    """The fault hooks, delegated to `self.faults`, so both disks expose the same methods."""

    faults: FaultHooks

    def set_slow_reads(self, path_prefix: str, ms: int) -> None:
        self.faults.set_slow_reads(path_prefix, ms)

    def set_io_error(self, path_prefix: str, on_read: bool = True, on_write: bool = True) -> None:
        self.faults.set_io_error(path_prefix, on_read, on_write)

    def set_full(self, path_prefix: str) -> None:
        self.faults.set_full(path_prefix)

    def clear_faults(self) -> None:
        self.faults.clear_faults()

    def read_latency_ms(self, path: str) -> int:
        return self.faults.read_latency_ms(path)


class RealDisk(_FaultInjecting):
    """Files on the local file system. One cached descriptor per open file; `close()` releases them."""

    def __init__(self) -> None:
        self.faults = FaultHooks()
        self._fds: dict[str, int] = {}

    def _fd(self, path: str) -> int:
        fd = self._fds.pop(path, None)
        if fd is None:
            if len(self._fds) >= OPEN_FILES_MAX:  # close the least recently used descriptor
                self._forget(next(iter(self._fds)))
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._fds[path] = fd  # re-inserted last: the dict's order is the recency order
        return fd

    def _forget(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for path in list(self._fds):
            self._forget(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def mkdir(self, path: str) -> None:
        self.faults.check(path, write=True)
        os.makedirs(path, exist_ok=True)

    def listdir(self, path: str) -> list[str]:
        self.faults.check(path, write=False)
        return sorted(os.listdir(path))

    def rmdir(self, path: str) -> None:
        self.faults.check(path, write=True)
        os.rmdir(path)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def space(self, path: str) -> DiskSpace:
        self.faults.check(path, write=False)
        stats = os.statvfs(path)
        return DiskSpace(stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize)

    def append(self, path: str, data: bytes | bytearray | memoryview) -> int:
        self.faults.check(path, write=True)
        fd = self._fd(path)
        position = os.lseek(fd, 0, os.SEEK_END)
        written = os.write(fd, data)
        view = memoryview(data)
        # os.write may write less than asked on some file systems; finish the job rather than tear the batch.
        for _ in range(1 + len(view) // 65536):
            if written >= len(view):
                break
            written += os.write(fd, view[written:])
        assert written == len(view), f"short write to {path}"
        return position

    def pread(self, path: str, position: int, length: int) -> bytes:
        assert position >= 0 and length >= 0
        self.faults.check(path, write=False)
        return os.pread(self._fd(path), length, position)

    def read_file(self, path: str) -> bytes:
        self.faults.check(path, write=False)
        with open(path, "rb") as handle:
            return handle.read()

    def write_file(self, path: str, data: bytes) -> None:
        self.faults.check(path, write=True)
        self._forget(path)
        with open(path, "wb") as handle:
            handle.write(data)

    def truncate(self, path: str, size: int) -> None:
        assert size >= 0
        self.faults.check(path, write=True)
        os.truncate(path, size)

    def fsync(self, path: str) -> None:
        self.faults.check(path, write=True)
        os.fsync(self._fd(path))

    def rename(self, source: str, target: str) -> None:
        self.faults.check(target, write=True)
        self._forget(source)
        self._forget(target)
        os.replace(source, target)
        _fsync_directory(os.path.dirname(target))  # the rename is only durable once the directory entry is

    def rename_dir(self, source: str, target: str) -> None:
        self.faults.check(target, write=True)
        prefix = source.rstrip("/") + "/"
        for path in [path for path in self._fds if path.startswith(prefix)]:
            self._forget(path)  # a cached descriptor would keep writing under the old name's meaning
        if os.path.exists(target):
            raise FileExistsError(errno.EEXIST, "directory exists", target)
        os.rename(source, target)
        for parent in {os.path.dirname(source), os.path.dirname(target)}:
            _fsync_directory(parent)

    def remove(self, path: str) -> None:
        self.faults.check(path, write=True)
        self._forget(path)
        os.remove(path)

    def replace_files(self, files: Sequence[tuple[str, bytes]]) -> list[OSError | None]:
        """The files' fsyncs overlap on up to REPLACE_THREADS_MAX threads: a journaling file system commits
        concurrent fsyncs together, where one after another each waits for a commit of its own."""
        assert len({path for path, _ in files}) == len(files), "a path twice"
        results: list[OSError | None] = [None] * len(files)
        todo = []
        for i, (path, _) in enumerate(files):
            try:
                self.faults.check(path, write=True)
            except OSError as exc:
                results[i] = exc
                continue
            self._forget(path)
            self._forget(path + ".tmp")
            todo.append(i)
        if len(todo) == 1:
            results[todo[0]] = _replace_durably(*files[todo[0]])
        elif todo:
            with ThreadPoolExecutor(min(REPLACE_THREADS_MAX, len(todo)), "replace-files") as pool:
                for i, result in zip(todo, pool.map(lambda i: _replace_durably(*files[i]), todo), strict=True):
                    results[i] = result
        return results


def _replace_durably(path: str, data: bytes) -> OSError | None:
    tmp = path + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            for _ in range(1 + len(view) // 65536):  # bounded: a short write is finished, not torn
                if not view:
                    break
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_directory(os.path.dirname(path))
    except OSError as exc:
        return exc
    return None


def _fsync_directory(path: str) -> None:
    """Make the directory's entries durable (a rename, a new file)."""
    directory = os.open(path or ".", os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


@dataclass(slots=True)
class _MemoryFile:
    data: bytearray = field(default_factory=bytearray)
    durable: bytes = b""


class MemoryDisk(_FaultInjecting):
    """Files in memory with a durable image per file, so a crash can be simulated (see the module docstring)."""

    def __init__(self) -> None:
        self.faults = FaultHooks()
        self._files: dict[str, _MemoryFile] = {}
        self._dirs: set[str] = {"", "/"}
        # The names in each directory, so listing one costs its own entries, not every file of the disk (a
        # broker of thousands of partitions lists each partition's directory as it opens the partition).
        self._children: dict[str, set[str]] = {}
        self._last_append: str | None = None  # the file that took the last unflushed append

    def _file(self, path: str) -> _MemoryFile:
        found = self._files.get(_norm(path))
        if found is None:
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        return found

    def exists(self, path: str) -> bool:
        path = _norm(path)
        return path in self._files or path in self._dirs

    def mkdir(self, path: str) -> None:
        self.faults.check(path, write=True)
        path = _norm(path)
        for _ in range(path.count("/") + 1):
            self._dirs.add(path)
            self._link(path)
            path = os.path.dirname(path)

    def listdir(self, path: str) -> list[str]:
        self.faults.check(path, write=False)
        path = _norm(path)
        if path not in self._dirs:
            raise FileNotFoundError(errno.ENOENT, "no such directory", path)
        return sorted(self._children.get(path, ()))

    def rmdir(self, path: str) -> None:
        self.faults.check(path, write=True)
        if self.listdir(path):
            raise OSError(errno.ENOTEMPTY, "directory not empty", path)
        self._dirs.discard(_norm(path))
        self._unlink(_norm(path))

    def _link(self, key: str) -> None:
        """Enter `key` (a normalised path) in its directory's names."""
        name = os.path.basename(key)
        if name:
            self._children.setdefault(os.path.dirname(key), set()).add(name)

    def _unlink(self, key: str) -> None:
        names = self._children.get(os.path.dirname(key))
        if names is not None:
            names.discard(os.path.basename(key))

    def size(self, path: str) -> int:
        return len(self._file(path).data)

    def space(self, path: str) -> DiskSpace:
        """A volume of `MEMORY_VOLUME_BYTES`, less what every file holds."""
        self.faults.check(path, write=False)
        used = sum(len(file.data) for file in self._files.values())
        return DiskSpace(MEMORY_VOLUME_BYTES, max(0, MEMORY_VOLUME_BYTES - used))

    def append(self, path: str, data: bytes | bytearray | memoryview) -> int:
        self.faults.check(path, write=True)
        key = _norm(path)
        assert os.path.dirname(key) in self._dirs, f"no directory for {path}"
        file = self._files.get(key)
        if file is None:
            file = self._files[key] = _MemoryFile()
            self._link(key)
        position = len(file.data)
        file.data += data
        self._last_append = key
        return position

    def pread(self, path: str, position: int, length: int) -> bytes:
        assert position >= 0 and length >= 0
        self.faults.check(path, write=False)
        return bytes(self._file(path).data[position : position + length])

    def read_file(self, path: str) -> bytes:
        self.faults.check(path, write=False)
        return bytes(self._file(path).data)

    def write_file(self, path: str, data: bytes) -> None:
        self.faults.check(path, write=True)
        key = _norm(path)
        assert os.path.dirname(key) in self._dirs, f"no directory for {path}"
        self._files[key] = _MemoryFile(bytearray(data), b"")
        self._link(key)

    def truncate(self, path: str, size: int) -> None:
        assert size >= 0
        self.faults.check(path, write=True)
        file = self._file(path)
        del file.data[size:]
        file.durable = file.durable[:size]

    def fsync(self, path: str) -> None:
        self.faults.check(path, write=True)
        file = self._file(path)
        file.durable = bytes(file.data)
        if self._last_append == _norm(path):
            self._last_append = None

    def rename(self, source: str, target: str) -> None:
        self.faults.check(target, write=True)
        file = self._file(source)
        del self._files[_norm(source)]
        self._unlink(_norm(source))
        self._files[_norm(target)] = file
        self._link(_norm(target))

    def rename_dir(self, source: str, target: str) -> None:
        self.faults.check(target, write=True)
        old, new = _norm(source), _norm(target)
        if old not in self._dirs:
            raise FileNotFoundError(errno.ENOENT, "no such directory", source)
        if self.exists(new):
            raise FileExistsError(errno.EEXIST, "directory exists", target)
        self.mkdir(os.path.dirname(new))
        moved_dirs = sorted((d for d in self._dirs if d == old or d.startswith(old + "/")), key=len)
        moved_files = [f for f in self._files if f.startswith(old + "/")]
        for key in moved_dirs:
            self._dirs.discard(key)
            self._unlink(key)
        for key in moved_dirs:
            self._dirs.add(new + key[len(old):])
            self._link(new + key[len(old):])
            self._children[new + key[len(old):]] = self._children.pop(key, set())
        for key in moved_files:
            self._files[new + key[len(old):]] = self._files.pop(key)
        if self._last_append is not None and self._last_append.startswith(old + "/"):
            self._last_append = new + self._last_append[len(old):]

    def remove(self, path: str) -> None:
        self.faults.check(path, write=True)
        self._file(path)
        del self._files[_norm(path)]
        self._unlink(_norm(path))

    def replace_files(self, files: Sequence[tuple[str, bytes]]) -> list[OSError | None]:
        """One after another: nothing runs between them in the simulator."""
        assert len({path for path, _ in files}) == len(files), "a path twice"
        results: list[OSError | None] = []
        for path, data in files:
            try:
                self.write_file(path + ".tmp", data)
                self.fsync(path + ".tmp")
                self.rename(path + ".tmp", path)
                results.append(None)
            except OSError as exc:
                results.append(exc)
        return results

    def crash(self, torn_tail: bool = False, rng: random.Random | None = None) -> None:
        """Lose everything not fsynced; with `torn_tail`, keep a random prefix of the last unflushed append."""
        torn: tuple[str, bytes] | None = None
        if torn_tail and self._last_append is not None:
            file = self._files.get(self._last_append)
            if file is not None and file.data.startswith(file.durable):
                # Writes reach the disk in order, so what survives is a prefix of the unflushed bytes.
                keep = (rng or random.Random()).randint(0, len(file.data) - len(file.durable))
                torn = (self._last_append, bytes(file.data[len(file.durable) : len(file.durable) + keep]))
        for file in self._files.values():
            file.data = bytearray(file.durable)
        if torn is not None:
            self._files[torn[0]].data += torn[1]
        self._last_append = None

    def unflushed_bytes(self, path: str) -> int:
        """Bytes of `path` a crash would lose (for tests)."""
        file = self._file(path)
        return len(file.data) - len(file.durable)


def _norm(path: str) -> str:
    return os.path.normpath(path) if path else path
