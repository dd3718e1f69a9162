"""Where the controller keeps its metadata records: a three-method interface and two implementations.

`MetadataStore` is all the controller needs: `load()` the records of earlier runs, `append(records)` a batch
durably before it is applied, `close()`. `MemoryStore` serves the simulator and tests. `LocalFileStore` is
`metadata.store=local`: one JSON-lines file, one line per batch (`{"crc": <crc32c of the records' canonical
JSON>, "records": [...]}`), which makes a batch atomic: a crash can only tear the last line, and a torn last line
is dropped on load with a log line and cut off the file, so the next append starts on a clean line. A damaged
line anywhere else is corruption, and loading fails naming the line. Each append is fsynced before it returns.
The file store does its I/O through storage's `Disk`, so the controller core never touches a file itself and
the simulator can run it on a `MemoryDisk` and crash it. The ZooKeeper store, which blocks on a network client
and threads, is a driver's concern: `server/zk_store.py`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import crc32c

from insync.metadata.records import Record, RecordError, record_from_dict
from insync.storage.disk import Disk, RealDisk

log = logging.getLogger(__name__)

METADATA_FILE = "metadata.jsonl"


class MetadataStoreError(Exception):
    """The stored metadata cannot be read; the message names the file and line."""


class ControllerFencedError(Exception):
    """A shared store (ZooKeeper) refused an append because another controller was elected, or this one's
    session is gone: this controller must stop acting. Nothing of the refused batch is stored."""


class MetadataStore(Protocol):
    def load(self) -> list[Record]: ...

    def append(self, records: Sequence[Record]) -> None: ...

    def close(self) -> None: ...


class MemoryStore:
    """Records in a list; survives a simulated controller restart when the same object is reused."""

    def __init__(self) -> None:
        self._records: list[Record] = []
        self.closed = False

    def load(self) -> list[Record]:
        assert not self.closed
        return list(self._records)

    def append(self, records: Sequence[Record]) -> None:
        assert not self.closed and records
        self._records.extend(records)

    def close(self) -> None:
        self.closed = True


def _canonical(dicts: list[dict[str, Any]]) -> bytes:
    return json.dumps(dicts, sort_keys=True, separators=(",", ":")).encode()


def encode_batch(records: Sequence[Record]) -> bytes:
    dicts = [r.to_dict() for r in records]
    line = {"crc": crc32c.crc32c(_canonical(dicts)), "records": dicts}
    return json.dumps(line, separators=(",", ":")).encode() + b"\n"


def decode_batch(line: bytes) -> list[Record]:
    """The records of one line; raises ValueError (or RecordError) saying what is wrong."""
    data = json.loads(line)
    if not isinstance(data, dict) or not isinstance(data.get("records"), list) or "crc" not in data:
        raise ValueError("not a {crc, records} object")
    if crc32c.crc32c(_canonical(data["records"])) != data["crc"]:
        raise ValueError("CRC mismatch")
    return [record_from_dict(item) for item in data["records"]]


class LocalFileStore:
    """`metadata.jsonl` in `directory`, appended and fsynced one batch per line, through `disk`."""

    def __init__(self, directory: str | Path, disk: Disk | None = None) -> None:
        self._disk: Disk = disk or RealDisk()
        self._owns_disk = disk is None  # a disk it was given outlives the store (a simulated restart reuses it)
        directory = str(directory).rstrip("/") or "/"
        self.path = f"{directory}/{METADATA_FILE}"
        self._disk.mkdir(directory)
        if not self._disk.exists(self.path):
            # Created empty by rename, which makes the new directory entry durable too (see Disk.rename).
            temporary = f"{self.path}.tmp"
            self._disk.write_file(temporary, b"")
            self._disk.fsync(temporary)
            self._disk.rename(temporary, self.path)
        self._loaded = False

    def load(self) -> list[Record]:
        *complete, tail = self._disk.read_file(self.path).split(b"\n")  # tail: bytes after the last newline
        records: list[Record] = []
        good_bytes = 0
        for number, line in enumerate(complete, start=1):
            try:
                records.extend(decode_batch(line))
            except (ValueError, RecordError) as exc:
                if number < len(complete) or tail:
                    raise MetadataStoreError(f"{self.path}: line {number} is corrupt: {exc}") from exc
                self._drop_torn_tail(good_bytes, number, str(exc))
                break
            good_bytes += len(line) + 1
        else:
            if tail:
                self._drop_torn_tail(good_bytes, len(complete) + 1, "no newline at the end")
        self._loaded = True
        return records

    def append(self, records: Sequence[Record]) -> None:
        assert self._loaded, "load() before append(): a torn tail must be cut first"
        assert records
        self._disk.append(self.path, encode_batch(records))
        self._disk.fsync(self.path)

    def close(self) -> None:
        if self._owns_disk and isinstance(self._disk, RealDisk):
            self._disk.close()

    def _drop_torn_tail(self, size: int, line_number: int, why: str) -> None:
        log.warning("%s: dropping torn last line %d left by a crash (%s); keeping %d bytes",
                    self.path, line_number, why, size)
        self._disk.truncate(self.path, size)
        self._disk.fsync(self.path)
