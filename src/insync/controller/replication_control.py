"""Partition decisions of the controller, after Kafka's `ReplicationControlManager`: pure functions of an image.

Each function reads a `MetadataImage` and returns the partition changes to make; the configs elections follow
come in an `ElectionPolicy`.
- `leaving_broker_changes`: a fenced or shutting-down broker leaves every ISR, as in KRaft, but with ELR off it
  stays where it is the last member (an empty ISR would forget who holds the committed data); with ELR on
  (KIP-966) the ELR remembers it. Partitions it led elect from the remaining ISR (or ELR), or go offline.
- `unclean_shutdown_changes`: a broker back from a crash may lack its unflushed tail: out of every ISR and ELR.
- `returning_broker_changes`: a broker is unfenced; offline partitions it can lead elect it.
- `preferred_leader_changes`: move leadership back to each partition's first replica where it is in sync.
- `check_alter_partition`: KIP-497 validation of one AlterPartition item, then the change it commits.
- topic creation and CreatePartitions checks and placement; `change_events` for DESIGN.md 7's events.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from insync import errors
from insync.controller.election import (
    PartitionChange,
    UncleanChooser,
    build_partition_change,
    first_out_of_sync,
)
from insync.errors import KafkaError, KafkaException
from insync.events import Event, EventType, LeaderChangeReason
from insync.limits import METADATA_RECORDS_PER_BATCH_MAX
from insync.metadata.image import MetadataImage, PartitionView
from insync.metadata.records import LEADER_RECOVERED, LEADER_RECOVERING
from insync.types import NO_LEADER, BrokerId

# A partition comes back online because an ISR member returned. DESIGN.md 7 has no reason for this yet
# (LeaderChangeReason lives in events.py); the schema types `reason` as a string.
REASON_UNFENCED = "unfenced"
# A leadership moved off a replica a reassignment removed (`controller.reassignment`).
REASON_REASSIGNMENT = "reassignment"

TOPIC_NAME_MAX = 249
_LEGAL_TOPIC_CHARS = re.compile(r"^[a-zA-Z0-9._-]+$")


@dataclass(frozen=True, slots=True)
class TopicPartitionChange:
    topic: str
    change: PartitionChange
    reason: str


@dataclass(frozen=True, slots=True)
class ElectionPolicy:
    """The configs elections follow: broker defaults, overridden by the topic's configs in the image."""

    unclean_default: bool  # unclean.leader.election.enable
    min_isr_default: int  # min.insync.replicas
    elr_enabled: bool  # eligible.leader.replicas.enable
    choose_unclean: UncleanChooser = first_out_of_sync

    def unclean_allowed(self, image: MetadataImage, topic: str) -> bool:
        text = _topic_config(image, topic, "unclean.leader.election.enable")
        return self.unclean_default if text is None else text == "true"

    def elr_min_isr(self, image: MetadataImage, view: PartitionView) -> int | None:
        """Kafka's effective min ISR, min(min.insync.replicas, replication factor), when ELR is on; else None."""
        if not self.elr_enabled:
            return None
        text = _topic_config(image, view.topic, "min.insync.replicas")
        min_isr = self.min_isr_default if text is None else int(text)
        return min(min_isr, len(view.registration.replicas))


def _topic_config(image: MetadataImage, topic: str, key: str) -> str | None:
    """The topic's override, else the cluster-wide dynamic default (None: the controller's static setting).
    Kafka's controller also reads its own node's dynamic config; insync's brokers' per-broker values act on the
    brokers alone (a leader's acks=all check), never on elections."""
    value = image.configs(topic).get(key)
    return image.dynamic_configs("").get(key) if value is None else value


def _changes(image: MetadataImage, views: list[PartitionView],
             target_isr: Callable[[PartitionView], tuple[BrokerId, ...]], is_eligible: Callable[[BrokerId], bool],
             policy: ElectionPolicy, reason: str, *, preferred: bool = False, unclean_allowed: bool = True,
             unclean_shutdown: BrokerId | None = None) -> list[TopicPartitionChange]:
    out = []
    for view in views:
        change = build_partition_change(
            view.topic_id, view.partition, view.registration, target_isr(view), is_eligible,
            unclean_allowed and policy.unclean_allowed(image, view.topic), preferred,
            elr_min_isr=policy.elr_min_isr(image, view), unclean_shutdown=unclean_shutdown,
            choose_unclean=policy.choose_unclean)
        if change is not None:
            out.append(TopicPartitionChange(view.topic, change,
                                            str(LeaderChangeReason.UNCLEAN) if change.unclean else reason))
    assert len(out) <= len(views)
    return out


