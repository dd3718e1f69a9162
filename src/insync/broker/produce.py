"""Produce requests: append on the leader, answer by acks, and hold acks=all answers in a purgatory.

acks=0 gets no answer at all; acks=1 is answered after the leader's append; acks=all (-1) is answered when
every partition of the request is done (`Partition.produce_status`): the high watermark passed the batch (NONE,
or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min ISR meanwhile), leadership moved
(NOT_LEADER_OR_FOLLOWER), or the request's `timeout_ms` expired (REQUEST_TIMED_OUT). Kafka's DelayedProduce.

The purgatory is checked when something may have completed a wait (the high watermark of a partition advanced,
or leadership changed) and at its earliest deadline; it is bounded by `limits.PURGATORY_ENTRIES_MAX`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from insync import errors
from insync.broker.messages import Address, Outgoing, PartitionProduceResult, ProduceRequest, ProduceResponse
from insync.errors import KafkaError, KafkaException
from insync.limits import PURGATORY_ENTRIES_MAX
from insync.replication.partition import Partition
from insync.replication.results import ProduceWait
from insync.types import Offset, TopicPartition

NO_OFFSET = Offset(-1)


@dataclass(slots=True)
class DelayedProduce:
    source: Address
    correlation_id: int
    deadline_ms: int
    results: dict[TopicPartition, PartitionProduceResult]
    waits: dict[TopicPartition, ProduceWait] = field(default_factory=dict)


@dataclass(slots=True)
class ProduceOutcome:
    outgoing: list[Outgoing]
    advanced: list[TopicPartition]  # partitions whose high watermark moved (acks=1 with a single replica)
    appended: dict[TopicPartition, int]  # bytes each partition took (parked follower fetches may complete)


class ProduceHandler:
    def __init__(self, partitions: Callable[[TopicPartition], Partition | None]) -> None:
        self._partitions = partitions
        self._delayed: list[DelayedProduce] = []
        # (partition, error name) -> refused produces since the last report (produce_rejected events)
        self.rejected: dict[tuple[TopicPartition, str], int] = {}

    def handle(self, now_ms: int, source: Address, request: ProduceRequest) -> ProduceOutcome:
        results: dict[TopicPartition, PartitionProduceResult] = {}
        waits: dict[TopicPartition, ProduceWait] = {}
        advanced: list[TopicPartition] = []
        appended: dict[TopicPartition, int] = {}
        for tp, records in request.partitions:
            partition = self._partitions(tp)
            if partition is None:
                results[tp] = self._error(tp, errors.NOT_LEADER_OR_FOLLOWER)
                continue
            try:
                append = partition.append_records_as_leader(records, request.acks, now_ms)
            except KafkaException as exc:
                results[tp] = self._error(tp, exc.error)
                continue
            appended[tp] = len(records)
            if append.high_watermark_advanced:
                advanced.append(tp)
            results[tp] = PartitionProduceResult(tp, errors.NONE, append.first_offset)
            if request.acks == -1:
                waits[tp] = append.wait
        if request.acks == 0:
            return ProduceOutcome([], advanced, appended)
        delayed = DelayedProduce(source, request.correlation_id, now_ms + request.timeout_ms, results, waits)
        if waits and not self._try_complete(delayed):
            assert len(self._delayed) < PURGATORY_ENTRIES_MAX, "produce purgatory full"
            self._delayed.append(delayed)
            return ProduceOutcome([], advanced, appended)
        return ProduceOutcome([self._respond(delayed)], advanced, appended)

    def _error(self, tp: TopicPartition, error: KafkaError) -> PartitionProduceResult:
        key = (tp, error.name)
        self.rejected[key] = self.rejected.get(key, 0) + 1
        return PartitionProduceResult(tp, error, NO_OFFSET)

    def _try_complete(self, delayed: DelayedProduce) -> bool:
        """Settle every wait that is decided; True when none is left."""
        for tp, wait in list(delayed.waits.items()):
            partition = self._partitions(tp)
            status = errors.NOT_LEADER_OR_FOLLOWER if partition is None else partition.produce_status(wait)
            if status is None:
                continue
            del delayed.waits[tp]
            if status is not errors.NONE:
                delayed.results[tp] = self._error(tp, status)
        return not delayed.waits

    @staticmethod
    def _respond(delayed: DelayedProduce) -> Outgoing:
        return Outgoing(delayed.source, ProduceResponse(delayed.correlation_id, tuple(delayed.results.values())))

    def check(self, now_ms: int, touched: Iterable[TopicPartition] | None = None) -> list[Outgoing]:
        """Complete what the HW or leadership of `touched` (None: every partition) decided, and what expired."""
        if not self._delayed:
            return []
        touched_set = None if touched is None else set(touched)
        out: list[Outgoing] = []
        keep: list[DelayedProduce] = []
        for delayed in self._delayed:
            relevant = touched_set is None or not touched_set.isdisjoint(delayed.waits)
            if relevant and self._try_complete(delayed):
                out.append(self._respond(delayed))
            elif now_ms >= delayed.deadline_ms:
                for tp in delayed.waits:
                    delayed.results[tp] = self._error(tp, errors.REQUEST_TIMED_OUT)
                out.append(self._respond(delayed))
            else:
                keep.append(delayed)
        self._delayed = keep
        return out

    def next_deadline_ms(self) -> int | None:
        return min((d.deadline_ms for d in self._delayed), default=None)

    def drain_rejected(self) -> dict[tuple[TopicPartition, str], int]:
        rejected, self.rejected = self.rejected, {}
        return rejected
