"""Slow disk reads for a process insync cannot reach into (a Kafka broker): a FUSE passthrough file system under
its data directory that delays reads of the partitions a control file names.

`mount(node_dir)` moves nothing: it mounts `node_dir/data` (the broker's `log.dirs`) over `node_dir/data.disk`,
where the files really are, served by `python -m insync.chaos.slow_disk` in its own process. Every operation
passes through; a read of a segment (`*.log`) of a partition named in `node_dir/slow-reads.json`
(`{"topic-0": 750}`) first sleeps that many milliseconds. Segments are opened with direct I/O, so that each read
reaches the file system rather than the page cache; index files stay cached, since Kafka maps them into memory.
Kafka serves a fetch's records with sendfile from its network threads, so a slow read holds up a fetch as a disk
that misses its page cache does: seed 000's slow leader. While `node_dir/disk-errors.json` says
`{"eio": true}` (`write_errors`), every read, write, fsync and change of a file or directory fails with EIO, as
a failing disk's do (the campaign's `disk-error`); looking files up and listing directories still work.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from insync.waiting import wait_until

CONTROL_FILE = "slow-reads.json"
ERRORS_FILE = "disk-errors.json"
DISK_DIR = "data.disk"
MOUNT_DIR = "data"
CONTROL_CHECK_S = 0.1
MOUNT_TIMEOUT_S = 10.0
UNMOUNT_TIMEOUT_S = 10.0
SEGMENT_SUFFIX = ".log"
STAT_KEYS = ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid", "st_ino",
             "st_blocks")
STATVFS_KEYS = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize",
                "f_namemax")


def unavailable() -> str | None:
    """Why no slow disk can be mounted here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as e:
        return f"mfusepy with libfuse3 is not installed ({e}); make kafka installs them"
    return None


def write_control(node_dir: Path, delays_ms: dict[str, int]) -> None:
    """Slow the reads of these partitions (`topic-N` -> ms) from now; an empty mapping ends it."""
    tmp = node_dir / f"{CONTROL_FILE}.tmp"
    tmp.write_text(json.dumps(delays_ms), encoding="utf-8")
    tmp.replace(node_dir / CONTROL_FILE)


def write_errors(node_dir: Path, failing: bool) -> None:
    """Make every operation on the data fail with EIO from now (`failing`), or work again."""
    tmp = node_dir / f"{ERRORS_FILE}.tmp"
    tmp.write_text(json.dumps({"eio": True} if failing else {}), encoding="utf-8")
    tmp.replace(node_dir / ERRORS_FILE)


