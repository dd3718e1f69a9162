"""Unclean recovery (KIP-966 part 2): which out-of-sync replica leads an offline partition, and what it costs.

When no ISR or ELR member can lead, Kafka 3.x elects any live replica; KIP-966 elects the one with the highest
(last leader epoch, log end offset): the most recent leader's data, then the longest log. insync does the same
and also computes what each choice costs: every other replica truncates where its log diverges from the new
leader's, as a follower does by leader epoch, so the offsets given up are known before anything changes. The
replicas report their leader-epoch histories (with heartbeats; the CLI asks the brokers), so no further round
trip is needed. `unclean.recovery.strategy`: None never recovers by itself (a topic with
`unclean.leader.election.enable=true` then elects as Kafka 3.x does); Balanced (default) recovers only when ISR
and ELR are empty and every last known ELR member is back; Aggressive (also what the enable flag maps to) as soon
as nobody clean can lead. The controller elects once every eligible candidate has reported for the current
leader epoch and broker epoch. `RecoveryReports` is kept in memory, as in KIP-966; `recover` elects through
`election.build_partition_change`, the new leader RECOVERING (KIP-704).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from insync.controller.election import UncleanChooser, build_partition_change
from insync.controller.replication_control import ElectionPolicy, TopicPartitionChange
from insync.events import Event, EventType, LeaderChangeReason
from insync.metadata.image import MetadataImage, PartitionRegistration, PartitionView
from insync.types import NO_LEADER, UNDEFINED_EPOCH, BrokerId

# The most leader epochs a replica reports per partition (its latest ones). A replica whose log holds more
# leader epochs is compared over the reported window only; Kafka's caches rarely hold more than a handful.
REPORTED_EPOCHS_MAX = 256
# The most partitions the controller keeps reports for (reports exist only for offline partitions).
REPORTED_PARTITIONS_MAX = 100_000
MANUAL = "ElectLeaders"  # the `strategy` of an operator's unclean election, in its event


class UncleanRecoveryStrategy(StrEnum):
    NONE = "None"
    BALANCED = "Balanced"
    AGGRESSIVE = "Aggressive"


@dataclass(frozen=True, slots=True)
class ReplicaLog:
    """One replica's log of one partition: where it starts and ends, and its leader-epoch history
    (`(epoch, start_offset)` ascending, as in `leader-epoch-checkpoint`)."""

    broker: BrokerId
    log_start_offset: int
    log_end_offset: int
    epochs: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        assert 0 <= self.log_start_offset <= self.log_end_offset, self
        assert len(self.epochs) <= REPORTED_EPOCHS_MAX, self
        assert all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(self.epochs, self.epochs[1:], strict=False)), self

    @property
    def last_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else UNDEFINED_EPOCH


@dataclass(frozen=True, slots=True)
class ReplicaLogReport:
    """What a broker reports of one offline partition it hosts: its log, at the partition's leader epoch."""

    topic_id: str
    partition: int
    leader_epoch: int
    log: ReplicaLog


@dataclass(frozen=True, slots=True)
class Loss:
    """Offsets `[from_offset, to_offset)` that `broker` truncates away when another replica leads."""

    broker: BrokerId
    from_offset: int
    to_offset: int

    @property
    def records(self) -> int:
        return self.to_offset - self.from_offset


@dataclass(frozen=True, slots=True)
class Choice:
    """Electing `leader`: what every other reported replica gives up (replicas that lose nothing included)."""

    leader: int
    losses: tuple[Loss, ...]

    @property
    def records_lost(self) -> int:
        return sum(loss.records for loss in self.losses)


def _end_offset_for(epochs: Sequence[tuple[int, int]], log_end_offset: int, epoch: int) -> tuple[int, int]:
    """OffsetsForLeaderEpoch on a log: (largest epoch <= `epoch`, where it ends), Kafka's
    `LeaderEpochFileCache.endOffsetFor` (and `LeaderEpochCache.end_offset_for`)."""
    if epoch == UNDEFINED_EPOCH or not epochs:
        return UNDEFINED_EPOCH, -1
    if epoch == epochs[-1][0]:
        return epoch, log_end_offset
    later = [i for i, (e, _) in enumerate(epochs) if e > epoch]
    if not later:
        return UNDEFINED_EPOCH, -1
    if later[0] == 0:
        return epoch, epochs[0][1]
    return epochs[later[0] - 1][0], epochs[later[0]][1]


