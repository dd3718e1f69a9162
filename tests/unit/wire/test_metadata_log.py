from __future__ import annotations

import pytest
from apis_helpers import running_controller, wire

from insync import errors
from insync.broker.metadata import BrokerMetadata
from insync.controller.controller import Controller
from insync.controller.messages import MetadataUpdate
from insync.errors import KafkaException
from insync.metadata.image import MetadataImage
from insync.metadata.records import TopicRecord
from insync.protocol.codec import DecodedRequest
from insync.protocol.records import build_batch
from insync.replication.messages import FetchRequest, FetchRequestPartition
from insync.types import UNDEFINED_EPOCH, BrokerId, Offset, TopicPartition
from insync.wire import fetch, metadata_log


def serve(controller: Controller, body: object) -> object:
    """The controller listener's side of one metadata fetch, through the wire both ways."""
    decoded = metadata_log.decode_fetch(DecodedRequest(1, int(body.__version__), 5, "broker-2",  # type: ignore[attr-defined]
                                                       wire(body)))
    asked = metadata_log.metadata_fetch_request(decoded)
    assert asked is not None and asked.broker_id == 2
    records, published = controller.records_since(asked.from_offset, asked.max_records)
    return wire(metadata_log.encode_fetch_response(MetadataUpdate(5, tuple(records), published), decoded))


@pytest.mark.parametrize("version", [4, 12, 13, 17])
def test_broker_catches_up_through_fetches(version: int) -> None:
    controller = running_controller()
    broker = BrokerMetadata(BrokerId(2))
    for _ in range(3):  # bounded: one fetch gets everything published here
        body = metadata_log.fetch_request(5, BrokerId(2), broker.applied_offset, version, max_wait_ms=500)
        update = metadata_log.update_from_fetch(serve(controller, body), 5, BrokerId(2))
        assert update.published_offset == controller.published_offset
        assert broker.apply(update.records) is not None  # type: ignore[arg-type]
        if broker.applied_offset == update.published_offset:
            break
    assert broker.image == controller.image
    # caught up: the next fetch brings nothing and the same published offset
    body = metadata_log.fetch_request(5, BrokerId(2), broker.applied_offset, version, max_wait_ms=500)
    update = metadata_log.update_from_fetch(serve(controller, body), 5, BrokerId(2))
    assert update.records == () and update.published_offset == broker.applied_offset


def test_records_round_trip_through_a_batch() -> None:
    records = [(7, TopicRecord("a", "id-a")), (8, TopicRecord("b", "id-b"))]
    data = metadata_log.encode_records(records)
    assert metadata_log.decode_records(data) == records
    assert metadata_log.encode_records([]) == b""


def test_damaged_metadata_record_is_corrupt() -> None:
    with pytest.raises(KafkaException) as caught:
        metadata_log.decode_records(build_batch([(None, b'{"type": "nope"}')]))
    assert caught.value.error is errors.CORRUPT_MESSAGE


def test_other_topics_are_unknown_on_the_controller_listener() -> None:
    orders_id = "00000000-0000-4000-8000-0000000000aa"
    image = MetadataImage.from_records([TopicRecord("orders", orders_id)])
    request = FetchRequest(5, BrokerId(2), 0, 1, 100, (FetchRequestPartition(
        TopicPartition("orders", 0), Offset(0), UNDEFINED_EPOCH, UNDEFINED_EPOCH, Offset(-1), 100),))
    for version in (12, 13):
        body = fetch.encode_request(request, version, image)
        decoded = metadata_log.decode_fetch(DecodedRequest(1, version, 5, "x", wire(body)))
        assert metadata_log.metadata_fetch_request(decoded) is None
        answer = wire(metadata_log.encode_fetch_response(None, decoded))
        expected = errors.UNKNOWN_TOPIC_ID if version >= 13 else errors.UNKNOWN_TOPIC_OR_PARTITION
        assert answer.responses[0].partitions[0].error_code == expected.code
