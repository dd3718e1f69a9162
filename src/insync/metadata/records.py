"""Metadata records: the only way cluster state changes, mirroring KRaft's `__cluster_metadata` records.

The controller never edits its image. Each operation produces a batch of records, appends it to the store and
then replays it (`image.py`); a restarted controller replays the same records and arrives at the same image.
Brokers receive the same records, in order, with their offsets (`propagation.py`). Every record is a frozen
dataclass with a JSON encoding (`to_dict()`, `record_from_dict()`, which checks each field's presence and type,
so a damaged store line is a `RecordError`, never a half-built record), and checks its own invariants.

Unlike KRaft, a `PartitionChangeRecord` carries the resulting leader epoch and partition epoch, so replay
verifies instead of computing them, and `leader is None` marks an ISR-only change (what seed 003 batches).
Partition records carry KIP-966's ELR fields, KIP-704's `leader_recovery_state` and, while reassigned, Kafka's
`adding_replicas` and `removing_replicas` (`replicas` is then the target followed by the ones being removed),
under Kafka's field names; in a change record None leaves a field as it was.
"""

from __future__ import annotations

import base64
import hashlib
import random
import re
import types
import typing
import uuid
from dataclasses import MISSING, Field, dataclass, fields
from typing import Any, ClassVar, Union

from insync.errors import KafkaException
from insync.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)
from insync.types import NO_LEADER, BrokerId

# Kafka's LeaderRecoveryState (KIP-704): a leader elected uncleanly is RECOVERING until its AlterPartition says
# RECOVERED.
LEADER_RECOVERED = 0
LEADER_RECOVERING = 1


class RecordError(ValueError):
    """A record (or its JSON form) is malformed; the message names the record type and what is wrong."""


def _require(condition: bool, record: object, detail: str) -> None:
    if not condition:
        raise RecordError(f"{type(record).__name__}: {detail}")


def _check_brokers(record: object, name: str, brokers: tuple[BrokerId, ...] | None, allow_empty: bool) -> None:
    if brokers is None:
        return
    _require(allow_empty or len(brokers) > 0, record, f"{name} is empty")
    _require(len(set(brokers)) == len(brokers), record, f"{name} {list(brokers)} has duplicates")
    _require(all(b >= 0 for b in brokers), record, f"{name} {list(brokers)} has a negative broker id")


def _check_reassignment(record: object, replicas: tuple[BrokerId, ...] | None,
                        adding: tuple[BrokerId, ...] | None, removing: tuple[BrokerId, ...] | None) -> None:
    """Kafka's: the replicas being added and those being removed are disjoint, both within the replicas."""
    _check_brokers(record, "adding_replicas", adding, allow_empty=True)
    _check_brokers(record, "removing_replicas", removing, allow_empty=True)
    _require(not set(adding or ()) & set(removing or ()), record,
             f"adding_replicas {list(adding or ())} and removing_replicas {list(removing or ())} overlap")
    if replicas is not None:
        _require(set(adding or ()) | set(removing or ()) <= set(replicas), record,
                 f"adding or removing replicas not within replicas {list(replicas)}")


def _check_elr(record: object, isr: tuple[BrokerId, ...] | None, elr: tuple[BrokerId, ...] | None,
               last_known_elr: tuple[BrokerId, ...] | None, recovery_state: int | None) -> None:
    """KIP-966: the ELR never overlaps the ISR; KIP-704: the recovery state is one of Kafka's two values."""
    _check_brokers(record, "eligible_leader_replicas", elr, allow_empty=True)
    _check_brokers(record, "last_known_elr", last_known_elr, allow_empty=True)
    _require(isr is None or elr is None or not set(isr) & set(elr), record,
             f"isr {list(isr or ())} and eligible_leader_replicas {list(elr or ())} overlap")
    _require(recovery_state in (None, LEADER_RECOVERED, LEADER_RECOVERING), record,
             f"leader_recovery_state {recovery_state} is neither {LEADER_RECOVERED} nor {LEADER_RECOVERING}")


class _Record:
    """Shared JSON encoding. Subclasses are frozen slotted dataclasses with a unique `TYPE` tag."""

    __slots__ = ()
    TYPE: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE}
        for name in _SCHEMAS[type(self)][0]:
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True, slots=True)
class TopicRecord(_Record):
    TYPE: ClassVar[str] = "topic"
    name: str
    topic_id: str

    def __post_init__(self) -> None:
        _require(bool(self.name), self, "empty topic name")
        _require(bool(self.topic_id), self, "empty topic_id")


