"""Kafka's own `server.log` wording for ISR, leadership and fetcher lines (REFERENCE.md 10, the 3.x forms).

Operators grep Kafka logs for these lines and tools parse them; insync's partitions and fetchers write the same
words through these functions, so one parser reads both (`insync analyze` does). `KafkaLogFormatter` gives
Python logging log4j's layout (timestamps in UTC):

    [2024-03-01 12:00:01,234] INFO [Partition t-0 broker=1] Shrinking ISR from 1,2,3 to 1,2. ... (kafka.cluster.Partition)

"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

PARTITION_LOGGER = "kafka.cluster.Partition"
FETCHER_LOGGER = "kafka.server.ReplicaFetcherThread"
MANAGER_LOGGER = "kafka.server.ReplicaManager"


def _ids(brokers: Iterable[int]) -> str:
    return ",".join(str(b) for b in brokers)


def _value(value: object) -> str:
    return "unknown" if value is None or (isinstance(value, int) and value < 0) else str(value)


def partition_prefix(topic: str, partition: int, broker: int) -> str:
    return f"[Partition {topic}-{partition} broker={broker}] "


def shrink_message(isr_before: Iterable[int], isr_after: Iterable[int], hw: int, leo: int,
                   removed: Iterable[Mapping[str, Any]]) -> str:
    """Kafka 3.6+: `Shrinking ISR from 1,2,3 to 1,2. Leader: (...). Out of sync replicas: (...).`"""
    replicas = ", ".join(
        f"(brokerId: {r['broker']}, endOffset: {_value(r.get('leo'))}, "
        f"lastCaughtUpTimeMs: {_value(r.get('last_caught_up_ms'))})" for r in removed)
    return (f"Shrinking ISR from {_ids(isr_before)} to {_ids(isr_after)}. "
            f"Leader: (highWatermark: {hw}, endOffset: {leo}). Out of sync replicas: {replicas}.")


def isr_updated_message(isr: Iterable[int], partition_epoch: int, under_min_isr: bool) -> str:
    """Kafka 3.5+ commit line; two spaces before `and` when not under min ISR, as Kafka prints it."""
    marker = " (under-min-isr)" if under_min_isr else " "
    return f"ISR updated to {_ids(isr)}{marker} and version updated to {partition_epoch}"


def leader_message(topic: str, partition: int, leader_epoch: int, offset: int, hw: int, isr: Iterable[int],
                   previous_epoch: int) -> str:
    return (f"Leader {topic}-{partition} starts at leader epoch {leader_epoch} from offset {offset} with high "
            f"watermark {hw} ISR [{_ids(isr)}] addingReplicas [] removingReplicas []. "
            f"Previous leader epoch was {previous_epoch}.")


def follower_message(topic: str, partition: int, leader_epoch: int, offset: int, hw: int,
                     previous_epoch: int) -> str:
    return (f"Follower {topic}-{partition} starts at leader epoch {leader_epoch} from offset {offset} with high "
            f"watermark {hw}. Previous leader epoch was {previous_epoch}.")


def min_isr_message(isr: Iterable[int], min_isr: int, topic: str, partition: int) -> str:
    return (f"The size of the current ISR Set({_ids(isr)}) is insufficient to satisfy the min.isr requirement "
            f"of {min_isr} for partition {topic}-{partition}")


def failed_message(topic: str, partition: int) -> str:
    return f"Partition {topic}-{partition} marked as failed"


class KafkaLogFormatter(logging.Formatter):
    """log4j's `[%d] %p %m (%c)%n` layout, in UTC."""

    converter = time.gmtime  # type: ignore[assignment]  # typeshed narrows gmtime

    def __init__(self) -> None:
        super().__init__(fmt="[%(asctime)s,%(msecs)03d] %(levelname)s %(message)s (%(name)s)",
                         datefmt="%Y-%m-%d %H:%M:%S")

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        if record.levelname == "WARNING":
            record.levelname = "WARN"
        return super().formatMessage(record)