def mount(node_dir: Path) -> subprocess.Popen[bytes]:
    """Mount the slow disk at `node_dir/data`, before the broker starts; returns the serving process."""
    disk, mountpoint = node_dir / DISK_DIR, node_dir / MOUNT_DIR
    disk.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    write_control(node_dir, {})
    write_errors(node_dir, False)
    log = open(node_dir / "slow-disk.log", "ab")  # noqa: SIM115 - handed to the child
    try:
        process = subprocess.Popen([sys.executable, "-m", "insync.chaos.slow_disk", str(disk), str(mountpoint),
                                    str(node_dir / CONTROL_FILE), str(node_dir / ERRORS_FILE)], stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    finally:
        log.close()
    wait_until(lambda: os.path.ismount(mountpoint) or process.poll() is not None, MOUNT_TIMEOUT_S,
               f"the slow disk mounted at {mountpoint}")
    if process.poll() is not None:
        raise RuntimeError(f"the slow disk at {mountpoint} exited: see {node_dir / 'slow-disk.log'}")
    return process


@contextlib.contextmanager
def mounted(node_dirs: Sequence[Path]) -> Iterator[None]:
    """A slow disk under each node's data while the block runs; all unmounted at the end, whatever happened."""
    processes: dict[Path, subprocess.Popen[bytes]] = {}
    try:
        for node_dir in node_dirs:
            processes[node_dir] = mount(node_dir)
        yield
    finally:
        for node_dir, process in processes.items():
            unmount(node_dir, process)


def unmount(node_dir: Path, process: subprocess.Popen[bytes] | None = None) -> None:
    """Unmount the slow disk (lazily, if a process still holds it) and end its server."""
    mountpoint = node_dir / MOUNT_DIR
    if os.path.ismount(mountpoint):
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False, capture_output=True,
                       timeout=UNMOUNT_TIMEOUT_S)
    if process is not None:
        try:
            process.wait(UNMOUNT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(UNMOUNT_TIMEOUT_S)


class _Control:
    """A control file's integers by name, read again when it changes (checked at most every CONTROL_CHECK_S)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._checked = 0.0
        self._mtime_ns = -1
        self._values: dict[str, int] = {}

    def of(self, name: str) -> int:
        now = time.monotonic()
        with self._lock:
            if now - self._checked >= CONTROL_CHECK_S:
                self._checked = now
                try:
                    mtime_ns = self.path.stat().st_mtime_ns
                    if mtime_ns != self._mtime_ns:
                        self._values = {str(k): int(v) for k, v in json.loads(self.path.read_text()).items()}
                        self._mtime_ns = mtime_ns
                except (OSError, ValueError):
                    self._values = {}
            return self._values.get(name, 0)


def _operations(disk: str, delays: _Control, errors: _Control) -> Any:
    import mfusepy as fuse

    def failing(operation: Any) -> Any:
        def checked(*args: Any) -> Any:
            if errors.of("eio"):
                raise fuse.FuseOSError(errno.EIO)
            return operation(*args)
        return checked

    class SlowDisk(fuse.Operations):  # type: ignore[misc]
        """A passthrough of `disk`; reads of segments of a slowed partition sleep first; with errors on, every
        operation that reads or changes data fails with EIO."""

        use_ns = True

        def _path(self, path: str) -> str:
            return os.path.join(disk, path.lstrip("/"))

        def getattr(self, path: str | None, fi: Any = None) -> dict[str, Any]:
            st = os.lstat(self._path(path)) if path is not None else os.fstat(fi.fh)
            out = {key: getattr(st, key) for key in STAT_KEYS}
            out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
            return out

        def readdir(self, path: str, fh: int) -> list[str]:
            return [".", "..", *os.listdir(self._path(path))]

        def statfs(self, path: str) -> dict[str, int]:
            st = os.statvfs(self._path(path))
            return {key: getattr(st, key) for key in STATVFS_KEYS}

        @failing
        def open(self, path: str, fi: Any) -> int:
            fi.fh = os.open(self._path(path), fi.flags)
            fi.direct_io = path.endswith(SEGMENT_SUFFIX)
            return 0

        @failing
        def create(self, path: str, mode: int, fi: Any = None) -> int:
            fh = os.open(self._path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            if fi is None:
                return fh
            os.close(fh)
            fi.fh = os.open(self._path(path), os.O_RDWR)
            fi.direct_io = path.endswith(SEGMENT_SUFFIX)
            return 0

        @failing
        def read(self, path: str, size: int, offset: int, fi: Any) -> bytes:
            if path.endswith(SEGMENT_SUFFIX):
                delay_ms = delays.of(os.path.basename(os.path.dirname(path)))
                if delay_ms > 0:
                    time.sleep(delay_ms / 1000)
            return os.pread(fi.fh, size, offset)

        @failing
        def write(self, path: str, data: bytes, offset: int, fi: Any) -> int:
            return os.pwrite(fi.fh, data, offset)

        @failing
        def truncate(self, path: str | None, length: int, fi: Any = None) -> int:
            if path is None:
                os.ftruncate(fi.fh, length)
            else:
                os.truncate(self._path(path), length)
            return 0

        def flush(self, path: str, fi: Any) -> int:
            return 0

        @failing
        def fsync(self, path: str, datasync: int, fi: Any) -> int:
            (os.fdatasync if datasync else os.fsync)(fi.fh)
            return 0

        def release(self, path: str, fi: Any) -> int:
            os.close(fi.fh)
            return 0

        @failing
        def unlink(self, path: str) -> int:
            os.unlink(self._path(path))
            return 0

        @failing
        def rename(self, old: str, new: str) -> int:
            os.rename(self._path(old), self._path(new))
            return 0

        @failing
        def mkdir(self, path: str, mode: int) -> int:
            os.mkdir(self._path(path), mode)
            return 0

        @failing
        def rmdir(self, path: str) -> int:
            os.rmdir(self._path(path))
            return 0

        def chmod(self, path: str, mode: int) -> int:
            os.chmod(self._path(path), mode)
            return 0

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
            os.utime(self._path(path), ns=times) if times else os.utime(self._path(path))
            return 0

        def access(self, path: str, amode: int) -> int:
            if not os.access(self._path(path), amode):
                raise fuse.FuseOSError(errno.EACCES)
            return 0

    return SlowDisk()


def main() -> None:
    import mfusepy as fuse

    disk, mountpoint, control, errors = sys.argv[1:5]
    fuse.FUSE(_operations(disk, _Control(Path(control)), _Control(Path(errors))), mountpoint, foreground=True,
              raw_fi=True, nothreads=False)


if __name__ == "__main__":
    main()
