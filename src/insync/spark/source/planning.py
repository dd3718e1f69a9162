"""How the driver plans a micro-batch's ranges: rate limits, splits, and partitions whose leader does not answer.

A leader that does not answer the driver's ListOffsets (paused, partitioned away, overloaded) within
`kafka.socket.timeout.ms` must not hold up the partitions of the other leaders: the stream reader plans the
partitions whose high watermark it got and keeps the others at their position for this micro-batch, so they are
read, from where they were, in a later one (nothing lost, nothing twice). `Unanswered` remembers which partitions
are being skipped so the log says when a skip starts (with the reason) and when the partition is read again. When
no broker answers the topic listing at all, the batch plans nothing; that goes on for at most
`kafkaConsumer.pollTimeoutMs`, after which the query fails, as Spark's Kafka source fails when it cannot fetch
offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from insync.spark.source.kafka_io import OffsetRange
from insync.types import TopicPartition

log = logging.getLogger(__name__)


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Drop empty ranges; with `minPartitions`, cut large ranges so there are about that many (as Spark does)."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    result: list[OffsetRange] = []
    for r in ranges:
        parts = min(r.size, max(1, round(r.size / total * min_partitions)))
        for i in range(parts):
            # Equal pieces; the first (size % parts) pieces take one offset more.
            start = r.start + i * (r.size // parts) + min(i, r.size % parts)
            end = r.start + (i + 1) * (r.size // parts) + min(i + 1, r.size % parts)
            result.append(OffsetRange(r.topic, r.partition, start, end))
    assert sum(r.size for r in result) == total, (ranges, result)
    return result


def rate_limit(begin: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               max_rows: int) -> dict[TopicPartition, int]:
    """End offsets reading at most about `max_rows`, shared in proportion to each partition's backlog (Spark's
    rule: a share below one offset is rounded up so small partitions are never starved)."""
    assert max_rows > 0, max_rows
    backlog = {tp: latest[tp] - begin[tp] for tp in latest if tp in begin and latest[tp] > begin[tp]}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    end = dict(latest)
    for tp, size in backlog.items():
        share = max_rows * (size / total)
        take = int(share) if share >= 1 else 1
        end[tp] = min(latest[tp], begin[tp] + take)
    return end




class Unanswered:
    """The partitions a stream reader is skipping because their leader did not answer, and since when no broker
    answered at all. Lives as long as the reader (one per query); `now_s` is a monotonic clock."""

    __slots__ = ("poll_timeout_ms", "skipped", "silent_since_s")

    def __init__(self, poll_timeout_ms: int) -> None:
        assert poll_timeout_ms > 0, poll_timeout_ms
        self.poll_timeout_ms = poll_timeout_ms
        self.skipped: dict[TopicPartition, int] = {}  # partition -> micro-batches skipped in a row
        self.silent_since_s: float | None = None

    def hold(self, begin: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
             unanswered: Mapping[TopicPartition, str]) -> dict[TopicPartition, int]:
        """The end offsets to plan: `latest` for the partitions that answered, the position for the others.
        A partition that is new to the query and did not answer is left out: it is planned once it answers."""
        assert not set(latest) & set(unanswered), (latest, unanswered)
        self.silent_since_s = None
        for tp in sorted(set(self.skipped) - set(unanswered)):
            log.warning("insync source: %s answered again; reading it from where it was, after %d micro-batches "
                        "without it", tp, self.skipped.pop(tp))
        for tp, reason in sorted(unanswered.items()):
            if tp not in self.skipped:
                log.warning("insync source: skipping %s in this micro-batch and until its leader answers: %s", tp,
                            reason)
            self.skipped[tp] = self.skipped.get(tp, 0) + 1
        held = {tp: begin[tp] for tp in unanswered if tp in begin}
        return dict(latest) | held

    def nothing(self, reason: str, now_s: float) -> None:
        """No broker answered this micro-batch's planning: it plans nothing. Raises TimeoutError once that has
        lasted `poll_timeout_ms`."""
        if self.silent_since_s is None:
            self.silent_since_s = now_s
            log.warning("insync source: no broker answered; planning nothing until one does: %s", reason)
        silent_ms = (now_s - self.silent_since_s) * 1000
        assert silent_ms >= 0, (now_s, self.silent_since_s)
        if silent_ms >= self.poll_timeout_ms:
            raise TimeoutError(f"no broker answered the insync source for {silent_ms / 1000:.0f} s "
                               f"(kafkaConsumer.pollTimeoutMs={self.poll_timeout_ms}): {reason}")
