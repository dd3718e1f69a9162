"""Transactions in the simulator: the production coordinator on every broker, transactional producers under
leader, coordinator and broker faults, and the checker's Jepsen properties (no aborted read, no torn transaction,
no lost committed write, no duplicate, no hanging transaction); the checker is shown to fail on planted
violations, including an aborted batch a broken read path would leave visible."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from insync.protocol.control_records import AbortedTxn, marker_batch
from insync.sim.batches import make_batch
from insync.sim.run import run_scenario
from insync.sim.scenario import load_document, load_scenario, parse_scenario
from insync.sim.sweep import local_processes, sweep
from insync.sim.txn_checker import PartitionTxnView, check_transactions, committed_batches
from insync.sim.txn_workload import TxnAttempt, TxnHistory
from insync.types import TopicPartition

A, B = TopicPartition("txn", 0), TopicPartition("txn", 1)
# Faults from the first second, closer together, and shorter transaction timeouts: a quick run with several faults.
# The quiesce outlasts a marker request lost with a killed leader (its timeout) and a transaction's timeout.
SHORT = {"duration_s": "6", "quiesce_s": "40", "chaos.start_s": "1", "chaos.gap_s": "[0.5, 1]",
         "chaos.duration_s": "[0.5, 2]", "transactions.timeout_ms": "3000"}


@pytest.mark.slow  # the scenario's runs are test-slow's; the checker's own tests below stay in make test
@pytest.mark.parametrize("seed", range(5))
def test_transactions_under_faults_keep_the_properties(seed: int) -> None:
    result = run_scenario(load_scenario("transactions", SHORT, seed=seed), SHORT)
    assert result.ok, f"seed {seed}: {result.invariant_violations[:5]} {result.expectation_failures}"
    assert result.transactions["committed"] > 0 and result.transactions["aborted"] > 0, result.transactions
    assert result.transactions["open"] <= 3  # at most the producers' last, cut off by the end of the run


@pytest.mark.slow
def test_killing_every_coordinator_in_turn_moves_the_transactions_and_keeps_the_properties() -> None:
    document = load_document("transactions")
    del document["chaos"]
    document["duration_s"] = 36
    # Each __transaction_state partition's leader killed in turn, mid-transaction: its ids move to a new leader,
    # which replays the partition and completes what was prepared; the producers find it again. The kills are
    # far enough apart for the restarted broker to catch up first: logs are not fsynced, so a kill costs the
    # broker its log, and three close together leave no replica to elect cleanly.
    document["faults"] = [{"at_s": 2 + 12 * p, "kind": "kill", "target": "coordinator", "partition": p,
                           "restart_after_s": 2} for p in range(3)]
    result = run_scenario(parse_scenario(document))
    assert result.ok, result.invariant_violations[:5]
    assert sum(1 for line in result.trace if "fault kill" in line) == 3, result.trace
    moved = sum(result.transactions.get(f"error.{name}", 0) for name in
                ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS", "REQUEST_TIMED_OUT"))
    assert moved > 0 and result.transactions["committed"] > 0, result.transactions


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_transactions_clean_over_eight_seeds() -> None:
    """CI's share of the sweep (eight seeds: twenty took CI's test-slow 161 s of both cores, and CI has 45 minutes);
    `insync sim sweep transactions --seeds 1000` is the full one (docs/benchmarks.md)."""
    summary = sweep("transactions", {}, range(8), local_processes(2))
    assert not summary.failures, summary.table()


@pytest.mark.slow
def test_a_run_is_a_pure_function_of_its_seed_whatever_the_string_hashes() -> None:
    # Two processes with different hash seeds: iterating a set of partitions somewhere would change the run.
    code = ("import logging; logging.disable(logging.CRITICAL)\n"
            "from insync.sim.run import run_scenario\nfrom insync.sim.scenario import load_scenario\n"
            f"short = {SHORT!r}\nr = run_scenario(load_scenario('transactions', short, seed=7), short)\n"
            "print(r.sim_events, sorted(r.transactions.items()))")
    outputs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(hash_seed)}).stdout for hash_seed in (1, 2)]
    assert outputs[0] == outputs[1] and "committed" in outputs[0], outputs


# The checker over planted histories and logs ----------------------------------------------------------------


def _history(*attempts: TxnAttempt) -> TxnHistory:
    history = TxnHistory()
    for attempt in attempts:
        history.begin(attempt)
    return history


def _attempt(producer_id: int, outcome: str, commit_requested: bool) -> TxnAttempt:
    return TxnAttempt("t-1", producer_id, 0, {A: 0, B: 0}, commit_requested, outcome)


def _view(log: list[tuple[int, int, int]], visible: list[tuple[int, int, int]], lso: int = 10) -> PartitionTxnView:
    return PartitionTxnView(log, visible, 10, lso)


def test_a_clean_history_has_no_violation() -> None:
    committed, aborted = _attempt(1, "committed", True), _attempt(2, "aborted", False)
    views = {tp: _view([(1, 0, 0), (2, 0, 0)], [(1, 0, 0)]) for tp in (A, B)}
    assert check_transactions(_history(committed, aborted), views) == []


def test_an_aborted_record_visible_to_read_committed_is_an_aborted_read() -> None:
    aborted = _attempt(2, "aborted", False)
    views = {tp: _view([(2, 0, 0)], [(2, 0, 0)]) for tp in (A, B)}
    (violation,) = check_transactions(_history(aborted), views)
    assert violation.startswith("aborted read") and "txn-0, txn-1" in violation


def test_a_transaction_visible_on_one_partition_only_is_torn() -> None:
    unknown = _attempt(3, "abandoned", True)  # commit asked, answer lost: either outcome is fine, but not half
    views = {A: _view([(3, 0, 0)], [(3, 0, 0)]), B: _view([(3, 0, 0)], [])}
    (violation,) = check_transactions(_history(unknown), views)
    assert violation.startswith("torn transaction") and "not on txn-1" in violation


def test_a_committed_transaction_missing_from_a_log_is_a_lost_write() -> None:
    committed = _attempt(1, "committed", True)
    views = {A: _view([(1, 0, 0)], [(1, 0, 0)]), B: _view([], [])}
    (violation,) = check_transactions(_history(committed), views)
    assert violation.startswith("lost committed write") and "txn-1" in violation


def test_duplicates_unknown_batches_and_hanging_transactions_are_reported() -> None:
    committed = _attempt(1, "committed", True)
    views = {A: _view([(1, 0, 0), (1, 0, 0), (9, 0, 0)], [(1, 0, 0)], lso=4), B: _view([(1, 0, 0)], [(1, 0, 0)])}
    violations = check_transactions(_history(committed), views)
    assert any(v.startswith("txn-0: duplicate") for v in violations), violations
    assert any("written by no transaction" in v for v in violations), violations
    assert any("hanging transaction" in v for v in violations), violations


def _log_with_an_aborted_transaction() -> bytes:
    """Producer 5's aborted batch at offset 0, its ABORT marker at 3, producer 6's committed batch at 4 and
    COMMIT marker at 7 (offsets stamped as a leader would)."""
    parts = [(make_batch(5, 0, 3, 16, 1, transactional=True), 0), (marker_batch(5, 0, 0, False, 1), 3),
             (make_batch(6, 0, 3, 16, 1, transactional=True), 4), (marker_batch(6, 0, 0, True, 1), 7)]
    return b"".join(offset.to_bytes(8, "big") + batch[8:] for batch, offset in parts)


def test_the_consumer_filter_drops_aborted_batches_and_markers() -> None:
    records = _log_with_an_aborted_transaction()
    kept = committed_batches(records, (AbortedTxn(5, 0, 3),))
    assert [(h.producer_id, h.base_offset) for h in kept] == [(6, 4)]


def test_an_aborted_index_that_misses_a_transaction_is_caught() -> None:
    # A read path that forgot producer 5's abort would hand its batch to read_committed consumers.
    records = _log_with_an_aborted_transaction()
    leaked = [(h.producer_id, h.producer_epoch, h.base_sequence) for h in committed_batches(records, ())]
    assert leaked == [(5, 0, 0), (6, 0, 0)]
    aborted = TxnAttempt("t-5", 5, 0, {A: 0}, False, "aborted")
    committed = TxnAttempt("t-6", 6, 0, {A: 0}, True, "committed")
    views = {A: PartitionTxnView([(5, 0, 0), (6, 0, 0)], leaked, 8, 8)}
    (violation,) = check_transactions(_history(aborted, committed), views)
    assert violation.startswith("aborted read: transaction of t-5")