@dataclass(frozen=True, slots=True)
class PartitionRecord(_Record):
    TYPE: ClassVar[str] = "partition"
    topic_id: str
    partition: int
    replicas: tuple[BrokerId, ...]
    isr: tuple[BrokerId, ...]
    leader: BrokerId
    leader_epoch: int
    partition_epoch: int
    eligible_leader_replicas: tuple[BrokerId, ...] = ()
    last_known_elr: tuple[BrokerId, ...] = ()
    leader_recovery_state: int = LEADER_RECOVERED
    removing_replicas: tuple[BrokerId, ...] = ()
    adding_replicas: tuple[BrokerId, ...] = ()

    def __post_init__(self) -> None:
        _require(self.partition >= 0, self, f"negative partition {self.partition}")
        _check_brokers(self, "replicas", self.replicas, allow_empty=False)
        _check_reassignment(self, self.replicas, self.adding_replicas, self.removing_replicas)
        _check_brokers(self, "isr", self.isr, allow_empty=False)
        _require(set(self.isr) <= set(self.replicas), self, f"isr {list(self.isr)} not within replicas")
        _require(self.leader == NO_LEADER or self.leader in self.isr, self, f"leader {self.leader} not in isr")
        _require(self.leader_epoch >= 0 and self.partition_epoch >= 0, self, "negative epoch")
        _check_elr(self, self.isr, self.eligible_leader_replicas, self.last_known_elr, self.leader_recovery_state)
        _require(set(self.eligible_leader_replicas) <= set(self.replicas), self,
                 f"eligible_leader_replicas {list(self.eligible_leader_replicas)} not within replicas")


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord(_Record):
    """A committed change of one partition: ISR-only when `leader is None`, a leadership change otherwise.

    `leader_epoch` and `partition_epoch` are the values after the change; a leadership change bumps both,
    an ISR-only change bumps only the partition epoch (KIP-497's `partition_epoch`, ZooKeeper's zkVersion).
    The ISR may become empty (leader -1) only with Eligible Leader Replicas on, as in Kafka. A reassignment sets
    `replicas`, `removing_replicas` and `adding_replicas`; one that drops replicas names the leader even when it
    stays, so that the leader epoch goes up (Kafka's `triggerLeaderEpochBumpForReplicaReassignmentIfNeeded`).
    """

    TYPE: ClassVar[str] = "partition_change"
    topic_id: str
    partition: int
    isr: tuple[BrokerId, ...] | None
    leader: BrokerId | None
    leader_epoch: int
    partition_epoch: int
    eligible_leader_replicas: tuple[BrokerId, ...] | None = None
    last_known_elr: tuple[BrokerId, ...] | None = None
    leader_recovery_state: int | None = None
    replicas: tuple[BrokerId, ...] | None = None
    removing_replicas: tuple[BrokerId, ...] | None = None
    adding_replicas: tuple[BrokerId, ...] | None = None

    def __post_init__(self) -> None:
        _require(self.partition >= 0, self, f"negative partition {self.partition}")
        changed = (self.isr, self.leader, self.eligible_leader_replicas, self.last_known_elr,
                   self.leader_recovery_state, self.replicas, self.removing_replicas, self.adding_replicas)
        _require(any(c is not None for c in changed), self, "changes nothing")
        _check_brokers(self, "replicas", self.replicas, allow_empty=False)
        _check_reassignment(self, self.replicas, self.adding_replicas, self.removing_replicas)
        _check_brokers(self, "isr", self.isr, allow_empty=True)
        _require(self.leader is None or self.leader >= NO_LEADER, self, f"bad leader {self.leader}")
        _require(self.leader_epoch >= 0 and self.partition_epoch >= 0, self, "negative epoch")
        _check_elr(self, self.isr, self.eligible_leader_replicas, self.last_known_elr, self.leader_recovery_state)

    @property
    def is_isr_only(self) -> bool:
        return (self.leader is None and self.replicas is None and self.adding_replicas is None
                and self.removing_replicas is None)


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord(_Record):
    TYPE: ClassVar[str] = "remove_topic"
    topic_id: str


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord(_Record):
    """A broker (re-)registers; it starts fenced. Its epoch is the record's metadata offset, as in KRaft.
    `listeners` are its advertised listeners, `NAME://host:port` (Kafka's BrokerEndpoint entries), the first of
    which is `host` and `port`; empty in records written before brokers had several."""

    TYPE: ClassVar[str] = "register_broker"
    broker_id: BrokerId
    broker_epoch: int
    incarnation_id: str
    host: str
    port: int
    rack: str | None = None
    listeners: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _require(self.broker_id >= 0, self, f"negative broker_id {self.broker_id}")
        _require(self.broker_epoch >= 0, self, f"negative broker_epoch {self.broker_epoch}")
        _require(0 <= self.port <= 65535, self, f"port {self.port} out of range")
        _require(all("://" in listener for listener in self.listeners), self,
                 f"listeners {list(self.listeners)} are not all NAME://host:port")


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord(_Record):
    TYPE: ClassVar[str] = "fence_broker"
    broker_id: BrokerId
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord(_Record):
    TYPE: ClassVar[str] = "unfence_broker"
    broker_id: BrokerId
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord(_Record):
    """KRaft's record for a broker entering controlled shutdown (its only use here)."""

    TYPE: ClassVar[str] = "broker_registration_change"
    broker_id: BrokerId
    broker_epoch: int
    in_controlled_shutdown: bool


