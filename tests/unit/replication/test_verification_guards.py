import pytest

from insync.errors import KafkaException
from insync.protocol.control_records import marker_batch
from insync.protocol.records import build_batch, iter_batches
from insync.replication.producer_state import ProducerStateTable
from insync.replication.verification_guards import GUARDS_MAX, VerificationGuards


def test_a_marker_appended_while_the_coordinator_was_asked_voids_the_guard() -> None:
    guards = VerificationGuards()
    token = guards.start(7, 0, bumps_epoch=False)
    assert guards.holds(7, token)
    guards.on_batch(7, 0, is_control=True)  # the transaction aborted on this partition meanwhile
    assert not guards.holds(7, token)
    assert guards.holds(7, guards.start(7, 0, bumps_epoch=False))  # a retry verifies again


def test_requests_in_flight_share_a_guard_and_the_first_append_spends_it() -> None:
    guards = VerificationGuards()
    first, second = guards.start(7, 0, False), guards.start(7, 0, False)
    assert first == second and len(guards) == 1
    guards.on_batch(7, 0, is_control=False)
    assert not guards.holds(7, first)
    guards.on_batch(8, 0, is_control=False)  # another producer's batch: nothing to clear
    assert len(guards) == 0


def test_the_previous_transactions_marker_in_the_verified_epoch_keeps_a_v2_guard() -> None:
    guards = VerificationGuards()
    token = guards.start(7, 3, bumps_epoch=True)  # the next transaction, in the epoch EndTxn gave
    guards.on_batch(7, 3, is_control=True)  # the previous one's marker, carrying that epoch
    assert guards.holds(7, token)
    guards.on_batch(7, 4, is_control=True)  # a later marker (a fence or timeout abort) voids it
    assert not guards.holds(7, token)


def test_guards_are_bounded() -> None:
    guards = VerificationGuards()
    for producer_id in range(GUARDS_MAX + 1):
        guards.start(producer_id, 0, False)
    assert len(guards) == GUARDS_MAX and not guards.holds(0, 1)


def test_the_partitions_table_clears_a_guard_when_it_observes_the_producers_marker() -> None:
    table = ProducerStateTable()
    token = table.verifications.start(7, 0, False)
    batch = marker_batch(7, 0, 0, False, 1_000)
    for position, header in iter_batches(batch, verify_crc=False):
        table.observe(header, batch, position)
    assert not table.verifications.holds(7, token)


def test_a_guard_keeps_the_lowest_sequence_of_its_newest_epoch() -> None:
    guards = VerificationGuards()
    guards.start(7, 3, bumps_epoch=True, base_sequence=9)
    guards.start(7, 3, bumps_epoch=True, base_sequence=0)  # an earlier batch of the same epoch
    assert guards.refusal(7, 0, has_state=True) is None
    assert "9 (incoming seq. number), 0 (earliest seen sequence)" in str(guards.refusal(7, 9, has_state=True))
    guards.start(7, 2, bumps_epoch=True, base_sequence=0)  # an older epoch leaves the lowest alone
    guards.start(7, 4, bumps_epoch=True, base_sequence=5)  # a newer epoch starts it again
    assert guards.refusal(7, 5, has_state=True) is None
    assert guards.refusal(8, 5, has_state=False) is None  # no guard, nothing to say


def test_a_v2_batch_past_zero_for_a_producer_the_partition_does_not_know_is_out_of_order() -> None:
    guards = VerificationGuards()
    guards.start(7, 0, bumps_epoch=True, base_sequence=9)  # the batch before it is not verified yet
    assert "Expected sequence 0 for transactions v2" in str(guards.refusal(7, 9, has_state=False))
    guards = VerificationGuards()
    guards.start(7, 0, bumps_epoch=False, base_sequence=9)  # transactions v1: Kafka accepts an unknown producer
    assert guards.refusal(7, 9, has_state=False) is None


def test_a_batch_that_overtook_one_being_verified_is_refused_out_of_order_and_appends_after_it() -> None:
    """Two batches of one transactions-v2 producer on a partition it has never written, both being verified: the
    second may not land first (its records would precede the first's, and the first could never follow)."""
    table = ProducerStateTable()

    def batch(sequence: int, count: int) -> bytes:
        return build_batch([(None, b"v")] * count, producer_id=7, producer_epoch=0, base_sequence=sequence,
                           is_transactional=True)

    table.verifications.start(7, 0, True, 0)
    table.verifications.start(7, 0, True, 9)
    with pytest.raises(KafkaException) as refused:
        table.check_batch(batch(9, 1))
    assert refused.value.error.name == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    first = batch(0, 9)
    assert table.check_batch(first) is None
    for position, header in iter_batches(first, verify_crc=False):  # appended at offset 0
        table.observe(header, first, position)
    assert table.check_batch(batch(9, 1)) is None  # the guard is spent: the second follows in sequence
