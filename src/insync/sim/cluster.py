"""A simulated cluster: one controller node, N broker nodes, the network between them, and the checker's view.

`SimCluster` wires the nodes to one scheduler and network, collects every event they emit, runs the checker's
incremental invariants after each broker step, and integrates the partition health that the result reports:
`urp_ms`, `under_min_isr_ms` and `offline_ms` are partition-milliseconds measured on the controller's image
(the committed truth every broker converges to), and `failed_partitions_max` is the largest total of fetcher
failed partitions seen at any moment. It implements `faults.FaultTarget` and `checker.ClusterView`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from insync.config import BrokerConfig, ConfigError
from insync.errors import KafkaException
from insync.events import Event, EventType, LeaderChangeReason
from insync.metadata.image import PartitionRegistration
from insync.protocol.records import iter_batches
from insync.sim.broker_node import SimBroker
from insync.sim.checker import BatchInfo, Checker, LeaderState
from insync.sim.controller_node import SimController
from insync.sim.network import LinkConfig, Network, NodeId
from insync.sim.scheduler import Scheduler
from insync.storage.disk import MemoryDisk
from insync.types import NO_LEADER, TRANSACTION_STATE_TOPIC, BrokerId, TopicPartition

EVENTS_REMEMBERED_MAX = 2_000_000
READ_CHUNK_BYTES = 1 << 22


class SimCluster:
    def __init__(self, scheduler: Scheduler, brokers: int, broker_config: dict[str, object], topic: str,
                 link: LinkConfig, transactions: bool = False) -> None:
        assert brokers >= 1
        self.scheduler = scheduler
        self.topic = topic
        self.network = Network(scheduler, link)
        self.events: list[Event] = []
        self.trace: list[str] = []
        self._broker_ids = [BrokerId(b) for b in range(1, brokers + 1)]
        self.checker = Checker(self)
        self.failed_partitions_max = 0
        self._health: dict[TopicPartition, tuple[bool, bool, bool]] = {}
        self._health_since_ms = scheduler.now_ms
        self._last_image: object = None
        self.urp_ms = self.under_min_isr_ms = self.offline_ms = 0
        self._min_isr_default = BrokerConfig(broker_config).log_config().min_insync_replicas
        self.controller = SimController(BrokerConfig(broker_config), scheduler, network=self.network,
                                        sink=self._collect, on_step=self.update_health)
        self.brokers: dict[int, SimBroker] = {}
        for broker_id in self._broker_ids:
            config = BrokerConfig({**broker_config, "node.id": broker_id})
            self.brokers[broker_id] = SimBroker(broker_id, config, scheduler, self.network, self._collect,
                                                self._on_broker_step, transactions)
        for node in self.brokers.values():
            node.start()

    # Events and health --------------------------------------------------------------------------------

    def _collect(self, events: list[Event]) -> None:
        if len(self.events) + len(events) <= EVENTS_REMEMBERED_MAX:
            self.events.extend(events)
        for event in events:
            if (event.type is EventType.LEADER_CHANGE and event.fields.get("reason") == LeaderChangeReason.UNCLEAN
                    and event.topic is not None and event.partition is not None):
                self.checker.unclean_election(TopicPartition(event.topic, event.partition),
                                              int(event.fields["leader_epoch"]))

    def _on_broker_step(self, broker_id: int) -> None:
        now = self.scheduler.now_ms
        self.checker.check_broker(now, broker_id)
        failed = self.failed_partitions_now()
        if failed > self.failed_partitions_max:
            self.failed_partitions_max = failed
        self.update_health()

    def failed_partitions_now(self) -> int:
        return sum(node.core.failed_partitions_count for node in self.brokers.values() if node.core is not None)

    def update_health(self) -> None:
        """Integrate partition health over time from the controller's image (cheap when nothing changed)."""
        image = self.controller.controller.image
        now = self.scheduler.now_ms
        elapsed = now - self._health_since_ms
        if elapsed:
            for urp, under_min, offline in self._health.values():
                self.urp_ms += elapsed * urp
                self.under_min_isr_ms += elapsed * under_min
                self.offline_ms += elapsed * offline
            self._health_since_ms = now
        if image is self._last_image:
            return
        self._last_image = image
        health: dict[TopicPartition, tuple[bool, bool, bool]] = {}
        registrations = []
        for view in image.all_partitions():
            tp, reg = TopicPartition(view.topic, view.partition), view.registration
            min_isr = int(image.configs(tp.topic).get("min.insync.replicas", self._min_isr_default))
            min_isr = min(min_isr, len(reg.replicas))
            health[tp] = (len(reg.isr) < len(reg.replicas), len(reg.isr) < min_isr, reg.leader == NO_LEADER)
            registrations.append((tp, reg, min_isr))
        self._health = health
        self.checker.check_image(now, registrations)

    def note(self, text: str) -> None:
        self.trace.append(f"t={self.scheduler.elapsed_ms}ms {text}")

    # Admin --------------------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
        self.controller.create_topic(name, partitions, replication_factor, configs)

    def all_registered(self) -> bool:
        image = self.controller.controller.image
        return all(b in image.brokers and not image.brokers[b].fenced for b in self._broker_ids)

    # FaultTarget --------------------------------------------------------------------------------------

    def broker_ids(self) -> list[int]:
        return list(self._broker_ids)

    def in_every_isr(self, broker_id: int) -> bool:
        image = self.controller.controller.image
        broker = image.brokers.get(broker_id)
        return broker is not None and not broker.fenced and all(
            broker_id in view.registration.isr for view in image.all_partitions()
            if broker_id in view.registration.replicas)

    def resolve(self, target: object, topic_partition: TopicPartition) -> int:
        if isinstance(target, int) and target in self.brokers:
            return target
        if target == "coordinator":  # the transaction coordinator that partition's index places
            state = self.controller.controller.image.topic(TRANSACTION_STATE_TOPIC)
            if state is None or not state.partitions:
                raise ConfigError("fault target 'coordinator' needs the __transaction_state topic")
            topic_partition = TopicPartition(TRANSACTION_STATE_TOPIC, topic_partition.partition % len(state.partitions))
            target = "leader"
        reg = self._registration(topic_partition)
        followers = [b for b in reg.replicas if b != reg.leader] if reg is not None else []
        if target == "leader" and reg is not None and reg.leader != NO_LEADER:
            return reg.leader
        if target in ("follower", "follower2") and followers:
            return followers[min(len(followers) - 1, 1 if target == "follower2" else 0)]
        if target == "leader" and reg is not None:
            return reg.replicas[0]
        raise ConfigError(f"cannot resolve fault target {target!r} for {topic_partition}")

    def _registration(self, tp: TopicPartition) -> PartitionRegistration | None:
        image = self.controller.controller.image
        topic = image.topic(tp.topic)
        return None if topic is None else topic.partitions.get(tp.partition)

    def pause(self, broker_id: int, duration_ms: int) -> None:
        self.brokers[broker_id].pause(duration_ms)

    def kill(self, broker_id: int, torn_tail: bool, empty_disk: bool = False) -> None:
        node = self.brokers[broker_id]
        node.kill(torn_tail)
        if empty_disk:
            node.disk = MemoryDisk()  # a replaced disk: the broker comes back knowing nothing of its past
        self.checker.forget_broker(broker_id)

    def stop(self, broker_id: int, then: Callable[[], None]) -> None:
        def stopped() -> None:
            self.checker.forget_broker(broker_id)
            then()

        self.brokers[broker_id].stop(stopped)

    def restart(self, broker_id: int) -> None:
        self.brokers[broker_id].restart()

    def _everyone(self) -> list[NodeId]:
        return self.network.nodes()

    def isolate(self, broker_id: int, one_way: bool) -> None:
        for other in self._everyone():
            if other != broker_id:
                self.network.cut(broker_id, other)
                if not one_way:
                    self.network.cut(other, broker_id)

    def partition_groups(self, side_a: list[int], side_b: list[int]) -> None:
        self.network.partition(side_a, side_b)

    def heal_network(self) -> None:
        self.network.heal()

    def clog_from(self, broker_id: int, until_ms: int) -> None:
        for other in self._everyone():
            if other != broker_id:
                self.network.clog(broker_id, other, until_ms)

    def throttle_to(self, broker_id: int, bytes_per_ms: int) -> None:
        for other in self._everyone():
            if other != broker_id:
                self.network.throttle(other, broker_id, bytes_per_ms)

    def slow_links(self, broker_id: int, latency_ms: int, jitter_ms: int, one_way: bool) -> None:
        for other in self._everyone():
            if other != broker_id:
                self.network.set_latency(broker_id, other, latency_ms, jitter_ms)
                if not one_way:
                    self.network.set_latency(other, broker_id, latency_ms, jitter_ms)

    def restore_links(self, broker_id: int) -> None:
        for other in self._everyone():
            if other != broker_id:
                self.network.clear_latency(broker_id, other)
                self.network.clear_latency(other, broker_id)

    def swizzle(self, duration_ms: int) -> None:
        self.network.swizzle_clog(list(self._broker_ids), duration_ms)

    def partition_path(self, broker_id: int, tp: TopicPartition | None) -> str:
        base = self.brokers[broker_id].log_dir
        return base if tp is None else f"{base}/{tp}/"

    def set_slow_reads(self, broker_id: int, topic_partition: TopicPartition | None, ms: int) -> None:
        self.brokers[broker_id].disk.set_slow_reads(self.partition_path(broker_id, topic_partition), ms)

    def set_io_error(self, broker_id: int, topic_partition: TopicPartition, on_read: bool, on_write: bool) -> None:
        self.brokers[broker_id].disk.set_io_error(self.partition_path(broker_id, topic_partition), on_read, on_write)

    def clear_disk_faults(self, broker_id: int) -> None:
        self.brokers[broker_id].disk.clear_faults()

    def fill_disk(self, broker_id: int) -> None:
        self.brokers[broker_id].disk.set_full(self.partition_path(broker_id, None) + "/")

    def free_disk(self, broker_id: int) -> None:
        """Space returns; a broker that halted on its full log dir is restarted, as an operator would."""
        self.clear_disk_faults(broker_id)
        if self.brokers[broker_id].core is None:
            self.checker.forget_broker(broker_id)
            self.restart(broker_id)

    def delete_records(self, topic_partition: TopicPartition, offset: int | None) -> None:
        reg = self._registration(topic_partition)
        if reg is None or reg.leader == NO_LEADER:
            return
        node = self.brokers[reg.leader]
        if node.core is not None and not node.paused:
            try:
                node.core.delete_records(self.scheduler.now_ms, topic_partition, offset)
            except KafkaException as exc:
                self.note(f"delete_records on {topic_partition} refused: {exc}")

    # ClusterView --------------------------------------------------------------------------------------

    def leader_states(self, broker_id: int) -> Iterable[LeaderState]:
        core = self.brokers[broker_id].core
        if core is None:
            return ()
        return [LeaderState(tp, p.leader_epoch, p.high_watermark, p.log.log_start_offset, p.log.log_end_offset)
                for tp, p in core.partitions.items() if p.is_leader]

    def candidate_log_ends(self, broker_id: int) -> Iterable[tuple[TopicPartition, int]]:
        core = self.brokers[broker_id].core
        if core is None or not core.caught_up:
            return ()
        out = []
        for tp, partition in core.partitions.items():
            reg = self._registration(tp)
            if reg is not None and (broker_id in reg.isr or broker_id in reg.elr):
                out.append((tp, partition.log.log_end_offset))
        return out

    def replica_brokers(self, topic_partition: TopicPartition) -> list[int]:
        reg = self._registration(topic_partition)
        if reg is None:
            return []
        return [b for b in reg.replicas if self.brokers[b].core is not None]

    def high_watermark(self, broker_id: int, topic_partition: TopicPartition) -> int:
        core = self.brokers[broker_id].core
        assert core is not None
        return core.high_watermark(topic_partition)

    def current_leader(self, topic_partition: TopicPartition) -> int:
        reg = self._registration(topic_partition)
        return NO_LEADER if reg is None else int(reg.leader)

    def batches(self, broker_id: int, topic_partition: TopicPartition, end_offset: int,
                start_offset: int = 0) -> list[BatchInfo]:
        core = self.brokers[broker_id].core
        assert core is not None
        log = core.log_manager.get(topic_partition)
        if log is None:
            return []
        out: list[BatchInfo] = []
        offset = max(log.log_start_offset, start_offset)
        disk = self.brokers[broker_id].disk
        disk_faults = dict(disk.faults.io_errors)
        disk.faults.io_errors.clear()  # the checker reads past injected faults; they are healed by now anyway
        try:
            # Bounded: each read returns at least one batch and moves `offset` forward.
            while offset < min(end_offset, log.log_end_offset):
                result = log.read(offset, READ_CHUNK_BYTES)
                if not result.records:
                    break
                for _, header in iter_batches(result.records, verify_crc=False):
                    out.append(BatchInfo(header.base_offset, header.last_offset, header.crc,
                                         (header.producer_id, header.base_sequence)))
                assert result.next_offset > offset
                offset = result.next_offset
        finally:
            disk.faults.io_errors.update(disk_faults)
        return out