def leaving_broker_changes(image: MetadataImage, broker_id: BrokerId, reason: str,
                           policy: ElectionPolicy) -> list[TopicPartitionChange]:
    """Take `broker_id` out of every ISR (with ELR off, never emptying one) and move its leaderships."""
    assert broker_id in image.brokers, broker_id

    def without_broker(view: PartitionView) -> tuple[BrokerId, ...]:
        isr = view.registration.isr
        return tuple(b for b in isr if b != broker_id) or (() if policy.elr_enabled else isr)

    def eligible(b: BrokerId) -> bool:
        return b != broker_id and image.is_eligible(b)

    views = image.partitions_with_replica_in_isr(broker_id)
    return _changes(image, views, without_broker, eligible, policy, reason)


def unclean_shutdown_changes(image: MetadataImage, broker_id: BrokerId,
                             policy: ElectionPolicy) -> list[TopicPartitionChange]:
    """`broker_id` comes back from a crash (Kafka's `handleBrokerUncleanShutdown`): out of every ISR and ELR,
    since its log may lack the tail it acknowledged. Nothing to do with ELR off: fencing is all Kafka does then."""
    assert broker_id in image.brokers, broker_id
    if not policy.elr_enabled:
        return []

    def eligible(b: BrokerId) -> bool:
        return b != broker_id and image.is_eligible(b)

    views = image.partitions_with_replica_in_isr_or_elr(broker_id)
    return _changes(image, views, lambda v: v.registration.isr, eligible, policy,
                    str(LeaderChangeReason.FENCED), unclean_shutdown=broker_id)


def returning_broker_changes(image: MetadataImage, broker_id: BrokerId,
                             policy: ElectionPolicy) -> list[TopicPartitionChange]:
    """Elect leaders for offline partitions now that `broker_id` (not yet unfenced in `image`) is back."""
    assert broker_id in image.brokers, broker_id

    def eligible(b: BrokerId) -> bool:
        return b == broker_id or image.is_eligible(b)

    views = [v for v in image.offline_partitions() if broker_id in v.registration.replicas]
    return _changes(image, views, lambda v: v.registration.isr, eligible, policy, REASON_UNFENCED)


def offline_topic_changes(image: MetadataImage, topic: str, policy: ElectionPolicy) -> list[TopicPartitionChange]:
    """Elect leaders for `topic`'s offline partitions among eligible replicas: what a topic whose
    `unclean.leader.election.enable` was just turned on gets at once, rather than at the next broker event."""
    views = [v for v in image.offline_partitions() if v.topic == topic]
    return _changes(image, views, lambda v: v.registration.isr, image.is_eligible, policy,
                    str(LeaderChangeReason.UNCLEAN))


def min_isr_changes(image: MetadataImage, topic: str, policy: ElectionPolicy) -> list[TopicPartitionChange]:
    """`topic`'s min.insync.replicas changed: its ELRs are judged again against the new effective min ISR, as
    Kafka does. A lower min ISR lets the high watermark advance with the ISR alone, so the replicas outside it
    no longer hold every committed record: where the ISR now reaches min ISR, the ELR is cleared."""
    if not policy.elr_enabled:
        return []
    views = [v for v in image.all_partitions()
             if v.topic == topic and (v.registration.elr or v.registration.last_known_elr)]
    return _changes(image, views, lambda v: v.registration.isr, image.is_eligible, policy,
                    str(LeaderChangeReason.ISR_CHANGE), unclean_allowed=False)


def preferred_leader_changes(image: MetadataImage, policy: ElectionPolicy) -> list[TopicPartitionChange]:
    """Move leadership to the first replica wherever it is in the ISR and eligible but not leading."""
    views = [v for v in image.all_partitions()
             if v.registration.leader != v.registration.replicas[0]
             and v.registration.replicas[0] in v.registration.isr
             and image.is_eligible(v.registration.replicas[0])]
    return _changes(image, views, lambda v: v.registration.isr, image.is_eligible, policy,
                    str(LeaderChangeReason.PREFERRED), preferred=True, unclean_allowed=False)


