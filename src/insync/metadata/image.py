"""The metadata image: cluster state as a fold over metadata records.

`MetadataImage.replay_all(records)` (and `replay(record)`, one record) returns a NEW image and is the only way an
image changes; the controller, a restarted controller and every broker build identical images from the same
records. Images are immutable (frozen dataclasses over mappings that are copied on write, level by level), so a
broker or the simulator may hold one while the controller moves on. A run of partition records copies each
topic's partition map once, not once per record, so a batch over a topic of thousands of partitions stays linear.

Replay checks what the controller promised: a partition change carries the next partition epoch and, for a
leadership change, the next leader epoch. A record that does not fit the image is a programmer error (the
controller built it from this very image), hence an assertion.
"""

from __future__ import annotations

from base64 import b64decode
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from insync.metadata.records import (
    LEADER_RECOVERED,
    LEADER_RECOVERING,
    AccessControlEntryRecord,
    BrokerConfigRecord,
    BrokerRegistrationChangeRecord,
    ClusterIdRecord,
    ConfigRecord,
    ControllerChangeRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UserScramCredentialRecord,
)
from insync.security.acl import AclBinding
from insync.security.scram import ScramCredential, ScramMechanism
from insync.types import NO_LEADER, BrokerId


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """One partition's state. `elr` (KIP-966) holds replicas that left the ISR while it was below min ISR and may
    still lead; `last_known_elr` those that left the ELR too, the last hint of who held the committed data;
    `leader_recovery_state` is KIP-704's (RECOVERING after an unclean election). While a reassignment is in
    progress `replicas` holds the target replicas followed by `removing_replicas`, and `adding_replicas` are
    the target replicas that are new (Kafka's PartitionRegistration)."""

    replicas: tuple[BrokerId, ...]
    isr: tuple[BrokerId, ...]
    leader: BrokerId
    leader_epoch: int
    partition_epoch: int
    elr: tuple[BrokerId, ...] = ()
    last_known_elr: tuple[BrokerId, ...] = ()
    leader_recovery_state: int = LEADER_RECOVERED
    adding_replicas: tuple[BrokerId, ...] = ()
    removing_replicas: tuple[BrokerId, ...] = ()

    @property
    def is_reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[BrokerId, ...]:
        """The replicas once the reassignment completes (the replicas, when none is in progress)."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def is_offline(self) -> bool:
        return self.leader == NO_LEADER

    @property
    def is_recovering(self) -> bool:
        return self.leader_recovery_state == LEADER_RECOVERING


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: Mapping[int, PartitionRegistration]


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: BrokerId
    broker_epoch: int
    incarnation_id: str
    host: str
    port: int
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    listeners: tuple[str, ...] = ()  # NAME://host:port, every advertised listener (RegisterBrokerRecord's)

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """This broker's host and port on the listener named so; its only address when it registered none by
        name (older records); None when it has no such listener."""
        if not self.listeners:
            return self.host, self.port
        for entry in self.listeners:
            name, _, address = entry.partition("://")
            if name == listener:
                host, _, port = address.rpartition(":")
                return host, int(port)
        return None

    @property
    def is_eligible(self) -> bool:
        """May lead a partition or join an ISR (KRaft: unfenced and not shutting down)."""
        return not self.fenced and not self.in_controlled_shutdown


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One partition with its topic, for the helpers that scan the whole image."""

    topic: str
    topic_id: str
    partition: int
    registration: PartitionRegistration


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int = 0  # records replayed so far, i.e. the metadata offset of the next record
    controller_id: int = -1
    controller_epoch: int = 0
    cluster_id: str | None = None  # set once, by the first batch of a new metadata store
    finalized_features: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))  # levels above 0
    topics_by_id: Mapping[str, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    topic_ids_by_name: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: MappingProxyType({}))
    topic_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: MappingProxyType({}))
    # dynamic broker configs by resource name: a broker id, or "" for the cluster-wide defaults
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: MappingProxyType({}))
    # SCRAM credentials by user, then by mechanism type (1 SCRAM-SHA-256, 2 SCRAM-SHA-512)
    scram_credentials: Mapping[str, Mapping[int, ScramCredential]] = field(
        default_factory=lambda: MappingProxyType({}))
    acls: Mapping[str, AclBinding] = field(default_factory=lambda: MappingProxyType({}))  # by record id

    @staticmethod
    def from_records(records: Iterable[Record]) -> MetadataImage:
        return MetadataImage().replay_all(records)

    # ---- queries

    def topic(self, name: str) -> TopicImage | None:
        topic_id = self.topic_ids_by_name.get(name)
        return None if topic_id is None else self.topics_by_id[topic_id]

    def partition(self, topic_id: str, partition: int) -> PartitionRegistration | None:
        topic = self.topics_by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(partition)

    def as_seen_on(self, listener: str) -> MetadataImage:
        """This image with every broker's address on `listener` (Kafka answers a client with the endpoints of
        the listener it came in on); a broker without that listener is left out, as Kafka leaves it out."""
        if all(len(b.listeners) <= 1 for b in self.brokers.values()):
            return self  # one address per broker: nothing to choose (and no copy on the hot path)
        brokers = {}
        for broker_id, broker in self.brokers.items():
            endpoint = broker.endpoint(listener)
            if endpoint is not None:
                brokers[broker_id] = replace(broker, host=endpoint[0], port=endpoint[1])
        return replace(self, brokers=MappingProxyType(brokers))

    def configs(self, topic: str) -> Mapping[str, str]:
        return self.topic_configs.get(topic, MappingProxyType({}))

    def dynamic_configs(self, broker: str) -> Mapping[str, str]:
        """The dynamic configs of broker `broker` (its id as text), or the cluster-wide ones for ""."""
        return self.broker_configs.get(broker, MappingProxyType({}))

    def scram_credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        return self.scram_credentials.get(user, {}).get(mechanism.type)

    def all_partitions(self) -> list[PartitionView]:
        return [PartitionView(t.name, t.topic_id, p, reg)
                for t in sorted(self.topics_by_id.values(), key=lambda t: t.name)
                for p, reg in sorted(t.partitions.items())]

    def partitions_led_by(self, broker_id: BrokerId) -> list[PartitionView]:
        return [v for v in self.all_partitions() if v.registration.leader == broker_id]

    def partitions_with_replica_in_isr(self, broker_id: BrokerId) -> list[PartitionView]:
        return [v for v in self.all_partitions() if broker_id in v.registration.isr]

    def partitions_with_replica_in_isr_or_elr(self, broker_id: BrokerId) -> list[PartitionView]:
        return [v for v in self.all_partitions()
                if broker_id in v.registration.isr or broker_id in v.registration.elr]

    def offline_partitions(self) -> list[PartitionView]:
        return [v for v in self.all_partitions() if v.registration.is_offline]

    def under_replicated_partitions(self) -> list[PartitionView]:
        return [v for v in self.all_partitions()
                if len(v.registration.isr) < len(v.registration.replicas)]

    def eligible_brokers(self) -> list[BrokerId]:
        return sorted(b.broker_id for b in self.brokers.values() if b.is_eligible)

    def is_eligible(self, broker_id: BrokerId) -> bool:
        broker = self.brokers.get(broker_id)
        return broker is not None and broker.is_eligible

    # ---- replay

    def replay(self, record: Record) -> MetadataImage:
        """The image after `record`."""
        return self.replay_all((record,))

    def replay_all(self, records: Iterable[Record]) -> MetadataImage:
        """The image after `records`, in order; the one place metadata state changes. Partition records collect
        in a copy of their topic's partition map, written back before any other record (which may read it)."""
        image = self
        replayed = 0
        pending: dict[str, dict[int, PartitionRegistration]] = {}  # partition maps by topic id, being changed
        for record in records:
            replayed += 1
            if isinstance(record, PartitionRecord | PartitionChangeRecord):
                if record.topic_id not in pending:
                    topic = image.topics_by_id.get(record.topic_id)
                    assert topic is not None, record
                    pending[record.topic_id] = dict(topic.partitions)
                partitions = pending[record.topic_id]
                partitions[record.partition] = image._registration_after(partitions.get(record.partition), record)
                continue
            image = image._with_partitions(pending)._apply(record)
            pending = {}
        return replace(image._with_partitions(pending), offset=self.offset + replayed)

    def _apply(self, record: Record) -> MetadataImage:
        match record:
            case TopicRecord():
                assert record.name not in self.topic_ids_by_name, record
                assert record.topic_id not in self.topics_by_id, record
                topic = TopicImage(record.name, record.topic_id, MappingProxyType({}))
                return self._with_topic(topic, names={**self.topic_ids_by_name, record.name: record.topic_id})
            case RemoveTopicRecord():
                return self._replay_remove_topic(record)
            case RegisterBrokerRecord():
                old = self.brokers.get(record.broker_id)
                assert old is None or old.broker_epoch < record.broker_epoch, (old, record)
                broker = BrokerRegistration(record.broker_id, record.broker_epoch, record.incarnation_id,
                                            record.host, record.port, record.rack, fenced=True,
                                            in_controlled_shutdown=False, listeners=record.listeners)
                return self._with_broker(broker)
            case FenceBrokerRecord():
                broker = self._broker_at_epoch(record.broker_id, record.broker_epoch)
                return self._with_broker(replace(broker, fenced=True, in_controlled_shutdown=False))
            case UnfenceBrokerRecord():
                broker = self._broker_at_epoch(record.broker_id, record.broker_epoch)
                return self._with_broker(replace(broker, fenced=False))
            case BrokerRegistrationChangeRecord():
                broker = self._broker_at_epoch(record.broker_id, record.broker_epoch)
                return self._with_broker(replace(broker, in_controlled_shutdown=record.in_controlled_shutdown))
            case ConfigRecord():
                return replace(self, topic_configs=_with_config(self.topic_configs, record.topic, record.key,
                                                                record.value))
            case BrokerConfigRecord():
                return replace(self, broker_configs=_with_config(self.broker_configs, record.broker, record.key,
                                                                 record.value))
            case UserScramCredentialRecord() | RemoveUserScramCredentialRecord():
                return replace(self, scram_credentials=_with_scram_credential(self.scram_credentials, record))
            case AccessControlEntryRecord():
                assert record.id not in self.acls, record
                return replace(self, acls=MappingProxyType({**self.acls, record.id: record.binding}))
            case RemoveAccessControlEntryRecord():
                assert record.id in self.acls, record
                return replace(self, acls=MappingProxyType({k: v for k, v in self.acls.items() if k != record.id}))
            case ControllerChangeRecord():
                assert record.controller_epoch > self.controller_epoch, (self.controller_epoch, record)
                return replace(self, controller_id=record.controller_id, controller_epoch=record.controller_epoch)
            case ClusterIdRecord():
                assert self.cluster_id is None, (self.cluster_id, record)
                return replace(self, cluster_id=record.cluster_id)
            case FeatureLevelRecord():
                features = {k: v for k, v in self.finalized_features.items() if k != record.name}
                if record.feature_level > 0:
                    features[record.name] = record.feature_level
                return replace(self, finalized_features=MappingProxyType(features))
        raise AssertionError(f"unhandled record {record!r}")

    def _registration_after(self, old: PartitionRegistration | None,
                            record: PartitionRecord | PartitionChangeRecord) -> PartitionRegistration:
        """The partition's registration after `record`, `old` the one before it (None: no such partition)."""
        if isinstance(record, PartitionRecord):
            assert old is None, record
            assert all(b in self.brokers for b in record.replicas), record
            return PartitionRegistration(record.replicas, record.isr, record.leader, record.leader_epoch,
                                         record.partition_epoch, record.eligible_leader_replicas,
                                         record.last_known_elr, record.leader_recovery_state,
                                         record.adding_replicas, record.removing_replicas)
        assert old is not None, record
        assert record.partition_epoch == old.partition_epoch + 1, (old, record)
        expected_leader_epoch = old.leader_epoch if record.leader is None else old.leader_epoch + 1
        assert record.leader_epoch == expected_leader_epoch, (old, record)
        new = PartitionRegistration(
            old.replicas if record.replicas is None else record.replicas,
            isr=old.isr if record.isr is None else record.isr,
            leader=old.leader if record.leader is None else record.leader,
            leader_epoch=record.leader_epoch,
            partition_epoch=record.partition_epoch,
            elr=old.elr if record.eligible_leader_replicas is None else record.eligible_leader_replicas,
            last_known_elr=old.last_known_elr if record.last_known_elr is None else record.last_known_elr,
            leader_recovery_state=(old.leader_recovery_state if record.leader_recovery_state is None
                                   else record.leader_recovery_state),
            adding_replicas=old.adding_replicas if record.adding_replicas is None else record.adding_replicas,
            removing_replicas=(old.removing_replicas if record.removing_replicas is None
                               else record.removing_replicas))
        assert set(new.isr) | set(new.elr) <= set(new.replicas) and not set(new.isr) & set(new.elr), (old, record)
        assert set(new.adding_replicas) | set(new.removing_replicas) <= set(new.replicas), (old, record)
        assert new.leader == NO_LEADER or new.leader in new.isr, (old, record)
        return new

    def _replay_remove_topic(self, record: RemoveTopicRecord) -> MetadataImage:
        topic = self.topics_by_id.get(record.topic_id)
        assert topic is not None, record
        topics = {k: v for k, v in self.topics_by_id.items() if k != record.topic_id}
        names = {k: v for k, v in self.topic_ids_by_name.items() if k != topic.name}
        configs = {k: v for k, v in self.topic_configs.items() if k != topic.name}
        return replace(self, topics_by_id=MappingProxyType(topics), topic_ids_by_name=MappingProxyType(names),
                       topic_configs=MappingProxyType(configs))

    def _broker_at_epoch(self, broker_id: BrokerId, broker_epoch: int) -> BrokerRegistration:
        broker = self.brokers.get(broker_id)
        assert broker is not None and broker.broker_epoch == broker_epoch, (broker, broker_id, broker_epoch)
        return broker

    def _with_broker(self, broker: BrokerRegistration) -> MetadataImage:
        return replace(self, brokers=MappingProxyType({**self.brokers, broker.broker_id: broker}))

    def _with_topic(self, topic: TopicImage, names: dict[str, str] | None = None) -> MetadataImage:
        topics = MappingProxyType({**self.topics_by_id, topic.topic_id: topic})
        if names is None:
            return replace(self, topics_by_id=topics)
        return replace(self, topics_by_id=topics, topic_ids_by_name=MappingProxyType(names))

    def _with_partitions(self, partitions: Mapping[str, dict[int, PartitionRegistration]]) -> MetadataImage:
        """This image with the partition maps of `partitions` (by topic id) in place of its own."""
        if not partitions:
            return self
        topics = dict(self.topics_by_id)
        for topic_id, changed in partitions.items():
            topics[topic_id] = replace(topics[topic_id], partitions=MappingProxyType(changed))
        return replace(self, topics_by_id=MappingProxyType(topics))


