"""Which keys a broker coordinates: the group and transaction coordinators both place a key on a partition of
their internal topic and serve it where this broker leads that partition, once its records are loaded."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from insync import errors
from insync.broker.core import BrokerCore
from insync.errors import KafkaError
from insync.groups.offsets import partition_for
from insync.types import TopicPartition

E = errors.BY_NAME


def partition_count(core: BrokerCore, topic_name: str) -> int | None:
    """The internal topic's partitions, or None before it exists."""
    topic = core.metadata.image.topic(topic_name)
    return None if topic is None or not topic.partitions else len(topic.partitions)


def coordinator_status(core: BrokerCore, topic_name: str, key: str, loaded: Mapping[int, int],
                       start_load: Callable[[int, int], None]) -> tuple[KafkaError, int]:
    """(NONE, partition) when this broker coordinates `key` with its partition loaded at the current leader
    epoch; else Kafka's error (a load of the partition started when it is led but not loaded)."""
    count = partition_count(core, topic_name)
    if count is None:
        return E["COORDINATOR_NOT_AVAILABLE"], -1
    partition = partition_for(key, count)
    epoch = core.leader_epoch(TopicPartition(topic_name, partition))
    if epoch is None:
        return E["NOT_COORDINATOR"], partition
    if loaded.get(partition) != epoch:
        start_load(partition, epoch)
        return E["COORDINATOR_LOAD_IN_PROGRESS"], partition
    return errors.NONE, partition
