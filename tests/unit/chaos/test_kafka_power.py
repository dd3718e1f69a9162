"""A power loss on a Kafka node: its logs cut back to the recovery points Kafka checkpointed (chaos/kafka_power.py)."""

from __future__ import annotations

import struct
from pathlib import Path

from insync.chaos import kafka_power


def _batch(base_offset: int, records: int) -> bytes:
    """A batch as far as the cut reads it: base offset, length, and a body of that length."""
    body = bytes(49) + bytes(10 * records)
    return struct.pack(">qi", base_offset, len(body)) + body


def _partition(log_dir: Path, name: str, segments: dict[int, list[tuple[int, int]]]) -> Path:
    directory = log_dir / name
    directory.mkdir(parents=True)
    for base, batches in segments.items():
        stem = f"{base:020d}"
        (directory / f"{stem}.log").write_bytes(b"".join(_batch(o, n) for o, n in batches))
        (directory / f"{stem}.index").write_bytes(bytes(8))
        (directory / f"{stem}.timeindex").write_bytes(bytes(12))
    return directory


def test_the_recovery_points_come_from_kafkas_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n2\nmy-topic 0 20\nmy-topic 1 0\n")
    assert kafka_power.recovery_points(tmp_path) == {"my-topic-0": 20, "my-topic-1": 0}
    assert kafka_power.recovery_points(tmp_path / "none") == {}
    (tmp_path / "recovery-point-offset-checkpoint").write_text("")  # as Kafka first creates it
    assert kafka_power.recovery_points(tmp_path) == {}


def test_what_kafka_had_not_flushed_is_gone_and_the_rest_kept(tmp_path: Path) -> None:
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n2\nt 0 25\nt 1 0\n")
    flushed = _partition(tmp_path, "t-0", {0: [(0, 10), (10, 10)], 20: [(20, 5), (25, 5), (30, 5)], 35: [(35, 5)]})
    never = _partition(tmp_path, "t-1", {0: [(0, 3)]})
    before = (flushed / f"{0:020d}.log").read_bytes()
    lost = kafka_power.lose_unflushed(tmp_path)
    assert (flushed / f"{0:020d}.log").read_bytes() == before  # wholly below the recovery point
    assert (flushed / f"{20:020d}.log").read_bytes() == _batch(20, 5)  # cut at the first batch from 25
    assert not (flushed / f"{20:020d}.index").exists()  # Kafka's recovery rebuilds it
    assert not (flushed / f"{35:020d}.log").exists() and not (flushed / f"{35:020d}.timeindex").exists()
    assert (never / f"{0:020d}.log").read_bytes() == b""  # nothing flushed yet: the first segment stays, empty
    assert lost == {"t-0": len(_batch(25, 5)) + len(_batch(30, 5)) + len(_batch(35, 5)), "t-1": len(_batch(0, 3))}
