"""`insync log dump`: kafka-dump-log.sh style lines, corrupt regions reported, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from insync.cli.main import main
from insync.config import LogConfig
from insync.protocol.control_records import marker_batch
from insync.protocol.records import build_batch
from insync.storage.log import Log


def make_log(tmp_path: Path) -> Path:
    directory = tmp_path / "orders-0"
    log = Log.open(directory, LogConfig(index_interval_bytes=10))
    log.append_as_leader(build_batch([(b"k1", b"hello"), (b"k2", b"world")], base_timestamp=1_700_000_000_000),
                         leader_epoch=3)
    log.append_as_leader(build_batch([(None, b"x")], base_timestamp=1_700_000_000_500), leader_epoch=3)
    log.close()
    return directory


def test_dump_segment_prints_one_line_per_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    segment = make_log(tmp_path) / "00000000000000000000.log"
    assert main(["log", "dump", str(segment)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"Dumping {segment}"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 "
                               "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false "
                               "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: "
                               "1700000000000 size: ")
    assert lines[2].endswith("isvalid: true") and "compresscodec: none" in lines[2]
    assert lines[3].startswith("baseOffset: 2 lastOffset: 2 count: 1 ")
    assert len(lines) == 4


def test_dump_directory_with_records_and_indexes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = make_log(tmp_path)
    assert main(["log", "dump", str(directory), "--print-data-log"]) == 0
    out = capsys.readouterr().out
    assert "| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 5 headerKeys: [] key: k1 payload: hello" in out
    assert "| offset: 2 CreateTime: 1700000000500 keySize: -1 valueSize: 1 headerKeys: [] key: null payload: x" in out
    assert "00000000000000000000.index" in out and "offset: 2 position: " in out
    assert "timestamp: 1700000000500 offset: 2" in out


def test_dump_shows_what_the_cleaner_did(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from insync.storage.checkpoint import CLEANER_OFFSET_CHECKPOINT, write_offset_checkpoint
    from insync.storage.disk import RealDisk
    from insync.types import TopicPartition

    directory = tmp_path / "orders-0"
    log = Log.open(directory, LogConfig())
    log.append_as_leader(build_batch([(b"k", None)], base_timestamp=1), leader_epoch=0)
    header = log.batch_header(0)
    assert header is not None
    from insync.protocol.records import decode_records, rebuild_batch

    cleaned = rebuild_batch(header, decode_records(log.read(0, 1000).records), delete_horizon_ms=86_400_001)
    log.close()
    (directory / "00000000000000000000.log").write_bytes(cleaned)
    disk = RealDisk()
    write_offset_checkpoint(disk, str(tmp_path / CLEANER_OFFSET_CHECKPOINT), {TopicPartition("orders", 0): 1})
    disk.close()
    assert main(["log", "dump", str(directory)]) == 0
    out = capsys.readouterr().out
    assert "Cleaned below offset 1 (cleaner-offset-checkpoint); first dirty offset: 1" in out
    assert "deleteHorizonMs: OptionalLong[86400001]" in out


def test_dump_reports_corruption_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    segment = make_log(tmp_path) / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0xFF  # CRC of the second batch no longer matches
    segment.write_bytes(bytes(data) + b"\x00\x00\x00\x00\x00\x00\x00\x09\xff\xff\xff\x00" + b"garbage" * 20)
    assert main(["log", "dump", str(segment)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[3].startswith("baseOffset: 2 ") and lines[3].endswith("isvalid: false")
    assert lines[4].startswith(f"corrupt region at position {len(data)}: 152 bytes: ")


def test_dump_missing_path_is_an_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log", "dump", str(tmp_path / "nope.log")]) == 1
    assert "insync: error:" in capsys.readouterr().err


def test_dump_prints_a_transaction_marker_as_kafka_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = tmp_path / "orders-0"
    log = Log.open(directory, LogConfig())
    log.append_as_leader(marker_batch(7, 1, 4, False, 1_700_000_000_000), leader_epoch=0, from_client=False)
    log.close()
    assert main(["log", "dump", str(directory), "--print-data-log"]) == 0
    out = capsys.readouterr().out
    assert "producerId: 7 producerEpoch: 1 " in out and "isTransactional: true isControl: true " in out
    assert "| offset: 0 CreateTime: 1700000000000 keySize: 4 valueSize: 6 headerKeys: [] endTxnMarker: ABORT " \
           "coordinatorEpoch: 4" in out