def preferred_election_refusals(image: MetadataImage,
                                partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], KafkaError]:
    """Each asked partition's outcome if no election moves it, as Kafka words it: ELECTION_NOT_NEEDED (the
    preferred replica leads), PREFERRED_LEADER_NOT_AVAILABLE (it is out of the ISR or not eligible),
    UNKNOWN_TOPIC_OR_PARTITION."""
    outcomes = {}
    for name, index in partitions:
        topic = image.topic(name)
        registration = None if topic is None else topic.partitions.get(index)
        outcomes[(name, index)] = (errors.UNKNOWN_TOPIC_OR_PARTITION if registration is None
                                   else errors.ELECTION_NOT_NEEDED if registration.leader == registration.replicas[0]
                                   else errors.PREFERRED_LEADER_NOT_AVAILABLE)
    return outcomes


@dataclass(frozen=True, slots=True)
class AlterPartitionData:
    """One partition of an AlterPartition request: the leader's proposed ISR and the state it is based on, and
    (v1+, KIP-704) the leader recovery state it asks for."""

    topic_id: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[BrokerId, ...]
    leader_recovery_state: int = LEADER_RECOVERED
    # v3+ (KIP-903): the broker epoch of each member of `new_isr`, in order, as the leader knows it from the
    # member's fetches; -1 (or none given, v2) skips the check for that member, as in Kafka.
    new_isr_broker_epochs: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        assert not self.new_isr_broker_epochs or len(self.new_isr_broker_epochs) == len(self.new_isr), self


def check_alter_partition(image: MetadataImage, broker_id: BrokerId, item: AlterPartitionData,
                          policy: ElectionPolicy) -> KafkaError | TopicPartitionChange | None:
    """The error for `item`, or the change to commit (None: the proposed ISR and recovery state are the current).
    An accepted item asking RECOVERED ends KIP-704's RECOVERING; one bringing the last target replica of a
    reassignment into the ISR completes it (`controller.reassignment`), which may move the leadership."""
    topic = image.topics_by_id.get(item.topic_id)
    if topic is None:
        return errors.UNKNOWN_TOPIC_ID
    current = topic.partitions.get(item.partition)
    if current is None:
        return errors.UNKNOWN_TOPIC_OR_PARTITION
    if item.leader_epoch != current.leader_epoch:
        return errors.FENCED_LEADER_EPOCH
    if broker_id != current.leader:
        return errors.NOT_LEADER_OR_FOLLOWER
    if item.partition_epoch != current.partition_epoch:
        return errors.INVALID_UPDATE_VERSION
    if broker_id not in item.new_isr or len(set(item.new_isr)) != len(item.new_isr):
        return errors.INVALID_REQUEST  # the leader must stay in its ISR, once
    if item.leader_recovery_state not in (LEADER_RECOVERED, LEADER_RECOVERING):
        return errors.INVALID_REQUEST
    if item.leader_recovery_state == LEADER_RECOVERING and (len(item.new_isr) > 1 or not current.is_recovering):
        return errors.INVALID_REQUEST  # Kafka: a recovering leader leads alone, and RECOVERED never goes back
    added = [b for b in item.new_isr if b not in current.isr]
    if any(b not in current.replicas or not image.is_eligible(b) for b in added):
        return errors.INELIGIBLE_REPLICA
    if _stale_broker_epochs(image, item):
        return errors.INELIGIBLE_REPLICA
    view = PartitionView(topic.name, item.topic_id, item.partition, current)
    change = build_partition_change(item.topic_id, item.partition, current, item.new_isr, image.is_eligible,
                                    unclean_allowed=False, elr_min_isr=policy.elr_min_isr(image, view),
                                    recovery_state=item.leader_recovery_state)
    if change is None:
        return None
    # An eligible leader in its ISR stays, unless the change completes a reassignment that removes it.
    assert change.leader_after == broker_id or change.record.replicas is not None, change
    return TopicPartitionChange(topic.name, change, REASON_REASSIGNMENT if change.record.replicas is not None
                                else str(LeaderChangeReason.ISR_CHANGE))


def _stale_broker_epochs(image: MetadataImage, item: AlterPartitionData) -> bool:
    """KIP-903 (Kafka's ineligibleReplicasForIsr, "broker epoch mismatch"): whether the leader vouches for a
    member with an epoch that is not its broker's registered one: what it knows of that member is from another
    life of the broker (which may have restarted with an empty or truncated disk), so it cannot be in the ISR."""
    for broker, epoch in zip(item.new_isr, item.new_isr_broker_epochs, strict=False):
        registration = image.brokers.get(broker)
        if epoch != -1 and (registration is None or registration.broker_epoch != epoch):
            return True
    return False


