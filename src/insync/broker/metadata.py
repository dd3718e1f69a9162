"""A broker's copy of the cluster metadata, and what each published batch of records means for this broker.

The broker replays the controller's published records, in offset order, into its own `MetadataImage` (the same
fold the controller uses, so both agree). After each batch it compares, for every partition the batch touched,
the registration before and after, and turns the difference into `PartitionDelta`s, the broker's equivalent of
KRaft's `TopicsDelta.localChanges`:
- `LEADER`: this broker leads the partition at a new leader epoch (or starts leading it);
- `FOLLOWER`: it follows at a new leader epoch (a new leader, or leader -1 while offline);
- `ISR`: only the ISR / partition epoch changed (what a leader must adopt, e.g. after a fencing);
- `STOP`: it no longer hosts the partition (the topic was deleted or reassigned away);
- `CONFIG`: the topic's config overrides changed (IncrementalAlterConfigs), for every partition it hosts.
Records arriving out of order (a gap) are refused: the caller fetches from `applied_offset` again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from insync.broker.messages import MetadataRequest, MetadataResponse, PartitionMetadata
from insync.metadata.image import MetadataImage, PartitionRegistration
from insync.metadata.records import (
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RemoveTopicRecord,
)
from insync.types import BrokerId, LeaderEpoch, TopicPartition


class DeltaKind(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    ISR = "isr"
    STOP = "stop"
    CONFIG = "config"  # the topic's config overrides changed (IncrementalAlterConfigs): apply them to the partition


@dataclass(frozen=True, slots=True)
class PartitionDelta:
    kind: DeltaKind
    topic_partition: TopicPartition
    topic_id: str
    registration: PartitionRegistration | None  # None for STOP


class BrokerMetadata:
    """The image as this broker knows it; `apply` is the only way it changes."""

    def __init__(self, broker_id: BrokerId) -> None:
        self.broker_id = broker_id
        self.image = MetadataImage()

    @property
    def applied_offset(self) -> int:
        """Records applied so far: the offset of the next record this broker needs."""
        return self.image.offset

    def apply(self, records: Iterable[tuple[int, Record]]) -> list[PartitionDelta] | None:
        """Replay a contiguous run of `(offset, record)`; None (and nothing applied) if it does not start here."""
        batch = [(offset, record) for offset, record in records if offset >= self.applied_offset]
        if not batch:
            return []
        if batch[0][0] != self.applied_offset or any(b[0] != a[0] + 1 for a, b in zip(batch, batch[1:], strict=False)):
            return None
        before = self.image
        touched: dict[tuple[str, int], None] = {}
        removed: list[str] = []
        configured: dict[str, None] = {}
        for _, record in batch:
            if isinstance(record, PartitionRecord | PartitionChangeRecord):
                touched[(record.topic_id, record.partition)] = None
            elif isinstance(record, RemoveTopicRecord):
                removed.append(record.topic_id)
            elif isinstance(record, ConfigRecord) and before.topic(record.topic) is not None:
                configured[record.topic] = None  # a new topic's configs come with it: nothing to re-apply
        self.image = before.replay_all(record for _, record in batch)
        assert self.image.offset == batch[-1][0] + 1
        # A removed topic's partitions stop first, as KRaft's ReplicaManager.applyDelta does: a topic deleted and
        # created again under its name in one batch must not meet the old partition (its epochs, its log).
        deltas = [stop for topic_id in removed for stop in self._stops(before, topic_id)]
        deltas.extend(delta for key in touched if (delta := self._delta(before, key[0], key[1])) is not None)
        for name in configured:
            deltas.extend(self._reconfigured(name))
        return deltas

    def _delta(self, before: MetadataImage, topic_id: str, partition: int) -> PartitionDelta | None:
        after_topic = self.image.topics_by_id.get(topic_id)
        if after_topic is None:
            return None  # created and removed in one batch; `_stops` handles what we hosted
        new = after_topic.partitions.get(partition)
        old = before.partition(topic_id, partition)
        tp = TopicPartition(after_topic.name, partition)
        me = self.broker_id
        hosted_before = old is not None and me in old.replicas
        if new is None or me not in new.replicas:
            return PartitionDelta(DeltaKind.STOP, tp, topic_id, None) if hosted_before else None
        epoch_changed = old is None or not hosted_before or old.leader_epoch != new.leader_epoch
        if epoch_changed:
            kind = DeltaKind.LEADER if new.leader == me else DeltaKind.FOLLOWER
            return PartitionDelta(kind, tp, topic_id, new)
        assert old is not None
        if old.partition_epoch != new.partition_epoch:
            return PartitionDelta(DeltaKind.ISR, tp, topic_id, new)
        return None

    def _stops(self, before: MetadataImage, topic_id: str) -> list[PartitionDelta]:
        topic = before.topics_by_id.get(topic_id)
        if topic is None:
            return []
        return [PartitionDelta(DeltaKind.STOP, TopicPartition(topic.name, p), topic_id, None)
                for p, reg in sorted(topic.partitions.items()) if self.broker_id in reg.replicas]

    def _reconfigured(self, name: str) -> list[PartitionDelta]:
        topic = self.image.topic(name)
        if topic is None:
            return []
        return [PartitionDelta(DeltaKind.CONFIG, TopicPartition(name, p), topic.topic_id, reg)
                for p, reg in sorted(topic.partitions.items()) if self.broker_id in reg.replicas]

    def hosted_deltas(self) -> list[PartitionDelta]:
        """The role of every partition this broker hosts in the current image, as if all were new: what a
        broker applies once, when it has caught up with the metadata after (re)starting."""
        deltas = []
        for view in self.image.all_partitions():
            reg = view.registration
            if self.broker_id in reg.replicas:
                kind = DeltaKind.LEADER if reg.leader == self.broker_id else DeltaKind.FOLLOWER
                deltas.append(PartitionDelta(kind, TopicPartition(view.topic, view.partition), view.topic_id, reg))
        return deltas

    # Queries ------------------------------------------------------------------------------------------

    def client_metadata(self, request: MetadataRequest) -> MetadataResponse:
        """Leader, epoch, replicas and ISR of each partition of the topics asked for that the image knows."""
        partitions = []
        for name in request.topics:
            topic = self.image.topic(name)
            if topic is None:
                continue
            for number, reg in sorted(topic.partitions.items()):
                partitions.append(PartitionMetadata(TopicPartition(name, number), BrokerId(reg.leader),
                                                    LeaderEpoch(reg.leader_epoch), reg.replicas, reg.isr))
        return MetadataResponse(request.correlation_id, tuple(partitions))

    def registration(self, tp: TopicPartition) -> PartitionRegistration | None:
        topic = self.image.topic(tp.topic)
        return None if topic is None else topic.partitions.get(tp.partition)

    def image_configs(self, topic: str) -> Mapping[str, str]:
        """The topic's config overrides in the current image."""
        return self.image.configs(topic)

    def topic_id(self, topic: str) -> str | None:
        return self.image.topic_ids_by_name.get(topic)

    def is_eligible(self, broker_id: BrokerId) -> bool:
        return self.image.is_eligible(broker_id)
