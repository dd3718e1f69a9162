"""Building and reading kio entities of any version with one mechanism.

kio generates one class per API version (`kio.schema.fetch.v13.response.FetchResponse`), each with only the
fields that version has, and nested classes (`FetchableTopicResponse`, ...) in the same module. The
translators in this package describe a response once, with every field any version knows, and `build` keeps
the ones the target class declares: a field a version lacks is dropped, a required field nobody gave fails
loudly (a programmer error). Reading goes the other way with `field_or`: a field absent from an old version
reads as its Kafka default.

Kafka's wire conventions live here too: error codes as kio's `ErrorCode`, durations as `timedelta`, topic ids
as `uuid.UUID` (the image keeps them as strings), and topic-keyed grouping in first-seen order, which is how
Kafka orders responses.
"""

from __future__ import annotations

import dataclasses
import datetime
import sys
import uuid
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kio.schema.errors import ErrorCode

from insync import errors
from insync.controller.image import MetadataImage
from insync.errors import KafkaError
from insync.protocol.codec import request_schema, response_schema

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
R = TypeVar("R")

ZERO_UUID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: "no topic id"

_FIELD_NAMES: dict[type, frozenset[str]] = {}


def field_names(cls: type) -> frozenset[str]:
    """The fields `cls` declares (cached: the translators ask on every request)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = frozenset(f.name for f in dataclasses.fields(cls))
        _FIELD_NAMES[cls] = names
    return names


def has_field(entity_or_cls: Any, name: str) -> bool:
    cls = entity_or_cls if isinstance(entity_or_cls, type) else type(entity_or_cls)
    return name in field_names(cls)


def build(cls: type, /, **values: Any) -> Any:
    """An instance of `cls` from the values it declares; the others are for other versions."""
    assert dataclasses.is_dataclass(cls), cls
    names = field_names(cls)
    return cls(**{name: value for name, value in values.items() if name in names})


def nested(cls: type, name: str) -> type:
    """A nested entity class (`FetchableTopicResponse`) of the same version as `cls`."""
    found = getattr(sys.modules[cls.__module__], name)
    assert isinstance(found, type) and dataclasses.is_dataclass(found), (cls, name)
    return found


def field_or(entity: Any, name: str, default: Any) -> Any:
    """`entity.name`, or Kafka's default when this version has no such field."""
    return getattr(entity, name) if has_field(entity, name) else default


def request_class(api_key: int, version: int) -> type:
    cls = request_schema(api_key, version)
    assert isinstance(cls, type)
    return cls


def response_class(api_key: int, version: int) -> type:
    cls = response_schema(api_key, version)
    assert isinstance(cls, type)
    return cls


def check_body(body: Any, api_key: int) -> int:
    """The version of a kio entity of `api_key` (its class carries both)."""
    assert int(body.__api_key__) == api_key, (type(body), api_key)
    return int(body.__version__)


def code(error: KafkaError) -> ErrorCode:
    return ErrorCode(error.code)


def error_of(value: ErrorCode | int) -> KafkaError:
    return errors.by_code(int(value))


def millis(value: datetime.timedelta) -> int:
    return round(value.total_seconds() * 1000)


def duration(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


NO_THROTTLE = duration(0)


def wire_uuid(topic_id: str | None) -> uuid.UUID:
    """The image's topic id string as a wire UUID; unknown is Kafka's zero UUID."""
    return ZERO_UUID if not topic_id else uuid.UUID(topic_id)


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
_NEW_LEADER_ERRORS = (errors.NOT_LEADER_OR_FOLLOWER, errors.FENCED_LEADER_EPOCH)


def current_leader(cls: type, image: MetadataImage | None, topic: str, partition: int,
                   error: KafkaError) -> dict[str, Any]:
    """`{"current_leader": LeaderIdAndEpoch}` for a partition entity of `cls` when a hint applies, else {}."""
    if image is None or error not in _NEW_LEADER_ERRORS or not has_field(cls, "current_leader"):
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