def truncation_offset(leader: ReplicaLog, follower: ReplicaLog) -> int:
    """Where `follower` truncates to when `leader` leads: the first offset where their logs differ.

    Kafka's rounds: the follower asks the leader for the end of its latest epoch; if the leader answers an
    older epoch the follower does not end at, it truncates to its own end of that epoch and asks again. Each
    round drops at least the follower's latest epoch, so there are at most as many rounds as epochs. The new
    leader starts a new epoch at its log end on election (Kafka's `maybeAssignEpochStartOffset`), newer than
    any epoch a replica holds; that is what lets it answer for epochs it never saw."""
    new_epoch = max(leader.last_epoch, follower.last_epoch) + 1
    leader_epochs = (*leader.epochs, (new_epoch, leader.log_end_offset))
    epochs = list(follower.epochs)
    end = follower.log_end_offset
    for _ in range(len(follower.epochs) + 1):
        if not epochs:
            return end
        leader_epoch, leader_end = _end_offset_for(leader_epochs, leader.log_end_offset, epochs[-1][0])
        assert leader_end >= 0, (leader, follower)  # the new epoch is above every epoch the follower holds
        own_epoch, own_end = _end_offset_for(epochs, end, leader_epoch)
        if own_epoch == leader_epoch:
            return min(own_end, leader_end, end)
        end = min(own_end, end)
        epochs = [(e, start) for e, start in epochs if start < end]
    raise AssertionError(f"truncation of {follower} under {leader} did not converge")


def choice(leader: ReplicaLog, logs: Sequence[ReplicaLog]) -> Choice:
    """What electing `leader` costs the other replicas of `logs`."""
    losses = []
    for log in logs:
        if log.broker == leader.broker:
            continue
        start = max(truncation_offset(leader, log), log.log_start_offset)
        losses.append(Loss(log.broker, min(start, log.log_end_offset), log.log_end_offset))
    return Choice(leader.broker, tuple(losses))


def best(logs: Sequence[ReplicaLog]) -> ReplicaLog:
    """Kafka's rule: the highest last leader epoch, then the longest log; ties go to the first in `logs`
    (callers pass them in assignment order, so the preferred replica wins a tie)."""
    assert logs
    index = max(range(len(logs)), key=lambda i: (logs[i].last_epoch, logs[i].log_end_offset, -i))
    return logs[index]


def plan(logs: Sequence[ReplicaLog]) -> tuple[Choice, ...]:
    """Every possible choice, the recovery rule's first (what the dry run prints)."""
    chosen = best(logs)
    return (choice(chosen, logs), *(choice(log, logs) for log in logs if log is not chosen))


def effective_strategy(strategy: UncleanRecoveryStrategy, unclean_election_enabled: bool) -> UncleanRecoveryStrategy:
    """KIP-966's mapping: `unclean.leader.election.enable=true` means Aggressive, unless recovery is off."""
    if unclean_election_enabled and strategy is not UncleanRecoveryStrategy.NONE:
        return UncleanRecoveryStrategy.AGGRESSIVE
    return strategy


def recovery_due(strategy: UncleanRecoveryStrategy, registration: PartitionRegistration,
                 is_eligible: Callable[[BrokerId], bool]) -> bool:
    """Whether `strategy` recovers this partition by itself now (see the module docstring)."""
    if registration.leader != NO_LEADER or strategy is UncleanRecoveryStrategy.NONE:
        return False
    if any(is_eligible(b) for b in (*registration.isr, *registration.elr)):
        return False  # a clean election is possible: not ours to make
    if strategy is UncleanRecoveryStrategy.AGGRESSIVE:
        return True
    return (not registration.isr and not registration.elr
            and all(is_eligible(b) for b in registration.last_known_elr))


@dataclass(frozen=True, slots=True)
class _Report:
    broker_epoch: int
    leader_epoch: int
    log: ReplicaLog


