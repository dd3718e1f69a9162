from __future__ import annotations

import datetime

import pytest
from apis_helpers import client_request, wire

from insync import errors
from insync.broker.messages import InitProducerIdResponse
from insync.wire import producer_id


@pytest.mark.parametrize("version", [0, 1, 2, 3, 5])
def test_init_producer_id_round_trip(version: int) -> None:
    request = client_request(22, version, transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
                             producer_id=1000, producer_epoch=3)
    decoded = producer_id.decode_request(request)
    internal = decoded.request
    assert decoded.error is errors.NONE and internal.transaction_timeout_ms == 60_000
    # v0-v2 carry no producer id or epoch: a new producer
    assert (internal.producer_id, internal.producer_epoch) == ((1000, 3) if version >= 3 else (-1, -1))
    body = wire(producer_id.encode_response(InitProducerIdResponse(42, errors.NONE, 7001, 0), decoded))
    assert (body.error_code, body.producer_id, body.producer_epoch) == (0, 7001, 0)
    assert body.__flexible__ == (version >= 2)
