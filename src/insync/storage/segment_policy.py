"""When a log rolls its active segment and which of its oldest segments retention deletes: Kafka's rules over a
partition's segments (`LogSegment.shouldRoll`, `UnifiedLog.deletableSegments`), as pure functions of the segments,
the topic's settings and the time. The log applies them; nothing here changes a segment. Where Kafka leaves
room: time rolls and retention without timestamps count from the segment's creation or load.
"""

from __future__ import annotations

from collections.abc import Sequence

from insync.config import LogConfig
from insync.storage.index import RELATIVE_OFFSET_MAX
from insync.storage.segment import LogSegment


def should_roll(active: LogSegment, config: LogConfig, now_ms: int, incoming_bytes: int,
                last_offset: int | None) -> bool:
    """Whether the active segment must be sealed before an append of `incoming_bytes` ending at `last_offset`:
    it would pass `segment.bytes`, is older than `segment.ms`, has a full index, or could not index `last_offset`
    relative to its base. An empty segment never rolls."""
    assert incoming_bytes >= 0, incoming_bytes
    if active.size == 0:
        return False
    return (active.size + incoming_bytes > config.segment_bytes
            or now_ms - active.created_ms > config.segment_ms
            or active.index_full(config.index_size_max_bytes)
            or (last_offset is not None and last_offset - active.base_offset > RELATIVE_OFFSET_MAX))


def retention_deletable(segments: Sequence[LogSegment], config: LogConfig, now_ms: int, high_watermark: int) -> int:
    """How many of the oldest segments retention deletes: each past `retention.ms` (its newest record's
    timestamp) or within the bytes over `retention.bytes`, up to the first that is not, or that holds offsets
    at or above the high watermark, or is the active one and empty."""
    assert segments, "a log has at least its active segment"
    log_end_offset = segments[-1].next_offset
    assert high_watermark <= log_end_offset, (high_watermark, log_end_offset)
    retention_ms, retention_bytes = config.retention_ms, config.retention_bytes
    excess_bytes = sum(segment.size for segment in segments) - retention_bytes if retention_bytes >= 0 else -1
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        upper = log_end_offset if last else segments[index + 1].base_offset
        if upper > high_watermark or (last and segment.size == 0):
            return index
        last_ms = segment.max_timestamp if segment.max_timestamp >= 0 else segment.created_ms
        expired = retention_ms >= 0 and now_ms - last_ms > retention_ms
        if not expired and excess_bytes < segment.size:
            return index
        excess_bytes -= segment.size
    return len(segments)