def _with_config(configs: Mapping[str, Mapping[str, str]], resource: str, key: str,
                 value: str | None) -> Mapping[str, Mapping[str, str]]:
    """`configs` with `resource`'s `key` set to `value` (None: removed)."""
    changed = dict(configs.get(resource, {}))
    if value is None:
        changed.pop(key, None)
    else:
        changed[key] = value
    return MappingProxyType({**configs, resource: MappingProxyType(changed)})


def _with_scram_credential(credentials: Mapping[str, Mapping[int, ScramCredential]],
                           record: UserScramCredentialRecord | RemoveUserScramCredentialRecord
                           ) -> Mapping[str, Mapping[int, ScramCredential]]:
    """`credentials` with the record's user and mechanism set or removed; a user without any is gone."""
    changed = dict(credentials.get(record.name, {}))
    if isinstance(record, UserScramCredentialRecord):
        changed[record.mechanism] = ScramCredential(b64decode(record.salt), b64decode(record.stored_key),
                                                    b64decode(record.server_key), record.iterations)
    else:
        assert record.mechanism in changed, record  # the controller removes only what exists
        del changed[record.mechanism]
    out = {**credentials, record.name: MappingProxyType(changed)}
    if not changed:
        del out[record.name]
    return MappingProxyType(out)
