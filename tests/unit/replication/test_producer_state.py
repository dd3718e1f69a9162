import pytest

from insync import errors
from insync.errors import KafkaException
from insync.replication.producer_state import SEQUENCE_MAX, Duplicate, ProducerStateTable


def appended(table: ProducerStateTable, pid: int, epoch: int, seq: int, first: int, count: int) -> None:
    assert table.check(pid, epoch, seq, count - 1) is None
    table.record(pid, epoch, seq, first, first + count - 1)


def code_of(call: object) -> str:
    with pytest.raises(KafkaException) as info:
        call()  # type: ignore[operator]
    return info.value.error.name


def test_in_sequence_batches_and_retries_of_the_last_five() -> None:
    table = ProducerStateTable()
    for i in range(7):
        appended(table, 1, 0, i * 10, i * 10, 10)
    # a retry of any of the last five batches gets its original offsets
    assert table.check(1, 0, 60, 9) == Duplicate(60, 69)
    assert table.check(1, 0, 20, 9) == Duplicate(20, 29)
    # older than five batches ago is out of order, not a duplicate
    assert code_of(lambda: table.check(1, 0, 10, 9)) == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert code_of(lambda: table.check(1, 0, 80, 9)) == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert table.check(1, 0, 70, 4) is None


def test_epochs_fence_and_restart_sequences() -> None:
    table = ProducerStateTable()
    appended(table, 1, 3, 0, 0, 5)
    assert code_of(lambda: table.check(1, 2, 5, 0)) == errors.INVALID_PRODUCER_EPOCH.name
    assert code_of(lambda: table.check(1, 4, 5, 0)) == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    appended(table, 1, 4, 0, 5, 1)
    table.record(1, 3, 5, 6, 6)  # a zombie batch replicated late changes nothing
    assert table.check(1, 4, 1, 0) is None


def test_unknown_producer_and_non_idempotent_batches() -> None:
    table = ProducerStateTable()
    assert code_of(lambda: table.check(9, 0, 3, 0)) == "UNKNOWN_PRODUCER_ID"
    assert table.check(-1, -1, -1, 5) is None
    assert len(table) == 0


def test_sequences_wrap() -> None:
    table = ProducerStateTable()
    table.record(1, 0, SEQUENCE_MAX, 0, 1)
    entry = table.entry(1)
    assert entry is not None and entry.last_sequence == 0
    assert table.check(1, 0, 1, 0) is None


def test_truncation_forgets_later_batches() -> None:
    table = ProducerStateTable()
    appended(table, 1, 0, 0, 0, 10)
    appended(table, 1, 0, 10, 10, 10)
    appended(table, 2, 0, 0, 20, 1)
    table.truncate_to(10)
    assert table.entry(2) is None
    assert table.check(1, 0, 10, 9) is None  # the truncated batch may be sent again
