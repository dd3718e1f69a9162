"""One topic-partition on one broker: its roles, its high watermark, produce, and the entry points of both
sides of replication.

Roles change only through `make_leader` / `make_follower`, from the controller's metadata; stale epochs are
ignored. Leading, the partition holds a `Leader` for the epoch (`leader.py`) and appends produced batches
(acks=all refused with NOT_ENOUGH_REPLICAS when the committed ISR is below min(min.insync.replicas, replication
factor), Kafka 3.7+; `produce_status` tells a delayed produce its outcome), serves follower fetches in two halves
(KIP-501), and checks its ISR (`maybe_shrink_isr`, Kafka's isr-expiration task). The ISR state, its proposals
and the health that follows it are `PartitionIsr`'s (`partition_isr.py`); `on_alter_partition_result` commits a
proposal or reacts to the controller's error as Kafka does, and newer metadata resolves any pending change.
Not leading, it holds a `Follower` (`follower.py`) for its fetcher session to drive. Every state change worth
reporting becomes an `Event` in `self.events`, which the driver drains.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from insync import errors, kafkalog
from insync.config import BrokerConfig, LogConfig
from insync.errors import KafkaError, KafkaException
from insync.events import Event, EventType
from insync.protocol.records import parse_header
from insync.replication import producer_state
from insync.replication.event_buffer import EventBuffer
from insync.replication.follower import Follower, bounded_high_watermark
from insync.replication.isr import IsrPolicy, IsrState, after_alter_partition, from_metadata
from insync.replication.leader import FollowerClock, Leader
from insync.replication.log_view import LogView, ReadResultView
from insync.replication.messages import (
    AlterPartitionItem,
    AlterPartitionResult,
    FetchPartitionData,
)
from insync.replication.partition_isr import Lead, PartitionIsr, isr_text
from insync.replication.replica_state import ReplicaState
from insync.replication.results import (
    AlterOutcome,
    AlterPartitionOutcome,
    FollowerFetchResult,
    FollowerRead,
    LeaderAppendResult,
    ProduceWait,
)
from insync.types import (
    NO_LEADER,
    UNDEFINED_EPOCH,
    UNKNOWN_BROKER_EPOCH,
    BrokerEpoch,
    BrokerId,
    LeaderEpoch,
    Offset,
    PartitionEpoch,
    TopicPartition,
)

logger = logging.getLogger(kafkalog.PARTITION_LOGGER)

@dataclass(frozen=True, slots=True)
class PartitionConfig:
    isr_policy: IsrPolicy = IsrPolicy()
    min_insync_replicas: int = 1
    pending_reads_insync_enable: bool = False  # follower.fetch.pending.reads.insync.enable (KIP-501)

    def __post_init__(self) -> None:
        assert self.min_insync_replicas >= 1, self

    @classmethod
    def from_configs(cls, broker: BrokerConfig, log: LogConfig) -> PartitionConfig:
        return cls(IsrPolicy.from_config(broker), log.min_insync_replicas,
                   broker.replication.pending_reads_insync_enable)


class Partition:
    def __init__(self, topic_partition: TopicPartition, local_broker_id: BrokerId, log: LogView,
                 config: PartitionConfig | None = None, *, events: EventBuffer | None = None,
                 is_replica_eligible: Callable[[BrokerId], bool] | None = None,
                 high_watermark: int = 0) -> None:
        """`is_replica_eligible(broker)`: alive, not fenced, not shutting down (asked before adding a replica
        to the ISR). `high_watermark`: from the replication-offset-checkpoint, bounded by the log."""
        self.topic_partition = topic_partition
        self.broker_id = local_broker_id
        self.log = log
        self.config = config or PartitionConfig()
        self.events = events if events is not None else EventBuffer()
        self._is_replica_eligible = is_replica_eligible or (lambda _broker: True)
        self._leader_id = NO_LEADER
        self._leader_epoch = UNDEFINED_EPOCH
        self._partition_epoch = PartitionEpoch(-1)
        self._replicas: tuple[BrokerId, ...] = ()
        self._isr = PartitionIsr(topic_partition, local_broker_id, log, self._is_replica_eligible, self._emit)
        self.producer_state = producer_state.open_table(log)  # also makes the log snapshot it (roll, close)
        # Exactly one role at a time. The follower holds the high watermark while it lasts; `_high_watermark` is
        # the leader's, taken over from the follower when this broker starts leading.
        self._leader: Leader | None = None
        self._follower: Follower | None = Follower(log, self.producer_state,
                                                   bounded_high_watermark(log, Offset(high_watermark)), self._emit)
        self._stopped: KafkaError | None = None  # `stop`'s answer to what still waits on this partition
        self._high_watermark = Offset(0)
        self._log_prefix = f"[Partition {topic_partition} broker={local_broker_id}] "

    # --- State ------------------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._leader is not None

    @property
    def follower(self) -> Follower | None:
        """The follower role, which a fetcher session drives; None while this broker leads."""
        return self._follower

    @property
    def recovering(self) -> bool:
        """KIP-704, while leading: elected uncleanly, RECOVERED not yet recorded."""
        return self._leader is not None and self._leader.recovering

    @property
    def leader_id(self) -> BrokerId:
        return self._leader_id

    @property
    def leader_epoch(self) -> LeaderEpoch:
        return self._leader_epoch

    @property
    def partition_epoch(self) -> PartitionEpoch:
        return self._partition_epoch

    @property
    def replicas(self) -> tuple[BrokerId, ...]:
        return self._replicas

    @property
    def isr_state(self) -> IsrState:
        return self._isr.state

    @property
    def isr(self) -> tuple[BrokerId, ...]:
        """The last committed ISR."""
        return self._isr.state.isr

    @property
    def maximal_isr(self) -> tuple[BrokerId, ...]:
        return self._isr.state.maximal_isr

    @property
    def high_watermark(self) -> Offset:
        return self._high_watermark if self._follower is None else self._follower.high_watermark

    @property
    def high_watermark_lagging(self) -> bool:
        """Whether this leader's high watermark is still below where its epoch began: just elected, its followers
        have not fetched what the previous leader acknowledged (Kafka's `leaderEpochStartOffsetOpt` check)."""
        return self._leader is not None and self._high_watermark < self._leader.epoch_start_offset

    @property
    def last_stable_offset(self) -> Offset:
        """What read_committed consumers may read up to: the high watermark, or the first offset of the earliest
        transaction still open (or whose marker is not yet below the high watermark), whichever is lower."""
        return Offset(self.producer_state.transactions.last_stable_offset(self.high_watermark))

    @property
    def log_end_offset(self) -> Offset:
        return Offset(self.log.log_end_offset)

    @property
    def effective_min_isr(self) -> int:
        return min(self.config.min_insync_replicas, len(self._replicas))

    @property
    def is_under_replicated(self) -> bool:
        return self._isr.under_replicated

    @property
    def is_under_min_isr(self) -> bool:
        return self._isr.under_min_isr

    def reconfigure(self, config: PartitionConfig, now_ms: int) -> None:
        """A topic config change (IncrementalAlterConfigs): in force from the next request on; a new
        min.insync.replicas may put the partition under (or lift it out of) its minimum ISR at once."""
        self.config = config
        self._isr.refresh_health(now_ms, self._lead())

    def replica_state(self, broker_id: BrokerId) -> ReplicaState | None:
        return self._leader.replica_state(broker_id) if self._leader is not None else None

    def _lead(self) -> Lead | None:
        """What the ISR needs of this partition while it leads; None while it follows."""
        if self._leader is None:
            return None
        return Lead(self._leader, self._leader_epoch, self._partition_epoch, self._replicas, self._high_watermark,
                    self.effective_min_isr, self.config.isr_policy)

    # --- Leadership -------------------------------------------------------------------------------------------

    def make_leader(self, leader_epoch: LeaderEpoch, partition_epoch: PartitionEpoch, isr: Sequence[BrokerId],
                    replicas: Sequence[BrokerId], now_ms: int, recovering: bool = False) -> bool:
        """Apply metadata naming this broker leader (`recovering`: KIP-704). Returns False if stale or applied."""
        assert self.broker_id in isr and set(isr) <= set(replicas), (isr, replicas)
        if self._is_stale(leader_epoch, partition_epoch):
            return False
        is_new_epoch = leader_epoch > self._leader_epoch
        if not (self._leader is None or is_new_epoch or partition_epoch > self._partition_epoch):
            return False
        previous_epoch = self._leader_epoch
        if self._follower is not None:
            self._high_watermark = self._follower.retire()
            self._follower = None
        self._leader_id = self.broker_id
        self._partition_epoch = partition_epoch
        self._replicas = tuple(replicas)
        if self._leader is not None and not is_new_epoch:
            self._leader.reassign(self._replicas, recovering)
        else:
            self._leader = Leader.start_epoch(self.topic_partition, self.broker_id, self.log, leader_epoch,
                                              self._replicas, isr, now_ms, previous=self._leader,
                                              recovering=recovering)
            self._leader_epoch = leader_epoch
            tp = self.topic_partition
            logger.info("%s%s", self._log_prefix, kafkalog.leader_message(
                tp.topic, tp.partition, leader_epoch, self.log.log_end_offset, self._high_watermark, isr,
                previous_epoch))
        self._isr.enter(from_metadata(tuple(isr)), now_ms, self._lead())
        self._maybe_advance_high_watermark(now_ms)
        return True

    def make_follower(self, leader_id: BrokerId, leader_epoch: LeaderEpoch, partition_epoch: PartitionEpoch,
                      isr: Sequence[BrokerId], replicas: Sequence[BrokerId], now_ms: int) -> bool:
        """Apply metadata naming another broker leader (or none: -1). Returns True when the leader epoch
        changed or this broker stopped leading, i.e. when its fetcher must (re)start for this partition."""
        assert leader_id != self.broker_id and self.broker_id in replicas, (leader_id, replicas)
        if self._is_stale(leader_epoch, partition_epoch):
            return False
        was_leader = self.is_leader
        restart_fetching = was_leader or leader_epoch > self._leader_epoch
        if not (restart_fetching or leader_id != self._leader_id or partition_epoch > self._partition_epoch):
            return False
        previous_epoch = self._leader_epoch
        self._leader_id = leader_id
        self._leader_epoch = leader_epoch
        self._partition_epoch = partition_epoch
        self._replicas = tuple(replicas)
        if self._follower is None:
            self._follower = Follower(self.log, self.producer_state, self._high_watermark, self._emit)
        self._leader = None  # drops the followers' states, every pending read with them
        self._isr.enter(from_metadata(tuple(isr)), now_ms, self._lead())
        if restart_fetching:
            tp = self.topic_partition
            logger.info("%s%s", self._log_prefix, kafkalog.follower_message(
                tp.topic, tp.partition, leader_epoch, self.log.log_end_offset, self.high_watermark, previous_epoch))
        return restart_fetching

    def stop(self, error: KafkaError) -> None:
        """This broker no longer hosts the partition (its topic deleted, or the replica moved away): every acks=all
        produce still waiting on it is answered `error`, as Kafka's DelayedProduce finds the partition gone."""
        self._stopped = error
        self._leader = None
        self._follower = None

    def _is_stale(self, leader_epoch: LeaderEpoch, partition_epoch: PartitionEpoch) -> bool:
        return leader_epoch < self._leader_epoch or partition_epoch < self._partition_epoch

    # --- Produce ----------------------------------------------------------------------------------------------

    def append_records_as_leader(self, records: bytes, required_acks: int, now_ms: int, *,
                                 from_client: bool = True) -> LeaderAppendResult:
        """Append one produced batch (not `from_client`: a coordinator's marker or transactional offset commit,
        without sequence checks). Raises KafkaException with INVALID_REQUIRED_ACKS, NOT_LEADER_OR_FOLLOWER,
        NOT_ENOUGH_REPLICAS, INVALID_PRODUCER_EPOCH (a marker of a fenced epoch), or whatever the log refuses."""
        if required_acks not in (0, 1, -1):
            raise KafkaException(errors.INVALID_REQUIRED_ACKS, f"acks={required_acks}")
        if not self.is_leader:
            raise KafkaException(errors.NOT_LEADER_OR_FOLLOWER,
                                 f"broker {self.broker_id} is not the leader of {self.topic_partition}")
        isr, min_isr = self._isr.state.isr, self.effective_min_isr
        if required_acks == -1 and len(isr) < min_isr:
            raise KafkaException(errors.NOT_ENOUGH_REPLICAS, kafkalog.min_isr_message(
                isr, min_isr, self.topic_partition.topic, self.topic_partition.partition))
        header = parse_header(records, 0)
        if from_client:
            duplicate = self.producer_state.check_batch(records)
            if duplicate is not None:  # a retry of a batch already in the log: answer with its offsets
                return LeaderAppendResult(Offset(duplicate.first_offset), Offset(duplicate.last_offset),
                                          duplicate.last_offset - duplicate.first_offset + 1,
                                          ProduceWait(Offset(duplicate.last_offset + 1), self._leader_epoch), False)
        elif header.is_control:
            self.producer_state.check_marker(header, records)
        info = self.log.append_as_leader(records, self._leader_epoch, from_client=from_client)
        assert info.last_offset >= info.first_offset >= 0 and info.last_offset < self.log.log_end_offset
        self.producer_state.observe(replace(header, base_offset=info.first_offset), records, 0)
        advanced = self._maybe_advance_high_watermark(now_ms)
        wait = ProduceWait(Offset(info.last_offset + 1), self._leader_epoch)
        return LeaderAppendResult(Offset(info.first_offset), Offset(info.last_offset), info.record_count, wait,
                                  advanced)

    def produce_status(self, wait: ProduceWait) -> KafkaError | None:
        """The outcome of an acks=all produce, or None while it must keep waiting."""
        if self._stopped is not None:
            return self._stopped
        if not self.is_leader or self._leader_epoch != wait.leader_epoch:
            return errors.NOT_LEADER_OR_FOLLOWER
        if self._high_watermark < wait.required_offset:
            return None
        # The ISR may have shrunk after the append was admitted (REFERENCE.md 3).
        if len(self._isr.state.maximal_isr) >= self.effective_min_isr:
            return errors.NONE
        return errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (-1: the high watermark), never past the
        high watermark. Returns the new log start offset."""
        if not self.is_leader:
            raise KafkaException(errors.NOT_LEADER_OR_FOLLOWER, str(self.topic_partition))
        target = self._high_watermark if offset == -1 else offset
        if target < 0 or target > self._high_watermark:
            raise KafkaException(errors.OFFSET_OUT_OF_RANGE, f"Cannot increment the log start offset to {target} "
                                 f"of partition {self.topic_partition} since it is larger than the high watermark "
                                 f"{self._high_watermark}")
        return self.log.delete_records_before(target)

    # --- Follower fetches, on the leader ----------------------------------------------------------------------

    def begin_follower_fetch(self, replica_id: BrokerId, fetch_offset: Offset, current_leader_epoch: LeaderEpoch,
                             last_fetched_epoch: LeaderEpoch, follower_log_start_offset: Offset,
                             now_ms: int, *, from_purgatory: bool = False,
                             replica_epoch: BrokerEpoch = UNKNOWN_BROKER_EPOCH) -> FollowerRead | FetchPartitionData:
        """First half of a follower fetch (`Leader.begin_fetch`): the answer at once, or a `FollowerRead`: read
        the log at `fetch_offset`, then call `complete_follower_fetch`. `from_purgatory`: the fetch was parked
        and is read again to be answered; as in Kafka, only its first read updates the follower's state.
        `replica_epoch`: the follower's broker epoch (KIP-903): an older life's fetch is refused, a newer life's
        starts its state afresh (see `ReplicaState`)."""
        if self._leader is None:
            return FetchPartitionData(self.topic_partition, errors.NOT_LEADER_OR_FOLLOWER)
        return self._leader.begin_fetch(
            replica_id, fetch_offset, current_leader_epoch, last_fetched_epoch, follower_log_start_offset, now_ms,
            high_watermark=self._high_watermark, register_pending_read=self.config.pending_reads_insync_enable,
            from_purgatory=from_purgatory, replica_epoch=replica_epoch)

    def complete_follower_fetch(self, read: FollowerRead, outcome: ReadResultView | KafkaException,
                                now_ms: int) -> FollowerFetchResult:
        """Second half (`Leader.complete_fetch`): the read finished at `now_ms`, with records or an error. A read
        that updated the follower's state may expand the ISR and advance the high watermark."""
        assert now_ms >= read.fetch_time_ms, (now_ms, read)
        if self._leader is None:
            return FollowerFetchResult(FetchPartitionData(self.topic_partition, errors.NOT_LEADER_OR_FOLLOWER))
        data, updated = self._leader.complete_fetch(read, outcome, now_ms, high_watermark=self._high_watermark,
                                                    lag_time_max_ms=self.config.isr_policy.replica_lag_time_max_ms)
        if updated is None:
            return FollowerFetchResult(data)
        lead = self._lead()
        assert lead is not None
        alter_partition = self._isr.expand(updated, read.fetch_time_ms, now_ms, lead)
        return FollowerFetchResult(data, alter_partition, self._maybe_advance_high_watermark(now_ms))

    def follower_fetch_is_idle(self, replica_id: BrokerId, fetch_offset: Offset, current_leader_epoch: LeaderEpoch,
                               last_fetched_epoch: LeaderEpoch, follower_log_start_offset: Offset,
                               replica_epoch: BrokerEpoch) -> bool:
        """Whether a follower fetch can skip the read (`Leader.fetch_is_idle`): also an ISR member with no ISR
        change in flight, so that neither the ISR nor the high watermark can move by it."""
        isr_state = self._isr.state
        return self._leader is not None and not isr_state.is_inflight and replica_id in isr_state.isr \
            and self._leader.fetch_is_idle(replica_id, fetch_offset, current_leader_epoch, last_fetched_epoch,
                                           follower_log_start_offset, replica_epoch)

    def note_idle_follower_fetch(self, replica_id: BrokerId, clock: FollowerClock) -> None:
        """The follower fetch `follower_fetch_is_idle` accepted: its follower's state, as a read would leave it,
        at each fetch `clock` tells of (`Leader.note_idle_fetch`)."""
        assert self._leader is not None
        self._leader.note_idle_fetch(replica_id, clock, self.config.isr_policy.replica_lag_time_max_ms)

    def end_idle_follower_fetches(self, replica_id: BrokerId) -> None:
        """The follower left this partition out of its fetch session (`Leader.end_idle_fetches`)."""
        if self._leader is not None:
            self._leader.end_idle_fetches(replica_id)

    # --- ISR --------------------------------------------------------------------------------------------------

    def maybe_shrink_isr(self, now_ms: int) -> AlterPartitionItem | None:
        """The isr-expiration check (`PartitionIsr.shrink`); does nothing unless leader."""
        lead = self._lead()
        return None if lead is None else self._isr.shrink(now_ms, lead)

    def on_alter_partition_result(self, item: AlterPartitionItem, result: AlterPartitionResult,
                                  now_ms: int) -> AlterPartitionOutcome:
        """The controller answered `item` (`after_alter_partition` in isr.py): a commit takes the answer's
        partition epoch and may advance the high watermark."""
        state, outcome = after_alter_partition(self._isr.state, item, result, self._leader_epoch,
                                               self._partition_epoch)
        if outcome is AlterOutcome.COMMITTED:
            self._partition_epoch = result.partition_epoch
            self._isr.enter(state, now_ms, self._lead())
            return AlterPartitionOutcome(outcome, self._maybe_advance_high_watermark(now_ms))
        if outcome is AlterOutcome.ROLLED_BACK:
            self._isr.enter(state, now_ms, self._lead())
            logger.info("%sFailed to alter partition to %s since the controller rejected the request with %s. "
                        "Partition state has been reset to the latest committed state.", self._log_prefix,
                        isr_text(item.new_isr), result.error.name)
        return AlterPartitionOutcome(outcome)

    # --- High watermark ---------------------------------------------------------------------------------------

    def _maybe_advance_high_watermark(self, now_ms: int) -> bool:
        """`Leader.advanced_high_watermark`. Returns whether it moved (delayed produces may complete)."""
        if self._leader is None:
            return False
        advanced = self._leader.advanced_high_watermark(
            now_ms, self._isr.state, self.effective_min_isr, self._high_watermark,
            self.config.isr_policy.replica_lag_time_max_ms, self._is_replica_eligible)
        if advanced is None:
            return False
        self._set_high_watermark(advanced)
        return True

    def _set_high_watermark(self, high_watermark: Offset) -> None:
        assert self.is_leader and high_watermark >= self._high_watermark, \
            f"a leader's high watermark only moves forward: {self._high_watermark} -> {high_watermark}"
        assert high_watermark <= self.log.log_end_offset, (high_watermark, self.log.log_end_offset)
        self._high_watermark = high_watermark

    def _emit(self, event_type: EventType, now_ms: int, **fields: Any) -> None:
        self.events.emit(Event(now_ms, self.broker_id, event_type, self.topic_partition.topic,
                               self.topic_partition.partition, fields))
