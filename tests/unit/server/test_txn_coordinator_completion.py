"""The transaction coordinator's completion tasks: one per transaction and coordinator epoch, which writes the
Complete state until it is written or the broker no longer coordinates."""

from __future__ import annotations

import asyncio
from typing import Any

from insync import errors
from insync.config import BrokerConfig
from insync.errors import KafkaError
from insync.server.txn_coordinator import TransactionCoordinator
from insync.transactions.coordinator import Decision
from insync.transactions.log_records import TxnMetadata, TxnState
from insync.types import TopicPartition

E = errors.BY_NAME


def test_a_completion_left_from_an_older_coordinator_epoch_is_replaced() -> None:
    """A partition lost and loaded again while a completion still waited on markers: the reload's completion runs
    (the old task would give up at its next step, its epoch gone, and leave the transaction prepared for ever)."""
    started: list[int] = []

    async def scenario() -> None:
        none: Any = None
        coordinator = TransactionCoordinator(BrokerConfig().transactions, none, none, none, none, lambda: 0, none, none)
        coordinator._count = lambda: 1  # type: ignore[method-assign]

        async def complete(txn: TxnMetadata) -> None:
            started.append(coordinator._loaded[0])
            await asyncio.sleep(3600)

        coordinator._complete = complete  # type: ignore[method-assign]
        txn = TxnMetadata("tx", 7, 0, 60_000, TxnState.PREPARE_COMMIT)
        coordinator._loaded[0] = 5
        coordinator._start_completing(txn)
        coordinator._start_completing(txn)  # the same epoch: the running task stays
        await asyncio.sleep(0)
        first, _ = coordinator._completing["tx"]
        coordinator._loaded[0] = 6  # lost and loaded again
        coordinator._start_completing(txn)
        await asyncio.sleep(0)
        second, epoch = coordinator._completing["tx"]
        assert first.cancelled() and second is not first and epoch == 6
        coordinator.close()
        await asyncio.sleep(0)
        assert second.cancelled()

    asyncio.run(scenario())
    assert started == [5, 6]


def test_a_complete_state_whose_append_found_too_few_replicas_is_written_again() -> None:
    """Every marker written, but the CompleteCommit append failed (COORDINATOR_NOT_AVAILABLE: it timed out waiting
    for the ISR): the task writes it again, as Kafka does, instead of leaving the transaction prepared and its id
    answered CONCURRENT_TRANSACTIONS until the coordinator moves."""
    tp = TopicPartition("t", 0)
    txn = TxnMetadata("tx", 7, 0, 60_000, TxnState.PREPARE_COMMIT, frozenset({tp}))
    written: list[TxnState] = []

    async def scenario() -> None:
        none: Any = None
        coordinator = TransactionCoordinator(BrokerConfig().transactions, none, none, none, none, lambda: 0, none, none)
        coordinator._count = lambda: 1  # type: ignore[method-assign]
        coordinator._loaded[0] = 5
        coordinator.state.replay(0, txn, "tx")
        answers = [E["COORDINATOR_NOT_AVAILABLE"], E["COORDINATOR_NOT_AVAILABLE"], errors.NONE]

        async def send_markers(*_: object) -> set[TopicPartition]:
            return {tp}

        async def apply(decision: Decision) -> KafkaError:
            assert decision.write is not None
            written.append(decision.write.state)
            error = answers.pop(0)
            if error is errors.NONE:
                coordinator.state.replay(0, decision.write, "tx")
            else:
                coordinator.state.abandon("tx")
            return error

        coordinator._send_markers = send_markers  # type: ignore[method-assign,assignment]
        coordinator._apply = apply  # type: ignore[method-assign]
        await coordinator._complete(txn)
        current = coordinator.state.get("tx")
        assert current is not None and current.state is TxnState.COMPLETE_COMMIT, current

    asyncio.run(scenario())
    assert written == [TxnState.COMPLETE_COMMIT] * 3
