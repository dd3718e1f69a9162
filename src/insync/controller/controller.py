"""The active controller: broker liveness, topics and their configs, leader election and ISR commits, as records.

Every operation follows KRaft's shape: decide from the current image, produce records and a response, append
them to the store, then apply them by replay (`MetadataImage.replay_all`), nothing else. Records are staged on a
scratch image first (`controller.batch`), so decisions of one operation build on each other; a user's request is
one metadata batch, the controller's own work as many as it takes. Request-level errors (unknown broker, stale
epoch, bad topic, too large) raise `KafkaException` before anything is written; per-partition errors of
AlterPartition travel in the response.

Time is the `now_ms` argument of each call (never decreasing); the owner (server or simulator) calls `tick`
by `next_deadline_ms()` to fence brokers whose session expired and to run seed 003's propagation check.
Replication-health events (`controller_elected`, `broker_*`, `leader_change`, `partition_offline|online`,
`metadata_propagated`) collect in a bounded buffer that the owner drains.
"""

from __future__ import annotations

import random
import uuid
from collections import deque
from collections.abc import Mapping, Sequence

from insync import errors
from insync.config import BrokerConfig, ConfigChange
from insync.controller.batch import Batch, check_request_records
from insync.controller.brokers import (
    BrokerSessions,
    BrokerState,
    current_state,
    is_caught_up,
    next_broker_state,
)
from insync.controller.config_control import (
    ConfigUpdate,
    broker_config_update,
    elr_safety_records,
    new_topic_config_records,
    topic_config_update,
)
from insync.controller.election import first_out_of_sync
from insync.controller.leader_balance import MAX_ELECTIONS_PER_IMBALANCE, LeaderBalance
from insync.controller.log_dirs import OfflineLogDirs, offline_dir_changes
from insync.controller.propagation import MetadataLog, PropagationConfig, Publication
from insync.controller.reassignment import ReassignmentTarget, reassignment_changes
from insync.controller.replication_control import (
    AlterPartitionData,
    ElectionPolicy,
    check_alter_partition,
    check_manual_assignments,
    check_new_topic,
    check_replication_factor,
    check_topic_assignments,
    leaving_broker_changes,
    min_isr_changes,
    offline_topic_changes,
    place_replicas,
    preferred_election_refusals,
    preferred_leader_changes,
    returning_broker_changes,
    unclean_shutdown_changes,
)
from insync.controller.results import (
    AlterPartitionDataResult,
    ControllerResult,
    CreateTopicResponse,
    HeartbeatResponse,
)
from insync.controller.store import MetadataStore
from insync.controller.unclean_recovery import (
    MANUAL,
    REPORTED_PARTITIONS_MAX,
    RecoveryReports,
    ReplicaLogReport,
    UncleanRecoveryStrategy,
    effective_strategy,
    recover,
    recovery_due,
    wait_for_recovery,
)
from insync.errors import KafkaError, KafkaException
from insync.events import Event, EventType, LeaderChangeReason
from insync.limits import (
    ALTER_PARTITION_ITEMS_MAX,
    BROKERS_MAX,
    EVENTS_BUFFERED_MAX,
)
from insync.metadata.image import BrokerRegistration, MetadataImage, PartitionView
from insync.metadata.records import (
    ELR_FEATURE,
    TRANSACTION_VERSION_FEATURE,
    TRANSACTION_VERSION_NEW_CLUSTER,
    BrokerRegistrationChangeRecord,
    ClusterIdRecord,
    ControllerChangeRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    new_cluster_id,
)
from insync.types import NO_LEADER, OFFSETS_TOPIC, BrokerId


