"""The metadata log as brokers see it: ordered records, a published offset, and seed 003's batching of ISR changes.

Every committed record gets the next metadata offset. Brokers read records below the *published offset*
(`records_since`), which only moves forward, always to the end of the log, so brokers see a prefix in order.
It moves (seed 003, REFERENCE 4, ZooKeeper-era Kafka reused for the metadata log):
- at once, for a batch holding anything but ISR-only partition changes (earlier pending ISR changes ride along);
- for ISR-only changes, at a check every `isr.change.propagation.check.interval.ms` (2500), once the last
  change is `isr.change.propagation.blackout.ms` (5000) old, so a burst goes out as one batch, or, so that churn
  cannot starve brokers, once the last publication is `isr.change.propagation.max.interval.ms` (60000) old.
Unlike Kafka's `maybePropagateIsrChanges`, the max-interval rule also needs the oldest pending change to be
blackout-old, so every ISR-only change waits its blackout unless churn is continuous, as seed 003 promises: a
lone change reaches brokers 5 to 7.5 s after it happened, and churn still reaches them every 60 s. A leader
learns the outcome of its ISR proposal from its AlterPartition response, not from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from insync.config import BrokerConfig
from insync.limits import METADATA_LOG_RECORDS_MAX, METADATA_RECORDS_PER_BATCH_MAX
from insync.metadata.records import PartitionChangeRecord, Record


@dataclass(frozen=True, slots=True)
class PropagationConfig:
    check_interval_ms: int = 2500
    blackout_ms: int = 5000
    max_interval_ms: int = 60000

    @staticmethod
    def from_broker_config(config: BrokerConfig) -> PropagationConfig:
        return PropagationConfig(*config.controller.isr_propagation_ms)


@dataclass(frozen=True, slots=True)
class Publication:
    """One propagation: brokers may now read up to `published_offset`; `changes` records became visible."""

    published_offset: int
    changes: int
    immediate: bool


def _is_isr_only(record: Record) -> bool:
    return isinstance(record, PartitionChangeRecord) and record.is_isr_only


class MetadataLog:
    """The controller's ordered records with a published offset; time only arrives as `now_ms`."""

    def __init__(self, config: PropagationConfig, records: Sequence[Record], now_ms: int) -> None:
        assert config.check_interval_ms > 0 and config.blackout_ms >= 0 and config.max_interval_ms >= 0
        assert len(records) <= METADATA_LOG_RECORDS_MAX
        self.config = config
        self._records: list[Record] = list(records)
        self._published_offset = len(self._records)  # what a previous run stored, brokers may read
        self._last_publication_ms = now_ms
        self._first_pending_ms: int | None = None
        self._last_pending_ms: int | None = None
        self._next_check_ms = now_ms + config.check_interval_ms
        self._now_ms = now_ms
        self.propagations = 0

    @property
    def end_offset(self) -> int:
        return len(self._records)

    @property
    def published_offset(self) -> int:
        return self._published_offset

    def next_check_ms(self) -> int:
        return self._next_check_ms

    def append(self, records: Sequence[Record], now_ms: int) -> Publication | None:
        """Add a committed batch; publish at once unless it holds only ISR changes."""
        assert 0 < len(records) <= METADATA_RECORDS_PER_BATCH_MAX, len(records)
        assert len(self._records) + len(records) <= METADATA_LOG_RECORDS_MAX, "metadata log full"
        self._advance(now_ms)
        self._records.extend(records)
        if all(_is_isr_only(r) for r in records):
            if self._first_pending_ms is None:
                self._first_pending_ms = now_ms
            self._last_pending_ms = now_ms
            return None
        return self._publish(now_ms, immediate=True)

    def tick(self, now_ms: int) -> Publication | None:
        """Run the periodic check if it is due; publish pending ISR changes when seed 003's rule says so."""
        self._advance(now_ms)
        if now_ms < self._next_check_ms:
            return None
        interval = self.config.check_interval_ms
        missed = (now_ms - self._next_check_ms) // interval  # a late tick runs one check, not a backlog
        self._next_check_ms += (missed + 1) * interval
        assert self._next_check_ms > now_ms
        if self._first_pending_ms is None or self._last_pending_ms is None:
            return None
        quiet = now_ms - self._last_pending_ms >= self.config.blackout_ms
        overdue = (now_ms - self._last_publication_ms >= self.config.max_interval_ms
                   and now_ms - self._first_pending_ms >= self.config.blackout_ms)
        return self._publish(now_ms, immediate=False) if quiet or overdue else None

    def records_since(self, offset: int, max_records: int) -> tuple[list[tuple[int, Record]], int]:
        """Published records from `offset` on (at most `max_records`), with the published offset.

        A broker passes the number of records it has applied; an offset past the published one (a controller
        that lost its unflushed tail) gets no records, and the broker sees the published offset it must trust.
        """
        assert offset >= 0 and max_records > 0, (offset, max_records)
        end = min(self._published_offset, offset + max_records)
        return [(o, self._records[o]) for o in range(offset, end)], self._published_offset

    def _advance(self, now_ms: int) -> None:
        assert now_ms >= self._now_ms, f"time went backwards: {now_ms} < {self._now_ms}"
        self._now_ms = now_ms

    def _publish(self, now_ms: int, immediate: bool) -> Publication:
        changes = len(self._records) - self._published_offset
        assert changes > 0
        self._published_offset = len(self._records)
        self._last_publication_ms = now_ms
        self._first_pending_ms = self._last_pending_ms = None
        self.propagations += 1
        return Publication(self._published_offset, changes, immediate)
