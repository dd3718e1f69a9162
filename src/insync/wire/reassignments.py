"""AlterPartitionReassignments (v0-1) and ListPartitionReassignments (v0), which brokers forward to the controller
as KRaft brokers do, so that a list right after an alteration sees it.

AlterPartitionReassignments: each partition's target replicas (null cancels) go to the controller in one call
(`Controller.alter_partition_reassignments`); each partition is answered with its own error and Kafka's message
(null when accepted), the top-level error NONE. v1's `allow_replication_factor_change` (KIP-860) is echoed. A
request whose changes would not fit in one metadata batch is refused whole with the controller's error (Kafka's
POLICY_VIOLATION) as the top-level error.

ListPartitionReassignments: the partitions being reassigned, with their replicas, adding and removing replicas,
of the topics named (null: all); partitions that do not exist or are not being reassigned are left out, as Kafka
does (`controller.reassignment.ongoing_reassignments`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from insync import errors
from insync.controller.reassignment import ReassignmentTarget, ongoing_reassignments
from insync.errors import KafkaError, KafkaException
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import NO_THROTTLE, build, check_body, code, field_or, nested, response_class
from insync.wire.versions import ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS

# The targets, in request order -> each one's refusal (None: accepted), or KafkaException for the whole request;
# `Controller.alter_partition_reassignments`.
Reassign = Callable[[list[ReassignmentTarget]], Sequence[KafkaException | None]]


def alter_partition_reassignments(request: DecodedRequest, reassign: Reassign) -> Any:
    """The answer to an AlterPartitionReassignments request, the partitions altered by `reassign`."""
    body = request.body
    check_body(body, ALTER_PARTITION_REASSIGNMENTS)
    allow = bool(field_or(body, "allow_replication_factor_change", True))
    targets = [ReassignmentTarget(t.name, int(p.partition_index),
                                  None if p.replicas is None else tuple(int(b) for b in p.replicas), allow)
               for t in body.topics for p in t.partitions]
    try:
        outcomes = reassign(targets)
    except KafkaException as exc:  # the whole request (more changes than one metadata batch holds)
        return refuse(request, exc.error, exc.detail or "")
    assert len(outcomes) == len(targets), (len(outcomes), len(targets))
    results = [(target, (errors.NONE, None) if outcome is None else (outcome.error, outcome.detail or None))
               for target, outcome in zip(targets, outcomes, strict=True)]
    return _alter_response(request, results, errors.NONE, None)


def refuse(request: DecodedRequest, error: KafkaError, message: str) -> Any:
    """An AlterPartitionReassignments or ListPartitionReassignments answer refusing the whole request with
    `error` (NOT_CONTROLLER when a broker cannot forward it: admin clients retry that)."""
    if request.api_key == LIST_PARTITION_REASSIGNMENTS:
        return _list_response(request, [], error, message)
    return _alter_response(request, [], error, message)


def _alter_response(request: DecodedRequest, results: list[tuple[ReassignmentTarget, tuple[KafkaError, str | None]]],
                    error: KafkaError, message: str | None) -> Any:
    cls = response_class(ALTER_PARTITION_REASSIGNMENTS, request.api_version)
    by_topic: dict[str, list[Any]] = {}
    for target, (outcome, detail) in results:
        by_topic.setdefault(target.topic, []).append(build(
            nested(cls, "ReassignablePartitionResponse"), partition_index=target.partition,
            error_code=code(outcome), error_message=detail))
    responses = tuple(build(nested(cls, "ReassignableTopicResponse"), name=name, partitions=tuple(partitions))
                      for name, partitions in by_topic.items())
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(error), error_message=message, responses=responses,
                 allow_replication_factor_change=bool(field_or(request.body, "allow_replication_factor_change",
                                                               True)))


def list_partition_reassignments(request: DecodedRequest, image: MetadataImage) -> Any:
    """The answer to a ListPartitionReassignments request, from the controller's image."""
    body = request.body
    check_body(body, LIST_PARTITION_REASSIGNMENTS)
    asked = None if body.topics is None else [(t.name, [int(p) for p in t.partition_indexes]) for t in body.topics]
    return _list_response(request, ongoing_reassignments(image, asked), errors.NONE, None)


def _list_response(request: DecodedRequest, ongoing: Sequence[Any], error: KafkaError, message: str | None) -> Any:
    cls = response_class(LIST_PARTITION_REASSIGNMENTS, request.api_version)
    by_topic: dict[str, list[Any]] = {}
    for o in ongoing:
        by_topic.setdefault(o.topic, []).append(build(
            nested(cls, "OngoingPartitionReassignment"), partition_index=o.partition, replicas=o.replicas,
            adding_replicas=o.adding_replicas, removing_replicas=o.removing_replicas))
    topics = tuple(build(nested(cls, "OngoingTopicReassignment"), name=name, partitions=tuple(partitions))
                   for name, partitions in by_topic.items())
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(error), error_message=message, topics=topics)
