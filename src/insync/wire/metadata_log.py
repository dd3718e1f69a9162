"""How brokers read the controller's metadata records over the Kafka protocol: a Fetch of `__cluster_metadata`.

The controller's published records (`controller/propagation.py`) are served as partition 0 of
`__cluster_metadata` (topic id 1, KRaft's METADATA_TOPIC_ID) on the controller listener, with Fetch v4-v17:
- The broker fetches from the number of records it has applied, with `max_wait_ms` for a long poll held until
  something is published past that offset.
- The records are one v2 batch whose record `i` is metadata record `base + i`, its value the record's JSON, its
  key null; built by `protocol.records.build_batch`, CRC included, so the broker checks it like any batch.
- The high watermark is the *published offset*: a broker below it fetches again at once. The log start is 0.
  A fetch offset above the published offset (a restarted controller that lost an unpublished tail) gets no
  records and the published offset, which the broker must trust (see `MetadataLog.records_since`).
- Other topics on the controller listener: UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id).
Server side: `decode_fetch`, `encode_fetch_response`; broker side: `fetch_request`, `update_from_fetch`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

from insync import errors
from insync.controller.messages import MetadataFetchRequest, MetadataUpdate
from insync.errors import KafkaException
from insync.limits import METADATA_RECORDS_PER_FETCH_MAX
from insync.metadata.image import MetadataImage, TopicImage
from insync.metadata.records import RECORD_TYPES, Record, RecordError, record_from_dict
from insync.protocol.codec import DecodedRequest
from insync.protocol.records import RecordSpec, build_batch, iter_records
from insync.replication.messages import FetchPartitionData, FetchRequest, FetchRequestPartition, FetchResponse
from insync.types import UNDEFINED_EPOCH, BrokerId, Offset, TopicPartition
from insync.wire import fetch
from insync.wire.entities import Decoded

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
METADATA_PARTITION = TopicPartition(METADATA_TOPIC, 0)
METADATA_FETCH_MAX_BYTES = 64 * 1024 * 1024
_RECORD_CLASSES = tuple(RECORD_TYPES.values())

# An image that knows only the metadata topic, so that Fetch's name <-> id resolution covers it.
_METADATA_IMAGE = MetadataImage(
    topics_by_id=MappingProxyType({str(METADATA_TOPIC_ID): TopicImage(METADATA_TOPIC, str(METADATA_TOPIC_ID),
                                                                      MappingProxyType({}))}),
    topic_ids_by_name=MappingProxyType({METADATA_TOPIC: str(METADATA_TOPIC_ID)}))


def encode_records(records: Sequence[tuple[int, object]]) -> bytes:
    """One record batch holding `records` (consecutive metadata offsets, controller records as
    `MetadataUpdate` carries them); empty bytes for none."""
    if not records:
        return b""
    assert len(records) <= METADATA_RECORDS_PER_FETCH_MAX, len(records)
    base = records[0][0]
    assert all(offset == base + i for i, (offset, _) in enumerate(records)), "metadata offsets are consecutive"
    values = []
    for _, record in records:
        assert isinstance(record, _RECORD_CLASSES), record
        values.append(RecordSpec(value=json.dumps(record.to_dict(), separators=(",", ":")).encode()))
    return build_batch(values, base_offset=base)


def decode_records(data: bytes) -> list[tuple[int, Record]]:
    """The `(offset, record)` pairs in fetched bytes; damage of any kind is CORRUPT_MESSAGE."""
    out: list[tuple[int, Record]] = []
    for record in iter_records(data):  # raises InvalidRecordError (a KafkaException) on a bad batch
        if record.value is None:
            raise KafkaException(errors.CORRUPT_MESSAGE, f"metadata record at offset {record.offset} has no value")
        try:
            out.append((record.offset, record_from_dict(json.loads(record.value))))
        except (ValueError, RecordError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise KafkaException(errors.CORRUPT_MESSAGE, f"metadata record at offset {record.offset}: {exc}") from None
    return out


# Controller listener --------------------------------------------------------------------------------------


def decode_fetch(request: DecodedRequest) -> Decoded[FetchRequest]:
    """A Fetch arriving at the controller listener (the metadata topic is the only one it knows)."""
    return fetch.decode_request(request, _METADATA_IMAGE)


def metadata_fetch_request(decoded: Decoded[FetchRequest]) -> MetadataFetchRequest | None:
    """What to ask `Controller.records_since`, or None when the fetch does not ask for the metadata log."""
    partition = decoded.request.partition(METADATA_PARTITION)
    if partition is None or decoded.error is not errors.NONE:
        return None
    return MetadataFetchRequest(decoded.request.correlation_id, decoded.request.replica_id,
                                max(0, partition.fetch_offset), METADATA_RECORDS_PER_FETCH_MAX,
                                decoded.request.max_wait_ms)


def encode_fetch_response(update: MetadataUpdate | None, decoded: Decoded[FetchRequest]) -> Any:
    """The Fetch answer: the metadata partition from `update` (None when it was not asked for), every other
    partition UNKNOWN_TOPIC_OR_PARTITION."""
    if decoded.error is not errors.NONE:
        return fetch.encode_response(None, decoded)
    partitions = []
    for p in decoded.request.partitions:
        if p.topic_partition == METADATA_PARTITION and update is not None:
            partitions.append(FetchPartitionData(METADATA_PARTITION, errors.NONE, Offset(update.published_offset),
                                                 Offset(0), Offset(update.published_offset),
                                                 records=encode_records(update.records)))
        else:
            partitions.append(FetchPartitionData(p.topic_partition, errors.UNKNOWN_TOPIC_OR_PARTITION))
    response = FetchResponse(decoded.request.correlation_id, errors.NONE, tuple(partitions))
    return fetch.encode_response(response, decoded)


# Broker side ---------------------------------------------------------------------------------------------


def fetch_request(correlation_id: int, broker_id: BrokerId, applied_offset: int, version: int,
                  max_wait_ms: int) -> Any:
    """The broker's Fetch of the metadata log from the first record it has not applied."""
    assert applied_offset >= 0 and max_wait_ms >= 0
    partition = FetchRequestPartition(METADATA_PARTITION, Offset(applied_offset), UNDEFINED_EPOCH, UNDEFINED_EPOCH,
                                      Offset(-1), METADATA_FETCH_MAX_BYTES)
    request = FetchRequest(correlation_id, broker_id, max_wait_ms, 1, METADATA_FETCH_MAX_BYTES, (partition,))
    return fetch.encode_request(request, version, _METADATA_IMAGE)


def update_from_fetch(body: Any, correlation_id: int, broker_id: BrokerId) -> MetadataUpdate:
    """The records and published offset in the controller's Fetch answer; an error raises KafkaException."""
    request = FetchRequest(correlation_id, broker_id, 0, 1, METADATA_FETCH_MAX_BYTES, (
        FetchRequestPartition(METADATA_PARTITION, Offset(0), UNDEFINED_EPOCH, UNDEFINED_EPOCH, Offset(-1), 0),))
    response = fetch.decode_response(body, request, _METADATA_IMAGE)
    if response.error is not errors.NONE:
        raise KafkaException(response.error, "metadata fetch refused")
    if not response.partitions:
        raise KafkaException(errors.UNKNOWN_TOPIC_OR_PARTITION, "the answer has no metadata partition")
    data = response.partitions[0]
    if data.error is not errors.NONE:
        raise KafkaException(data.error, "metadata fetch refused")
    return MetadataUpdate(correlation_id, tuple(decode_records(data.records)), int(data.high_watermark))