@dataclass(frozen=True, slots=True)
class ConfigRecord(_Record):
    """A topic config override; `value is None` deletes it (KRaft's null value)."""

    TYPE: ClassVar[str] = "config"
    topic: str
    key: str
    value: str | None


@dataclass(frozen=True, slots=True)
class BrokerConfigRecord(_Record):
    """A dynamic broker config (Kafka's ConfigRecord of resource type BROKER): `broker` is a broker id, or "" for
    the cluster-wide default; `value is None` deletes it."""

    TYPE: ClassVar[str] = "broker_config"
    broker: str
    key: str
    value: str | None

    def __post_init__(self) -> None:
        _require(self.broker == "" or (self.broker.isdigit() and self.broker.isascii()), self,
                 f"broker {self.broker!r} is neither a broker id nor \"\"")
        _require(bool(self.key), self, "empty key")


@dataclass(frozen=True, slots=True)
class ControllerChangeRecord(_Record):
    """A controller became active; the epoch fences requests of an older controller."""

    TYPE: ClassVar[str] = "controller_change"
    controller_id: int
    controller_epoch: int

    def __post_init__(self) -> None:
        _require(self.controller_epoch > 0, self, f"controller_epoch {self.controller_epoch} must be > 0")


# Kafka's cluster id: a random UUID in unpadded base64url (`Uuid.toString`), 22 characters.
_CLUSTER_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")
CLUSTER_ID_TRIES_MAX = 64


@dataclass(frozen=True, slots=True)
class ClusterIdRecord(_Record):
    """The cluster's id, written once, in the first batch of a new metadata store (Kafka makes it at format)."""

    TYPE: ClassVar[str] = "cluster_id"
    cluster_id: str

    def __post_init__(self) -> None:
        _require(bool(_CLUSTER_ID.match(self.cluster_id)), self, f"cluster_id {self.cluster_id!r} is not 22 "
                 "base64url characters")


