"""Internal requests and responses for CreateTopics and DeleteTopics, which the controller answers.

Like the broker's messages (`broker/messages.py`, where the requests a broker core answers live) these are
frozen dataclasses, not wire formats: `wire.topics` produces the requests from Kafka requests of any supported
version and turns the responses back into Kafka responses, one result per requested topic, in any order.

What the controller is expected to do: each topic is one `Controller.create_topic` / `delete_topic` call on
the active controller; a `KafkaException` becomes that topic's error and message.
"""

from __future__ import annotations

from dataclasses import dataclass

from insync import errors
from insync.errors import KafkaError

# CreateTopics / DeleteTopics -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewTopic:
    """One topic to create, defaults already applied (-1 on the wire means the broker's default)."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...]  # topic-level overrides, in request order
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()  # (partition, replicas) given by the client


@dataclass(frozen=True, slots=True)
class CreateTopicsRequest:
    correlation_id: int
    timeout_ms: int
    validate_only: bool
    topics: tuple[NewTopic, ...]


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    name: str
    error: KafkaError
    message: str | None = None
    topic_id: str | None = None  # the image's string form
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class CreateTopicsResponse:
    correlation_id: int
    results: tuple[CreateTopicResult, ...]


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequest:
    correlation_id: int
    timeout_ms: int
    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteTopicResult:
    name: str
    error: KafkaError
    message: str | None = None
    topic_id: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopicsResponse:
    correlation_id: int
    results: tuple[DeleteTopicResult, ...]


def created(topic: NewTopic, topic_id: str) -> CreateTopicResult:
    """The success result for `topic` (what the lead's handler answers after `Controller.create_topic`)."""
    return CreateTopicResult(topic.name, errors.NONE, None, topic_id, topic.num_partitions,
                             topic.replication_factor)
