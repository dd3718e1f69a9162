"""The campaign's transactional producer: transactions of a few records over several partitions, each committed
or (a seeded fraction) aborted on purpose, every step an operation in the history (chaos/ops.py).

A transaction `<process>-<n>` is `txn-begin`, one `send` per record (value `<txn>.<i>`, completed from its
delivery report as the other producers' sends are), then `txn-commit` or `txn-abort`: `ok` when the call
returned, `info` when it did not (a commit that timed out or failed may still have committed: librdkafka cannot
say, and neither can the history). A timed-out call is retried, as librdkafka allows; a transaction that must be
aborted (a record that could not be delivered) is aborted. A fatal error (a fenced producer, a lost producer id)
or an end that failed for good starts a new producer with the same transactional.id, as applications do, recorded
as a `txn-init`; its InitProducerId fences the old one and aborts what it left open.
"""

from __future__ import annotations

import contextlib
import random
import threading
from typing import Any

from insync.chaos.history import client_conf
from insync.chaos.ops import HistoryWriter, pad, send_outcome

LABEL = "transactional"
PROCESS = "t0"  # the workload's transactional producer
RECORDS = (2, 4)  # records per transaction, at least two so it spans partitions
ABORT_FRACTION = 0.25
GAP_S = 0.05  # between one transaction's end and the next one's begin
CALL_TIMEOUT_S = 10.0  # init_transactions, commit_transaction, abort_transaction
END_ATTEMPTS = 2  # tries of a commit or an abort that timed out, while the run goes on
PRODUCERS_MAX = 20  # producers started in turn after fatal errors


def transactional_id(topic: str, process: str) -> str:
    return f"{topic}-{process}"


class Restart(Exception):
    """The producer cannot go on: the next one takes its transactional.id."""


class TxnProducer:
    """One transactional.id's producers, one after another, in the calling thread until `stop` is set."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, seed: int, size: int,
                 history: HistoryWriter, stop: threading.Event) -> None:
        assert partitions >= 1 and size > 0, (partitions, size)
        self.name, self.bootstrap, self.topic, self.partitions, self.size = name, bootstrap, topic, partitions, size
        self.history, self.stop = history, stop
        self.rng = random.Random(seed)
        self.transactional_id = transactional_id(topic, name)
        self.sequence = 0

    def run(self) -> None:
        from confluent_kafka import KafkaException

        for instance in range(PRODUCERS_MAX):
            if self.stop.is_set():
                return
            producer = self._init(instance)
            if producer is None:
                continue
            try:
                while not self.stop.is_set():
                    self._transaction(producer)
                    self.stop.wait(GAP_S)
                return
            except Restart:
                continue
            finally:
                with contextlib.suppress(KafkaException, SystemError):  # a fatally failed producer may raise here
                    producer.purge()
                    producer.flush(1.0)  # serves the purged records' reports: each send gets its completion

    def _init(self, instance: int) -> Any:
        from confluent_kafka import KafkaException, Producer

        conf = {"bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_id}
        self.history.append(self.name, "invoke", "txn-init", value=str(instance), label=LABEL)
        producer = Producer(client_conf(conf))
        try:
            producer.init_transactions(CALL_TIMEOUT_S)
        except KafkaException as exc:
            self.history.append(self.name, "fail", "txn-init", value=str(instance), error=exc.args[0].name())
            return None
        self.history.append(self.name, "ok", "txn-init", value=str(instance))
        return producer

    def _transaction(self, producer: Any) -> None:
        from confluent_kafka import KafkaException

        txn = f"{self.name}-{self.sequence}"
        self.sequence += 1
        self.history.append(self.name, "invoke", "txn-begin", txn=txn, label=LABEL)
        try:
            producer.begin_transaction()
        except KafkaException as exc:
            self.history.append(self.name, "fail", "txn-begin", txn=txn, error=exc.args[0].name())
            raise Restart from exc
        self.history.append(self.name, "ok", "txn-begin", txn=txn)
        first = self.rng.randrange(self.partitions)
        sent = all(self._send(producer, txn, i, (first + i) % self.partitions)
                   for i in range(self.rng.randint(*RECORDS)))
        if not sent or self.rng.random() < ABORT_FRACTION:
            # Delivered first, so the aborted records are in the log for the readers to skip: an abort purges the
            # records still queued in the client, and those never reach a broker.
            producer.flush(CALL_TIMEOUT_S)
            self._end(producer, txn, commit=False)
        else:
            self._end(producer, txn, commit=True)
        producer.poll(0)

    def _send(self, producer: Any, txn: str, index: int, partition: int) -> bool:
        from confluent_kafka import KafkaException

        value = f"{txn}.{index}"
        self.history.append(self.name, "invoke", "send", value=value, label=LABEL, txn=txn)

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                self.history.append(self.name, "ok", "send", value=value, partition=msg.partition(),
                                    offset=msg.offset(), txn=txn)
            else:
                self.history.append(self.name, send_outcome(err), "send", value=value, error=err.name(), txn=txn)

        try:
            producer.produce(self.topic, key=value.encode(), value=pad(value, self.size), partition=partition,
                             on_delivery=delivered)
        except (KafkaException, BufferError) as exc:
            error = exc.args[0].name() if isinstance(exc, KafkaException) else "BufferError"
            self.history.append(self.name, "fail", "send", value=value, error=error, txn=txn)
            return False
        return True

    def _end(self, producer: Any, txn: str, commit: bool) -> None:
        """Commit or abort; a commit the transaction cannot make is followed by an abort (its outcome stays
        unknown: the abort does not say whether the commit reached the coordinator)."""
        from confluent_kafka import KafkaException

        f = "txn-commit" if commit else "txn-abort"
        call = producer.commit_transaction if commit else producer.abort_transaction
        self.history.append(self.name, "invoke", f, txn=txn)
        error: Any = None
        for _ in range(END_ATTEMPTS):
            try:
                call(CALL_TIMEOUT_S)
            except KafkaException as exc:
                error = exc.args[0]
                if error.retriable() and not error.fatal() and not self.stop.is_set():
                    continue
                break
            self.history.append(self.name, "ok", f, txn=txn)
            return
        self.history.append(self.name, "info", f, txn=txn, error=error.name())
        if commit and error.txn_requires_abort() and not error.fatal():
            self._end(producer, txn, commit=False)
            return
        raise Restart(error.name())
