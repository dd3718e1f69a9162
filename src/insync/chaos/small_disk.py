"""A small file system under a broker's log directory, to fill and free while the broker runs (`disk-full`).

`mounted(log_dirs, size_mb)` mounts a size-limited tmpfs at each log directory before its broker starts (root
only: `mount -t tmpfs`) and unmounts them when the block ends, whatever happened. `fill(log_dir)` writes a filler
file (`.filler`, which no partition directory is named like) until the file system refuses with ENOSPC, so the
broker's next append, roll, index or checkpoint write fails as on a full disk; `free(log_dir)` deletes it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

FILLER = ".filler"
CHUNK_BYTES = 1 << 20
BLOCK_BYTES = 512
MOUNT_TIMEOUT_S = 10.0


def unavailable() -> str | None:
    """Why no small file system can be mounted here, or None."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    return None


def mount(log_dir: Path, size_mb: int) -> None:
    """Mount an empty tmpfs of `size_mb` at `log_dir` (created when missing)."""
    if size_mb <= 0:
        raise ValueError(f"a small disk needs a positive size in MB, got {size_mb}")
    log_dir.mkdir(parents=True, exist_ok=True)
    if any(log_dir.iterdir()):
        raise ValueError(f"{log_dir} is not empty: a small disk is mounted before its broker first starts")
    _run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(log_dir)])


def unmount(log_dir: Path) -> None:
    """Unmount it, lazily if a process still holds a file in it."""
    if os.path.ismount(log_dir):
        _run(["umount", "-l", str(log_dir)])


@contextlib.contextmanager
def mounted(log_dirs: Sequence[Path], size_mb: int) -> Iterator[None]:
    done: list[Path] = []
    try:
        for log_dir in log_dirs:
            mount(log_dir, size_mb)
            done.append(log_dir)
        yield
    finally:
        for log_dir in reversed(done):
            unmount(log_dir)


def fill(log_dir: Path) -> int:
    """Fill the file system of `log_dir` to the last byte; returns the bytes written. Bounded by its size."""
    if not os.path.ismount(log_dir):
        raise ValueError(f"{log_dir} is not a mount point: filling it would fill the file system under it")
    stats = os.statvfs(log_dir)
    passes_max = stats.f_blocks * stats.f_frsize // BLOCK_BYTES + 64  # each pass writes a block or shrinks
    written, size = 0, CHUNK_BYTES
    chunk = b"\0" * CHUNK_BYTES
    fd = os.open(log_dir / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for _ in range(passes_max):
            try:
                written += os.write(fd, chunk[:size])
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if size == BLOCK_BYTES:
                    break
                size = max(BLOCK_BYTES, size // 16)  # the rest in smaller pieces, down to one block
        os.fsync(fd)
    finally:
        os.close(fd)
    return written


def free(log_dir: Path) -> None:
    """Delete the filler: the space is back."""
    with contextlib.suppress(FileNotFoundError):
        (log_dir / FILLER).unlink()


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=MOUNT_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