def new_cluster_id(rng: random.Random) -> str:
    """A random version-4 UUID as Kafka's `Uuid.randomUuid` prints it, never one starting with '-' (which a
    command line would take for an option). Its bits are a digest of `rng`'s state, not draws from it: the topic
    ids and placements drawn next stay those a seeded simulation always made."""
    state = repr(rng.getstate()).encode()
    for attempt in range(CLUSTER_ID_TRIES_MAX):
        raw = hashlib.sha256(state + attempt.to_bytes(2, "big")).digest()[:16]
        text = base64.urlsafe_b64encode(uuid.UUID(bytes=raw, version=4).bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            assert _CLUSTER_ID.match(text), text
            return text
    raise AssertionError(f"{CLUSTER_ID_TRIES_MAX} digests all started with '-'")


# Kafka's feature flag for Eligible Leader Replicas (KIP-966): level 1 when they are on.
ELR_FEATURE = "eligible.leader.replicas.version"
# Kafka's transaction version (KIP-890): at 2, clients run transactions v2 (EndTxn bumps the producer epoch, a
# produce adds its partition). A new cluster finalizes 2, Kafka 4.x's TransactionVersion.LATEST_PRODUCTION.
TRANSACTION_VERSION_FEATURE = "transaction.version"
TRANSACTION_VERSION_NEW_CLUSTER = 2


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord(_Record):
    """A finalized feature level, as Kafka's FeatureLevelRecord: level 0 takes the feature out of the finalized
    ones. Brokers advertise them in ApiVersions."""

    TYPE: ClassVar[str] = "feature_level"
    name: str
    feature_level: int

    def __post_init__(self) -> None:
        _require(bool(self.name), self, "empty feature name")
        _require(self.feature_level >= 0, self, f"feature_level {self.feature_level} must be >= 0")


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord(_Record):
    """KRaft's UserScramCredentialRecord: a user's credential for one SCRAM mechanism (Kafka's type byte, 1 for
    SCRAM-SHA-256, 2 for SCRAM-SHA-512), the salt and keys in base64; never the password. It replaces the user's
    previous credential for that mechanism."""

    TYPE: ClassVar[str] = "user_scram_credential"
    name: str
    mechanism: int
    salt: str
    stored_key: str
    server_key: str
    iterations: int

    def __post_init__(self) -> None:
        _require(bool(self.name), self, "empty user name")
        _require(self.mechanism in (1, 2), self, f"mechanism {self.mechanism} is not 1 or 2")
        _require(bool(self.salt and self.stored_key and self.server_key), self, "empty salt or key")
        _require(self.iterations > 0, self, f"iterations {self.iterations} must be > 0")


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord(_Record):
    """KRaft's RemoveUserScramCredentialRecord: the user's credential for one mechanism is gone."""

    TYPE: ClassVar[str] = "remove_user_scram_credential"
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord(_Record):
    """One ACL (KRaft's record of the same name): the resource pattern and entry with Kafka's enum codes, under an
    id that `RemoveAccessControlEntryRecord` names. The controller validated it (`acl.validate_binding`)."""

    TYPE: ClassVar[str] = "access_control_entry"
    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def __post_init__(self) -> None:
        _require(bool(self.id), self, "empty id")
        try:
            validate_binding(self.binding)
        except (ValueError, KafkaException) as exc:
            raise RecordError(f"{type(self).__name__}: {exc}") from None

    @property
    def binding(self) -> AclBinding:
        return AclBinding(ResourcePattern(ResourceType(self.resource_type), self.resource_name,
                                          PatternType(self.pattern_type)),
                          AccessControlEntry(self.principal, self.host, AclOperation(self.operation),
                                             AclPermissionType(self.permission_type)))

    @staticmethod
    def of(acl_id: str, binding: AclBinding) -> AccessControlEntryRecord:
        pattern, entry = binding.pattern, binding.entry
        return AccessControlEntryRecord(acl_id, pattern.resource_type, pattern.name, pattern.pattern_type,
                                        entry.principal, entry.host, entry.operation, entry.permission_type)


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord(_Record):
    TYPE: ClassVar[str] = "remove_access_control_entry"
    id: str


Record = (
    TopicRecord | PartitionRecord | PartitionChangeRecord | RemoveTopicRecord | RegisterBrokerRecord
    | FenceBrokerRecord | UnfenceBrokerRecord | BrokerRegistrationChangeRecord | ConfigRecord
    | BrokerConfigRecord | ControllerChangeRecord | ClusterIdRecord | FeatureLevelRecord | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord | AccessControlEntryRecord | RemoveAccessControlEntryRecord
)

RECORD_TYPES: dict[str, type[_Record]] = {
    cls.TYPE: cls for cls in typing.get_args(Record)
}
# Each record class's field names, annotations and fields, read once: the controller encodes, and every broker
# decodes, thousands of records a batch.
_SCHEMAS: dict[type[_Record], tuple[tuple[str, ...], dict[str, Any], tuple[Field[Any], ...]]] = {
    cls: (tuple(f.name for f in fields(cls)), typing.get_type_hints(cls), fields(cls))  # type: ignore[arg-type]
    for cls in RECORD_TYPES.values()
}


def _decode(value: object, hint: object, where: str) -> object:
    """Check `value` against a field annotation (the few shapes records use) and convert lists to tuples."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        assert len(inner) == 1, hint
        return _decode(value, inner[0], where)
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, list):
            raise RecordError(f"{where}: expected a list, got {value!r}")
        return tuple(_decode(item, args[0], f"{where}[{i}]") for i, item in enumerate(value))
    supertype = getattr(hint, "__supertype__", None)
    if supertype is not None:  # a NewType (BrokerId): stored as the type it names
        return _decode(value, supertype, where)
    if hint is bool:
        if not isinstance(value, bool):
            raise RecordError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise RecordError(f"{where}: expected an integer, got {value!r}")
        return value
    assert hint is str, hint
    if not isinstance(value, str):
        raise RecordError(f"{where}: expected a string, got {value!r}")
    return value


def record_from_dict(data: object) -> Record:
    """Decode one record from its JSON form; raises RecordError naming the type and field that is wrong."""
    if not isinstance(data, dict):
        raise RecordError(f"a record must be a JSON object, got {type(data).__name__}")
    tag = data.get("type")
    cls = RECORD_TYPES.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise RecordError(f"unknown record type {tag!r}; known: {', '.join(sorted(RECORD_TYPES))}")
    names, hints, record_fields = _SCHEMAS[cls]
    unknown = sorted(set(data) - set(names) - {"type"})
    if unknown:
        raise RecordError(f"{cls.__name__}: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    kwargs: dict[str, object] = {}
    for f in record_fields:
        if f.name not in data:
            if f.default is not MISSING:  # a field with a default (rack) may be absent
                continue
            raise RecordError(f"{cls.__name__}: missing field {f.name}")
        kwargs[f.name] = _decode(data[f.name], hints[f.name], f"{cls.__name__}.{f.name}")
    return cls(**kwargs)  # type: ignore[return-value]
