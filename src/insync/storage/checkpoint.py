"""Kafka's checkpoint files: small text files replaced atomically.

Format (Kafka's `CheckpointFile`): line 1 the version `0`, line 2 the number of entries, then one entry a
line. Offset checkpoints (`replication-offset-checkpoint`, `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`) hold `topic partition offset`; `leader-epoch-checkpoint` holds
`epoch start_offset`. A write goes to `<file>.tmp`, is fsynced, then renamed over the file, so a crash leaves
either the old or the new file, never a mix.

Reading is strict: a missing file is an empty checkpoint, but a wrong version, a count that disagrees with the
lines, a malformed or negative number, or a duplicate key raises `CheckpointError` naming the file and the line.
Callers choose the safe default (see `log_manager.py` and `log.py`); nothing here guesses an offset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from insync.limits import CHECKPOINT_BYTES_MAX, CHECKPOINT_ENTRIES_MAX
from insync.storage.disk import Disk
from insync.types import TopicPartition

CHECKPOINT_VERSION = 0
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"  # the log cleaner's first dirty offset of each compacted log


class CheckpointError(ValueError):
    """A checkpoint file is truncated or garbled. `line` is 1-based (0 when the whole file is at fault)."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        super().__init__(f"{path}: line {line}: {reason}" if line else f"{path}: {reason}")


def write_offset_checkpoint(disk: Disk, path: str, offsets: Mapping[TopicPartition, int],
                            rendered: OffsetLines | None = None) -> None:
    """`rendered`: the lines of this file's last write, kept by the caller, so that only the entries that changed
    since are formatted again (a broker of 10,000 partitions rewrites its high watermarks every few seconds)."""
    lines = (rendered or OffsetLines()).update(offsets)
    _write_bytes(disk, path, _render(lines))


class OffsetLines:
    """An offset checkpoint's entry lines, in key order, updated where the offsets changed."""

    def __init__(self) -> None:
        self._offsets: dict[TopicPartition, int] = {}
        self._index: dict[TopicPartition, int] = {}
        self._lines: list[str] = []

    def update(self, offsets: Mapping[TopicPartition, int]) -> list[str]:
        if offsets.keys() != self._offsets.keys():
            order = sorted(offsets)
            self._index = {tp: i for i, tp in enumerate(order)}
            self._lines = [_offset_line(tp, offsets[tp]) for tp in order]
        else:
            for tp, offset in offsets.items():
                if self._offsets[tp] != offset:
                    self._lines[self._index[tp]] = _offset_line(tp, offset)
        self._offsets = dict(offsets)
        return self._lines

    @property
    def offsets(self) -> Mapping[TopicPartition, int]:
        """What the lines say."""
        return self._offsets


def _offset_line(tp: TopicPartition, offset: int) -> str:
    assert " " not in tp.topic and tp.partition >= 0 and offset >= 0, (tp, offset)
    return f"{tp.topic} {tp.partition} {offset}"


def read_offset_checkpoint(disk: Disk, path: str) -> dict[TopicPartition, int]:
    result: dict[TopicPartition, int] = {}
    for number, fields in _read(disk, path, 3):
        tp = TopicPartition(fields[0], _number(path, number, fields[1]))
        if tp in result:
            raise CheckpointError(path, number, f"duplicate entry for {tp}")
        result[tp] = _number(path, number, fields[2])
    return result


def write_epoch_checkpoint(disk: Disk, path: str, entries: Iterable[tuple[int, int]]) -> None:
    _write(disk, path, (f"{epoch} {start_offset}" for epoch, start_offset in entries))


def epoch_checkpoint_bytes(entries: Iterable[tuple[int, int]]) -> bytes:
    """What `write_epoch_checkpoint` writes, for `Disk.replace_files`."""
    return _render(f"{epoch} {start_offset}" for epoch, start_offset in entries)


def read_epoch_checkpoint(disk: Disk, path: str) -> list[tuple[int, int]]:
    """(epoch, start_offset) entries; both must increase strictly from line to line."""
    entries: list[tuple[int, int]] = []
    for number, fields in _read(disk, path, 2):
        entry = (_number(path, number, fields[0]), _number(path, number, fields[1]))
        if entries and (entry[0] <= entries[-1][0] or entry[1] < entries[-1][1]):
            raise CheckpointError(path, number, f"entry {entry} does not follow {entries[-1]}")
        entries.append(entry)
    return entries


def _write(disk: Disk, path: str, lines: Iterable[str]) -> None:
    _write_bytes(disk, path, _render(lines))


def _write_bytes(disk: Disk, path: str, content: bytes) -> None:
    tmp = path + ".tmp"
    disk.write_file(tmp, content)
    disk.fsync(tmp)
    disk.rename(tmp, path)


def _render(lines: Iterable[str]) -> bytes:
    body = list(lines)
    assert len(body) <= CHECKPOINT_ENTRIES_MAX
    return ("\n".join([str(CHECKPOINT_VERSION), str(len(body)), *body]) + "\n").encode()


def _read(disk: Disk, path: str, field_count: int) -> list[tuple[int, list[str]]]:
    """(line number, fields) of each entry, after checking the header and the entry count."""
    if not disk.exists(path):
        return []
    raw = disk.read_file(path)
    if len(raw) > CHECKPOINT_BYTES_MAX:
        raise CheckpointError(path, 0, f"file is {len(raw)} bytes, more than {CHECKPOINT_BYTES_MAX}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(path, raw.count(b"\n", 0, exc.start) + 1, "not UTF-8 text") from None
    if text and not text.endswith("\n"):
        raise CheckpointError(path, text.count("\n") + 1, "last line is not terminated (truncated file?)")
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointError(path, len(lines) + 1, "missing version or entry count (truncated file?)")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointError(path, 1, f"unsupported version {lines[0]!r}, expected {CHECKPOINT_VERSION}")
    count = _number(path, 2, lines[1].strip())
    if count > CHECKPOINT_ENTRIES_MAX:
        raise CheckpointError(path, 2, f"entry count {count} exceeds {CHECKPOINT_ENTRIES_MAX}")
    if len(lines) - 2 != count:
        # Name the first missing line, or the first line beyond the count.
        at = len(lines) + 1 if len(lines) - 2 < count else count + 3
        raise CheckpointError(path, at, f"expected {count} entries, found {len(lines) - 2}")
    entries: list[tuple[int, list[str]]] = []
    for number, line in enumerate(lines[2:], start=3):
        fields = line.split()
        if len(fields) != field_count:
            raise CheckpointError(path, number, f"expected {field_count} fields, got {line!r}")
        entries.append((number, fields))
    return entries


def _number(path: str, line: int, text: str) -> int:
    # Rejects signs, blanks and non-ASCII digits: offsets and epochs are never negative.
    if not (text.isascii() and text.isdigit()):
        raise CheckpointError(path, line, f"expected a non-negative integer, got {text!r}")
    return int(text)
