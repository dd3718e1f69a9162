import itertools
import re

from insync import errors
from insync.transactions.coordinator import EPOCH_MAX, SHORT_MAX, TV2, TransactionCoordinatorCore
from insync.transactions.log_records import TxnState
from insync.types import TopicPartition

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def written(core: TransactionCoordinatorCore, decision: object) -> None:
    """Replay what a decision writes, as the driver does once the record is acknowledged."""
    write = decision.write  # type: ignore[attr-defined]
    assert write is not None
    core.replay(0, write, write.transactional_id)


def started() -> tuple[TransactionCoordinatorCore, int]:
    core, ids = TransactionCoordinatorCore(max_timeout_ms=60_000), itertools.count(1000)
    decision = core.init_producer_id("tx", 10_000, -1, -1, 0, lambda: next(ids))
    written(core, decision)
    txn = core.get("tx")
    assert txn is not None and (txn.producer_id, txn.producer_epoch, txn.state) == (1000, 0, TxnState.EMPTY)
    return core, txn.producer_id


def test_a_transaction_commits_through_prepare_and_complete() -> None:
    core, pid = started()
    written(core, core.add_partitions("tx", pid, 0, [TP0, TP1], 5))
    assert core.add_partitions("tx", pid, 0, [TP0], 6).write is None  # nothing new
    decision = core.end_txn("tx", pid, 0, True, 10)
    assert decision.write is not None and decision.write.state is TxnState.PREPARE_COMMIT
    assert core.end_txn("tx", pid, 0, True, 10).error.name == "CONCURRENT_TRANSACTIONS"  # its write is in flight
    written(core, decision)
    assert core.add_partitions("tx", pid, 0, [TP0], 11).error.name == "CONCURRENT_TRANSACTIONS"
    written(core, core.complete("tx", 12))
    txn = core.get("tx")
    assert txn is not None and txn.state is TxnState.COMPLETE_COMMIT and not txn.partitions
    assert core.end_txn("tx", pid, 0, True, 13).error is errors.NONE  # a retry
    assert core.end_txn("tx", pid, 0, False, 13).error.name == "INVALID_TXN_STATE"


def test_fencing_and_timeouts() -> None:
    core, pid = started()
    ids = itertools.count(2000)
    assert core.init_producer_id("tx", 120_000, -1, -1, 1, lambda: next(ids)).error.name == \
        "INVALID_TRANSACTION_TIMEOUT"
    written(core, core.add_partitions("tx", pid, 0, [TP0], 5))
    # a new producer with the same id: the open transaction is aborted with a bumped epoch first
    decision = core.init_producer_id("tx", 10_000, -1, -1, 6, lambda: next(ids))
    assert decision.error.name == "CONCURRENT_TRANSACTIONS" and decision.write is not None
    assert (decision.write.state, decision.write.producer_epoch) == (TxnState.PREPARE_ABORT, 1)
    written(core, decision)
    assert core.end_txn("tx", pid, 0, True, 7).error.name == "PRODUCER_FENCED"
    written(core, core.complete("tx", 8))
    written(core, core.init_producer_id("tx", 10_000, -1, -1, 9, lambda: next(ids)))
    assert core.get("tx").producer_epoch == 2  # type: ignore[union-attr]
    assert core.add_partitions("tx", pid + 1, 2, [TP0], 10).error.name == "INVALID_PRODUCER_ID_MAPPING"


def test_expired_transactions_are_aborted_with_a_bumped_epoch() -> None:
    core, pid = started()
    written(core, core.add_partitions("tx", pid, 0, [TP0], 100))
    assert core.expired(10_099) == []
    (expired,) = core.expired(10_100)
    decision = core.abort_expired(expired, 10_100)
    assert decision.write is not None and decision.write.state is TxnState.PREPARE_ABORT
    assert decision.write.producer_epoch == 1


