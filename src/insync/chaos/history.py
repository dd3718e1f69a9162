"""A real-process workload and its verdict: what was acknowledged against what can be read back.

`ProduceWorkload` runs an idempotent confluent-kafka producer (acks=all) in a thread at a fixed rate; every
value carries a run id and a sequence number, and every delivery report is recorded: acknowledged
(partition, offset, sequence) or failed (error name). `read_back` then consumes each partition from the
earliest offset up to its high watermark. `verdict` compares the two histories:
- lost: acknowledged sequences not read back (0 for acks=all with min ISR >= 2 and no unclean election);
- duplicated: sequences read more than once (the idempotent producer must make this 0);
- reordered: within a partition, sequences read out of the order they were sent.
The clients' own log lines (expected while brokers are paused and killed) go to the `insync.clients` logger
(`client_conf`), so a caller decides where they are shown.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from insync import command_config

DELIVERY_TIMEOUT_S = 60.0
PRODUCERS_MAX = 10  # producers a workload starts in turn after fatal errors
READ_IDLE_S = 10.0
END_OFFSET_WAIT_S = 30.0
END_OFFSET_RETRY_S = 0.5
CLIENT_LOGGER = "insync.clients"


def client_conf(conf: dict[str, Any], logger: Any = None) -> dict[str, Any]:
    """`conf` for a confluent-kafka client whose log lines go to `logger` (anything with Logger.log), by default
    the `insync.clients` logger, not stderr, with the command's client settings (`--command-config`)."""
    return command_config.confluent({**conf, "logger": logger or logging.getLogger(CLIENT_LOGGER)})


@dataclass
class ProduceHistory:
    acked: list[tuple[int, int, int]] = field(default_factory=list)  # (partition, offset, sequence)
    failed: Counter[str] = field(default_factory=Counter)
    sent: int = 0


@dataclass(frozen=True, slots=True)
class Verdict:
    sent: int
    acked: int
    failed: dict[str, int]
    read: int
    lost: int
    duplicated: int
    reordered: int
    lost_examples: tuple[int, ...] = ()

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicated == 0 and self.reordered == 0


def encode_value(run_id: str, sequence: int, size: int) -> bytes:
    head = f"{run_id}:{sequence}:".encode()
    return head + b"x" * max(0, size - len(head))


def decode_value(run_id: str, value: bytes | None) -> int | None:
    if not value:
        return None
    parts = value.split(b":", 2)
    if len(parts) < 3 or parts[0].decode(errors="replace") != run_id:
        return None
    try:
        return int(parts[1])
    except ValueError:
        return None


class ProduceWorkload:
    def __init__(self, bootstrap: str, topic: str, rate: float, run_id: str, size: int = 100) -> None:
        assert rate > 0
        self.bootstrap, self.topic, self.rate, self.run_id, self.size = bootstrap, topic, rate, run_id, size
        self.history = ProduceHistory()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> ProduceHistory:
        self._stop.set()
        self._thread.join(DELIVERY_TIMEOUT_S + 10)
        return self.history

    def _run(self) -> None:
        from confluent_kafka import KafkaException, Producer

        lock = threading.Lock()

        def delivered(err: Any, msg: Any) -> None:
            sequence = decode_value(self.run_id, msg.value())
            with lock:
                if err is not None:
                    self.history.failed[err.name()] += 1
                elif sequence is not None:
                    self.history.acked.append((msg.partition(), msg.offset(), sequence))

        start = time.monotonic()
        # A fatal error (an idempotent producer whose state the brokers lost, e.g. UNKNOWN_PRODUCER_ID after every
        # replica lost power) ends a producer for good: as an application would, record it and start a new one.
        for _ in range(PRODUCERS_MAX):
            producer = Producer(client_conf({"bootstrap.servers": self.bootstrap, "acks": "all",
                                             "enable.idempotence": True, "linger.ms": 5,
                                             "message.timeout.ms": int(DELIVERY_TIMEOUT_S * 1000)}))
            try:
                self._send_until_stopped(producer, start, delivered)
                return
            except KafkaException as exc:
                with lock:
                    self.history.failed[f"fatal {exc.args[0].name()}"] += 1
            finally:
                self._flush(producer, lock)

    def _flush(self, producer: Any, lock: threading.Lock) -> None:
        """Serve the producer's last delivery reports. Flushing one that failed fatally can raise the fatal error
        again from inside a report (`SystemError: <method 'decode' of 'bytes' objects> returned a result with an
        exception set`, after UNKNOWN_PRODUCER_ID), which would end the workload's thread. Its unreported records
        were never acknowledged: the failed flush is counted, and the workload goes on with a new producer."""
        from confluent_kafka import KafkaException

        try:
            producer.flush(DELIVERY_TIMEOUT_S)
        except (KafkaException, SystemError) as exc:
            with lock:
                self.history.failed[f"flush {type(exc).__name__}"] += 1

    def _send_until_stopped(self, producer: Any, start: float, delivered: Any) -> None:
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self.rate)
            while self.history.sent < due and not self._stop.is_set():
                value = encode_value(self.run_id, self.history.sent, self.size)
                try:
                    producer.produce(self.topic, key=str(self.history.sent % 64).encode(), value=value,
                                     on_delivery=delivered)
                except BufferError:
                    break
                self.history.sent += 1
            producer.poll(0.01)


