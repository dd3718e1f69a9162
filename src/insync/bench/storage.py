"""Storage throughput: `Log.append_as_leader` and `Log.read` beside plain `open().write()` / `read()`.

For each batch size (1 MiB and 16 KiB batches of 1 KiB records) the benchmark appends the same produced batch
through a real `Log` for about `seconds` (capped at `bytes_max`) and writes the same bytes to a plain file, in
alternating 32 MiB rounds; then it reads both back the same way, `Log.read` with `fetch_bytes` a read (as a
consumer's `max.partition.fetch.bytes`) against plain `read(fetch_bytes)`. Nothing is fsynced on either side
(Kafka's default: data is made durable by replication), so both measure the same page-cache path, and the ratio
is what insync costs on top of it: validation, CRC, one copy for stamping, index upkeep and batch-boundary
reads.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from insync.clock import SystemClock
from insync.config import LogConfig
from insync.protocol.records import build_batch
from insync.storage.disk import RealDisk
from insync.storage.log import Log

RECORD_BYTES = 1024
BATCH_SIZES = (("1MiB", 1024 * 1024), ("16KiB", 16 * 1024))
APPENDS_MAX = 10_000_000
ROUND_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class StorageBenchResult:
    batch: str
    batch_bytes: int
    batches: int
    total_mb: float
    append_mb_s: float
    plain_write_mb_s: float
    append_ratio: float
    read_mb_s: float
    plain_read_mb_s: float
    read_ratio: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def run(seconds: float = 3.0, directory: str | None = None, fetch_bytes: int = 1024 * 1024,
        bytes_max: int = 2 * 1024**3) -> list[StorageBenchResult]:
    """Both batch sizes, each given half of `seconds` for its appends."""
    assert seconds > 0 and fetch_bytes > 0
    root = tempfile.mkdtemp(prefix="insync-bench-", dir=directory)
    try:
        return [_run_one(name, size, seconds / len(BATCH_SIZES), os.path.join(root, name), fetch_bytes,
                         bytes_max) for name, size in BATCH_SIZES]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run_one(name: str, batch_bytes: int, seconds: float, directory: str, fetch_bytes: int,
             bytes_max: int) -> StorageBenchResult:
    value = os.urandom(RECORD_BYTES)
    batch = build_batch([(None, value)] * (batch_bytes // RECORD_BYTES), base_timestamp=int(time.time() * 1000))
    config = LogConfig(max_message_bytes=len(batch) + 1024, segment_bytes=2**31 - 1)
    disk = RealDisk()
    log = Log.open(os.path.join(directory, "bench-0"), config, disk, clock=SystemClock())
    plain_path = os.path.join(directory, "plain.bin")
    per_round = max(1, ROUND_BYTES // len(batch))
    # Rounds alternate between the log and the plain file, so both see the same page-cache pressure and the
    # same neighbours on a shared machine.
    append_s = write_s = 0.0
    rounds, deadline = 0, time.perf_counter() + seconds
    with open(plain_path, "wb") as plain:
        for _ in range(APPENDS_MAX):
            if time.perf_counter() >= deadline or (rounds + 1) * per_round * len(batch) > bytes_max:
                break
            append_s += _timed(lambda: [log.append_as_leader(batch, leader_epoch=0) for _ in range(per_round)])
            write_s += _timed(lambda: [plain.write(batch) for _ in range(per_round)])
            rounds += 1
    batches = rounds * per_round
    total = batches * len(batch)
    read_s, plain_read_s = _read_both(log, plain_path, fetch_bytes, per_round * len(batch))
    log.close()
    disk.close()
    mb = total / 1e6
    return StorageBenchResult(
        batch=name, batch_bytes=len(batch), batches=batches, total_mb=round(mb, 1),
        append_mb_s=round(mb / append_s, 1), plain_write_mb_s=round(mb / write_s, 1),
        append_ratio=round(write_s / append_s, 3),
        read_mb_s=round(mb / read_s, 1), plain_read_mb_s=round(mb / plain_read_s, 1),
        read_ratio=round(plain_read_s / read_s, 3),
    )


def _read_both(log: Log, plain_path: str, fetch_bytes: int, round_bytes: int) -> tuple[float, float]:
    """Seconds to read everything back through `Log.read` and through plain reads, in alternating rounds."""
    read_s = plain_s = 0.0
    offset, log_bytes, plain_bytes = 0, 0, 0
    with open(plain_path, "rb", buffering=0) as plain:
        for _ in range(APPENDS_MAX):
            if offset >= log.log_end_offset:
                break
            start, target = time.perf_counter(), log_bytes + round_bytes
            while offset < log.log_end_offset and log_bytes < target:
                result = log.read(offset, fetch_bytes)
                log_bytes, offset = log_bytes + len(result.records), result.next_offset
            read_s += time.perf_counter() - start
            start = time.perf_counter()
            while plain_bytes < log_bytes:
                chunk = plain.read(fetch_bytes)
                assert chunk, "plain file shorter than the log"
                plain_bytes += len(chunk)
            plain_s += time.perf_counter() - start
    assert log_bytes == plain_bytes, f"log read {log_bytes} bytes, plain {plain_bytes}"
    return read_s, plain_s


def _timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start
