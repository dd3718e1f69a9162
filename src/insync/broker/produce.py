"""Produce requests: append on the leader, answer by acks, and hold acks=all answers in a purgatory.

acks=0 gets no answer at all; acks=1 is answered after the leader's append; acks=all (-1) is answered when
every partition of the request is done (`Partition.produce_status`): the high watermark passed the batch (NONE,
or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min ISR meanwhile), leadership moved
(NOT_LEADER_OR_FOLLOWER), or the request's `timeout_ms` expired (REQUEST_TIMED_OUT). Waiting answers live in
`replication.purgatory` (Kafka's DelayedProduce), watched by partition, checked when a high watermark advances or
leadership changes; the purgatory is bounded, and when it is full the undecided partitions are answered at once
with REQUEST_TIMED_OUT. Each answer carries the log start offset as Kafka's ReplicaManager gives it: after the
append on success, kept with the base offset when an acks=all wait ends in an error, -1 for the refusals Kafka
answers without looking at the log (`NO_LOG_ERRORS`), the current one for any other refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from insync import errors
from insync.broker.messages import PartitionProduceResult, ProduceRequest, ProduceResponse
from insync.errors import KafkaError, KafkaException
from insync.replication.partition import Partition
from insync.replication.purgatory import DelayedProduce, ProduceStatusSource, Purgatory, PurgatoryFullError
from insync.replication.results import ProduceWait
from insync.types import Address, Offset, Outgoing, TopicPartition

NO_OFFSET = Offset(-1)

# Refusals Kafka's ReplicaManager answers with no log start offset; any other carries the partition's.
NO_LOG_ERRORS = frozenset({errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NOT_LEADER_OR_FOLLOWER, errors.MESSAGE_TOO_LARGE,
                           errors.RECORD_LIST_TOO_LARGE, errors.CORRUPT_MESSAGE, errors.KAFKA_STORAGE_ERROR,
                           errors.INVALID_REQUIRED_ACKS})


@dataclass(frozen=True, slots=True)
class _Reply:
    """Where a waiting produce's answer goes, and the results already known (offsets, refusals)."""

    source: Address
    correlation_id: int
    results: dict[TopicPartition, PartitionProduceResult]


@dataclass(slots=True)
class ProduceOutcome:
    outgoing: list[Outgoing]
    advanced: list[TopicPartition]  # partitions whose high watermark moved (acks=1 with a single replica)
    appended: dict[TopicPartition, int]  # bytes each partition took (parked follower fetches may complete)


class ProduceHandler:
    def __init__(self, partitions: Callable[[TopicPartition], Partition | None]) -> None:
        self._partitions = partitions
        self._purgatory: Purgatory[DelayedProduce[_Reply]] = Purgatory("produce")
        # (partition, error name) -> refused produces since the last report (produce_rejected events)
        self.rejected: dict[tuple[TopicPartition, str], int] = {}

    def handle(self, now_ms: int, source: Address, request: ProduceRequest) -> ProduceOutcome:
        results: dict[TopicPartition, PartitionProduceResult] = {}
        waits: dict[TopicPartition, tuple[ProduceStatusSource, ProduceWait]] = {}
        advanced: list[TopicPartition] = []
        appended: dict[TopicPartition, int] = {}
        for tp, records in request.partitions:
            partition = self._partitions(tp)
            if partition is None:
                results[tp] = self._error(tp, errors.NOT_LEADER_OR_FOLLOWER)
                continue
            try:
                append = partition.append_records_as_leader(records, request.acks, now_ms,
                                                            from_client=request.from_client)
            except KafkaException as exc:
                log_start = NO_OFFSET if exc.error in NO_LOG_ERRORS else Offset(partition.log.log_start_offset)
                results[tp] = self._error(tp, exc.error, log_start)
                if exc.error.name == "INVALID_RECORD":  # Kafka answers its LogValidator's words (KIP-467)
                    results[tp] = replace(results[tp], error_message=exc.detail,
                                          record_errors=getattr(exc, "record_errors", ()))
                continue
            appended[tp] = len(records)
            if append.high_watermark_advanced:
                advanced.append(tp)
            results[tp] = PartitionProduceResult(tp, errors.NONE, append.first_offset,
                                                 Offset(partition.log.log_start_offset))
            if request.acks == -1:
                waits[tp] = (partition, append.wait)
        if request.acks == 0:
            return ProduceOutcome([], advanced, appended)
        reply = _Reply(source, request.correlation_id, results)
        if not waits:
            return ProduceOutcome([self._respond(reply)], advanced, appended)
        delayed = DelayedProduce(reply, waits)
        if delayed.try_complete():
            return ProduceOutcome([self._finish(delayed)], advanced, appended)
        try:
            self._purgatory.add(delayed, now_ms + request.timeout_ms, waits)
        except PurgatoryFullError:
            delayed.on_expire()
            return ProduceOutcome([self._finish(delayed)], advanced, appended)
        return ProduceOutcome([], advanced, appended)

    def _count(self, tp: TopicPartition, error: KafkaError) -> None:
        key = (tp, error.name)
        self.rejected[key] = self.rejected.get(key, 0) + 1

    def _error(self, tp: TopicPartition, error: KafkaError, log_start: Offset = NO_OFFSET) -> PartitionProduceResult:
        self._count(tp, error)
        return PartitionProduceResult(tp, error, NO_OFFSET, log_start)

    def _finish(self, delayed: DelayedProduce[_Reply]) -> Outgoing:
        """The answer of an acks=all wait: an error keeps the append's offsets, as Kafka's DelayedProduce."""
        reply = delayed.context
        for tp, status in delayed.results().items():
            if status is not errors.NONE:
                self._count(tp, status)
                reply.results[tp] = replace(reply.results[tp], error=status)
        return self._respond(reply)

    @staticmethod
    def _respond(reply: _Reply) -> Outgoing:
        return Outgoing(reply.source, ProduceResponse(reply.correlation_id, tuple(reply.results.values())))

    def check(self, now_ms: int, touched: Iterable[TopicPartition] | None = None) -> list[Outgoing]:
        """Answer what the HW or leadership of `touched` (None: every watched partition) decided, and what
        expired by `now_ms`."""
        keys = self._purgatory.watched_keys() if touched is None else list(touched)
        done = [op for key in keys for op in self._purgatory.check(key)]
        done += self._purgatory.expire(now_ms)
        return [self._finish(op) for op in done]

    def next_deadline_ms(self) -> int | None:
        return self._purgatory.next_deadline_ms()

    @property
    def purgatory_size(self) -> int:
        return len(self._purgatory)

    def drain_rejected(self) -> dict[tuple[TopicPartition, str], int]:
        rejected, self.rejected = self.rejected, {}
        return rejected
