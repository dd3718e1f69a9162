"""The records that must come through the fuzz unharmed (`fuzz.run`), written and read with confluent-kafka.

`Workload` is one acks=all idempotent producer of values unique to the run at a steady rate; it keeps when each
value was acknowledged. `LiveConsumer` reads the workload topic while the fuzz runs (read_uncommitted, every
partition from where it ended before the workload began, back to the earliest offset should a position be called
out of range, so a wrong answer shows up as a value seen twice). When the fuzz is over it catches up for at most
`CATCH_UP_S`; `live_report` then names what it missed (a value acknowledged more than `LIVE_GRACE_S` before the
end and never seen) and saw twice. `read_topic` reads a topic back to its high watermarks after the run.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from insync.chaos.history import client_conf
from insync.config import ConfigError
from insync.waiting import WaitTimeout, wait_until

WORKLOAD_TOPIC = "fuzz-workload"
BEFORE_TOPIC = "fuzz-before"
BEFORE_RECORDS = 300
PROBE_TIMEOUT_S = 10.0
FLUSH_TIMEOUT_S = 60.0
READ_DEADLINE_S = 120.0
CATCH_UP_S = 30.0
LIVE_GRACE_S = 5.0
POLL_S = 0.5
CONSUME_BATCH = 1000


def write_before(bootstrap: str) -> None:
    """`BEFORE_RECORDS` records of varied keys, values and headers in `BEFORE_TOPIC`, acknowledged by all."""
    from confluent_kafka import Producer

    producer = Producer(client_conf({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}))
    for n in range(BEFORE_RECORDS):
        producer.produce(BEFORE_TOPIC, key=str(n).encode(), value=bytes(range(n % 256)) * (n % 7 + 1),
                         headers=[("n", str(n).encode())])
        producer.poll(0)
    if producer.flush(FLUSH_TIMEOUT_S) != 0:
        raise ConfigError(f"could not write {BEFORE_TOPIC} before fuzzing")


def read_topic(bootstrap: str, topic: str) -> list[tuple[int, int, bytes | None, bytes | None, Any, Any]]:
    """Every record of `topic` up to its high watermarks as (partition, offset, key, value, headers, timestamp)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(client_conf({"bootstrap.servers": bootstrap, "group.id": "insync-fuzz-reader",
                                     "enable.auto.commit": False, "isolation.level": "read_uncommitted"}))
    try:
        partitions = consumer.list_topics(topic, timeout=PROBE_TIMEOUT_S).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=PROBE_TIMEOUT_S)[1]
                for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        out: list[tuple[int, int, bytes | None, bytes | None, Any, Any]] = []
        positions = dict.fromkeys(partitions, 0)

        def read_to_the_ends() -> bool:
            for message in consumer.consume(CONSUME_BATCH, timeout=POLL_S):
                partition, offset = message.partition(), message.offset()
                if message.error() is None and partition is not None and offset is not None:
                    out.append((partition, offset, message.key(), message.value(), message.headers(),
                                message.timestamp()))
                    positions[partition] = offset + 1
            return all(positions[p] >= ends[p] for p in partitions)

        # What was read by the deadline is returned either way: the caller's comparison names what is missing.
        with contextlib.suppress(WaitTimeout):
            wait_until(read_to_the_ends, READ_DEADLINE_S, f"{topic} read to its end", interval_s=0.001)
        return sorted(out, key=lambda r: (r[0], r[1]))
    finally:
        consumer.close()


