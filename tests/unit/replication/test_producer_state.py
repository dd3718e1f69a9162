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


def test_a_marker_that_raises_the_epoch_forgets_the_older_epochs_batches() -> None:
    """Kafka's maybeUpdateProducerEpoch: after an abort in a bumped epoch, the producer's first batch of that
    epoch (sequence 0) is appended, not answered as a duplicate of the old epoch's sequence 0."""
    import dataclasses

    from insync.protocol.control_records import marker_batch
    from insync.protocol.records import build_batch, parse_header

    table = ProducerStateTable()
    old = build_batch([(None, b"x")], producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True)
    table.observe(dataclasses.replace(parse_header(old), base_offset=0), old, 0)
    abort = marker_batch(1, 1, 0, False, 1_000)
    table.observe(dataclasses.replace(parse_header(abort), base_offset=1), abort, 0)
    assert table.check(1, 1, 0, 0) is None
    assert code_of(lambda: table.check(1, 0, 1, 0)) == errors.INVALID_PRODUCER_EPOCH.name


def test_unknown_producer_and_non_idempotent_batches() -> None:
    table = ProducerStateTable()
    # Kafka (KIP-360): a producer the partition no longer knows continues at whatever sequence it is at
    assert table.check(9, 0, 3, 0) is None
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


def test_leader_answers_a_retry_with_the_original_offsets_and_a_new_leader_does_too() -> None:
    from repl_helpers import T0, follower_of, ids, leader, log_bytes, new_partition

    from insync.protocol.records import build_batch
    from insync.replication.producer_state import rebuild_from_log
    from insync.types import BrokerId, LeaderEpoch, PartitionEpoch

    old = leader(1, isr=(1,), replicas=(1, 2))
    first = build_batch([(b"k", b"a"), (b"k", b"b")], producer_id=7, producer_epoch=0, base_sequence=0)
    second = build_batch([(b"k", b"c")], producer_id=7, producer_epoch=0, base_sequence=2)
    assert old.append_records_as_leader(first, 1, T0).first_offset == 0
    assert old.append_records_as_leader(second, 1, T0).first_offset == 2
    retry = old.append_records_as_leader(first, 1, T0)
    assert (retry.first_offset, retry.last_offset) == (0, 1)
    assert old.log.log_end_offset == 3  # nothing appended twice
    gap = build_batch([(b"k", b"d")], producer_id=7, producer_epoch=0, base_sequence=9)
    with pytest.raises(KafkaException, match="OUT_OF_ORDER_SEQUENCE_NUMBER"):
        old.append_records_as_leader(gap, 1, T0)

    # A follower that replicated the batches knows the producer: as the new leader it dedupes the retry.
    follower = new_partition(2)
    follower.make_follower(BrokerId(1), LeaderEpoch(1), PartitionEpoch(1), ids((1, 2)), ids((1, 2)), T0)
    replica = follower_of(follower)
    replica.append_fetched_records(replica.fetch_position().fetch_offset, log_bytes(old.log), 3, 0, T0)
    assert follower.make_leader(LeaderEpoch(2), PartitionEpoch(2), ids((2,)), ids((1, 2)), T0)
    assert follower.append_records_as_leader(second, 1, T0).first_offset == 2
    assert follower.log.log_end_offset == 3
    # And a restart rebuilds the same knowledge from the log alone.
    assert rebuild_from_log(follower.log).check(7, 0, 2, 0) is not None
