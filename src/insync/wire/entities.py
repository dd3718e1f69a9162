"""The translators' shared mechanics: topic keys (by name or by id, resolved from the metadata image),
topic-keyed grouping in first-seen order (how Kafka orders responses), `Decoded`/`Rejected` results, and the
current-leader hints of KIP-951. The version-agnostic building of kio entities (`build`, `field_or`, ...)
lives in `insync.protocol.kio`, below this package.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from insync import errors
from insync.errors import KafkaError
from insync.metadata.image import MetadataImage
from insync.protocol.kio import ZERO_UUID, build, field_or, has_field, nested, wire_uuid

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class TopicKey:
    """How a request named a topic: by name (old versions) or by id (newer ones), with the other side
    resolved from the metadata image when known. A response names it the same way."""

    name: str | None  # None when only an unknown id was given ("" is a name a client may send)
    topic_id: uuid.UUID  # ZERO_UUID when unknown


def group(items: Iterable[tuple[K, V]]) -> list[tuple[K, list[V]]]:
    """Items grouped by key, keys in first-seen order, items in their order: Kafka's response layout."""
    groups: dict[K, list[V]] = {}
    for key, value in items:
        groups.setdefault(key, []).append(value)
    return list(groups.items())


@dataclass(frozen=True, slots=True)
class Rejected:
    """A partition the translator answers itself (an unknown topic id, invalid acks): it never reaches the core."""

    topic: TopicKey
    partition: int  # -1 for a refusal of a whole topic (CreateTopics, DeleteTopics)
    error: KafkaError
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Decoded(Generic[R]):
    """A decoded request: the internal `request` for the core, the version to answer in, how each topic was
    named (so the response names it the same way, even if the image changed meanwhile), and what is answered
    without the core: `rejected` partitions, or everything when `error` is set."""

    version: int
    request: R
    keys: Mapping[str, TopicKey] = field(default_factory=dict)
    rejected: tuple[Rejected, ...] = ()
    error: KafkaError = errors.NONE  # a request-level error: answer it at once, the core never sees it

    def key(self, topic: str) -> TopicKey:
        return self.keys.get(topic) or TopicKey(topic, ZERO_UUID)


def topic_key(image: MetadataImage, name: str | None, topic_id: uuid.UUID | None) -> TopicKey:
    """Complete a wire topic reference from the image: by id (name None when unknown), else by name (zero id
    when unknown). A version that names topics by id and got the zero id names no topic: name None as well."""
    if name is None or (topic_id is not None and topic_id != ZERO_UUID):
        topic = image.topics_by_id.get(str(topic_id)) if topic_id is not None else None
        return TopicKey(topic.name if topic is not None else None, topic_id or ZERO_UUID)
    return TopicKey(name, wire_uuid(image.topic_ids_by_name.get(name)))


def wire_topic_key(image: MetadataImage, topic: Any) -> TopicKey:
    """`topic_key` of a kio topic entity, whichever of `name`/`topic`/`topic_id` its version has."""
    name = field_or(topic, "name", None)
    if name is None:
        name = field_or(topic, "topic", None)
    return topic_key(image, name, field_or(topic, "topic_id", None))


def topic_entities(cls: type, partitions_field: str, grouped: Iterable[tuple[TopicKey, list[Any]]]) -> tuple[Any, ...]:
    """Topic entities of `cls` (whichever of name/topic/topic_id its version has) holding their partitions."""
    return tuple(build(cls, name=key.name, topic=key.name, topic_id=key.topic_id, **{partitions_field: tuple(parts)})
                 for key, parts in grouped)


# KIP-951: a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names the leader the image knows
# (Produce v10+, Fetch v12+), and the response lists those leaders' endpoints, so a client re-routes at once
# instead of refreshing its metadata first.
NEW_LEADER_ERRORS = (errors.NOT_LEADER_OR_FOLLOWER, errors.FENCED_LEADER_EPOCH)


def current_leader(cls: type, image: MetadataImage | None, topic: str, partition: int,
                   error: KafkaError) -> dict[str, Any]:
    """`{"current_leader": LeaderIdAndEpoch}` for a partition entity of `cls` when a hint applies, else {}."""
    if image is None or error not in NEW_LEADER_ERRORS or not has_field(cls, "current_leader"):
        return {}
    topic_image = image.topic(topic)
    registration = topic_image.partitions.get(partition) if topic_image is not None else None
    if registration is None or registration.is_offline:
        return {}
    hint = build(nested(cls, "LeaderIdAndEpoch"), leader_id=registration.leader,
                 leader_epoch=registration.leader_epoch)
    return {"current_leader": hint}


def node_endpoints(cls: type, image: MetadataImage | None, partitions: Iterable[Any]) -> tuple[Any, ...]:
    """The endpoints of the leaders named in `partitions`' hints (for `cls`'s `node_endpoints`, v10/v16+)."""
    if image is None or not has_field(cls, "node_endpoints"):
        return ()
    leaders = sorted({int(p.current_leader.leader_id) for p in partitions
                      if has_field(p, "current_leader") and p.current_leader.leader_id >= 0})
    endpoint_cls = nested(cls, "NodeEndpoint")
    return tuple(build(endpoint_cls, node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
                 for b in (image.brokers.get(leader) for leader in leaders) if b is not None)
