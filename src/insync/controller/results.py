"""What the controller's operations return (`Controller`'s results), in their own module to keep the controller's
under the size limit; `controller.controller` re-exports them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from insync.errors import KafkaError
from insync.metadata.records import Record
from insync.types import NO_LEADER, BrokerId

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[T]):
    records: tuple[Record, ...]
    response: T


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


@dataclass(frozen=True, slots=True)
class CreateTopicResponse:
    topic_id: str
    assignments: tuple[tuple[BrokerId, ...], ...]  # replicas per partition, the first one leads


@dataclass(frozen=True, slots=True)
class AlterPartitionDataResult:
    """The partition's state after the request (or as it stands, with the error that refused the change)."""

    topic_id: str
    partition: int
    error: KafkaError
    leader: BrokerId = NO_LEADER
    isr: tuple[BrokerId, ...] = ()
    leader_epoch: int = -1
    partition_epoch: int = -1
    leader_recovery_state: int = 0  # KIP-704 (AlterPartition v1+)
