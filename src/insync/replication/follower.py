"""The follower role of a partition: apply fetched data, and truncate so the log never diverges.

A `Follower` lives while this broker does not lead the partition; its fetcher session drives it, and it holds
the high watermark meanwhile. Its rules never fail a partition for something the protocol explains:
- `append_fetched`: the batches go in as the leader stamped them; the high watermark is the leader's, bounded by
  the local log end. KAFKA-7104 (seed 004), the half Kafka never merged: the leader's log start may be beyond
  what this follower holds, so it is bounded by the local log end instead of failing, and the log restarts empty
  at the leader's log start.
- `truncate_on_divergence` (REFERENCE.md 8): to min(local end of the leader's epoch, leader's end offset, local
  log end); a follower that does not know the leader's epoch truncates to the end of its own largest epoch below
  it and fetches again, one round per epoch (KIP-279).
- `truncate_on_out_of_range`: a follower ahead of the leader's end (after an unclean election) truncates to it;
  one below the leader's log start restarts empty at it; anything else waits for a retry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from insync import errors
from insync.errors import KafkaException
from insync.events import EventType
from insync.protocol.records import parse_header
from insync.replication import producer_state
from insync.replication.log_view import LogView
from insync.replication.messages import EpochEndOffset
from insync.replication.producer_state import ProducerStateTable
from insync.types import UNDEFINED_EPOCH, LeaderEpoch, Offset

Emit = Callable[..., None]  # emit(EventType, **fields): the partition adds time, broker and topic-partition
TimedEmit = Callable[..., None]  # emit(EventType, now_ms, **fields)


class TruncateReason(StrEnum):
    DIVERGING_EPOCH = "diverging_epoch"
    OFFSET_OUT_OF_RANGE = "offset_out_of_range"
    LEADER_LOG_START = "leader_log_start"


@dataclass(frozen=True, slots=True)
class FetchPosition:
    """Where a follower fetches next: its log end offset, the epoch of its last batch, its log start."""

    fetch_offset: Offset
    last_fetched_epoch: LeaderEpoch
    log_start_offset: Offset


class FollowerReplica(Protocol):
    """What a fetcher session needs from a follower partition: a `Follower`, or a test's stand-in."""

    def fetch_position(self) -> FetchPosition: ...

    def append_fetched_records(self, fetch_offset: Offset, records: bytes, leader_high_watermark: Offset,
                               leader_log_start_offset: Offset, now_ms: int) -> FetchPosition: ...

    def truncate_on_divergence(self, diverging_epoch: EpochEndOffset, now_ms: int) -> FetchPosition: ...

    def truncate_on_out_of_range(self, leader_log_start_offset: Offset, leader_log_end_offset: Offset,
                                 leader_high_watermark: Offset, now_ms: int) -> FetchPosition: ...


class Follower:
    def __init__(self, log: LogView, producers: ProducerStateTable, high_watermark: Offset,
                 emit: TimedEmit) -> None:
        """`high_watermark`: the partition's as this broker stops leading (or from its checkpoint)."""
        assert 0 <= high_watermark <= log.log_end_offset, (high_watermark, log.log_end_offset)
        self.log = log
        self.producers = producers
        self.high_watermark = high_watermark
        self._emit = emit
        self._retired = False

    def retire(self) -> Offset:
        """This broker leads now: the follower applies nothing more. Returns the high watermark to lead from."""
        self._retired = True
        return self.high_watermark

    def fetch_position(self) -> FetchPosition:
        return position_of(self.log)

    def append_fetched_records(self, fetch_offset: Offset, records: bytes, leader_high_watermark: Offset,
                               leader_log_start_offset: Offset, now_ms: int) -> FetchPosition:
        assert not self._retired, "a leader never appends fetched records"
        self._set_high_watermark(append_fetched(self.log, fetch_offset, records, leader_high_watermark,
                                                leader_log_start_offset, self._emitter(now_ms)))
        self._sync_producer_state(records)
        return self.fetch_position()

    def truncate_on_divergence(self, diverging_epoch: EpochEndOffset, now_ms: int) -> FetchPosition:
        assert not self._retired, "a leader never truncates on a fetch response"
        self._set_high_watermark(truncate_on_divergence(self.log, diverging_epoch, self.high_watermark,
                                                        self._emitter(now_ms)))
        self._sync_producer_state()
        return self.fetch_position()

    def truncate_on_out_of_range(self, leader_log_start_offset: Offset, leader_log_end_offset: Offset,
                                 leader_high_watermark: Offset, now_ms: int) -> FetchPosition:
        assert not self._retired, "a leader never truncates on a fetch response"
        self._set_high_watermark(truncate_on_out_of_range(
            self.log, leader_log_start_offset, leader_log_end_offset, leader_high_watermark, self.high_watermark,
            self._emitter(now_ms)))
        self._sync_producer_state()
        return self.fetch_position()

    def _set_high_watermark(self, high_watermark: Offset) -> None:
        assert high_watermark <= self.log.log_end_offset, (high_watermark, self.log.log_end_offset)
        self.high_watermark = high_watermark

    def _sync_producer_state(self, appended: bytes = b"") -> None:
        """Followers track producers too, so a new leader answers retries as the old one would. A truncation
        forgets what it cut (a no-op after a plain append: the log only grew)."""
        self.producers.truncate_to(self.log.log_end_offset)
        if appended:
            producer_state.record_batches(self.producers, appended, below_offset=self.log.log_end_offset)

    def _emitter(self, now_ms: int) -> Emit:
        return lambda event_type, **fields: self._emit(event_type, now_ms, **fields)