def check_topic_name(name: str) -> None:
    """Kafka's topic name rules (`Topic.validate`, its wording); raises INVALID_TOPIC_EXCEPTION saying which one
    failed."""
    why = None
    if not name:
        why = "the empty string is not allowed"
    elif name in (".", ".."):
        why = f"'{name}' is not allowed"
    elif len(name) > TOPIC_NAME_MAX:
        why = f"the length of '{name}' is longer than the max allowed length {TOPIC_NAME_MAX}"
    elif not _LEGAL_TOPIC_CHARS.match(name):
        why = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    if why is not None:
        raise KafkaException(errors.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {why}")


def check_partitions_per_request(partition_counts: Sequence[int]) -> None:
    """Kafka's first check of a CreateTopics request (`ReplicationControlManager.validateTotalNumberOfPartitions`):
    more partitions in all than one metadata batch holds refuse the whole request, in Kafka's words."""
    total = 0
    for count in partition_counts:
        total += max(count, 0)
        if total > METADATA_RECORDS_PER_BATCH_MAX:
            raise KafkaException(errors.BY_NAME["POLICY_VIOLATION"],
                                 "Excessively large number of partitions per request.")


def check_new_topic(image: MetadataImage, name: str, num_partitions: int, replication_factor: int | None) -> None:
    """CreateTopics refusals of one topic: its name (`check_topic_name`), an existing topic of that name or one
    differing only by '.' versus '_' (Kafka: their metric names would collide), a partition count below 1, and a
    replication factor the eligible brokers cannot hold (None: manual assignments, checked by
    `check_topic_assignments`). How many partitions one topic may have is the batch limit's to say."""
    check_topic_name(name)
    if name in image.topic_ids_by_name:
        raise KafkaException(errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    for existing in image.topic_ids_by_name:
        if existing.replace(".", "_") == name.replace(".", "_"):
            raise KafkaException(errors.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topic: {existing}")
    if num_partitions < 1:
        raise KafkaException(errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    if replication_factor is not None and replication_factor < 1:
        raise KafkaException(errors.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0, or -1 to use the default value.")
    if replication_factor is not None:
        check_replication_factor(image, replication_factor)


def check_replication_factor(image: MetadataImage, replication_factor: int) -> None:
    """Enough eligible brokers to place `replication_factor` replicas on, refused in the words of Kafka's controller
    and replica placer (INVALID_REPLICATION_FACTOR)."""
    assert replication_factor >= 1, replication_factor
    eligible = len(image.eligible_brokers())
    if eligible == 0:
        why = "All brokers are currently fenced or in controlled shutdown."
    elif replication_factor > eligible:
        why = (f"The target replication factor of {replication_factor} cannot be reached because only {eligible} "
               "broker(s) are registered.")
    else:
        return
    raise KafkaException(errors.INVALID_REPLICATION_FACTOR,
                         f"Unable to replicate the partition {replication_factor} time(s): {why}")


def check_topic_assignments(image: MetadataImage,
                            assignments: Sequence[tuple[int, Sequence[int]]]) -> list[tuple[BrokerId, ...]]:
    """Kafka's checks of CreateTopics replica assignments (`ReplicationControlManager.createTopic`), its wording:
    each partition once, each replica list as `check_manual_assignments` checks it (the first sets the replication
    factor), the partitions numbered 0..n-1. Answers the replica lists by partition. Raises
    INVALID_REPLICA_ASSIGNMENT."""
    by_partition: dict[int, tuple[BrokerId, ...]] = {}
    for partition, replicas in assignments:
        if partition in by_partition:
            raise KafkaException(errors.INVALID_REPLICA_ASSIGNMENT,
                                 f"Found multiple manual partition assignments for partition {partition}")
        first = next(iter(by_partition.values()), None)
        check_replicas(image, partition, replicas, None if first is None else len(first))
        by_partition[partition] = tuple(BrokerId(b) for b in replicas)
    if sorted(by_partition) != list(range(len(by_partition))):
        raise KafkaException(errors.INVALID_REPLICA_ASSIGNMENT,
                             "partitions should be a consecutive 0-based integer sequence")
    return [by_partition[p] for p in range(len(by_partition))]


def check_manual_assignments(image: MetadataImage, first_partition: int, additional: int,
                             assignments: Sequence[Sequence[int]], replication_factor: int) -> None:
    """Kafka's checks of CreatePartitions replica assignments (`ReplicationControlManager.createPartitions`), its
    wording: one assignment per new partition, each replica list as `check_replicas` checks it at the topic's
    replication factor. Raises INVALID_REPLICA_ASSIGNMENT."""
    if len(assignments) != additional:
        raise KafkaException(errors.INVALID_REPLICA_ASSIGNMENT, f"Attempted to add {additional} additional "
                             f"partition(s), but only {len(assignments)} assignment(s) were specified.")
    for partition, replicas in enumerate(assignments, start=first_partition):
        check_replicas(image, partition, replicas, replication_factor)


def check_replicas(image: MetadataImage, partition: int, replicas: Sequence[int],
                   replication_factor: int | None, *, need_eligible: bool = True) -> None:
    """Kafka's `validateManualPartitionAssignment`, then the ISR check after it: non-empty, every broker registered
    (fenced ones count) and listed once, checked in id order so the lowest offender is named; the replication
    factor when one is set; with `need_eligible` (a new partition), at least one replica able to join the ISR."""
    if not replicas:
        raise KafkaException(errors.INVALID_REPLICA_ASSIGNMENT,
                             "The manual partition assignment includes an empty replica list.")
    previous = None
    for broker_id in sorted(replicas):
        if broker_id not in image.brokers:
            raise KafkaException(errors.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment "
                                 f"includes broker {broker_id}, but no such broker is registered.")
        if broker_id == previous:
            raise KafkaException(errors.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment "
                                 f"includes the broker {broker_id} more than once.")
        previous = broker_id
    if replication_factor is not None and len(replicas) != replication_factor:
        raise KafkaException(errors.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes a "
                             f"partition with {len(replicas)} replica(s), but this is not consistent with "
                             f"previous partitions, which have {replication_factor} replica(s).")
    if need_eligible and not any(image.is_eligible(BrokerId(b)) for b in replicas):
        raise KafkaException(errors.INVALID_REPLICA_ASSIGNMENT, f"All brokers specified in the manual partition "
                             f"assignment for partition {partition} are fenced or in controlled shutdown.")


def place_replicas(brokers: list[BrokerId], num_partitions: int, replication_factor: int,
                   rng: random.Random) -> list[tuple[BrokerId, ...]]:
    """Kafka's rack-unaware assignment: leaders round-robin from a random start, followers shifted.

    Partition p's first replica is broker (start + p) mod n; follower j sits `1 + (shift + j) mod (n - 1)`
    places after it, and the shift grows by one after each full round, so followers of one broker's
    partitions spread over the other brokers too.
    """
    n = len(brokers)
    assert 1 <= replication_factor <= n and num_partitions >= 1, (brokers, num_partitions, replication_factor)
    ordered = sorted(brokers)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out: list[tuple[BrokerId, ...]] = []
    for p in range(num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        followers = [(first + 1 + (shift + j) % (n - 1)) % n for j in range(replication_factor - 1)]
        out.append(tuple(ordered[i] for i in [first, *followers]))
    assert all(len(set(r)) == replication_factor for r in out), out
    return out


def change_events(ts_ms: int, node_id: int, tpc: TopicPartitionChange) -> list[Event]:
    """leader_change, and partition_offline / partition_online when the leader goes to or comes from -1.
    leader_change also carries the ELR after the change (`elr`, an optional field of the schema)."""
    change = tpc.change
    if change.leader_before == change.leader_after:
        return []
    fields = {"leader_before": change.leader_before, "leader_after": change.leader_after,
              "leader_epoch": change.record.leader_epoch, "isr": list(change.isr_after), "reason": tpc.reason,
              "elr": list(change.elr_after)}
    partition = change.record.partition
    events = [Event(ts_ms, node_id, EventType.LEADER_CHANGE, tpc.topic, partition, fields)]
    if change.leader_after == NO_LEADER:
        events.append(Event(ts_ms, node_id, EventType.PARTITION_OFFLINE, tpc.topic, partition))
    elif change.leader_before == NO_LEADER:
        events.append(Event(ts_ms, node_id, EventType.PARTITION_ONLINE, tpc.topic, partition))
    return events
