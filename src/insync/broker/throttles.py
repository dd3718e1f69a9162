"""Replication throttles, as Kafka's: they keep a reassignment's copying from starving producers and in-sync
followers.

A topic lists the replicas throttled on this broker: `leader.replication.throttled.replicas` the partitions whose
fetches this broker answers as leader (`partition:this broker`, or `*`), `follower.replication.throttled.replicas`
those it fetches as follower. The bytes of listed partitions count toward `leader.replication.throttled.rate`
(sent) or `follower.replication.throttled.rate` (fetched), measured by `replication.quota.ReplicationQuota`;
while a rate is over its bound, a listed replica that is out of the ISR gets no records: the leader answers its
fetches empty, the follower leaves it out of its fetches for `replica.fetch.backoff.ms`. In-sync replicas are never
held back, so acks=all producers wait for no throttled copy. Both rates are dynamic broker configs (unlimited by
default, when nothing is checked at all); the replica lists are topic configs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from insync.config import LONG_MAX, THROTTLED_REPLICAS_KEYS, BrokerConfig
from insync.replication.quota import QuotaConfig, ReplicationQuota
from insync.types import BrokerId, TopicPartition

LEADER_KEY, FOLLOWER_KEY = THROTTLED_REPLICAS_KEYS


class ReplicationThrottles:
    def __init__(self, broker_id: BrokerId, config: Callable[[], BrokerConfig],
                 topic_configs: Callable[[str], Mapping[str, str]]) -> None:
        self.broker_id = broker_id
        self._config = config  # the broker's current config, dynamic layers included
        self._topic_configs = topic_configs
        static = config()
        quota = QuotaConfig(static.replication.quota_window_num, static.replication.quota_window_size_ms)
        self.leader = ReplicationQuota(quota)
        self.follower = ReplicationQuota(quota)

    def _rate(self, leader: bool) -> int:
        replication = self._config().replication
        return (replication.leader_throttled_rate_bytes_per_s if leader
                else replication.follower_throttled_rate_bytes_per_s)

    def is_set(self, *, leader: bool) -> bool:
        """Whether the leader (or follower) rate is bounded: when not, nothing is counted or held back."""
        return self._rate(leader) != LONG_MAX

    def applies(self, tp: TopicPartition, *, leader: bool) -> bool:
        """Whether `tp`'s bytes count toward this broker's leader (or follower) throttle: a rate is set and the
        topic lists the partition on this broker."""
        if not self.is_set(leader=leader):
            return False
        text = self._topic_configs(tp.topic).get(LEADER_KEY if leader else FOLLOWER_KEY)
        if not text:
            return False
        entries = [entry.strip() for entry in text.split(",")]
        return entries == ["*"] or f"{tp.partition}:{self.broker_id}" in entries

    def holds_back(self, tp: TopicPartition, in_sync: bool, now_ms: int, *, leader: bool) -> bool:
        """Whether an out-of-sync replica of `tp` gets no records now: listed, and the rate over its bound."""
        if in_sync or not self.applies(tp, leader=leader):
            return False
        return (self.leader if leader else self.follower).is_exceeded(self._rate(leader), now_ms)

    def record(self, tp: TopicPartition, size: int, now_ms: int, *, leader: bool) -> None:
        if size and self.applies(tp, leader=leader):
            (self.leader if leader else self.follower).record(size, now_ms)
