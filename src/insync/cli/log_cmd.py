"""`insync log dump PATH`: print segments, indexes or a partition directory the way `kafka-dump-log.sh` does.

A `.log` file prints one line per batch (Kafka's field names and order); `--print-data-log` adds one `|` line per
record (for a transaction marker, its type and coordinator epoch in place of key and payload, as Kafka prints it).
The walk is `storage.segment.BatchScan` without CRC checks, so a batch whose CRC is wrong still prints, with
`isvalid: false`; where the structure itself breaks (torn write, garbage) the rest of the file is reported as one
`corrupt region at position P: N bytes: <reason>` line. `.index` and `.timeindex` files print their entries; a
directory prints each of its segment files in offset order, after the log cleaner's checkpoint of the partition
when it has one (the segments below it are cleaned; a cleaned batch whose tombstones or marker were kept shows its
`deleteHorizonMs`). Damage is output, not an error: the exit status is 0 unless PATH cannot be read.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TextIO

from insync.errors import KafkaException
from insync.protocol.control_records import COMMIT, marker_info
from insync.protocol.records import BatchHeader, crc_is_valid, decode_records, parse_header
from insync.storage.checkpoint import CLEANER_OFFSET_CHECKPOINT, CheckpointError, read_offset_checkpoint
from insync.storage.disk import RealDisk
from insync.storage.index import OFFSET_ENTRY, TIME_ENTRY
from insync.storage.log_manager import tp_of
from insync.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, BatchScan

_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("log", help="inspect log segments on disk")
    commands = parser.add_subparsers(dest="log_command", metavar="COMMAND")
    commands.required = True
    dump = commands.add_parser("dump", help="print the batches of a segment file or partition directory")
    dump.add_argument("path", help="a .log, .index or .timeindex file, or a partition directory")
    dump.add_argument("--print-data-log", action="store_true", help="also print every record")
    dump.set_defaults(func=run_dump)


def run_dump(args: argparse.Namespace) -> int:
    dump_path(args.path, args.print_data_log, sys.stdout)
    return 0


def dump_path(path: str, print_data_log: bool, out: TextIO) -> None:
    disk = RealDisk()
    try:
        if os.path.isdir(path):
            names = sorted(n for n in os.listdir(path) if n.endswith((LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)))
            _print_cleaner_checkpoint(disk, path, out)
            for name in names:
                _dump_file(disk, os.path.join(path, name), print_data_log, out)
        else:
            _dump_file(disk, path, print_data_log, out)
    finally:
        disk.close()


def _print_cleaner_checkpoint(disk: RealDisk, path: str, out: TextIO) -> None:
    """Where the log cleaner's checkpoint (at the log dir's root) puts a compacted partition: the segments below
    its first dirty offset are cleaned."""
    tp = tp_of(os.path.basename(os.path.normpath(path)))
    checkpoint = os.path.join(os.path.dirname(os.path.normpath(path)), CLEANER_OFFSET_CHECKPOINT)
    if tp is None or not os.path.exists(checkpoint):
        return
    try:
        first_dirty = read_offset_checkpoint(disk, checkpoint).get(tp)
    except CheckpointError as exc:
        print(f"{CLEANER_OFFSET_CHECKPOINT}: unreadable: {exc}", file=out)
        return
    if first_dirty is not None:
        print(f"Cleaned below offset {first_dirty} ({CLEANER_OFFSET_CHECKPOINT}); first dirty offset: {first_dirty}",
              file=out)


def _dump_file(disk: RealDisk, path: str, print_data_log: bool, out: TextIO) -> None:
    print(f"Dumping {path}", file=out)
    if path.endswith(INDEX_SUFFIX):
        _dump_entries(disk, path, OFFSET_ENTRY.size, out, _offset_entry_line)
    elif path.endswith(TIME_INDEX_SUFFIX):
        _dump_entries(disk, path, TIME_ENTRY.size, out, _time_entry_line)
    else:
        _dump_segment(disk, path, print_data_log, out)


def _base_offset_of(path: str) -> int:
    stem = os.path.basename(path).split(".", 1)[0]
    return int(stem) if stem.isdigit() else 0


def _offset_entry_line(base_offset: int, raw: bytes) -> str:
    relative, position = OFFSET_ENTRY.unpack(raw)
    return f"offset: {base_offset + relative} position: {position}"


def _time_entry_line(base_offset: int, raw: bytes) -> str:
    timestamp, relative = TIME_ENTRY.unpack(raw)
    return f"timestamp: {timestamp} offset: {base_offset + relative}"


def _dump_entries(disk: RealDisk, path: str, entry_size: int, out: TextIO,
                  line: Callable[[int, bytes], str]) -> None:
    raw = disk.read_file(path)
    base_offset = _base_offset_of(path)
    whole = len(raw) - len(raw) % entry_size
    for position in range(0, whole, entry_size):
        print(line(base_offset, raw[position : position + entry_size]), file=out)
    if whole < len(raw):
        print(f"corrupt region at position {whole}: {len(raw) - whole} bytes: partial index entry", file=out)


def _dump_segment(disk: RealDisk, path: str, print_data_log: bool, out: TextIO) -> None:
    size = disk.size(path)
    print(f"Log starting offset: {_base_offset_of(path)}", file=out)
    scan = BatchScan(disk, path, 0, size, verify_crc=False)
    for position, header in scan:
        batch = disk.pread(path, position, header.size)
        valid = crc_is_valid(batch, 0, header)
        print(_batch_line(position, header, valid), file=out)
        if print_data_log:
            _dump_records(batch, out)
    if scan.error is not None:
        print(f"corrupt region at position {scan.valid_end}: {size - scan.valid_end} bytes: {scan.error}", file=out)


def _batch_line(position: int, header: BatchHeader, valid: bool) -> str:
    codec = _CODECS[header.attributes & 0x07] if header.attributes & 0x07 < len(_CODECS) else "unknown"
    time_type = "LogAppendTime" if header.timestamp_type else "CreateTime"
    # Set by the log cleaner on a batch whose tombstones it kept (Java's OptionalLong, as Kafka prints it).
    horizon = "OptionalLong.empty" if header.delete_horizon_ms is None else f"OptionalLong[{header.delete_horizon_ms}]"
    return (f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.record_count} "
            f"baseSequence: {header.base_sequence} lastSequence: {header.last_sequence} "
            f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
            f"partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"isTransactional: {str(header.is_transactional).lower()} isControl: {str(header.is_control).lower()} "
            f"deleteHorizonMs: {horizon} position: {position} {time_type}: {header.max_timestamp} size: {header.size} magic: {header.magic} "
            f"compresscodec: {codec} crc: {header.crc} isvalid: {str(valid).lower()}")


def _dump_records(batch: bytes, out: TextIO) -> None:
    try:
        records = decode_records(batch)
    except KafkaException as exc:
        print(f"| records could not be decoded: {exc.detail or exc}", file=out)
        return
    control = parse_header(batch).is_control
    for record in records:
        contents = _control_contents(batch) if control else _contents(record.key, record.value)
        print(f"| offset: {record.offset} CreateTime: {record.timestamp} "
              f"keySize: {-1 if record.key is None else len(record.key)} "
              f"valueSize: {-1 if record.value is None else len(record.value)} "
              f"headerKeys: [{','.join(k for k, _ in record.headers)}] {contents}", file=out)


def _contents(key: bytes | None, value: bytes | None) -> str:
    shown = [b.decode("utf-8", "replace") if b is not None else "null" for b in (key, value)]
    return f"key: {shown[0]} payload: {shown[1]}"


def _control_contents(batch: bytes) -> str:
    """A control record as Kafka prints one: a transaction marker's type and coordinator epoch."""
    marker = marker_info(batch)
    if marker is None:
        return "controlType: UNKNOWN"
    kind, coordinator_epoch = marker
    return f"endTxnMarker: {'COMMIT' if kind == COMMIT else 'ABORT'} coordinatorEpoch: {coordinator_epoch}"

