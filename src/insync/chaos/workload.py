"""Jepsen's Kafka workload on real clients: producers, a consumer group and assign-mode readers, every operation
in a history (chaos/ops.py).

- Producers (`PRODUCERS`): one thread each, labelled by what it promises (`acks=all,idempotent`, `acks=all`,
  `acks=1`). A send is `invoke`d before `produce()` and completed from its delivery report: `ok` with partition
  and offset, `info` for a timeout, a retriable error or a purge at close (it may be in the log), else `fail`.
- Group consumers (`c0`, ...): one group, committing every `COMMIT_EVERY_S`; each rebalance is an `assign` op
  (the checker resets their positions there), each poll an `ok` poll.
- Assign-mode readers (`r0`, ...): all partitions, no group; every `REREAD_EVERY_S` they seek back to the
  beginning, so the same offsets are read again, by another path.
- With `txn`, a transactional producer (`t0`, chaos/txn_workload.py) too. Every reader is read_committed.
- `final_read`: after the faults, one reader reads every partition to its end and records a `complete-read` for
  each: the reference the checker calls complete (at read_uncommitted too, to show aborted records are there).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from insync.chaos.history import CLIENT_LOGGER, client_conf
from insync.chaos.ops import HistoryWriter, pad, send_outcome, unpad
from insync.chaos.txn_workload import PROCESS, TxnProducer

DELIVERY_TIMEOUT_S = 30.0
POLL_TIMEOUT_S = 0.2
POLL_BATCH = 500
COMMIT_EVERY_S = 1.0
REREAD_EVERY_S = 8.0
# A partition may still be electing its leader after the last fault heals; a loaded machine takes longer.
FINAL_READ_IDLE_S = 30.0
JOIN_TIMEOUT_S = DELIVERY_TIMEOUT_S + 15.0
READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"


@dataclass(frozen=True, slots=True)
class ProducerSpec:
    label: str
    conf: dict[str, Any]


PRODUCERS = (
    ProducerSpec("acks=all,idempotent", {"acks": "all", "enable.idempotence": True}),
    ProducerSpec("acks=all", {"acks": "all", "enable.idempotence": False, "retries": 5}),
    ProducerSpec("acks=1", {"acks": "1", "enable.idempotence": False, "retries": 5}),
)


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    topic: str
    rate: float = 300.0  # records per second, over all producers
    consumers: int = 2
    readers: int = 1
    size: int = 64
    txn: bool = False  # a transactional producer too
    partitions: int = 3
    seed: int = 0  # the transactional producer's choices (partitions, which transactions abort)


class Workload:
    """The clients of one run, each a thread writing to `history` until `stop`."""

    def __init__(self, bootstrap: str, spec: WorkloadSpec, history: HistoryWriter) -> None:
        assert spec.rate > 0 and spec.consumers >= 0 and spec.readers >= 0, spec
        self.bootstrap, self.spec, self.history = bootstrap, spec, history
        self._stop = threading.Event()
        self.errors: list[str] = []
        targets: list[tuple[str, Callable[..., None], tuple[Any, ...]]] = [
            (f"p{i}", self._produce, (p,)) for i, p in enumerate(PRODUCERS)]
        targets += [(f"c{i}", self._consume, ()) for i in range(spec.consumers)]
        targets += [(f"r{i}", self._read, ()) for i in range(spec.readers)]
        targets += [(PROCESS, self._transact, ())] if spec.txn else []
        self._threads = [threading.Thread(target=self._guarded, args=(name, run, args), name=f"chaos-{name}",
                                          daemon=True) for name, run, args in targets]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(JOIN_TIMEOUT_S)
        stuck = [t.name for t in self._threads if t.is_alive()]
        assert not stuck, f"workload threads still running after {JOIN_TIMEOUT_S} s: {stuck}"

    def _guarded(self, name: str, run: Callable[..., None], args: tuple[Any, ...]) -> None:
        try:
            run(name, *args)
        except Exception as exc:  # a client that dies ends its own history, the run goes on and says so
            self.errors.append(f"{name}: {exc!r}")

    def _produce(self, name: str, producer_spec: ProducerSpec) -> None:
        from confluent_kafka import Producer

        conf = {"bootstrap.servers": self.bootstrap, "linger.ms": 5,
                "message.timeout.ms": int(DELIVERY_TIMEOUT_S * 1000), **producer_spec.conf}
        logger = None
        if conf.get("enable.idempotence"):
            conf["debug"] = "eos"  # librdkafka says when it bumps its epoch only in these lines
            logger = EpochBumps(name, self.history)
        producer = Producer(client_conf(conf, logger))
        rate = self.spec.rate / len(PRODUCERS)
        start, sent = time.monotonic(), 0
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * rate)
            while sent < due and not self._stop.is_set():
                value = f"{name}-{sent}"
                self.history.append(name, "invoke", "send", value=value, label=producer_spec.label)
                try:
                    producer.produce(self.spec.topic, key=str(sent).encode(), value=pad(value, self.spec.size),
                                     on_delivery=self._on_delivery(name, value))
                except BufferError:
                    self.history.append(name, "fail", "send", value=value, error="BufferError")
                sent += 1
            producer.poll(0.01)
        producer.flush(DELIVERY_TIMEOUT_S)
        producer.purge()
        producer.flush(1.0)

    def _transact(self, name: str) -> None:
        TxnProducer(name, self.bootstrap, self.spec.topic, self.spec.partitions, self.spec.seed, self.spec.size,
                    self.history, self._stop).run()

    def _on_delivery(self, name: str, value: str) -> Callable[[Any, Any], None]:
        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                self.history.append(name, "ok", "send", value=value, partition=msg.partition(), offset=msg.offset())
            else:
                self.history.append(name, send_outcome(err), "send", value=value, error=err.name())
        return delivered

    def _consume(self, name: str) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(client_conf({"bootstrap.servers": self.bootstrap, "group.id": f"{self.spec.topic}-group",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                         "session.timeout.ms": 10000, "isolation.level": READ_COMMITTED}))

        def assigned(_consumer: Any, partitions: list[Any]) -> None:
            self.history.append(name, "info", "assign", partitions=tuple(sorted(p.partition for p in partitions)),
                                label=READ_COMMITTED)

        def revoked(_consumer: Any, _partitions: list[Any]) -> None:
            self.history.append(name, "info", "assign", label=READ_COMMITTED)  # nothing until the next on_assign

        consumer.subscribe([self.spec.topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
        committed = time.monotonic()
        try:
            while not self._stop.is_set():
                self._poll(name, consumer)
                if time.monotonic() - committed >= COMMIT_EVERY_S:
                    committed = time.monotonic()
                    self._commit(name, consumer)
        finally:
            consumer.close()

    def _commit(self, name: str, consumer: Any) -> None:
        from confluent_kafka import KafkaException

        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        if not positions:
            return
        records = tuple((tp.partition, tp.offset, "") for tp in positions)
        self.history.append(name, "invoke", "commit", records=records)
        try:
            consumer.commit(offsets=positions, asynchronous=False)
            self.history.append(name, "ok", "commit", records=records)
        except KafkaException as exc:
            self.history.append(name, "fail", "commit", records=records, error=exc.args[0].name())

    def _read(self, name: str) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer(client_conf({"bootstrap.servers": self.bootstrap, "group.id": f"{name}-unused",
                                         "enable.auto.commit": False, "isolation.level": READ_COMMITTED}))
        try:
            partitions = sorted(consumer.list_topics(self.spec.topic, timeout=15).topics[self.spec.topic].partitions)
            consumer.assign([TopicPartition(self.spec.topic, p, OFFSET_BEGINNING) for p in partitions])
            self.history.append(name, "info", "assign", partitions=tuple(partitions), label=READ_COMMITTED)
            reread = time.monotonic()
            while not self._stop.is_set():
                self._poll(name, consumer)
                if time.monotonic() - reread >= REREAD_EVERY_S:
                    reread = time.monotonic()
                    for partition in partitions:
                        self._seek(name, consumer, TopicPartition(self.spec.topic, partition, OFFSET_BEGINNING))
        finally:
            consumer.close()

    def _seek(self, name: str, consumer: Any, to: Any) -> None:
        """A seek refused (librdkafka's erroneous state while a partition has no leader) is a `fail` seek."""
        from confluent_kafka import KafkaException

        try:
            consumer.seek(to)
            self.history.append(name, "info", "seek", partition=to.partition, offset=0)
        except KafkaException as exc:
            self.history.append(name, "fail", "seek", partition=to.partition, offset=0, error=exc.args[0].name())

    def _poll(self, name: str, consumer: Any) -> int:
        from confluent_kafka import KafkaError

        messages = consumer.consume(num_messages=POLL_BATCH, timeout=POLL_TIMEOUT_S)
        for m in messages:  # a position reset or a truncation librdkafka detected: the checker names it at a skip
            if (error := m.error()) is not None and error.code() != KafkaError._PARTITION_EOF:
                self.history.append(name, "info", "client-error", partition=m.partition(),
                                    error=f"{error.name()}: {error.str()}")
        records = _records(messages)
        if records:
            self.history.append(name, "ok", "poll", records=records)
        return len(records)


class EpochBumps:
    """An idempotent producer's librdkafka log: each epoch it bumps to becomes an `epoch-bump` op of its process,
    with the lines that say why at INFO in the clients' log; the rest goes there as it came. librdkafka renumbers
    the batches it retries under the new epoch, so one the old epoch already wrote is written again
    (confluentinc/librdkafka#4953): the checker names such duplicates for what they are."""

    REASONS = ("DRAIN", "ERRSEQ", "DUPSEQ", "UNKPID")

    def __init__(self, process: str, history: HistoryWriter) -> None:
        self.process, self.history = process, history

    def log(self, level: int, msg: str, *args: Any) -> None:
        if len(args) == 3 and args[0] in self.REASONS:
            level = max(level, logging.INFO)
            line = str(args[2])
            if "bumped epoch to " in line:
                self.history.append(self.process, "info", "epoch-bump", label=line.rsplit("bumped epoch to ", 1)[1])
        logging.getLogger(CLIENT_LOGGER).log(level, msg, *args)


def final_read(bootstrap: str, topic: str, history: HistoryWriter, name: str = "final",
               isolation: str = READ_COMMITTED) -> tuple[int, ...]:
    """Read every partition from the beginning to its end (the high watermark, or the last stable offset when
    read_committed); returns the partitions read completely. A read_committed read reaches its end without a
    record there when the last one is a transaction marker: the end-of-partition event says it got there."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    assert isolation in (READ_COMMITTED, READ_UNCOMMITTED), isolation
    consumer = Consumer(client_conf({"bootstrap.servers": bootstrap, "group.id": f"{name}-unused",
                                     "enable.auto.commit": False, "enable.partition.eof": True,
                                     "isolation.level": isolation}))
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=15).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        history.append(name, "info", "assign", partitions=tuple(partitions), label=isolation)
        remaining = {p for p in partitions if ends[p] > 0}
        done = [p for p in partitions if ends[p] == 0]
        idle_deadline = time.monotonic() + FINAL_READ_IDLE_S
        while remaining and time.monotonic() < idle_deadline:
            messages = consumer.consume(num_messages=POLL_BATCH, timeout=0.5)
            reached = [(int(m.partition() or 0), int(m.offset() or 0) - 1) for m in messages
                       if (error := m.error()) is not None and error.code() == KafkaError._PARTITION_EOF]
            records = _records(messages)
            if records:
                idle_deadline = time.monotonic() + FINAL_READ_IDLE_S
                history.append(name, "ok", "poll", records=records)
            for partition, offset in [*((p, o) for p, o, _ in records), *reached]:
                if offset + 1 >= ends[partition] and partition in remaining:
                    remaining.discard(partition)
                    done.append(partition)
        for partition in sorted(done):
            history.append(name, "ok", "complete-read", partition=partition, offset=ends[partition])
        return tuple(sorted(done))
    finally:
        consumer.close()


def _records(messages: list[Any]) -> tuple[tuple[int, int, str], ...]:
    return tuple((int(m.partition() or 0), int(m.offset() or 0), unpad(m.value())) for m in messages
                 if m.error() is None)