class Workload:
    """One acks=all idempotent producer at a steady rate; `stop` returns the values acknowledged, each with the
    `time.monotonic()` of its acknowledgement."""

    def __init__(self, bootstrap: str, rate: float) -> None:
        assert rate > 0, rate
        self._bootstrap = bootstrap
        # Values unique to this run: runs before it on the same cluster left theirs in the topic.
        self.prefix = f"w-{secrets.token_hex(6)}-"
        self._interval_s = 1.0 / rate
        self._stopping = threading.Event()
        self._acked: dict[bytes, float] = {}
        self._thread = threading.Thread(target=self._produce, name="fuzz-workload", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[bytes, float]:
        self._stopping.set()
        self._thread.join(FLUSH_TIMEOUT_S * 2)
        return dict(self._acked)

    def _produce(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(client_conf({"bootstrap.servers": self._bootstrap, "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 5}))

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                self._acked[message.value()] = time.monotonic()

        sequence = 0
        next_s = time.monotonic()
        while not self._stopping.wait(max(0.0, next_s - time.monotonic())):
            producer.produce(WORKLOAD_TOPIC, value=f"{self.prefix}{sequence}".encode(), on_delivery=delivered)
            producer.poll(0)
            sequence += 1
            next_s += self._interval_s
        producer.flush(FLUSH_TIMEOUT_S)


class LiveConsumer:
    """Reads `WORKLOAD_TOPIC` while the fuzz runs and counts the values of `prefix` it sees (module docstring)."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self._bootstrap = bootstrap
        self._prefix = prefix.encode()
        self._seen: Counter[bytes] = Counter()
        self._first_seen: dict[bytes, float] = {}  # value -> time.monotonic() it was first read
        self._errors: Counter[str] = Counter()
        self._stopping = threading.Event()
        self._consumer: Any = None
        self._thread = threading.Thread(target=self._consume, name="fuzz-live-consumer", daemon=True)

    def start(self) -> None:
        """Assign every partition at its high watermark now: call it before the workload writes."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(client_conf({"bootstrap.servers": self._bootstrap, "group.id": "insync-fuzz-live",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                         "isolation.level": "read_uncommitted"}))
        try:
            partitions = consumer.list_topics(WORKLOAD_TOPIC, timeout=PROBE_TIMEOUT_S).topics[WORKLOAD_TOPIC].partitions
            consumer.assign([TopicPartition(WORKLOAD_TOPIC, p, consumer.get_watermark_offsets(
                TopicPartition(WORKLOAD_TOPIC, p), timeout=PROBE_TIMEOUT_S)[1]) for p in partitions])
        except Exception:
            consumer.close()
            raise
        self._consumer = consumer
        self._thread.start()

    def stop(self, acked: Mapping[bytes, float]) -> dict[str, Any]:
        """Catch up with `acked` (at most `CATCH_UP_S`), stop, and report (`live_report`)."""
        with contextlib.suppress(WaitTimeout):
            wait_until(lambda: all(value in self._first_seen for value in acked), CATCH_UP_S,
                       "the live consumer saw every acknowledged value")
        self._stopping.set()
        self._thread.join(CATCH_UP_S)
        first_seen = dict(self._first_seen)  # before the counts: a value is counted before it is first seen
        report = live_report(acked, Counter(self._seen), first_seen, time.monotonic())
        return {**report, "live_errors": dict(self._errors)}

    def _consume(self) -> None:
        try:
            while not self._stopping.is_set():  # `stop` sets it within CATCH_UP_S of the fuzz's end
                for message in self._consumer.consume(CONSUME_BATCH, timeout=POLL_S):
                    error = message.error()
                    if error is not None:
                        self._errors[error.name()] += 1
                        continue
                    value = message.value()
                    if value is not None and value.startswith(self._prefix):
                        self._seen[value] += 1
                        self._first_seen.setdefault(value, time.monotonic())
        finally:
            self._consumer.close()


def live_report(acked: Mapping[bytes, float], seen: Mapping[bytes, int], first_seen: Mapping[bytes, float],
                end: float) -> dict[str, Any]:
    """What the live consumer saw of the acknowledged values (times from `time.monotonic()`, `end` when it
    stopped): how many, how many it missed though acknowledged `LIVE_GRACE_S` before `end`, how many values it
    saw more than once, and the longest it saw one after its acknowledgement (it may see one before)."""
    assert all(count > 0 for count in seen.values()) and first_seen.keys() <= seen.keys()
    missed = sum(1 for value, at in acked.items() if value not in first_seen and at <= end - LIVE_GRACE_S)
    gaps_s = [first_seen[value] - at for value, at in acked.items() if value in first_seen]
    return {"live_seen": len(gaps_s), "live_missed": missed,
            "live_duplicated": sum(1 for count in seen.values() if count > 1),
            "live_gap_s_max": round(max((max(0.0, gap) for gap in gaps_s), default=0.0), 2)}
