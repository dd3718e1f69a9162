"""Automatic leader balancing (`auto.leader.rebalance.enable`), scheduled as Kafka's KRaft controller does it.

Kafka's `QuorumController.maybeScheduleNextBalancePartitionLeaders` runs after every controller write: once any
partition is led by a replica other than its preferred one (the first of its replicas; leaderless partitions
count), and no balance is pending, one is scheduled `leader.imbalance.check.interval.seconds` later. The
balance (`ReplicationControlManager.maybeBalancePartitionLeaders`) elects the preferred replica wherever it is
in the ISR and may lead, at most `MAX_ELECTIONS_PER_IMBALANCE` partitions a round; when more were waiting, the
next round follows at once, otherwise the next write that finds an imbalance schedules it again. So after a
rolling restart leadership returns to the preferred replicas by itself, one interval after the last restart's
elections at most. `leader.imbalance.per.broker.percentage` is accepted but, as in KRaft, unused: any
imbalanced partition schedules the check.

`LeaderBalance` is the schedule alone (pure, time as an argument); `Controller` elects.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from insync.config import ControllerConfig
from insync.metadata.image import MetadataImage

MAX_ELECTIONS_PER_IMBALANCE = 1000  # Kafka's ReplicationControlManager.maxElectionsPerImbalance


def is_imbalanced(image: MetadataImage) -> bool:
    """Some partition is not led by its preferred replica (Kafka's non-empty `imbalancedPartitions`)."""
    return any(topic.partitions[index].leader != topic.partitions[index].replicas[0]
               for topic in image.topics_by_id.values() for index in topic.partitions)


@dataclass(frozen=True, slots=True)
class LeaderBalance:
    interval_ms: int | None  # None: auto.leader.rebalance.enable=false
    due_ms: int | None = None

    def __post_init__(self) -> None:
        assert self.interval_ms is None or self.interval_ms > 0, self
        assert self.due_ms is None or self.interval_ms is not None, self

    @classmethod
    def from_config(cls, config: ControllerConfig) -> LeaderBalance:
        return cls(config.leader_imbalance_check_interval_ms if config.auto_leader_rebalance_enable else None)

    def after_write(self, image: MetadataImage, now_ms: int) -> LeaderBalance:
        """After a write: a balance one interval from now if the image is imbalanced and none is pending."""
        if self.interval_ms is None or self.due_ms is not None or not is_imbalanced(image):
            return self
        return replace(self, due_ms=now_ms + self.interval_ms)

    def is_due(self, now_ms: int) -> bool:
        return self.due_ms is not None and now_ms >= self.due_ms

    def after_balance(self, more_waiting: bool, now_ms: int) -> LeaderBalance:
        """After a round: the next at once when it left elections waiting, else none until `after_write`."""
        assert self.is_due(now_ms), self
        return replace(self, due_ms=now_ms if more_waiting else None)
