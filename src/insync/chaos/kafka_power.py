"""A power loss on a Kafka node, made from outside: SIGKILL, then every partition's log loses what Kafka had not
flushed, as far as Kafka itself knows.

Kafka does not fsync on acknowledgement (its default, like insync's); it flushes a segment when it rolls, and every
`log.flush.offset.checkpoint.interval.ms` records the offset below which all is flushed in the log directory's
`recovery-point-offset-checkpoint`. A power cut may take anything above that point, so this takes all of it: each
segment from the recovery point on is cut at the first batch at or past it, later segments and their index files
go, and the node restarts into Kafka's own recovery of an unclean shutdown. The worst case a power cut allows,
and the one insync's `power.crash` makes from its journal of syncs.
"""

from __future__ import annotations

import signal
import struct
from pathlib import Path

from insync.chaos import cluster

CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
CHECKPOINT_VERSION = 0
LOG_SUFFIX = ".log"
SEGMENT_FILES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
_BATCH_HEADER = struct.Struct(">qi")  # base offset, batch length (after these 12 bytes)
BATCHES_MAX = 10_000_000  # a segment of 1 GB holds far fewer


def crash(spec: cluster.ClusterSpec, node_id: int) -> cluster.ClusterSpec:
    """Kill Kafka node `node_id` and cut its logs back to its recovery points; it stays down (restart it later)."""
    spec = cluster.stop_node(spec, node_id, deadline_s=0, sig=signal.SIGKILL)
    node = next(n for n in spec.nodes if n.node_id == node_id)
    lose_unflushed(node.log_dir)
    return spec


def recovery_points(log_dir: Path) -> dict[str, int]:
    """Partition directory name (`topic-N`) -> its recovery point, from the checkpoint Kafka writes."""
    path = log_dir / CHECKPOINT_FILE
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    if not lines:
        return {}  # none yet: Kafka creates the file empty and first writes it after a flush interval
    assert int(lines[0]) == CHECKPOINT_VERSION, f"{path}: unknown checkpoint version {lines[0]}"
    points = {}
    for line in lines[2:2 + int(lines[1])]:
        topic, partition, offset = line.rsplit(" ", 2)
        points[f"{topic}-{partition}"] = int(offset)
    return points


def lose_unflushed(log_dir: Path) -> dict[str, int]:
    """Cut every partition of `log_dir` back to its recovery point (0 where the checkpoint has none); returns the
    bytes each partition lost."""
    points = recovery_points(log_dir)
    lost = {}
    for partition in sorted(p for p in log_dir.iterdir() if p.is_dir() and any(p.glob(f"*{LOG_SUFFIX}"))):
        lost[partition.name] = _cut(partition, points.get(partition.name, 0))
    return lost


def _cut(partition: Path, recovery_point: int) -> int:
    segments = sorted(partition.glob(f"*{LOG_SUFFIX}"), key=lambda p: int(p.stem))
    lost = 0
    for segment in segments:
        base = int(segment.stem)
        later = [s for s in segments if int(s.stem) > base]
        if later and int(later[0].stem) <= recovery_point:
            continue  # wholly below the recovery point: flushed
        keep = _position_of(segment, recovery_point) if base < recovery_point else 0
        lost += segment.stat().st_size - keep
        if keep == 0 and base > 0 and base >= recovery_point:
            for suffix in SEGMENT_FILES:
                segment.with_suffix(suffix).unlink(missing_ok=True)
            continue
        with segment.open("r+b") as f:
            f.truncate(keep)
        for suffix in (".index", ".timeindex"):  # rebuilt by Kafka's recovery
            segment.with_suffix(suffix).unlink(missing_ok=True)
    return lost


def _position_of(segment: Path, offset: int) -> int:
    """The byte position of the first batch of `segment` whose base offset is at or past `offset` (its end when
    none is)."""
    data = segment.read_bytes()
    position = 0
    for _ in range(BATCHES_MAX):
        if position + _BATCH_HEADER.size > len(data):
            return position
        base, length = _BATCH_HEADER.unpack_from(data, position)
        if base >= offset or length <= 0:
            return position
        position += _BATCH_HEADER.size + length
    raise AssertionError(f"{segment}: more than {BATCHES_MAX} batches")
