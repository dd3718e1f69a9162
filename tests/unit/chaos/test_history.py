"""`ProduceWorkload` outlives a fatal producer error: it records it and goes on with a new producer."""

from __future__ import annotations

from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException

from insync.chaos import history
from insync.waiting import wait_until


class FakeProducer:
    """The first instance fails fatally at its third record, as librdkafka's idempotent producer does after an
    UNKNOWN_PRODUCER_ID it cannot recover from; later ones acknowledge everything at once."""

    made: list[FakeProducer] = []

    flush_error: BaseException | None = None  # what the fatally failed producer's flush raises

    def __init__(self, _conf: dict[str, Any]) -> None:
        self.fatal_at = 3 if not FakeProducer.made else None
        self.records = 0
        self.pending: list[tuple[Any, Any]] = []
        FakeProducer.made.append(self)

    def produce(self, topic: str, key: bytes, value: bytes, on_delivery: Any) -> None:
        self.records += 1
        if self.fatal_at is not None and self.records >= self.fatal_at:
            raise KafkaException(KafkaError(KafkaError._FATAL))
        self.pending.append((on_delivery, FakeMessage(value, len(self.pending))))

    def poll(self, _timeout: float) -> int:
        for callback, message in self.pending:
            callback(None, message)
        served, self.pending = len(self.pending), []
        return served

    def flush(self, timeout: float) -> int:
        if self.fatal_at is not None and FakeProducer.flush_error is not None:
            raise FakeProducer.flush_error
        self.poll(timeout)
        return 0


class FakeMessage:
    def __init__(self, value: bytes, offset: int) -> None:
        self._value, self._offset = value, offset

    def value(self) -> bytes:
        return self._value

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset


def run_workload(monkeypatch: pytest.MonkeyPatch, flush_error: BaseException | None) -> history.ProduceHistory:
    """A workload on FakeProducers until 20 records are acknowledged (at most 10 s)."""
    FakeProducer.made, FakeProducer.flush_error = [], flush_error
    monkeypatch.setattr(confluent_kafka, "Producer", FakeProducer)
    workload = history.ProduceWorkload("127.0.0.1:9", "t", rate=2000, run_id="r")
    workload.start()
    try:
        wait_until(lambda: len(workload.history.acked) >= 20, 10, "20 records acknowledged", interval_s=0.01)
    finally:
        produced = workload.stop()
    return produced


def test_a_fatal_error_is_recorded_and_a_new_producer_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    produced = run_workload(monkeypatch, None)
    assert len(FakeProducer.made) == 2
    assert produced.failed == {"fatal _FATAL": 1}
    assert len(produced.acked) >= 20  # the second producer carried on


@pytest.mark.parametrize("error", [SystemError("<method 'decode' of 'bytes' objects> returned a result with an "
                                               "exception set"), KafkaException(KafkaError(KafkaError._FATAL))])
def test_a_fatal_producer_whose_flush_fails_too_is_replaced(monkeypatch: pytest.MonkeyPatch,
                                                              error: BaseException) -> None:
    """A CI run's workload thread died in the fatally failed producer's flush (librdkafka raised the fatal error
    again from inside a delivery report); the failure is counted and a new producer goes on."""
    produced = run_workload(monkeypatch, error)
    assert len(FakeProducer.made) == 2
    assert produced.failed == {"fatal _FATAL": 1, f"flush {type(error).__name__}": 1}
    assert len(produced.acked) >= 20
