"""Simulated clients: producers that record every acknowledgement, consumers that read committed data.

A `SimProducer` behaves like Kafka's producer reduced to what replication cares about. Every
`1000 * batch_records / rate` ms it creates one record batch (and, with bursts on, an occasional large batch of
`burst_records`), assigns partitions round-robin and sends each batch to the partition's leader as it knows it,
with up to `max_in_flight` requests per partition. Errors are counted by Kafka name; retriable ones are retried
after `retry_backoff_ms` until `delivery_timeout_ms`, and NOT_LEADER_OR_FOLLOWER-like errors or a request timeout
refresh its metadata from any broker first. A retry resends the same bytes, so a write that succeeded but whose
answer was lost shows up as a duplicate, as with a non-idempotent Kafka producer.

A `SimConsumer` long-polls the leaders of its partitions with `ConsumerFetchRequest`s, which brokers answer only
below the high watermark, and records what it read in the history for the checker.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from insync import errors
from insync.broker.messages import (
    ConsumerFetchRequest,
    ConsumerFetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from insync.sim.batches import batch_ids, make_batch
from insync.sim.history import Ack, History
from insync.sim.network import Disconnected, Network, NodeId
from insync.sim.scheduler import Scheduler, Timer
from insync.types import NO_LEADER, BrokerId, Offset, TopicPartition

# Batches a producer buffers per partition before it refuses new ones (Kafka: buffer.memory / max.block.ms).
PRODUCER_QUEUE_MAX = 2_000
METADATA_REFRESH_BACKOFF_MS = 100
METADATA_RETRY_MS = 1_000
_REFRESH_ON = frozenset({"NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PARTITION",
                         "REQUEST_TIMED_OUT", "KAFKA_STORAGE_ERROR", "FENCED_LEADER_EPOCH", "NETWORK_EXCEPTION"})


@dataclass(frozen=True, slots=True)
class ProducerSpec:
    topic: str
    partitions: int
    acks: int = -1
    rate_msgs_per_s: float = 1000.0
    batch_records: int = 10
    value_bytes: int = 16
    burst_every_ms: int = 0
    burst_records: int = 0
    max_in_flight: int = 5
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    retry_backoff_ms: int = 100
    start_ms: int = 0
    stop_ms: int = 2**62

    def __post_init__(self) -> None:
        assert self.acks in (0, 1, -1), self.acks
        assert self.partitions >= 1 and self.batch_records >= 1 and self.rate_msgs_per_s > 0, self
        assert self.max_in_flight >= 1 and self.burst_records >= 0 and self.burst_every_ms >= 0, self


BATCH_ID_BITS = 32  # batches per producer before its ids would reach the next producer's


@dataclass(slots=True)
class _Batch:
    topic_partition: TopicPartition
    producer_id: int  # the batch's own idempotent producer id; its base sequence is 0
    record_count: int
    data: bytes
    created_ms: int


class SimProducer:
    """One producer client node; see the module docstring."""

    def __init__(self, name: str, producer_id: int, spec: ProducerSpec, bootstrap: list[BrokerId],
                 scheduler: Scheduler, network: Network, history: History) -> None:
        assert bootstrap, "a producer needs a broker to ask for metadata"
        self.name = name
        self.producer_id = producer_id
        self.spec = spec
        self._bootstrap = bootstrap
        self._scheduler = scheduler
        self._network = network
        self._history = history
        self._tps = [TopicPartition(spec.topic, p) for p in range(spec.partitions)]
        self._leaders: dict[TopicPartition, BrokerId] = {}
        self._queues: dict[TopicPartition, deque[_Batch]] = {tp: deque() for tp in self._tps}
        self._in_flight: dict[int, tuple[_Batch, Timer, BrokerId]] = {}
        self._in_flight_count: dict[TopicPartition, int] = dict.fromkeys(self._tps, 0)
        self._next_sequence = 0
        self._next_partition = 0
        self._correlation = 0
        self._metadata_pending = False
        self.batches_created = 0
        network.register(name, self._on_message, hears_disconnects=True)
        self._start_ms = scheduler.start_ms + spec.start_ms
        self._stop_ms = scheduler.start_ms + min(spec.stop_ms, 2**61)
        scheduler.at(self._start_ms, self._generate)
        if spec.burst_every_ms and spec.burst_records:
            scheduler.at(self._start_ms + spec.burst_every_ms, self._burst)
        scheduler.at(self._start_ms, self._refresh_metadata)

    def stop(self) -> None:
        """Create no more batches; those already created are still sent and retried."""
        self._stop_ms = min(self._stop_ms, self._scheduler.now_ms)

    # Generating ---------------------------------------------------------------------------------------

    def _generate(self) -> None:
        if self._scheduler.now_ms >= self._stop_ms:
            return
        self._create_batch(self.spec.batch_records)
        interval_ms = max(1, round(1000 * self.spec.batch_records / self.spec.rate_msgs_per_s))
        self._scheduler.after(interval_ms, self._generate)

    def _burst(self) -> None:
        if self._scheduler.now_ms >= self._stop_ms:
            return
        self._create_batch(self.spec.burst_records)
        self._scheduler.after(self.spec.burst_every_ms, self._burst)

    def _create_batch(self, record_count: int) -> None:
        tp = self._tps[self._next_partition % len(self._tps)]
        self._next_partition += 1
        queue = self._queues[tp]
        if len(queue) >= PRODUCER_QUEUE_MAX:
            self._history.record_error("BUFFER_EXHAUSTED")
            return
        # Each batch is its own idempotent producer (a fresh producer id, sequence 0): retries of it are
        # deduplicated by the leader exactly as Kafka's are, while batches never wait on each other's
        # sequences, so the workload can keep several in flight and drop a batch without a sequence gap.
        batch_producer_id = (self.producer_id << BATCH_ID_BITS) | self._next_sequence
        self._next_sequence += 1
        assert self._next_sequence < 2**BATCH_ID_BITS
        now = self._scheduler.now_ms
        data = make_batch(batch_producer_id, 0, record_count, self.spec.value_bytes, now)
        queue.append(_Batch(tp, batch_producer_id, record_count, data, now))
        self.batches_created += 1
        self._send_ready(tp)

    # Sending ------------------------------------------------------------------------------------------

    def _send_ready(self, tp: TopicPartition) -> None:
        leader = self._leaders.get(tp, NO_LEADER)
        if leader == NO_LEADER:
            self._refresh_metadata()
            return
        queue = self._queues[tp]
        while queue and self._in_flight_count[tp] < self.spec.max_in_flight:
            self._send(queue.popleft(), leader)

    def _send(self, batch: _Batch, leader: BrokerId) -> None:
        self._correlation += 1
        correlation = self._correlation
        request = ProduceRequest(correlation, self.spec.acks, self.spec.request_timeout_ms,
                                 ((batch.topic_partition, batch.data),))
        self._network.send(self.name, leader, request)
        if self.spec.acks == 0:
            return  # fire and forget: no response will come, nothing is acknowledged
        timer = self._scheduler.after(self.spec.request_timeout_ms, lambda: self._on_timeout(correlation))
        self._in_flight[correlation] = (batch, timer, leader)
        self._in_flight_count[batch.topic_partition] += 1

    def _on_timeout(self, correlation: int) -> None:
        entry = self._in_flight.pop(correlation, None)
        if entry is None:
            return
        batch, _, _ = entry
        self._in_flight_count[batch.topic_partition] -= 1
        self._failed_attempt(batch, "REQUEST_TIMED_OUT", retriable=True)

    def _on_disconnect(self, broker: NodeId) -> None:
        """The connection to `broker` closed: what was in flight on it failed (Kafka's NetworkException)."""
        for correlation in [c for c, (_, _, leader) in self._in_flight.items() if leader == broker]:
            batch, timer, _ = self._in_flight.pop(correlation)
            timer.cancel()
            self._in_flight_count[batch.topic_partition] -= 1
            self._failed_attempt(batch, "NETWORK_EXCEPTION", retriable=True)
        for tp in [tp for tp, leader in self._leaders.items() if leader == broker]:
            del self._leaders[tp]
        # A metadata request to that broker is lost too; ask again (elsewhere, maybe) after a backoff, as Kafka's
        # clients back off reconnecting.
        self._metadata_pending = False
        self._scheduler.after(METADATA_REFRESH_BACKOFF_MS, self._refresh_metadata)

    def _on_message(self, src: NodeId, message: object) -> None:
        if isinstance(message, ProduceResponse):
            self._on_produce_response(message)
        elif isinstance(message, MetadataResponse):
            self._on_metadata(message)
        elif isinstance(message, Disconnected):
            self._on_disconnect(message.node)

    def _on_produce_response(self, response: ProduceResponse) -> None:
        entry = self._in_flight.pop(response.correlation_id, None)
        if entry is None:
            return  # answered after our timeout: that attempt was already retried
        batch, timer, _ = entry
        timer.cancel()
        tp = batch.topic_partition
        self._in_flight_count[tp] -= 1
        assert len(response.results) == 1 and response.results[0].topic_partition == tp, response
        result = response.results[0]
        if result.error is errors.NONE:
            ack = Ack(tp, (batch.producer_id, 0), result.base_offset, batch.record_count,
                      self.spec.acks, self._scheduler.now_ms)
            self._history.record_ack(ack)
        else:
            self._failed_attempt(batch, result.error.name, retriable=result.error.retriable)
        self._send_ready(tp)

    def _failed_attempt(self, batch: _Batch, error_name: str, retriable: bool) -> None:
        self._history.record_error(error_name)
        now = self._scheduler.now_ms
        if not retriable or now - batch.created_ms >= self.spec.delivery_timeout_ms:
            self._history.failed_batches += 1
            return
        if error_name in _REFRESH_ON:
            self._leaders.pop(batch.topic_partition, None)
        self._scheduler.after(self.spec.retry_backoff_ms, lambda: self._requeue(batch))

    def _requeue(self, batch: _Batch) -> None:
        self._queues[batch.topic_partition].appendleft(batch)
        self._send_ready(batch.topic_partition)

    # Metadata -----------------------------------------------------------------------------------------

    def _refresh_metadata(self) -> None:
        if self._metadata_pending:
            return
        self._metadata_pending = True
        broker = self._bootstrap[self._scheduler.rng.randrange(len(self._bootstrap))]
        self._correlation += 1
        self._network.send(self.name, broker, MetadataRequest(self._correlation, (self.spec.topic,)))
        # A lost request or a dead broker must not stall us: allow another attempt after a while.
        self._scheduler.after(METADATA_RETRY_MS, self._metadata_timeout)

    def _metadata_timeout(self) -> None:
        if self._metadata_pending:
            self._metadata_pending = False
            if any(self._queues[tp] and tp not in self._leaders for tp in self._tps):
                self._refresh_metadata()

    def _on_metadata(self, response: MetadataResponse) -> None:
        self._metadata_pending = False
        for meta in response.partitions:
            if meta.leader != NO_LEADER:
                self._leaders[meta.topic_partition] = meta.leader
        missing = [tp for tp in self._tps if tp not in self._leaders]
        if missing:
            self._scheduler.after(METADATA_REFRESH_BACKOFF_MS, self._refresh_metadata)
        for tp in self._tps:
            if tp in self._leaders:
                self._send_ready(tp)


class SimConsumer:
    """Reads every partition of a topic from its leader, below the high watermark, and records each batch."""

    def __init__(self, name: str, topic: str, partitions: int, bootstrap: list[BrokerId],
                 scheduler: Scheduler, network: Network, history: History, max_wait_ms: int = 500) -> None:
        self.name = name
        self._tps = [TopicPartition(topic, p) for p in range(partitions)]
        self._topic = topic
        self._bootstrap = bootstrap
        self._scheduler = scheduler
        self._network = network
        self._history = history
        self._max_wait_ms = max_wait_ms
        self._positions: dict[TopicPartition, int] = dict.fromkeys(self._tps, 0)
        self._leaders: dict[TopicPartition, BrokerId] = {}
        self._waiting: dict[int, tuple[BrokerId, Timer]] = {}  # correlation -> (broker, timeout)
        self._busy: set[BrokerId] = set()
        self._correlation = 0
        self.batches_read = 0
        network.register(name, self._on_message, hears_disconnects=True)
        scheduler.after(0, self._refresh_metadata)

    def _refresh_metadata(self) -> None:
        """Ask a random broker who leads what; if no answer comes (lost, dead broker), ask again later."""
        self._correlation += 1
        broker = self._bootstrap[self._scheduler.rng.randrange(len(self._bootstrap))]
        self._network.send(self.name, broker, MetadataRequest(self._correlation, (self._topic,)))
        self._scheduler.after(METADATA_RETRY_MS, self._check_leaders)

    def _check_leaders(self) -> None:
        if any(tp not in self._leaders for tp in self._tps):
            self._refresh_metadata()

    def _poll_leaders(self) -> None:
        for leader in sorted(set(self._leaders.values())):
            self._poll(leader)

    def _poll(self, leader: BrokerId) -> None:
        if leader in self._busy:
            return
        partitions = tuple((tp, Offset(self._positions[tp])) for tp in self._tps if self._leaders.get(tp) == leader)
        if not partitions:
            return
        self._correlation += 1
        correlation = self._correlation
        self._busy.add(leader)
        self._network.send(self.name, leader, ConsumerFetchRequest(correlation, partitions, self._max_wait_ms,
                                                                   1 << 20))
        timer = self._scheduler.after(self._max_wait_ms + 30_000, lambda: self._on_timeout(correlation))
        self._waiting[correlation] = (leader, timer)

    def _on_timeout(self, correlation: int) -> None:
        entry = self._waiting.pop(correlation, None)
        if entry is not None:
            self._busy.discard(entry[0])
            self._refresh_metadata()

    def _on_message(self, src: NodeId, message: object) -> None:
        if isinstance(message, MetadataResponse):
            for meta in message.partitions:
                if meta.leader != NO_LEADER:
                    self._leaders[meta.topic_partition] = meta.leader
            self._poll_leaders()
        elif isinstance(message, ConsumerFetchResponse):
            self._on_fetch(message)
        elif isinstance(message, Disconnected):
            self._on_disconnect(message.node)

    def _on_disconnect(self, broker: NodeId) -> None:
        """The connection to `broker` closed: drop its fetch, forget it as a leader, ask who leads now."""
        for correlation in [c for c, (leader, _) in self._waiting.items() if leader == broker]:
            _, timer = self._waiting.pop(correlation)
            timer.cancel()
        self._busy.discard(broker)
        for tp in [tp for tp, leader in self._leaders.items() if leader == broker]:
            del self._leaders[tp]
        self._scheduler.after(METADATA_REFRESH_BACKOFF_MS, self._refresh_metadata)

    def _on_fetch(self, response: ConsumerFetchResponse) -> None:
        entry = self._waiting.pop(response.correlation_id, None)
        if entry is None:
            return
        leader, timer = entry
        timer.cancel()
        self._busy.discard(leader)
        refresh = False
        for part in response.partitions:
            tp = part.topic_partition
            if part.error is not errors.NONE:
                if part.error.name == "OFFSET_OUT_OF_RANGE":
                    self._positions[tp] = max(self._positions[tp], part.log_start_offset)
                else:
                    self._leaders.pop(tp, None)
                    refresh = True
                continue
            for base_offset, last_offset, batch_id in batch_ids(part.records):
                if base_offset < self._positions[tp] or last_offset >= part.high_watermark:
                    continue
                self._history.record_consumed(tp, base_offset, batch_id)
                self.batches_read += 1
                self._positions[tp] = last_offset + 1
        if refresh:
            self._scheduler.after(METADATA_REFRESH_BACKOFF_MS, self._refresh_metadata)
        else:
            self._poll(leader)