def listed(core: TransactionCoordinatorCore, states: frozenset[TxnState] = frozenset(),
           producer_ids: frozenset[int] = frozenset(), duration_ms: int = -1, pattern: str | None = None) -> list[str]:
    found = core.listing(states, producer_ids, duration_ms, None if pattern is None else re.compile(pattern), 1_000)
    return [t.transactional_id for t in found]


def test_listing_applies_kafkas_filters() -> None:
    core, pid = started()
    ids = itertools.count(3000)
    written(core, core.init_producer_id("other", 10_000, -1, -1, 0, lambda: next(ids)))
    written(core, core.add_partitions("tx", pid, 0, [TP0], 100))
    assert listed(core) == ["other", "tx"]
    assert listed(core, states=frozenset({TxnState.ONGOING})) == ["tx"]
    assert listed(core, producer_ids=frozenset({3000})) == ["other"]
    # open for 900 ms at 1,000; Kafka's filter counts from the start time even where there is none (-1)
    assert listed(core, duration_ms=899) == ["other", "tx"]
    assert listed(core, duration_ms=900) == ["other"]
    assert listed(core, pattern="t") == [] and listed(core, pattern="t.") == ["tx"]  # the pattern matches whole ids


def test_verify_answers_whether_each_partition_is_in_the_open_transaction() -> None:
    core, pid = started()
    assert core.verify("tx", pid, 0, [TP0]) == {TP0: errors.BY_NAME["TRANSACTION_ABORTABLE"]}  # none open
    written(core, core.add_partitions("tx", pid, 0, [TP0], 5))
    assert core.verify("tx", pid, 0, [TP0, TP1]) == {TP0: errors.NONE, TP1: errors.BY_NAME["TRANSACTION_ABORTABLE"]}
    assert core.verify("tx", pid, 1, [TP0])[TP0].name == "PRODUCER_FENCED"
    assert core.verify("tx", pid + 1, 0, [TP0])[TP0].name == "INVALID_PRODUCER_ID_MAPPING"
    written(core, core.end_txn("tx", pid, 0, False, 6))
    assert core.verify("tx", pid, 0, [TP0])[TP0].name == "CONCURRENT_TRANSACTIONS"  # being aborted


# Transactions v2 (KIP-890 part 2) ------------------------------------------------------------------------------


def ended_v2(core: TransactionCoordinatorCore, pid: int, epoch: int, commit: bool, now_ms: int) -> tuple[int, int]:
    """An EndTxn v5 written and its markers done: the producer id and epoch its answer carried."""
    decision = core.end_txn("tx", pid, epoch, commit, now_ms, TV2, lambda: 5000)
    assert decision.error is errors.NONE and decision.write is not None, decision
    written(core, decision)
    answered = core.end_txn_ids("tx")
    written(core, core.complete("tx", now_ms + 1))
    assert core.end_txn_ids("tx") == answered
    return answered


def test_each_end_txn_of_transactions_v2_bumps_the_epoch_its_markers_carry() -> None:
    core, pid = started()
    written(core, core.add_partitions("tx", pid, 0, [TP0], 5, TV2))  # as a produce adds it
    decision = core.end_txn("tx", pid, 0, True, 10, TV2, lambda: 5000)
    assert decision.write is not None and (decision.write.state, decision.write.producer_epoch) == \
        (TxnState.PREPARE_COMMIT, 1)  # the markers are written in epoch 1
    written(core, decision)
    assert core.end_txn_ids("tx") == (pid, 1)
    assert core.end_txn("tx", pid, 0, True, 11, TV2, lambda: 5000).error.name == "CONCURRENT_TRANSACTIONS"
    # The next transaction's produce comes in epoch 1 before the markers are done: retried until they are.
    assert core.add_partitions("tx", pid, 1, [TP1], 11, TV2).error.name == "CONCURRENT_TRANSACTIONS"
    written(core, core.complete("tx", 12))
    assert core.end_txn("tx", pid, 0, True, 13, TV2, lambda: 5000).error is errors.NONE  # a retry: epoch 0 + 1
    assert core.end_txn_ids("tx") == (pid, 1)
    assert core.end_txn("tx", pid, 0, False, 13, TV2, lambda: 5000).error.name == "INVALID_TXN_STATE"
    # The old epoch is fenced everywhere else: its late batch cannot reopen a transaction.
    assert core.add_partitions("tx", pid, 0, [TP0], 14, TV2).error.name == "PRODUCER_FENCED"
    assert core.verify("tx", pid, 0, [TP0])[TP0].name == "PRODUCER_FENCED"
    written(core, core.add_partitions("tx", pid, 1, [TP1], 15, TV2))
    assert ended_v2(core, pid, 1, False, 20) == (pid, 2)
    txn = core.get("tx")
    assert txn is not None and (txn.state, txn.producer_epoch, txn.client_version) == (TxnState.COMPLETE_ABORT, 2, TV2)


