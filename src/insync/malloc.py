"""Keep freed large buffers in the heap instead of returning them to the kernel (glibc only).

glibc serves allocations above a threshold (128 KiB at start, adapting upwards as such chunks are freed) with
fresh mmap()s and unmaps them on free, so a fetch-sized buffer (a fetch response, its records, a segment read,
Arrow columns: megabytes each, several per fetch) is often new memory that page-faults in page by page, a large
share of a broker's or a Spark task's CPU when serving or reading fetches; how often depends on the order of
earlier frees, so two identical processes can differ widely. `keep_freed_buffers()` fixes the threshold high, so
freed buffers are reused by the next fetch. It is process-wide: brokers and Spark tasks that read topics call it.
The cost: the heap keeps memory at the peak of buffers in use at once (glibc returns only a free top of more than
twice the threshold), where mmap()ed buffers would go back to the kernel one by one.
"""

from __future__ import annotations

import ctypes
import sys

MMAP_THRESHOLD_BYTES = 64 * 1024 * 1024
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt() parameter numbers from glibc's malloc.h
_tuned = False


def keep_freed_buffers() -> bool:
    """Tune glibc's allocator once per process; False where there is no glibc (nothing to tune)."""
    global _tuned
    if _tuned:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # musl and others: a different allocator, which this does not know
    _tuned = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, 2 * MMAP_THRESHOLD_BYTES))
    return _tuned