def position_of(log: LogView) -> FetchPosition:
    latest = log.latest_epoch()
    return FetchPosition(Offset(log.log_end_offset), LeaderEpoch(UNDEFINED_EPOCH if latest is None else latest),
                         Offset(log.log_start_offset))


def append_fetched(log: LogView, fetch_offset: Offset, records: bytes, leader_high_watermark: Offset,
                   leader_log_start_offset: Offset, emit: Emit) -> Offset:
    """Append a fetch response's records and take the leader's offsets. Returns the new high watermark."""
    if fetch_offset != log.log_end_offset:
        raise KafkaException(errors.UNKNOWN_SERVER_ERROR, f"offset mismatch: fetched at {fetch_offset}, "
                             f"log end offset is {log.log_end_offset}")
    if records:
        _restart_at_first_batch_if_needed(log, records)
        log.append_as_follower(records)
    log_end_offset = log.log_end_offset
    if leader_log_start_offset > log_end_offset:
        emit(EventType.LOG_START_BOUNDED, leader_log_start=leader_log_start_offset, local_leo=log_end_offset)
        restart_at(log, leader_log_start_offset, TruncateReason.LEADER_LOG_START, emit)
        return bounded_high_watermark(log, leader_high_watermark)
    high_watermark = bounded_high_watermark(log, leader_high_watermark)
    # Never past this replica's own HW (Kafka's maybeIncrementLogStartOffset refuses that): a leader moves
    # its log start only below its HW, so a larger one is a stale or inconsistent answer to wait out.
    log_start_offset = min(leader_log_start_offset, high_watermark)
    if log_start_offset > log.log_start_offset:
        log.delete_records_before(log_start_offset)
    return high_watermark


def _restart_at_first_batch_if_needed(log: LogView, records: bytes) -> None:
    """An empty log restarted at the leader's log start offset may sit inside a batch (DeleteRecords can end
    mid-batch); the leader then sends the whole batch. As Kafka, restart the empty log at the batch's base."""
    first = parse_header(records, 0)
    empty = log.log_end_offset == log.log_start_offset
    if empty and first.base_offset < log.log_end_offset <= first.last_offset:
        log.truncate_fully_and_start_at(first.base_offset)


def truncate_on_divergence(log: LogView, diverging_epoch: EpochEndOffset, high_watermark: Offset,
                           emit: Emit) -> Offset:
    """Truncate to where this log and the leader's agree (REFERENCE.md 8). Returns the new high watermark."""
    log_end_offset = log.log_end_offset
    if diverging_epoch.end_offset < 0:
        return high_watermark  # the leader knows nothing of the epoch: keep the log, as Kafka does
    local_epoch, local_end = log.end_offset_for_epoch(diverging_epoch.epoch)
    if local_epoch < 0 or local_end < 0:
        target = min(diverging_epoch.end_offset, log_end_offset)
    elif local_epoch != diverging_epoch.epoch:
        target = min(local_end, log_end_offset)  # an epoch unknown here: one more round after this one
    else:
        target = min(local_end, diverging_epoch.end_offset, log_end_offset)
    return truncate(log, Offset(target), high_watermark, TruncateReason.DIVERGING_EPOCH, emit)


def truncate_on_out_of_range(log: LogView, leader_log_start_offset: Offset, leader_log_end_offset: Offset,
                             leader_high_watermark: Offset, high_watermark: Offset, emit: Emit) -> Offset:
    """React to OFFSET_OUT_OF_RANGE (Kafka's `fetchOffsetAndTruncate`). Returns the new high watermark."""
    log_end_offset = log.log_end_offset
    # The leader's end offset, or when it did not say, its high watermark (never beyond its end).
    leader_end = leader_log_end_offset if leader_log_end_offset >= 0 else leader_high_watermark
    if 0 <= leader_end < log_end_offset:
        return truncate(log, leader_end, high_watermark, TruncateReason.OFFSET_OUT_OF_RANGE, emit)
    if leader_log_start_offset > log_end_offset:
        return restart_at(log, leader_log_start_offset, TruncateReason.OFFSET_OUT_OF_RANGE, emit)
    return high_watermark


def truncate(log: LogView, target: Offset, high_watermark: Offset, reason: TruncateReason, emit: Emit) -> Offset:
    before = log.log_end_offset
    # At or past the end the log only drops epoch entries starting at its end (Kafka's truncateTo): a former
    # leader that recorded its epoch but appended nothing would otherwise diverge on every fetch.
    log.truncate_to(target)
    if target >= before:
        return high_watermark
    after = log.log_end_offset
    assert after <= target, (after, target)
    emit(EventType.TRUNCATE, from_offset=before, to_offset=after, reason=str(reason))
    return Offset(min(high_watermark, after))


def restart_at(log: LogView, offset: Offset, reason: TruncateReason, emit: Emit) -> Offset:
    before = log.log_end_offset
    log.truncate_fully_and_start_at(offset)
    assert log.log_start_offset == log.log_end_offset == offset
    emit(EventType.TRUNCATE, from_offset=before, to_offset=offset, reason=str(reason))
    return offset


def bounded_high_watermark(log: LogView, leader_high_watermark: Offset) -> Offset:
    """A follower's high watermark: the leader's, within [log start, log end] of the local log."""
    return Offset(max(log.log_start_offset, min(leader_high_watermark, log.log_end_offset)))
