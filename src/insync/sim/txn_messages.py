"""The requests a simulated transactional producer sends its transaction coordinator, and the answers.

They stand for Kafka's FindCoordinator (key type TRANSACTION), InitProducerId with a transactional id,
AddPartitionsToTxn and EndTxn as the server decodes them (`wire.transactions`); the simulator passes these plain
dataclasses instead of encoded requests, as it passes `broker.messages` for Produce and Fetch.
"""

from __future__ import annotations

from dataclasses import dataclass

from insync.errors import KafkaError
from insync.types import TopicPartition


@dataclass(frozen=True, slots=True)
class FindTxnCoordinator:
    correlation_id: int
    transactional_id: str


@dataclass(frozen=True, slots=True)
class TxnCoordinatorAnswer:
    correlation_id: int
    error: KafkaError
    broker_id: int = -1


@dataclass(frozen=True, slots=True)
class InitTxnProducer:
    correlation_id: int
    transactional_id: str
    timeout_ms: int
    producer_id: int = -1  # with the current epoch: KIP-360's bump of an existing producer
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class AddTxnPartitions:
    correlation_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class EndTxn:
    correlation_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool


@dataclass(frozen=True, slots=True)
class TxnAnswer:
    correlation_id: int
    error: KafkaError
    producer_id: int = -1
    producer_epoch: int = -1


TxnRequest = FindTxnCoordinator | InitTxnProducer | AddTxnPartitions | EndTxn