def read_back(bootstrap: str, topic: str, run_id: str) -> dict[int, list[int]]:
    """Sequences of this run per partition, in log order, from the earliest offset to the high watermark."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(client_conf({"bootstrap.servers": bootstrap, "group.id": f"chaos-{run_id}",
                                     "enable.auto.commit": False, "enable.partition.eof": True}))
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=15).topics[topic].partitions)
        ends = {p: _end_offset(consumer, TopicPartition(topic, p)) for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        result: dict[int, list[int]] = {p: [] for p in partitions}
        remaining = {p for p in partitions if ends[p] > 0}
        idle_deadline = time.monotonic() + READ_IDLE_S
        while remaining and time.monotonic() < idle_deadline:
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                if message.error() is not None:
                    continue
                idle_deadline = time.monotonic() + READ_IDLE_S
                partition, offset = int(message.partition() or 0), int(message.offset() or 0)
                sequence = decode_value(run_id, message.value())
                if sequence is not None:
                    result[partition].append(sequence)
                if offset + 1 >= ends[partition]:
                    remaining.discard(partition)
        return result
    finally:
        consumer.close()


def _end_offset(consumer: Any, partition: Any) -> int:
    """The partition's high watermark, asked again while the answer is a retriable error: right after a restart
    the metadata can name a leader that has not yet caught up with it and answers NOT_LEADER_OR_FOLLOWER, as a
    Kafka broker does in the same window; clients retry, so this does too, for at most `END_OFFSET_WAIT_S`."""
    from confluent_kafka import KafkaError, KafkaException

    passing = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError._TIMED_OUT,
               KafkaError.REQUEST_TIMED_OUT, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION}
    deadline = time.monotonic() + END_OFFSET_WAIT_S
    while True:  # bounded by the deadline
        try:
            return int(consumer.get_watermark_offsets(partition, timeout=15)[1])
        except KafkaException as exc:
            if exc.args[0].code() not in passing or time.monotonic() >= deadline:
                raise
        time.sleep(END_OFFSET_RETRY_S)


def verdict(history: ProduceHistory, read: dict[int, list[int]]) -> Verdict:
    read_counts = Counter(s for sequences in read.values() for s in sequences)
    acked = {sequence for _, _, sequence in history.acked}
    lost = sorted(acked - set(read_counts))
    duplicated = sum(count - 1 for count in read_counts.values() if count > 1)
    reordered = sum(1 for sequences in read.values() for a, b in zip(sequences, sequences[1:], strict=False)
                    if b < a)
    return Verdict(history.sent, len(acked), dict(history.failed), sum(read_counts.values()), len(lost),
                   duplicated, reordered, tuple(lost[:10]))
