"""The part of `insync.storage.log.Log` that replication uses, as a structural type.

Replication is written against this protocol, not the concrete class, so its contract with storage is
visible in one place: offsets, the leader epoch cache (OffsetsForLeaderEpoch answers, and the start of a
new leader's epoch), leader and follower appends, reads, truncations and log start movement. Offsets are
plain ints here; storage raises `KafkaException(OFFSET_OUT_OF_RANGE)` for reads outside
[log_start_offset, log_end_offset].
"""

from __future__ import annotations

from typing import Protocol


class AppendInfoView(Protocol):
    @property
    def first_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def record_count(self) -> int: ...


class ReadResultView(Protocol):
    @property
    def records(self) -> bytes: ...

    @property
    def next_offset(self) -> int: ...


class TimestampAndOffsetView(Protocol):
    @property
    def timestamp(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def leader_epoch(self) -> int: ...


class EpochCacheView(Protocol):
    def assign(self, epoch: int, start_offset: int) -> None: ...

    @property
    def epoch_entries(self) -> list[tuple[int, int]]: ...


class LogView(Protocol):
    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def leader_epoch_cache(self) -> EpochCacheView: ...

    def latest_epoch(self) -> int | None: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetsForLeaderEpoch answers it; (-1, -1) when nothing is known."""
        ...

    def append_as_leader(self, records: bytes, leader_epoch: int, *, from_client: bool = True) -> AppendInfoView:
        """`from_client` False: a coordinator's batch (markers, transactional offset commits)."""
        ...

    def append_as_follower(self, records: bytes) -> AppendInfoView: ...

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None, *,
             min_one_batch: bool = True) -> ReadResultView: ...

    def truncate_to(self, offset: int) -> None: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...

    def delete_records_before(self, offset: int) -> int: ...

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffsetView | None: ...

    def max_timestamp_and_offset(self) -> TimestampAndOffsetView | None: ...