class Controller:
    """One active controller over a `MetadataStore`; see the module docstring for the rules."""

    def __init__(self, node_id: int, config: BrokerConfig, store: MetadataStore, now_ms: int,
                 rng: random.Random) -> None:
        assert node_id >= 0 and now_ms >= 0
        self.node_id = node_id
        self._config = config
        self._store = store
        self._rng = rng  # topic ids and placement: a seeded simulator gets the same cluster every run
        self._now_ms = now_ms
        records = store.load()
        self._image = MetadataImage.from_records(records)
        self._log = MetadataLog(PropagationConfig.from_broker_config(config), records, now_ms)
        # KIP-966 unclean recovery: with a strategy, unclean elections wait for the replicas' log reports.
        self._recovery = UncleanRecoveryStrategy(config.controller.unclean_recovery_strategy)
        self._reports = RecoveryReports()
        # The topics' static defaults: the cluster-wide dynamic configs in the image override them at each election.
        defaults = config.log_config()
        self._policy = ElectionPolicy(defaults.unclean_leader_election, defaults.min_insync_replicas,
                                      config.controller.eligible_leader_replicas_enable,
                                      first_out_of_sync if self._recovery is UncleanRecoveryStrategy.NONE
                                      else wait_for_recovery)
        self._sessions = BrokerSessions(config.lifecycle.session_timeout_ms)
        self._offline_dirs = OfflineLogDirs()
        self._balance = LeaderBalance.from_config(config.controller)
        self._events: deque[Event] = deque(maxlen=EVENTS_BUFFERED_MAX)
        self.events_dropped = 0
        # Like Kafka's newly active controller, give live brokers a full session instead of fencing them all.
        for broker in self._image.brokers.values():
            if not broker.fenced:
                self._sessions.touch(broker.broker_id, now_ms)
        batch = self._batch(now_ms, internal=True)
        if self._image.cluster_id is None:  # a new metadata store: the cluster is made now, as Kafka's format does
            batch.add(ClusterIdRecord(new_cluster_id(rng)))
            batch.add(FeatureLevelRecord(TRANSACTION_VERSION_FEATURE, TRANSACTION_VERSION_NEW_CLUSTER))
        elr_level = 1 if self._policy.elr_enabled else 0  # the ELR feature brokers advertise in ApiVersions
        if self._image.finalized_features.get(ELR_FEATURE, 0) != elr_level:
            batch.add(FeatureLevelRecord(ELR_FEATURE, elr_level))
        epoch = self._image.controller_epoch + 1
        batch.add(ControllerChangeRecord(node_id, epoch))
        if self._policy.elr_enabled:
            for record in elr_safety_records(self._image, defaults.min_insync_replicas):
                batch.add(record)
        batch.event(EventType.CONTROLLER_ELECTED, controller_epoch=epoch)
        self._commit(batch, now_ms)

    # ---- state for the owner

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def propagations(self) -> int:
        return self._log.propagations

    @property
    def published_offset(self) -> int:
        return self._log.published_offset

    def records_since(self, offset: int, max_records: int) -> tuple[list[tuple[int, Record]], int]:
        return self._log.records_since(offset, max_records)

    def next_deadline_ms(self) -> int:
        """When `tick` next has work: the propagation check, the first session expiry or the leader balance."""
        live = [b.broker_id for b in self._image.brokers.values() if not b.fenced]
        expiry = self._sessions.next_expiry_ms(live)
        due = [self._log.next_check_ms(), *(t for t in (expiry, self._balance.due_ms) if t is not None)]
        return min(due)

    def drain_events(self) -> list[Event]:
        events = list(self._events)
        self._events.clear()
        return events

    def close(self) -> None:
        self._store.close()

    # ---- brokers

    def register_broker(self, broker_id: BrokerId, incarnation_id: str, host: str, port: int, now_ms: int,
                        rack: str | None = None, previous_broker_epoch: int = -1,
                        listeners: tuple[str, ...] = ()) -> ControllerResult[int]:
        """BrokerRegistration: a new broker epoch (the record's offset); the broker starts fenced.

        `previous_broker_epoch` is KIP-966's: the epoch of the broker's last life if that life ended with a
        clean shutdown, else -1. A new incarnation that cannot name the registered epoch crashed and may have
        lost its unflushed tail: with ELR on it leaves every ISR and ELR (`unclean_shutdown_changes`)."""
        self._advance(now_ms)
        invalid = errors.BY_NAME["INVALID_REGISTRATION"]
        if broker_id < 0 or not 0 < port <= 65535 or not incarnation_id:
            raise KafkaException(invalid, f"broker {broker_id} at {host}:{port} incarnation {incarnation_id!r}")
        existing = self._image.brokers.get(broker_id)
        if existing is None and len(self._image.brokers) >= BROKERS_MAX:
            raise KafkaException(invalid, f"the cluster already has {BROKERS_MAX} brokers")
        # A fenced broker holds no session (Kafka's BrokerHeartbeatManager.hasValidSession): after a controlled
        # shutdown its next incarnation registers at once.
        if (existing is not None and existing.incarnation_id != incarnation_id and not existing.fenced
                and self._sessions.has_valid_session(broker_id, now_ms)):
            raise KafkaException(errors.BY_NAME["DUPLICATE_BROKER_REGISTRATION"],
                                 f"broker {broker_id} is registered by incarnation {existing.incarnation_id} "
                                 "whose session has not expired")
        batch = self._batch(now_ms, internal=True)
        if existing is not None and not existing.fenced:
            self._fence(batch, existing, str(LeaderChangeReason.FENCED))  # a restart the session did not see
        if (existing is not None and existing.incarnation_id != incarnation_id
                and previous_broker_epoch != existing.broker_epoch):
            batch.add_changes(unclean_shutdown_changes(batch.image, broker_id, self._policy))
        epoch = self._log.end_offset + len(batch.records)
        batch.add(RegisterBrokerRecord(broker_id, epoch, incarnation_id, host, port, rack, listeners))
        batch.event(EventType.BROKER_REGISTERED, broker_id=broker_id, broker_epoch=epoch)
        records = self._commit(batch, now_ms)
        self._sessions.touch(broker_id, now_ms)  # after the commit: a failed write leaves no session behind
        return ControllerResult(records, epoch)

    def heartbeat(self, broker_id: BrokerId, broker_epoch: int, now_ms: int, current_metadata_offset: int,
                  want_fence: bool = False, want_shutdown: bool = False,
                  offline_log_dirs: tuple[str, ...] = ()) -> ControllerResult[HeartbeatResponse]:
        """BrokerHeartbeat: renews the session and moves the broker through Kafka's state table; failed log
        directories it names for the first time move its leaderships and shrink its ISRs (`controller.log_dirs`)."""
        self._advance(now_ms)
        broker = self._registered(broker_id, broker_epoch)
        self._sessions.touch(broker_id, now_ms)
        shutting_down = want_shutdown or broker.in_controlled_shutdown
        has_leaderships = shutting_down and bool(self._image.partitions_led_by(broker_id))  # a scan: only if asked
        state = next_broker_state(broker, current_metadata_offset, want_fence, want_shutdown, has_leaderships)
        batch = self._batch(now_ms, internal=True)
        if state is not current_state(broker):
            if state is BrokerState.UNFENCED:
                self._unfence(batch, broker)
            elif state is BrokerState.FENCED:
                self._fence(batch, broker, str(LeaderChangeReason.FENCED))
            elif state is BrokerState.CONTROLLED_SHUTDOWN:
                batch.add_changes(leaving_broker_changes(batch.image, broker_id, str(LeaderChangeReason.SHUTDOWN),
                                                         self._policy))
                batch.add(BrokerRegistrationChangeRecord(broker_id, broker.broker_epoch, True))
            elif not broker.fenced:
                self._fence(batch, broker, str(LeaderChangeReason.SHUTDOWN))
        if self._offline_dirs.newly_offline(broker_id, broker_epoch, offline_log_dirs):
            batch.add_changes(offline_dir_changes(batch.image, broker_id, self._policy))
        records = self._commit(batch, now_ms)
        response = HeartbeatResponse(is_caught_up(broker, current_metadata_offset),
                                     self._image.brokers[broker_id].fenced, state is BrokerState.SHUTDOWN_NOW)
        return ControllerResult(records, response)

    def tick(self, now_ms: int) -> ControllerResult[None]:
        """Fence brokers whose sessions expired, balance leaders and check ISR propagation when due."""
        self._advance(now_ms)
        live = [b.broker_id for b in self._image.brokers.values() if not b.fenced]
        batch = self._batch(now_ms, internal=True)
        for broker_id in self._sessions.expired(live, now_ms):
            self._fence(batch, batch.image.brokers[broker_id], str(LeaderChangeReason.FENCED))
        records = self._commit(batch, now_ms)
        if self._balance.is_due(now_ms):
            records += self._balance_leaders(now_ms)
        self._note_publication(self._log.tick(now_ms), now_ms)
        return ControllerResult(records, None)

    def _balance_leaders(self, now_ms: int) -> tuple[Record, ...]:
        """One round of the automatic leader balance (`controller.leader_balance`)."""
        batch = self._batch(now_ms, internal=True)
        changes = preferred_leader_changes(self._image, self._policy)
        batch.add_changes(changes[:MAX_ELECTIONS_PER_IMBALANCE])
        self._balance = self._balance.after_balance(len(changes) > MAX_ELECTIONS_PER_IMBALANCE, now_ms)
        records = self._commit(batch, now_ms)
        self._balance = self._balance.after_write(self._image, now_ms)  # also when nothing could move
        return records

    # ---- topics

    def create_topic(self, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, object],
                     now_ms: int, assignments: Sequence[tuple[int, Sequence[int]]] = (), *,
                     validate_only: bool = False) -> ControllerResult[CreateTopicResponse]:
        """CreateTopics for one topic, on the (partition, replicas) `assignments` given (`check_topic_assignments`) or
        placed round-robin over eligible brokers, first replica leading; `validate_only` checks all, writes nothing.
        One batch: the topic, its configs and its partitions, refused whole above the batch limit."""
        self._advance(now_ms)
        partitions = len(assignments) or num_partitions
        check_new_topic(self._image, name, partitions, None if assignments else replication_factor)
        config_records = new_topic_config_records(name, configs)
        check_request_records(1 + len(config_records) + partitions)  # before placing them
        placed = (check_topic_assignments(self._image, assignments) if assignments else
                  place_replicas(self._image.eligible_brokers(), num_partitions, replication_factor, self._rng))
        if validate_only:
            return ControllerResult((), CreateTopicResponse("", tuple(placed)))
        topic_id = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        batch = self._batch(now_ms)
        batch.add(TopicRecord(name, topic_id))
        for record in config_records:
            batch.add(record)
        self._add_partitions(batch, name, topic_id, 0, placed, now_ms)
        return ControllerResult(self._commit(batch, now_ms), CreateTopicResponse(topic_id, tuple(placed)))

    def create_partitions(self, name: str, count: int, now_ms: int, *, validate_only: bool = False,
                          assignments: Sequence[Sequence[int]] | None = None
                          ) -> ControllerResult[tuple[tuple[BrokerId, ...], ...]]:
        """CreatePartitions for one topic: partitions up to `count` in all, on the `assignments` given (one replica
        list per new partition, checked as Kafka checks them: `check_manual_assignments`) or placed as at creation
        (the topic's replication factor over the eligible brokers). Each is led by its first replica able to lead,
        its ISR the replicas able to join one. Answers the new partitions' replicas. Refused (Kafka's wording): an
        unknown topic, a count that is not an increase, more new partitions than one batch holds, too few brokers
        to place on, and `__consumer_offsets` (its partition count decides where each group's offsets live)."""
        self._advance(now_ms)
        topic = self._image.topic(name)
        if topic is None:  # no message, as Kafka's ReplicationControlManager answers
            raise KafkaException(errors.UNKNOWN_TOPIC_OR_PARTITION)
        if name == OFFSETS_TOPIC:
            raise KafkaException(errors.INVALID_REQUEST, f"the partition count of {OFFSETS_TOPIC} cannot change: "
                                 "it decides which partition holds each group's offsets")
        current = len(topic.partitions)
        if count <= current:
            raise KafkaException(errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s)." if
                                 count == current else f"The topic {name} currently has {current} partition(s); "
                                 f"{count} would not be an increase.")
        check_request_records(count - current)  # before placing them
        replication_factor = len(topic.partitions[0].replicas)
        if assignments is not None:
            check_manual_assignments(self._image, current, count - current, assignments, replication_factor)
            placed = [tuple(BrokerId(b) for b in replicas) for replicas in assignments]
        else:
            check_replication_factor(self._image, replication_factor)
            placed = place_replicas(self._image.eligible_brokers(), count, replication_factor, self._rng)[current:]
        if validate_only:
            return ControllerResult((), tuple(placed))
        batch = self._batch(now_ms)
        self._add_partitions(batch, name, topic.topic_id, current, placed, now_ms)
        return ControllerResult(self._commit(batch, now_ms), tuple(placed))

    def _add_partitions(self, batch: Batch, name: str, topic_id: str, first: int,
                        assignments: Sequence[tuple[BrokerId, ...]], now_ms: int) -> None:
        """New partitions, their ISR the replicas able to join one (all of them when placed by the controller,
        which places on eligible brokers only), led by the first (Kafka's buildPartitionRegistration)."""
        records = []
        for partition, replicas in enumerate(assignments, start=first):
            isr = tuple(r for r in replicas if batch.image.is_eligible(r))
            assert isr, (name, partition, replicas)  # placement and check_manual_assignments see to it
            records.append(PartitionRecord(topic_id, partition, replicas, isr, isr[0], 0, 0))
            fields = {"leader_before": NO_LEADER, "leader_after": isr[0], "leader_epoch": 0,
                      "isr": list(isr), "reason": str(LeaderChangeReason.CREATED)}
            batch.events.append(Event(now_ms, self.node_id, EventType.LEADER_CHANGE, name, partition, fields))
        batch.add_all(records)

    def alter_topic_configs(self, name: str, changes: Sequence[ConfigChange], now_ms: int, *, replace: bool = False,
                            validate_only: bool = False) -> ControllerResult[None]:
        """IncrementalAlterConfigs (AlterConfigs with `replace`) of one topic, all or nothing: one ConfigRecord
        per key whose override changes (`topic_config_update`); brokers apply them as they arrive."""
        self._advance(now_ms)
        update = topic_config_update(self._image, name, changes, replace)
        return self._apply_config_update(update, [name], now_ms, validate_only)

    def alter_broker_configs(self, broker: str, changes: Sequence[ConfigChange], now_ms: int, *,
                             replace: bool = False, validate_only: bool = False) -> ControllerResult[None]:
        """The same for a broker's dynamic configs, or the cluster-wide ones for "" (`broker_config_update`),
        which act on every topic without its own value."""
        self._advance(now_ms)
        update = broker_config_update(self._image, self._config, broker, changes, replace, self._policy.elr_enabled)
        topics = sorted(t.name for t in self._image.topics_by_id.values()) if broker == "" else []
        return self._apply_config_update(update, topics, now_ms, validate_only)

    def _apply_config_update(self, update: ConfigUpdate, topics: Sequence[str], now_ms: int,
                             validate_only: bool) -> ControllerResult[None]:
        """Commit `update` with, in `topics`, the ELRs a new min.insync.replicas judges again (one batch, as Kafka's
        incrementalAlterConfigs); then, as the controller's own work, where unclean election is now allowed,
        leaders for offline partitions at once rather than at the next broker event."""
        if validate_only:
            return ControllerResult((), None)
        batch = self._batch(now_ms)
        for record in update.records:
            batch.add(record)
        if update.changed("min.insync.replicas"):
            for topic in topics:
                batch.add_changes(min_isr_changes(batch.image, topic, self._policy))
        records = self._commit(batch, now_ms)
        elections = self._batch(now_ms, internal=True)
        for topic in topics:
            if self._policy.unclean_allowed(elections.image, topic):
                elections.add_changes(offline_topic_changes(elections.image, topic, self._policy))
        return ControllerResult(records + self._commit(elections, now_ms), None)

    def commit_records(self, records: Sequence[Record], now_ms: int) -> ControllerResult[None]:
        """Commit what a pure `*_control` module decided from this image (ACLs), on which nothing else depends."""
        self._advance(now_ms)
        batch = self._batch(now_ms)
        for record in records:
            batch.add(record)
        return ControllerResult(self._commit(batch, now_ms), None)

    def delete_topic(self, name: str, now_ms: int) -> ControllerResult[str]:
        """DeleteTopics for one topic; answers its topic id."""
        self._advance(now_ms)
        topic = self._image.topic(name)
        if topic is None:
            # Kafka's controller answers an unknown name with the error's own message.
            raise KafkaException(errors.UNKNOWN_TOPIC_OR_PARTITION, errors.UNKNOWN_TOPIC_OR_PARTITION.message)
        batch = self._batch(now_ms)
        batch.add(RemoveTopicRecord(topic.topic_id))
        return ControllerResult(self._commit(batch, now_ms), topic.topic_id)

    # ---- partitions

    def alter_partition(self, broker_id: BrokerId, broker_epoch: int, items: Sequence[AlterPartitionData],
                        now_ms: int) -> ControllerResult[tuple[AlterPartitionDataResult, ...]]:
        """AlterPartition (KIP-497): commit each leader-proposed ISR that passes the fencing checks."""
        self._advance(now_ms)
        broker = self._image.brokers.get(broker_id)
        if broker is None or broker.broker_epoch != broker_epoch:
            raise KafkaException(errors.STALE_BROKER_EPOCH,
                                 f"broker {broker_id} epoch {broker_epoch} is not the registered one")
        if len(items) > ALTER_PARTITION_ITEMS_MAX:
            raise KafkaException(errors.INVALID_REQUEST, f"{len(items)} partitions > {ALTER_PARTITION_ITEMS_MAX}")
        batch = self._batch(now_ms, internal=True)  # a leader's, not a user's: not atomic in Kafka either
        results = []
        for item in items:
            outcome = check_alter_partition(batch.image, broker_id, item, self._policy)
            if outcome is not None and not isinstance(outcome, KafkaError):
                batch.add_changes([outcome])
            error = outcome if isinstance(outcome, KafkaError) else errors.NONE
            results.append(self._partition_state(batch.image, item, error))
        return ControllerResult(self._commit(batch, now_ms), tuple(results))

    def elect_preferred_leaders(self, now_ms: int, partitions: Sequence[tuple[str, int]] | None = None
                                ) -> ControllerResult[dict[tuple[str, int], KafkaError]]:
        """Move leadership back to first replicas that are in sync and eligible (ElectLeaders, type PREFERRED), in
        `partitions` or everywhere (None). Answers NONE for each partition moved, and each other asked partition's
        `preferred_election_refusals`; with `partitions` None, only the partitions that moved."""
        self._advance(now_ms)
        batch = self._batch(now_ms)
        changes = preferred_leader_changes(self._image, self._policy)
        wanted = None if partitions is None else set(partitions)
        changes = [c for c in changes if wanted is None or (c.topic, c.change.record.partition) in wanted]
        outcomes = {} if partitions is None else preferred_election_refusals(self._image, partitions)
        outcomes.update({(c.topic, c.change.record.partition): errors.NONE for c in changes})
        batch.add_changes(changes)
        return ControllerResult(self._commit(batch, now_ms), outcomes)

    def alter_partition_reassignments(self, targets: Sequence[ReassignmentTarget], now_ms: int
                                      ) -> ControllerResult[tuple[KafkaException | None, ...]]:
        """AlterPartitionReassignments (`controller.reassignment`): each target's refusal (None: accepted). One
        batch: more changes than it holds refuse the whole request (`targets` is bounded by the request's size)."""
        self._advance(now_ms)
        batch = self._batch(now_ms)
        outcomes: list[KafkaException | None] = []
        for target in targets:
            try:
                changes = reassignment_changes(batch.image, target, self._policy)
            except KafkaException as exc:
                outcomes.append(exc)
                continue
            batch.add_changes(changes)
            outcomes.append(None)
        return ControllerResult(self._commit(batch, now_ms), tuple(outcomes))

    def report_replica_logs(self, broker_id: BrokerId, broker_epoch: int, reports: Sequence[ReplicaLogReport],
                            now_ms: int) -> ControllerResult[None]:
        """A broker's logs of its offline partitions (KIP-966's GetReplicaLogInfo; brokers send them with their
        heartbeats), kept for unclean recovery; then each reported partition the strategy recovers is elected."""
        self._advance(now_ms)
        self._registered(broker_id, broker_epoch)
        offline = {(v.topic_id, v.partition): v for v in self._image.offline_partitions()}
        self._reports.forget_all_but(set(offline))
        reported = [r for r in reports[:REPORTED_PARTITIONS_MAX]
                    if (r.topic_id, r.partition) in offline and r.log.broker == broker_id]
        for r in reported:
            self._reports.record(r.topic_id, r.partition, broker_epoch, r.leader_epoch, r.log)
        batch = self._batch(now_ms, internal=True)
        for r in reported:
            self._recover(batch, offline[(r.topic_id, r.partition)], manual=False)
        return ControllerResult(self._commit(batch, now_ms), None)

    def elect_unclean_leaders(self, now_ms: int, partitions: Sequence[tuple[str, int]] | None = None
                              ) -> ControllerResult[dict[tuple[str, int], KafkaError]]:
        """ElectLeaders type UNCLEAN for `partitions` (None: every offline partition), by the recovery rule among
        the replicas that reported their logs. Outcomes as Kafka's: NONE (elected), ELECTION_NOT_NEEDED (it has
        a leader), ELIGIBLE_LEADERS_NOT_AVAILABLE (no live replica reported), UNKNOWN_TOPIC_OR_PARTITION."""
        self._advance(now_ms)
        batch = self._batch(now_ms)
        asked = ([(v.topic, v.partition) for v in self._image.offline_partitions()] if partitions is None
                 else list(partitions))
        outcomes: dict[tuple[str, int], KafkaError] = {}
        for name, index in asked:
            topic = batch.image.topic(name)
            registration = None if topic is None else topic.partitions.get(index)
            if topic is None or registration is None:
                outcomes[(name, index)] = errors.UNKNOWN_TOPIC_OR_PARTITION
            elif registration.leader != NO_LEADER:
                outcomes[(name, index)] = errors.ELECTION_NOT_NEEDED
            elif self._recover(batch, PartitionView(name, topic.topic_id, index, registration), manual=True):
                outcomes[(name, index)] = errors.NONE
            else:
                outcomes[(name, index)] = errors.BY_NAME["ELIGIBLE_LEADERS_NOT_AVAILABLE"]
        return ControllerResult(self._commit(batch, now_ms), outcomes)

    # ---- internals

    def _recover(self, batch: Batch, view: PartitionView, manual: bool) -> bool:
        """Elect `view`'s partition by the recovery rule if the strategy (or, `manual`, an operator) wants it."""
        strategy = effective_strategy(self._recovery, self._policy.unclean_allowed(batch.image, view.topic))
        if not manual and not recovery_due(strategy, view.registration, batch.image.is_eligible):
            return False
        epochs = {b.broker_id: b.broker_epoch for b in batch.image.brokers.values()}
        logs = self._reports.logs(view.topic_id, view.partition, view.registration, epochs)
        outcome = recover(batch.image, view, self._policy, logs, MANUAL if manual else str(strategy),
                          self._now_ms, self.node_id)
        if outcome is None:
            return False
        change, events = outcome
        batch.add_changes([change])
        batch.events.extend(events)
        return True

    def _advance(self, now_ms: int) -> None:
        assert now_ms >= self._now_ms, f"time went backwards: {now_ms} < {self._now_ms}"
        self._now_ms = now_ms

    def _batch(self, now_ms: int, *, internal: bool = False) -> Batch:
        """A batch for a user's request (atomic, bounded), or, `internal`, for the controller's own work."""
        return Batch(self._image, self.node_id, now_ms, internal=internal)

    def _commit(self, batch: Batch, now_ms: int) -> tuple[Record, ...]:
        """Append each metadata batch to the store, then apply it by replay: the one place controller state
        changes. A store that fails between two batches of internal work leaves the image at the last one."""
        records = tuple(batch.records)
        if not records:
            assert not batch.events
            return records
        publications = []
        for chunk in batch.chunks():
            self._store.append(chunk)
            publications.append(self._log.append(chunk, now_ms))
            self._image = self._image.replay_all(chunk)
        assert self._image.offset == self._log.end_offset == batch.image.offset, (self._image.offset,
                                                                                  self._log.end_offset)
        self._balance = self._balance.after_write(self._image, now_ms)
        self._emit(batch.events)
        for publication in publications:
            self._note_publication(publication, now_ms)
        return records

    def _note_publication(self, publication: Publication | None, now_ms: int) -> None:
        if publication is not None:
            self._emit([Event(now_ms, self.node_id, EventType.METADATA_PROPAGATED,
                              fields={"changes": publication.changes})])

    def _emit(self, events: Sequence[Event]) -> None:
        overflow = len(self._events) + len(events) - EVENTS_BUFFERED_MAX
        self.events_dropped += max(0, overflow)  # the deque drops the oldest; the owner drains too rarely
        self._events.extend(events)

    def _registered(self, broker_id: BrokerId, broker_epoch: int) -> BrokerRegistration:
        broker = self._image.brokers.get(broker_id)
        if broker is None:
            raise KafkaException(errors.BROKER_ID_NOT_REGISTERED, f"broker {broker_id} is not registered")
        if broker.broker_epoch != broker_epoch:
            raise KafkaException(errors.STALE_BROKER_EPOCH,
                                 f"broker {broker_id} epoch {broker_epoch}, registered {broker.broker_epoch}")
        return broker

    def _fence(self, batch: Batch, broker: BrokerRegistration, reason: str) -> None:
        batch.add_changes(leaving_broker_changes(batch.image, broker.broker_id, reason, self._policy))
        batch.add(FenceBrokerRecord(broker.broker_id, broker.broker_epoch))
        batch.event(EventType.BROKER_FENCED, broker_id=broker.broker_id)

    def _unfence(self, batch: Batch, broker: BrokerRegistration) -> None:
        """The elections the broker's return allows, then its UnfenceBrokerRecord: last, so a controller that stops
        between two batches of this unfences it again at its next heartbeat, electing the rest."""
        batch.add_changes(returning_broker_changes(batch.image, broker.broker_id, self._policy))
        batch.add(UnfenceBrokerRecord(broker.broker_id, broker.broker_epoch))
        batch.event(EventType.BROKER_UNFENCED, broker_id=broker.broker_id)

    @staticmethod
    def _partition_state(image: MetadataImage, item: AlterPartitionData, error: KafkaError) -> AlterPartitionDataResult:
        reg = image.partition(item.topic_id, item.partition)
        return (AlterPartitionDataResult(item.topic_id, item.partition, error) if reg is None else
                AlterPartitionDataResult(item.topic_id, item.partition, error, reg.leader, reg.isr,
                                         reg.leader_epoch, reg.partition_epoch, reg.leader_recovery_state))