class RecoveryReports:
    """The replicas' latest log reports for offline partitions, keyed by topic id and partition."""

    def __init__(self) -> None:
        self._reports: dict[tuple[str, int], dict[BrokerId, _Report]] = {}

    def record(self, topic_id: str, partition: int, broker_epoch: int, leader_epoch: int, log: ReplicaLog) -> None:
        key = (topic_id, partition)
        if key not in self._reports and len(self._reports) >= REPORTED_PARTITIONS_MAX:
            return  # the partition is asked again at the next heartbeat, once others recovered
        self._reports.setdefault(key, {})[log.broker] = _Report(broker_epoch, leader_epoch, log)

    def forget_all_but(self, keep: set[tuple[str, int]]) -> None:
        """Drop the reports of partitions not in `keep` (the offline ones): they have a leader again."""
        for key in [k for k in self._reports if k not in keep]:
            del self._reports[key]

    def logs(self, topic_id: str, partition: int, registration: PartitionRegistration,
             broker_epochs: Mapping[BrokerId, int]) -> dict[BrokerId, ReplicaLog]:
        """The reports that still hold: from the broker's current epoch, for the current leader epoch."""
        reports = self._reports.get((topic_id, partition), {})
        return {broker: r.log for broker, r in reports.items()
                if r.leader_epoch == registration.leader_epoch and broker_epochs.get(broker) == r.broker_epoch}


def chooser(logs: Mapping[BrokerId, ReplicaLog], wait_for_all: bool) -> UncleanChooser:
    """An unclean chooser for `election.build_partition_change`: the best reported candidate. With
    `wait_for_all` (the strategies), NO_LEADER until every candidate has reported; without (an operator's
    ElectLeaders UNCLEAN), the best of those that have."""

    def choose(current: PartitionRegistration, candidates: tuple[BrokerId, ...]) -> BrokerId:
        reported = [logs[b] for b in candidates if b in logs]
        if not reported or (wait_for_all and len(reported) < len(candidates)):
            return NO_LEADER
        return best(reported).broker

    return choose


def wait_for_recovery(current: PartitionRegistration, candidates: tuple[BrokerId, ...]) -> BrokerId:
    """The unclean chooser of elections made when a broker leaves or returns, while a recovery strategy is on:
    none now; the partition is recovered when its replicas have reported (`recover`)."""
    return NO_LEADER


def recover(image: MetadataImage, view: PartitionView, policy: ElectionPolicy, logs: Mapping[BrokerId, ReplicaLog],
            why: str, now_ms: int, node_id: int) -> tuple[TopicPartitionChange, list[Event]] | None:
    """The election of `view`'s partition by the recovery rule among the replicas in `logs`, with its events;
    None when it cannot elect (no eligible candidate reported; with a strategy `why`, one has not yet). An
    operator's request (`why` "ElectLeaders") takes the best of those that reported, and a clean election
    when one has become possible."""
    reg = view.registration
    manual = why == MANUAL
    change = build_partition_change(view.topic_id, view.partition, reg, reg.isr, image.is_eligible, True,
                                    elr_min_isr=policy.elr_min_isr(image, view),
                                    choose_unclean=chooser(logs, wait_for_all=not manual))
    if change is None or change.leader_after == NO_LEADER:
        return None
    if not change.unclean:
        return TopicPartitionChange(view.topic, change, str(LeaderChangeReason.ISR_CHANGE)), []
    reported = [logs[b] for b in reg.replicas if b in logs]
    cost = choice(logs[change.leader_after], reported)
    fields = {
        "leader_after": change.leader_after, "leader_epoch": change.record.leader_epoch, "strategy": why,
        "reported": [{"broker": r.broker, "last_epoch": r.last_epoch, "log_end_offset": r.log_end_offset}
                     for r in reported],
        "lost": [{"broker": loss.broker, "from_offset": loss.from_offset, "to_offset": loss.to_offset,
                  "records": loss.records} for loss in cost.losses],
        "records_lost": cost.records_lost}
    event = Event(now_ms, node_id, EventType.UNCLEAN_RECOVERY, view.topic, view.partition, fields)
    return TopicPartitionChange(view.topic, change, str(LeaderChangeReason.UNCLEAN)), [event]

