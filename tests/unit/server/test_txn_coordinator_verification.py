"""KIP-890 on a partition leader: what a producer reads when the coordinator did not verify or add its batch's
partition, by produce version, and the bounded retry of an add the coordinator answers CONCURRENT_TRANSACTIONS."""

from __future__ import annotations

import asyncio
from typing import Any

from insync import errors
from insync.config import BrokerConfig
from insync.server.txn_coordinator import ADD_RETRIES_MAX, TransactionCoordinator, leader_answer
from insync.types import TopicPartition
from insync.wire import transactions as api

E = errors.BY_NAME
TP = TopicPartition("t", 0)


def test_a_leader_translates_the_coordinators_answers_as_kafka_does() -> None:
    v9, v11, v12 = (False, False), (False, True), (True, True)  # (adds, knows TRANSACTION_ABORTABLE)
    assert leader_answer(E["TRANSACTION_ABORTABLE"], *v9) == (E["INVALID_TXN_STATE"],
                                                              "Partition was not added to the transaction")
    assert leader_answer(E["TRANSACTION_ABORTABLE"], *v11) == (E["TRANSACTION_ABORTABLE"], None)
    assert leader_answer(E["PRODUCER_FENCED"], *v12) == (E["INVALID_PRODUCER_EPOCH"], None)
    error, message = leader_answer(E["NOT_COORDINATOR"], *v12)
    assert error.name == "NOT_ENOUGH_REPLICAS" and message is not None and message.endswith("NOT_COORDINATOR")
    assert leader_answer(E["CONCURRENT_TRANSACTIONS"], *v11)[0].name == "NOT_ENOUGH_REPLICAS"
    assert leader_answer(E["CONCURRENT_TRANSACTIONS"], *v12) == (E["CONCURRENT_TRANSACTIONS"], None)


def _coordinator(answers: list[errors.KafkaError]) -> tuple[TransactionCoordinator, list[api.TxnPartitions]]:
    none: Any = None
    coordinator = TransactionCoordinator(BrokerConfig().transactions, none, none, none, none, lambda: 0, none, none)
    asked: list[api.TxnPartitions] = []

    async def ask(txn: api.TxnPartitions) -> dict[TopicPartition, errors.KafkaError]:
        asked.append(txn)
        return {TP: answers[min(len(asked), len(answers)) - 1]}

    coordinator._ask_coordinator = ask  # type: ignore[method-assign]
    return coordinator, asked


def test_an_add_is_retried_while_the_previous_transaction_completes_and_a_verification_is_not() -> None:
    concurrent = E["CONCURRENT_TRANSACTIONS"]
    coordinator, asked = _coordinator([concurrent, concurrent, errors.NONE])
    adding = api.TxnPartitions("tx", 1, 0, False, (TP,))
    assert asyncio.run(coordinator.add_or_verify(adding)) == {TP: errors.NONE} and len(asked) == 3
    coordinator, asked = _coordinator([concurrent])
    assert asyncio.run(coordinator.add_or_verify(adding)) == {TP: concurrent}
    assert len(asked) == 1 + ADD_RETRIES_MAX  # bounded: the producer retries what is left
    coordinator, asked = _coordinator([concurrent])
    verifying = api.TxnPartitions("tx", 1, 0, True, (TP,))
    assert asyncio.run(coordinator.add_or_verify(verifying)) == {TP: concurrent} and len(asked) == 1
