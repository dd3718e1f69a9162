from insync.protocol.control_records import marker_batch
from insync.protocol.records import iter_batches
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
