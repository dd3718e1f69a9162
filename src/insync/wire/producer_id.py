"""InitProducerId (v0-v5) <-> `broker.messages.InitProducerIdRequest/Response`: idempotent producers.

Every idempotent producer (kafka-python 3 and librdkafka by default, aiokafka and KafkaJS when asked) starts
with InitProducerId and a null transactional id. v0-v2 requests have no producer id/epoch fields, so they read
as -1 (a new producer); from v3 a producer may ask to bump the epoch of the id it has. A request with a
transactional id goes to the transaction coordinator instead (`wire.transactions`).
"""

from __future__ import annotations

from typing import Any

from insync import errors
from insync.broker.messages import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import NO_THROTTLE, build, check_body, code, field_or, millis, response_class
from insync.wire.entities import Decoded
from insync.wire.versions import INIT_PRODUCER_ID


def decode_request(request: DecodedRequest) -> Decoded[InitProducerIdRequest]:
    body = request.body
    version = check_body(body, INIT_PRODUCER_ID)
    internal = InitProducerIdRequest(request.correlation_id, millis(body.transaction_timeout),
                                     int(field_or(body, "producer_id", NO_PRODUCER_ID)),
                                     int(field_or(body, "producer_epoch", NO_PRODUCER_EPOCH)))
    return Decoded(version, internal)


def encode_response(response: InitProducerIdResponse | None, decoded: Decoded[InitProducerIdRequest]) -> Any:
    """The answer from the core's response, or from `decoded.error` alone (None)."""
    assert (response is None) == (decoded.error is not errors.NONE), (response, decoded.error)
    if response is None:
        response = InitProducerIdResponse(decoded.request.correlation_id, decoded.error)
    assert response.correlation_id == decoded.request.correlation_id, (response, decoded.request)
    return build(response_class(INIT_PRODUCER_ID, decoded.version), throttle_time=NO_THROTTLE,
                 error_code=code(response.error), producer_id=response.producer_id,
                 producer_epoch=response.producer_epoch)