def test_transactions_v2_refuse_what_the_epoch_rules_forbid() -> None:
    core, pid = started()
    end = core.end_txn
    assert end("tx", pid, 1, True, 5, TV2, lambda: 5000).error.name == "PRODUCER_FENCED"  # a future epoch
    assert end("tx", pid + 1, 0, True, 5, TV2, lambda: 5000).error.name == "INVALID_PRODUCER_ID_MAPPING"
    assert end("tx", pid, 0, True, 5, TV2, lambda: 5000).error.name == "INVALID_TXN_STATE"  # nothing to commit
    # An abort needs no open transaction: it bumps the epoch all the same, with markers to no partition.
    assert ended_v2(core, pid, 0, False, 6) == (pid, 1)
    assert end("tx", pid, 0, False, 8, TV2, lambda: 5000).error is errors.NONE  # its retry
    assert ended_v2(core, pid, 1, False, 9) == (pid, 2)  # and the next abort, in the new epoch
    written(core, core.add_partitions("tx", pid, 2, [TP0], 10, TV2))
    written(core, core.end_txn("tx", pid, 2, True, 11, TV2, lambda: 5000))
    # An abort while the commit is written: a valid epoch (one below the bumped one) but not a valid change.
    assert end("tx", pid, 2, False, 12, TV2, lambda: 5000).error.name == "INVALID_TXN_STATE"


def test_an_exhausted_epoch_moves_to_a_new_producer_id_when_the_transaction_completes() -> None:
    core, pid = started()
    txn = core.get("tx")
    assert txn is not None
    core.replay(0, txn.__class__(**{**{f: getattr(txn, f) for f in txn.__slots__}, "producer_epoch": EPOCH_MAX}),
                "tx")
    written(core, core.add_partitions("tx", pid, EPOCH_MAX, [TP0], 5, TV2))
    decision = core.end_txn("tx", pid, EPOCH_MAX, True, 6, TV2, lambda: 5000)
    assert decision.write is not None and (decision.write.producer_epoch, decision.write.next_producer_id) == \
        (SHORT_MAX, 5000)  # the markers carry Short.MaxValue, which no client uses
    written(core, decision)
    assert core.end_txn_ids("tx") == (5000, 0)
    written(core, core.complete("tx", 7))
    txn = core.get("tx")
    assert txn is not None and (txn.producer_id, txn.producer_epoch, txn.prev_producer_id) == (5000, 0, pid)
    assert core.end_txn("tx", pid, EPOCH_MAX, True, 8, TV2, lambda: 6000).error is errors.NONE  # its retry
    assert core.end_txn_ids("tx") == (5000, 0)


def test_a_v1_end_txn_keeps_the_epoch() -> None:
    core, pid = started()
    written(core, core.add_partitions("tx", pid, 0, [TP0], 5))
    decision = core.end_txn("tx", pid, 0, True, 6)
    assert decision.write is not None and (decision.write.producer_epoch, decision.write.client_version) == (0, 0)
