"""DescribeClientQuotas (48) and AlterClientQuotas (49), v0-v1, answered by any broker with the truth: insync
has no client quotas.

Describe checks the filter as Kafka's `ClientQuotasImage.describe` does (its errors and words: an empty or
repeated entity type, an unsupported one, a match string that does not fit the match type, ip combined with
user or client-id) and answers no entries: `kafka-configs --describe --entity-type users` then lists the SCRAM
credentials alone, as against a Kafka cluster without quotas. Alter checks each entity and key as Kafka's
`ClientQuotaControlManager` does, in its words; an entity with changes is then refused with INVALID_REQUEST
saying insync does not enforce client quotas, and nothing is stored. An entity with no changes succeeds, as
it does in Kafka (kafka-configs sends one when it alters only SCRAM credentials).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from insync import errors
from insync.errors import KafkaError, KafkaException
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import NO_THROTTLE, build, check_body, code, error_message, nested, response_class
from insync.wire.versions import ALTER_CLIENT_QUOTAS, DESCRIBE_CLIENT_QUOTAS

USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
# Kafka's QuotaConfig keys by entity type: user and client-id share theirs, ip has one.
_RATE_KEYS = frozenset(("producer_byte_rate", "consumer_byte_rate", "request_percentage",
                        "controller_mutation_rate"))
QUOTA_KEYS = {USER: _RATE_KEYS, CLIENT_ID: _RATE_KEYS, IP: frozenset(("connection_creation_rate",))}
NOT_ENFORCED = "insync does not enforce client quotas: nothing was stored for this entity"


def respond(request: DecodedRequest) -> Any:
    if request.api_key == DESCRIBE_CLIENT_QUOTAS:
        return describe_client_quotas(request)
    return alter_client_quotas(request)


def describe_client_quotas(request: DecodedRequest) -> Any:
    body = request.body
    check_body(body, DESCRIBE_CLIENT_QUOTAS)
    try:
        _check_filter([(str(c.entity_type), int(c.match_type), c.match) for c in body.components])
    except KafkaException as exc:
        return refuse_describe(request, exc.error, exc.detail, entries=())
    # Kafka's ClientQuotasImage sets no message on success: the field's default, "".
    return build(response_class(DESCRIBE_CLIENT_QUOTAS, request.api_version), throttle_time=NO_THROTTLE,
                 error_code=code(errors.NONE), error_message="", entries=())


def refuse_describe(request: DecodedRequest, error: KafkaError, message: str, entries: tuple[()] | None = None
                    ) -> Any:
    """The whole request refused (CLUSTER_AUTHORIZATION_FAILED without DESCRIBE_CONFIGS on the cluster)."""
    return build(response_class(DESCRIBE_CLIENT_QUOTAS, request.api_version), throttle_time=NO_THROTTLE,
                 error_code=code(error), error_message=error_message(message), entries=entries)


def _check_filter(components: Sequence[tuple[str, int, str | None]]) -> None:
    """Kafka's checks of a DescribeClientQuotas filter, in its order; raises KafkaException."""
    seen: set[str] = set()
    for entity_type, match_type, match in components:
        if not entity_type:
            raise KafkaException(errors.INVALID_REQUEST, "Invalid empty entity type.")
        if entity_type in seen:
            raise KafkaException(errors.INVALID_REQUEST,
                                 f"Entity type {entity_type} cannot appear more than once in the filter.")
        if entity_type not in QUOTA_KEYS:
            raise KafkaException(errors.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
        if match_type == MATCH_EXACT and match is None:
            raise KafkaException(errors.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string "
                                 "to null.")
        if match_type in (MATCH_DEFAULT, MATCH_SPECIFIED) and match is not None:
            name = "MATCH_TYPE_DEFAULT" if match_type == MATCH_DEFAULT else "MATCH_TYPE_SPECIFIED"
            raise KafkaException(errors.INVALID_REQUEST, f"Request specified {name}, but also specified a match "
                                 "string.")
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise KafkaException(errors.INVALID_REQUEST, f"Unknown match type {match_type}")
        seen.add(entity_type)
    if IP in seen and seen & {USER, CLIENT_ID}:
        raise KafkaException(errors.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                             "component should not be used with user or clientId filter component.")


def alter_client_quotas(request: DecodedRequest) -> Any:
    body = request.body
    check_body(body, ALTER_CLIENT_QUOTAS)
    results = []
    for entry in body.entries:
        entity = [(str(e.entity_type), e.entity_name) for e in entry.entity]
        try:
            _check_entity(entity)
            _check_ops([(str(op.key), float(op.value), bool(op.remove)) for op in entry.ops], entity)
            error, message = (errors.INVALID_REQUEST, NOT_ENFORCED) if entry.ops else (errors.NONE, None)
        except KafkaException as exc:
            error, message = exc.error, exc.detail
        results.append((entry.entity, error, message))
    return _alter_response(request, results)


def refuse_alter(request: DecodedRequest, error: KafkaError, message: str) -> Any:
    """Every entity refused (CLUSTER_AUTHORIZATION_FAILED without ALTER_CONFIGS on the cluster)."""
    return _alter_response(request, [(entry.entity, error, message) for entry in request.body.entries])


def _alter_response(request: DecodedRequest, results: Sequence[tuple[Any, KafkaError, str | None]]) -> Any:
    cls = response_class(ALTER_CLIENT_QUOTAS, request.api_version)
    entry_cls, entity_cls = nested(cls, "EntryData"), nested(cls, "EntityData")
    return build(cls, throttle_time=NO_THROTTLE, entries=tuple(
        build(entry_cls, error_code=code(error), error_message=error_message(message),
              entity=tuple(
            build(entity_cls, entity_type=e.entity_type, entity_name=e.entity_name) for e in entity))
        for entity, error, message in results))


def _check_entity(entity: Sequence[tuple[str, str | None]]) -> None:
    """Kafka's `ClientQuotaControlManager.validateEntity` (an ip entity's address is not resolved here)."""
    if not entity:
        raise KafkaException(errors.INVALID_REQUEST, "Invalid empty client quota entity")
    seen: set[str] = set()
    for entity_type, name in entity:
        if entity_type in seen:
            raise KafkaException(errors.INVALID_REQUEST,
                                 f"Invalid client quota entity, duplicate entity entry {entity_type}")
        if entity_type not in QUOTA_KEYS:
            raise KafkaException(errors.INVALID_REQUEST, f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise KafkaException(errors.INVALID_REQUEST, f"Empty {entity_type} not supported")
        seen.add(entity_type)
    if IP in seen and seen & {USER, CLIENT_ID}:
        raise KafkaException(errors.INVALID_REQUEST, "Invalid quota entity combination, IP entity shouldnot be "
                             "combined with User or ClientId")


def _check_ops(ops: Sequence[tuple[str, float, bool]], entity: Sequence[tuple[str, str | None]]) -> None:
    """Each key known for the entity's type, and a value set above zero (Kafka's words)."""
    keys = QUOTA_KEYS[entity[0][0]]
    for key, value, remove in ops:
        if key not in keys:
            raise KafkaException(errors.INVALID_REQUEST, f"Invalid configuration key {key}")
        if not remove and value <= 0:
            raise KafkaException(errors.INVALID_REQUEST, f"Quota {key} must be greater than 0")
