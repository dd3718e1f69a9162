"""The transaction coordinator's completion tasks: one per transaction and coordinator epoch."""

from __future__ import annotations

import asyncio
from typing import Any

from insync.config import BrokerConfig
from insync.server.txn_coordinator import TransactionCoordinator
from insync.transactions.log_records import TxnMetadata, TxnState


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
