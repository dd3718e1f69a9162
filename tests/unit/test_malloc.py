"""insync.malloc: after tuning, glibc serves megabyte buffers from the heap instead of fresh mmap()s."""

from __future__ import annotations

import ctypes
import sys

import pytest

from insync import malloc


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _mmapped_bytes() -> int:
    """glibc's count of bytes currently held in mmap()ed chunks (mallinfo2().hblkhd)."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    return int(libc.mallinfo2().hblkhd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_megabyte_buffers_come_from_the_heap_once_tuned() -> None:
    assert malloc.keep_freed_buffers()
    assert malloc.keep_freed_buffers()  # idempotent
    before = _mmapped_bytes()
    buffer = bytearray(8 * 1024 * 1024)  # a fetch-sized buffer: above glibc's default mmap threshold
    assert _mmapped_bytes() == before  # not a fresh mapping that page-faults in
    del buffer
