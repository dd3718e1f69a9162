"""What the clients of a simulation saw: every acknowledgement, every error, every committed read.

Producers write batches whose header carries a unique identity, `(producer_id, base_sequence)` (the values of
their records are unique too, so a person reading a log can find them). The checker compares this history with
the replicas' logs at the end of a run: an acks=all acknowledgement whose batch is missing is a lost write; a
batch found twice is a duplicate (a retry of a write that had in fact succeeded); a batch a consumer read below
the high watermark that later vanished or moved is committed data lost.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from insync.types import Offset, TopicPartition

BatchId = tuple[int, int]  # (producer_id, base_sequence)

# Acknowledgements and reads remembered per run; a run beyond this is misconfigured for the simulator.
ACKS_REMEMBERED_MAX = 5_000_000


@dataclass(frozen=True, slots=True)
class Ack:
    topic_partition: TopicPartition
    batch_id: BatchId
    base_offset: Offset
    record_count: int
    acks: int
    ts_ms: int


@dataclass(slots=True)
class History:
    acks: list[Ack] = field(default_factory=list)
    produce_errors: Counter[str] = field(default_factory=Counter)
    failed_batches: int = 0
    records_acked: int = 0
    # (topic_partition, base_offset) -> batch id, as read by consumers below the high watermark.
    consumed: dict[tuple[TopicPartition, int], BatchId] = field(default_factory=dict)
    consumed_conflicts: list[str] = field(default_factory=list)

    def record_ack(self, ack: Ack) -> None:
        assert len(self.acks) < ACKS_REMEMBERED_MAX, "too many acknowledgements for one simulation"
        assert ack.acks in (1, -1), ack
        self.acks.append(ack)
        self.records_acked += ack.record_count

    def record_error(self, error_name: str) -> None:
        self.produce_errors[error_name] += 1

    def record_consumed(self, topic_partition: TopicPartition, base_offset: int, batch_id: BatchId) -> None:
        """A consumer read this batch at this offset below the HW; reading it again elsewhere is a conflict."""
        key = (topic_partition, base_offset)
        previous = self.consumed.get(key)
        if previous is None:
            assert len(self.consumed) < ACKS_REMEMBERED_MAX
            self.consumed[key] = batch_id
        elif previous != batch_id:
            self.consumed_conflicts.append(
                f"{topic_partition} offset {base_offset}: consumed batch {previous} then {batch_id}")
