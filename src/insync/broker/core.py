"""One broker's cores composed, sans-IO: the object both the simulator and the asyncio server drive.

`BrokerCore` owns the partitions this broker hosts (`HostedPartitions`), its copy of the metadata (`BrokerMetadata`),
its conversation with the controller (`ControllerChannel`), the fetches it serves (`FetchServer`), the produce
purgatory (`ProduceHandler`) and the fetcher sessions (`ReplicaFetchers`); what needs no purgatory it answers at once
(`broker.queries`, `broker.log_dirs`, `broker.producers`). It never does I/O and never reads a clock. A driver calls
`start`, `handle` for every message, `complete_read` when a `CompleteAfter` has elapsed and `tick` at
`next_deadline_ms()`, each returning commands (`Outgoing`, `CompleteAfter`), and `drain_events()` after each. Dynamic
broker configs apply as their records arrive: `config` is the static config under them, topic log defaults follow, and
the ISR checks see a new `replica.lag.time.max.ms` at their next pass. Metadata drives roles: published records are
replayed into the image, and the partitions they touch become leader, follower (moving to the fetcher session of the
new leader), adopt a new ISR, or stop. ISR proposals go to the controller through the channel (`IsrProposals`), one
AlterPartition in flight. A failed log dir stops its partitions (`broker.dir_failure`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from insync import errors
from insync.broker.clean_shutdown import mark_clean_shutdown, take_previous_broker_epoch
from insync.broker.controller_channel import ControllerChannel
from insync.broker.dir_failure import LogDirFailures, directory_id
from insync.broker.fetch_serving import FetchOutcome, FetchServer
from insync.broker.fetchers import ReplicaFetchers
from insync.broker.hosted_partitions import HostedPartitions
from insync.broker.isr_proposals import IsrProposals
from insync.broker.log_dirs import (
    AlterReplicaLogDirsRequest,
    DescribeLogDirsRequest,
    alter_replica_log_dirs,
    describe_log_dirs,
)
from insync.broker.messages import (
    Command,
    ConsumerFetchRequest,
    DeleteRecordsRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
)
from insync.broker.metadata import BrokerMetadata, DeltaKind, PartitionDelta
from insync.broker.produce import ProduceHandler
from insync.broker.producers import DescribeProducersRequest, describe_producers
from insync.broker.queries import ProducerIdAllocator, delete_records, list_offsets, offset_for_leader_epoch
from insync.broker.replica_logs import offline_replica_logs
from insync.broker.throttles import ReplicationThrottles
from insync.config import BrokerConfig, ConfigError
from insync.controller.messages import (
    CONTROLLER,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
    MetadataUpdate,
    ReplicaLogReportRequest,
)
from insync.events import Event, EventType
from insync.replication.event_buffer import EventBuffer
from insync.replication.messages import FetchRequest, FetchResponse
from insync.replication.partition import Partition, PartitionConfig
from insync.storage.checkpoint import CheckpointError
from insync.storage.log_manager import LogManager
from insync.types import NO_LEADER, Address, BrokerId, LeaderEpoch, Outgoing, PartitionEpoch, TopicPartition

log = logging.getLogger(__name__)

REJECTED_REPORT_INTERVAL_MS = 1_000
RETENTION_FIRST_CHECK_MS = 30_000  # Kafka's LogManager checks retention first 30 s after start-up
# How often finished cleans are swapped in and the log cleaner may start another (Kafka's cleaner threads pick the
# next log at once; log.cleaner.backoff.ms still spaces the picks that find nothing).
CLEANER_CHECK_INTERVAL_MS = 500
# How often a replica moving between log dirs copies its next share (`storage.replica_moves`), while one moves.
REPLICA_MOVE_STEP_INTERVAL_MS = 10
# Answered at once from the partitions' state, without purgatory (`broker.queries`, `log_dirs`, `producers`).
Query = (ListOffsetsRequest | OffsetForLeaderEpochRequest | DeleteRecordsRequest | InitProducerIdRequest
         | DescribeLogDirsRequest | AlterReplicaLogDirsRequest | DescribeProducersRequest)


class BrokerCore:
    def __init__(self, broker_id: BrokerId, config: BrokerConfig, log_manager: LogManager, incarnation_id: int,
                 now_ms: int) -> None:
        assert broker_id >= 0 and now_ms >= 0
        self.broker_id = broker_id
        self.static_config = config
        self.config = config  # the static config under the dynamic configs of the image
        self._dynamic_layers: tuple[Mapping[str, str], Mapping[str, str]] = ({}, {})
        self.log_manager = log_manager
        self.events = EventBuffer()
        self.metadata = BrokerMetadata(broker_id)
        previous_epoch = take_previous_broker_epoch(log_manager.disk, log_manager.log_dir)
        self.channel = ControllerChannel(broker_id, incarnation_id, config.lifecycle.heartbeat_interval_ms,
                                         previous_epoch)
        self.partitions = HostedPartitions()
        self.proposals = IsrProposals(broker_id, self.channel, self.metadata)
        self.throttles = ReplicationThrottles(broker_id, lambda: self.config, self.metadata.image_configs)
        self.fetch_server = FetchServer(self.partitions.leader, self.throttles, self.partitions.get)
        self.produce = ProduceHandler(self.partitions.leader)
        self.fetchers = ReplicaFetchers(broker_id, config.replication.fetch, self.partitions, self.events,
                                        lambda: self.channel.broker_epoch, self.throttles)
        self.producer_ids = ProducerIdAllocator(broker_id, now_ms)
        self.dir_failures = LogDirFailures(log_manager.log_dirs)
        # Partitions whose log is in a failed log dir: stopped until the broker restarts (Kafka's
        # HostedPartition.Offline); metadata no longer moves them, and they propose no ISR change.
        self.offline_partitions: set[TopicPartition] = set()
        self._checkpoint_interval_ms = config.replication.high_watermark_checkpoint_interval_ms
        self._retention_interval_ms = config.storage.retention_check_interval_ms
        self._next_isr_check_ms = now_ms + config.replication.isr_check_interval_ms
        self._next_checkpoint_ms = now_ms + self._checkpoint_interval_ms
        # A shorter interval than Kafka's first delay (tests, operators in a hurry) checks at the first interval.
        self._next_retention_ms = now_ms + min(RETENTION_FIRST_CHECK_MS, self._retention_interval_ms)
        self._next_clean_ms = now_ms + CLEANER_CHECK_INTERVAL_MS
        self._next_move_ms = now_ms
        self._next_rejected_report_ms = now_ms
        self._now_ms = now_ms
        self._caught_up = False
        try:
            self._checkpointed_hw = log_manager.read_high_watermarks()
        except CheckpointError:
            self._checkpointed_hw = {}  # never guess a HW: start from the log start and learn it again

    # Queries for drivers, tools and the simulator's checker -------------------------------------------------

    def leader_states(self, topic: str | None = None) -> list[tuple[TopicPartition, int, int]]:
        """(partition, leader epoch, high watermark) of each partition this broker leads; of `topic`'s only, found
        through the metadata, so that a coordinator's check of its topic costs its partitions, not all hosted."""
        if topic is None:
            return self.partitions.leader_states()
        image = self.metadata.image.topic(topic)
        if image is None:
            return []
        return [(tp, partition.leader_epoch, partition.high_watermark) for index in sorted(image.partitions)
                if (partition := self.partitions.leader(tp := TopicPartition(topic, index))) is not None]

    def leader_epoch(self, tp: TopicPartition) -> int | None:
        """The leader epoch of `tp` if this broker leads it (the group coordinator's test), else None."""
        partition = self.partitions.leader(tp)
        return None if partition is None else partition.leader_epoch

    def high_watermark(self, tp: TopicPartition) -> int:
        partition = self.partitions.get(tp)
        return 0 if partition is None else partition.high_watermark

    @property
    def failed_partitions_count(self) -> int:
        return self.fetchers.failed_partitions_count

    def drain_events(self) -> list[Event]:
        return self.events.drain()

    def _report_rejected(self, now_ms: int) -> None:
        """produce_rejected is a per-second aggregate per partition and error (DESIGN.md 7), not one per request."""
        self._next_rejected_report_ms = now_ms + REJECTED_REPORT_INTERVAL_MS
        for (tp, name), count in sorted(self.produce.drain_rejected().items()):
            self.events.emit(Event(now_ms, self.broker_id, EventType.PRODUCE_REJECTED, tp.topic, tp.partition,
                                   {"error": name, "count": count}))

    # Driving ------------------------------------------------------------------------------------------

    def start(self, now_ms: int) -> list[Command]:
        self._now_ms = now_ms
        return self._after_dir_failures(now_ms, list(self.channel.tick(now_ms, self.metadata.applied_offset)))

    def begin_controlled_shutdown(self, now_ms: int) -> list[Command]:
        """Kafka's controlled shutdown: ask the controller to move this broker's leaderships to other in-sync
        replicas before it goes (`shutdown_granted` once it has). Serving goes on meanwhile, so clients are told
        NOT_LEADER_OR_FOLLOWER and move to the new leaders."""
        self.channel.begin_shutdown(now_ms)
        return list(self.channel.tick(now_ms, self.metadata.applied_offset))

    @property
    def shutdown_granted(self) -> bool:
        return self.channel.shutdown_granted

    def handle(self, now_ms: int, source: Address, message: object) -> list[Command]:
        """Process one received message; returns what to send or schedule."""
        assert now_ms >= self._now_ms, (now_ms, self._now_ms)
        self._now_ms = now_ms
        return self._after_dir_failures(now_ms, self._handle(now_ms, source, message))

    def _handle(self, now_ms: int, source: Address, message: object) -> list[Command]:
        if isinstance(message, FetchRequest):
            return self._after_fetch(now_ms, self.fetch_server.follower_fetch(now_ms, source, message))
        if isinstance(message, FetchResponse):
            return self._on_fetch_response(now_ms, source, message)
        if isinstance(message, ProduceRequest):
            outcome = self.produce.handle(now_ms, source, message)
            commands: list[Command] = list(outcome.outgoing)
            commands.extend(self.produce.check(now_ms, outcome.advanced) if outcome.advanced else [])
            commands.extend(self._after_fetch(now_ms, self.fetch_server.wake(now_ms, outcome.appended,
                                                                             outcome.advanced)))
            return commands
        if isinstance(message, ConsumerFetchRequest):
            return self._after_fetch(now_ms, self.fetch_server.consumer_fetch(now_ms, source, message))
        if isinstance(message, MetadataRequest):
            return [Outgoing(source, self.metadata.client_metadata(message))]
        if isinstance(message, Query):
            return [Outgoing(source, self._answer(now_ms, message))]
        if isinstance(message, MetadataUpdate):
            return self._on_metadata_update(now_ms, message)
        if isinstance(message, BrokerHeartbeatResponse):
            self.channel.on_heartbeat(message)
            return list(self.channel.tick(now_ms, self.metadata.applied_offset))
        if isinstance(message, BrokerRegistrationResponse):
            if self.channel.on_registration(now_ms, message):
                return list(self.channel.tick(now_ms, self.metadata.applied_offset))
            return []
        if isinstance(message, AlterPartitionResponse):
            return self._on_alter_partition_response(now_ms, message)
        raise AssertionError(f"broker {self.broker_id} got an unexpected {type(message).__name__}")

    def _answer(self, now_ms: int, query: Query) -> object:
        if isinstance(query, ListOffsetsRequest):
            return list_offsets(self.partitions, self.metadata, query)
        if isinstance(query, OffsetForLeaderEpochRequest):
            return offset_for_leader_epoch(self.partitions, self.metadata, query)
        if isinstance(query, DeleteRecordsRequest):
            answer = delete_records(self.partitions, self.metadata, query)
            self.fetch_server.changed(tp for tp, _ in query.partitions)  # followers learn the new log start
            return answer
        if isinstance(query, DescribeLogDirsRequest):
            return describe_log_dirs(self.log_manager, self.partitions, query)
        if isinstance(query, AlterReplicaLogDirsRequest):
            return alter_replica_log_dirs(self.log_manager, self.partitions, query)
        if isinstance(query, DescribeProducersRequest):
            return describe_producers(self.log_manager, self.partitions, self.metadata, query)
        return self.producer_ids.allocate(query, now_ms)

    def fetch_failed(self, now_ms: int, leader: BrokerId, correlation_id: int) -> list[Command]:
        """A follower fetch this broker sent got no answer (the driver lost the connection or timed out)."""
        assert now_ms >= self._now_ms
        self._now_ms = now_ms
        return list(self.fetchers.on_error(now_ms, leader, correlation_id))

    def complete_read(self, now_ms: int, token: int) -> list[Command]:
        assert now_ms >= self._now_ms
        self._now_ms = now_ms
        return self._after_dir_failures(now_ms, self._after_fetch(now_ms, self.fetch_server.complete(now_ms, token)))

    def _after_dir_failures(self, now_ms: int, commands: list[Command]) -> list[Command]:
        """Stop serving the partitions of log directories that failed during the call (`broker.dir_failure`)."""
        if not self.log_manager.failure_channel.has_new:
            return commands
        for log_dir in self.log_manager.failure_channel.take_new():
            log.warning("Stopping serving replicas in dir %s with uuid %s because the log directory has failed.",
                        log_dir, directory_id(log_dir))
            offline = self.log_manager.handle_log_dir_failure(log_dir)
            self.offline_partitions.update(offline)
            failure = self.dir_failures.fail(log_dir, [tp for tp in offline if tp in self.partitions])
            if failure is None:
                continue
            for tp in failure.partitions:
                self.fetchers.remove(now_ms, tp)
                self.proposals.withdraw(tp)
            self.fetch_server.changed(failure.partitions)  # their followers are told by the next fetch
            log.warning("Broker %d stopped fetcher for partitions %s because they are in the failed log directory "
                        "%s.", self.broker_id, ",".join(map(str, failure.partitions)), log_dir)
            log.warning("Stopped serving replicas in dir %s", log_dir)
        if self.dir_failures.halt_message is None:  # the driver halts the broker otherwise: no one to tell
            self.channel.report_offline_log_dirs(now_ms, self.dir_failures.offline_directory_ids)
            commands.extend(self.channel.tick(now_ms, self.metadata.applied_offset))
        return commands

    @property
    def halt_message(self) -> str | None:
        """Set once every log directory has failed: the driver must halt the broker (Kafka's Exit.halt)."""
        return self.dir_failures.halt_message

    def tick(self, now_ms: int) -> list[Command]:
        assert now_ms >= self._now_ms
        self._now_ms = now_ms
        return self._after_dir_failures(now_ms, self._tick(now_ms))

    def _tick(self, now_ms: int) -> list[Command]:
        commands: list[Command] = []
        if now_ms >= self._next_isr_check_ms:
            self._next_isr_check_ms = now_ms + self.config.replication.isr_check_interval_ms
            for tp, partition in self.partitions.items():
                if tp in self.offline_partitions:
                    continue
                proposal = partition.maybe_shrink_isr(now_ms)
                if proposal is not None:
                    commands.extend(self.proposals.propose(now_ms, tp, proposal))
                    self.fetch_server.changed((tp,))  # with a change in flight no follower fetch is idle there
                commands.extend(self.proposals.propose_recovered(now_ms, tp, partition))  # an answer lost or refused
        if now_ms >= self._next_checkpoint_ms:
            self._next_checkpoint_ms = now_ms + self._checkpoint_interval_ms
            self.checkpoint()
        if now_ms >= self._next_rejected_report_ms and self.produce.rejected:
            self._report_rejected(now_ms)
        if now_ms >= self._next_retention_ms:
            self._next_retention_ms = now_ms + self._retention_interval_ms
            # Followers bound it by their own HW, as Kafka's deletableSegments does on every replica.
            if self.log_manager.apply_retention(self.partitions.high_watermarks()):
                self.fetch_server.sessions.mark_all()  # followers learn the new log starts
        if now_ms >= self._next_clean_ms:
            self._next_clean_ms = now_ms + CLEANER_CHECK_INTERVAL_MS
            self.log_manager.clean(now_ms, self.partitions.stable_offsets_of_compacted(self.log_manager),
                                   self.partitions)
        if now_ms >= self._next_move_ms:
            self._next_move_ms = now_ms + REPLICA_MOVE_STEP_INTERVAL_MS
            self.log_manager.moves.step(now_ms)
        commands.extend(self.produce.check(now_ms, ()))
        commands.extend(self._after_fetch(now_ms, self.fetch_server.wake(now_ms)))
        commands.extend(self.fetchers.tick(now_ms))
        sent = self.channel.tick(now_ms, self.metadata.applied_offset)
        commands.extend(sent)
        commands.extend(self._replica_log_report(sent))
        return commands

    def _replica_log_report(self, sent: list[Outgoing]) -> list[Outgoing]:
        """With each heartbeat, the logs of the offline partitions hosted here (unclean recovery, KIP-966)."""
        heartbeat = next((o.message for o in sent if isinstance(o.message, BrokerHeartbeatRequest)), None)
        if heartbeat is None or not self.caught_up:
            return []
        hosted = {tp: log for tp in self.partitions if (reg := self.metadata.registration(tp)) is not None
                  and reg.leader == NO_LEADER and (log := self.log_manager.get(tp)) is not None}
        reports = offline_replica_logs(self.broker_id, self.metadata, hosted)
        if not reports:
            return []
        return [Outgoing(CONTROLLER, ReplicaLogReportRequest(heartbeat.correlation_id, self.broker_id,
                                                             heartbeat.broker_epoch, reports))]

    def next_deadline_ms(self) -> int:
        deadlines = [self._next_isr_check_ms, self._next_checkpoint_ms, self._next_retention_ms, self._next_clean_ms,
                     self.channel.next_deadline_ms(), self.fetchers.next_deadline_ms()]
        if self.produce.rejected:
            deadlines.append(self._next_rejected_report_ms)
        if self.log_manager.moves.active:
            deadlines.append(self._next_move_ms)
        for deadline in (self.produce.next_deadline_ms(), self.fetch_server.next_deadline_ms()):
            if deadline is not None:
                deadlines.append(deadline)
        return min(deadlines)

    def checkpoint(self) -> None:
        """Write the HW checkpoint (and the recovery points and log starts with it)."""
        self.log_manager.checkpoint_high_watermarks(self.partitions.high_watermarks())
        self.log_manager.checkpoint_recovery_points_and_log_starts()

    def mark_clean_shutdown(self) -> None:
        """The driver closed (flushed) every log: leave the clean-shutdown marker for the next life (KIP-966)."""
        epoch = self.channel.epoch_to_remember
        if epoch >= 0:  # never registered, in this life or the last: nothing to prove
            mark_clean_shutdown(self.log_manager.disk, self.log_manager.log_dir, epoch)

    def delete_records(self, now_ms: int, tp: TopicPartition, offset: int | None) -> list[Command]:
        """DeleteRecords on the leader: move the log start offset (None: to the high watermark). Raises
        KafkaException (OFFSET_OUT_OF_RANGE past the high watermark)."""
        partition = self.partitions.leader(tp)
        if partition is None:
            return []
        partition.delete_records_on_leader(-1 if offset is None else offset)
        self.fetch_server.changed((tp,))
        return []

    # Fetch serving and its consequences ---------------------------------------------------------------

    def _after_fetch(self, now_ms: int, outcome: FetchOutcome) -> list[Command]:
        commands: list[Command] = list(outcome.commands)
        advanced: list[TopicPartition] = []
        for partition, result in outcome.results:
            if result.alter_partition is not None:
                commands.extend(self.proposals.propose(now_ms, partition.topic_partition, result.alter_partition))
                self.fetch_server.changed((partition.topic_partition,))  # the other followers' sessions too
            if result.high_watermark_advanced:
                advanced.append(partition.topic_partition)
        if advanced:
            commands.extend(self.produce.check(now_ms, advanced))
            commands.extend(self._after_fetch(now_ms, self.fetch_server.wake(now_ms, hw_advanced=advanced)))
        return commands

    def _on_fetch_response(self, now_ms: int, source: Address, response: FetchResponse) -> list[Command]:
        """Follow the leader's answer; consumer fetches parked on a follower (KIP-392) wait for its high
        watermark, as Kafka's fetcher completes them when the follower's advances."""
        assert isinstance(source, int), source
        before = {} if not self.fetch_server.purgatory_size else {
            d.topic_partition: p.high_watermark for d in response.partitions
            if (p := self.partitions.get(d.topic_partition)) is not None}
        commands: list[Command] = list(self.fetchers.on_response(now_ms, BrokerId(source), response))
        advanced = [tp for tp, hw in before.items() if (p := self.partitions.get(tp)) is not None
                    and p.high_watermark > hw]
        if advanced:
            commands.extend(self._after_fetch(now_ms, self.fetch_server.wake(now_ms, hw_advanced=advanced)))
        return commands

    # Metadata -----------------------------------------------------------------------------------------

    @property
    def caught_up(self) -> bool:
        """Registered, and the metadata applied reaches past this incarnation's own registration record (KRaft's
        initial catch-up). Before that the broker replays metadata but takes no role: an image that predates its
        registration may still name it leader at an epoch its previous incarnation held, with data this one lost
        in a crash, and acting on it would let followers truncate committed data to match."""
        if not self._caught_up and self.channel.registered:
            self._caught_up = self.metadata.applied_offset > self.channel.broker_epoch
        return self._caught_up

    def _on_metadata_update(self, now_ms: int, update: MetadataUpdate) -> list[Command]:
        self.channel.on_metadata_update(update.correlation_id, update.published_offset)
        was_caught_up = self._caught_up
        deltas = self.metadata.apply(update.records)
        if deltas is None:
            return list(self.channel.fetch_metadata(now_ms, self.metadata.applied_offset))
        self._apply_dynamic_configs(now_ms)
        if not self.caught_up:
            deltas = []  # kept in the image; applied all at once when caught up
        elif not was_caught_up:
            deltas = self.metadata.hosted_deltas()
            self._delete_stray_logs({d.topic_partition for d in deltas})
        commands: list[Command] = []
        touched: list[TopicPartition] = []
        with self.log_manager.epoch_checkpoints.batched():  # each new leader's epoch file, all durable at the end
            for delta in deltas:
                commands.extend(self._apply_delta(now_ms, delta))
                touched.append(delta.topic_partition)
        if touched:
            commands.extend(self.produce.check(now_ms, touched))
            commands.extend(self._after_fetch(now_ms, self.fetch_server.wake(now_ms, forced=touched)))
        commands.extend(self.fetchers.tick(now_ms))
        if self.metadata.applied_offset < self.channel.published_offset:
            commands.extend(self.channel.fetch_metadata(now_ms, self.metadata.applied_offset))
        return commands

    def _delete_stray_logs(self, hosted: set[TopicPartition]) -> None:
        """Delete the logs of partitions the caught-up image places elsewhere: a replica reassigned away, or a topic
        deleted, while this broker was down (Kafka's stray replicas, deleted at startup since 3.7)."""
        for tp in sorted(set(self.log_manager.all_logs()) - hosted - set(self.partitions)):
            log.warning("Deleting the stray log %s: the metadata places no replica of it on broker %d",
                        tp, self.broker_id)
            self.log_manager.delete(tp)

    def _apply_delta(self, now_ms: int, delta: PartitionDelta) -> list[Command]:
        tp = delta.topic_partition
        if tp in self.offline_partitions or not self.log_manager.online_dirs():
            if delta.kind is DeltaKind.STOP:
                self._stop(tp)  # forgotten, its files left for the restart to find (Kafka's)
            return []
        if delta.kind is DeltaKind.STOP:
            self.fetchers.remove(now_ms, tp)
            self.proposals.withdraw(tp)
            if self._stop(tp):
                self.log_manager.delete(tp)
            return []
        if delta.kind is DeltaKind.CONFIG:
            self._reconfigure(now_ms, tp)
            return []
        reg = delta.registration
        assert reg is not None
        partition = self._partition(tp)
        leader_epoch, partition_epoch = LeaderEpoch(reg.leader_epoch), PartitionEpoch(reg.partition_epoch)
        isr = tuple(BrokerId(b) for b in reg.isr)
        replicas = tuple(BrokerId(b) for b in reg.replicas)
        if reg.leader == self.broker_id:
            if partition.make_leader(leader_epoch, partition_epoch, isr, replicas, now_ms, reg.is_recovering):
                self.fetchers.remove(now_ms, tp)
                if delta.kind is DeltaKind.LEADER:
                    self.proposals.withdraw(tp)
            return list(self.proposals.propose_recovered(now_ms, tp, partition))
        restart = partition.make_follower(BrokerId(reg.leader), leader_epoch, partition_epoch, isr, replicas,
                                          now_ms)
        if restart or delta.kind is DeltaKind.FOLLOWER:
            self.proposals.withdraw(tp)
            self.fetchers.assign(now_ms, tp, BrokerId(reg.leader), leader_epoch)
        return []

    def _stop(self, tp: TopicPartition) -> bool:
        """Forget hosted `tp`, answering what still waits on it as Kafka's getPartitionOrError does (moved away,
        or its topic deleted); whether it was hosted."""
        gone = self.partitions.pop(tp, None)
        if gone is not None:
            gone.stop(errors.NOT_LEADER_OR_FOLLOWER if self.metadata.image.topic(tp.topic) is not None
                      else errors.UNKNOWN_TOPIC_OR_PARTITION)
        return gone is not None

    def _apply_dynamic_configs(self, now_ms: int) -> None:
        """New dynamic broker configs take effect at once, as in Kafka: every hosted partition is reconfigured
        (`_reconfigure`) and the ISR check runs within half the new lag. Values this broker's static settings
        refuse (a rule between keys the controller could not check) leave the previous ones in force, as Kafka's
        broker does, with an error in its log."""
        image = self.metadata.image
        layers = (dict(image.dynamic_configs("")), dict(image.dynamic_configs(str(self.broker_id))))
        if layers == self._dynamic_layers:
            return
        self._dynamic_layers = layers
        try:
            self.config = self.static_config.with_dynamic(*layers)
        except ConfigError as exc:
            log.error("Dynamic broker configs not applied, the previous ones stay in force: %s", exc)
            return
        self.log_manager.moves.set_rate(self.config.storage.alter_log_dirs_bytes_per_s)
        self._next_isr_check_ms = min(self._next_isr_check_ms, now_ms + self.config.replication.isr_check_interval_ms)
        for tp in self.partitions:
            self._reconfigure(now_ms, tp)

    def _reconfigure(self, now_ms: int, tp: TopicPartition) -> None:
        """New topic overrides take effect at once, as in Kafka: the log's limits and retention, and the
        partition's min.insync.replicas (its under-min-ISR state is judged again)."""
        partition = self.partitions.get(tp)
        if partition is None:
            return  # created later from the image, with the new configs
        log_config = self.config.log_config(self.metadata.image.configs(tp.topic))
        self.log_manager.get_or_create(tp, log_config)
        partition.reconfigure(PartitionConfig.from_configs(self.config, log_config), now_ms)

    def _partition(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is not None:
            return partition
        log_config = self.config.log_config(self.metadata.image.configs(tp.topic))
        log = self.log_manager.get_or_create(tp, log_config)
        partition = Partition(tp, self.broker_id, log, PartitionConfig.from_configs(self.config, log_config),
                              events=self.events, is_replica_eligible=self.metadata.is_eligible,
                              high_watermark=self._checkpointed_hw.get(tp, 0))
        self.partitions[tp] = partition
        return partition

    # AlterPartition -----------------------------------------------------------------------------------

    def _on_alter_partition_response(self, now_ms: int, response: AlterPartitionResponse) -> list[Command]:
        outgoing, advanced = self.proposals.on_response(now_ms, response, self.partitions)
        # A follower back in the ISR (or out of it) is idle or not by it: each answered partition is visited again.
        topics = self.metadata.image.topics_by_id
        self.fetch_server.changed(TopicPartition(topics[result.topic_id].name, result.partition)
                                  for result in response.results if result.topic_id in topics)
        commands: list[Command] = list(outgoing)
        if advanced:
            commands.extend(self.produce.check(now_ms, advanced))
            commands.extend(self._after_fetch(now_ms, self.fetch_server.wake(now_ms, hw_advanced=advanced)))
        return commands
