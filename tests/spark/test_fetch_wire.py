"""`fetch_wire.parse` against kio, the reference: random Fetch responses of every version it reads, written by
kio (aborted transactions, null records, errors, v12's tagged fields), read back by both; and cut or corrupted
responses, which must raise `MalformedResponse`, never anything else."""

from __future__ import annotations

import contextlib
import datetime
import random

import pytest
from kio.schema.fetch.v12.response import EpochEndOffset, LeaderIdAndEpoch

from insync import errors
from insync.protocol.codec import decode_response, encode_response
from insync.protocol.kio import build, code, has_field, nested, response_class
from insync.spark.source import fetch_wire

ERRORS = [errors.NONE, errors.NONE, errors.NONE, errors.OFFSET_OUT_OF_RANGE, errors.BY_NAME["NOT_LEADER_OR_FOLLOWER"]]


def random_response(rng: random.Random, version: int) -> object:
    cls = response_class(1, version)
    topics = []
    for t in range(rng.randint(0, 3)):
        partitions = []
        for p in range(rng.randint(0, 4)):
            error = rng.choice(ERRORS)
            records = None if rng.random() < 0.2 else rng.randbytes(rng.choice([0, 1, 70, 300, 5000]))
            aborted = None if rng.random() < 0.3 else tuple(
                build(nested(cls, "AbortedTransaction"), producer_id=rng.randint(0, 2**40),
                      first_offset=rng.randint(0, 2**40)) for _ in range(rng.randint(0, 3)))
            tagged = {}
            if version >= 12 and rng.random() < 0.5:  # tagged fields: written only when not the default
                tagged = {"diverging_epoch": EpochEndOffset(epoch=rng.randint(0, 9), end_offset=rng.randint(0, 99)),
                          "current_leader": LeaderIdAndEpoch(leader_id=rng.randint(0, 5),
                                                             leader_epoch=rng.randint(0, 9))}
            partitions.append(build(
                nested(cls, "PartitionData"), partition_index=p * 3 + t, error_code=code(error),
                high_watermark=rng.randint(-1, 2**50), last_stable_offset=rng.randint(-1, 2**50),
                log_start_offset=rng.randint(-1, 2**50), aborted_transactions=aborted,
                preferred_read_replica=rng.randint(-1, 5), records=records, **tagged))
        topics.append(build(nested(cls, "FetchableTopicResponse"), topic=f"topic-{t}-é", partitions=tuple(partitions)))
    values = {"error_code": code(rng.choice(ERRORS))} if has_field(cls, "error_code") else {}
    return build(cls, throttle_time=datetime.timedelta(milliseconds=rng.randint(0, 100)),
                 session_id=rng.randint(0, 2**31 - 1), responses=tuple(topics), **values)


@pytest.mark.parametrize("version", list(fetch_wire.VERSIONS))
def test_parse_agrees_with_kio(version: int) -> None:
    rng = random.Random(version)
    for _ in range(200):
        body = random_response(rng, version)
        correlation_id = rng.randint(0, 2**31 - 1)
        payload = memoryview(encode_response(1, version, correlation_id, body))[4:]
        view = fetch_wire.parse(payload, version)
        kio_id, kio_body = decode_response(1, version, payload)
        assert view.correlation_id == kio_id == correlation_id
        assert view.error_code == (kio_body.error_code.value if version >= 7 else 0)
        expected = [(t.topic, int(p.partition_index), p.error_code.value, int(p.high_watermark),
                     int(p.log_start_offset) if version >= 5 else -1, p.records or b"", int(p.last_stable_offset),
                     None if p.aborted_transactions is None else
                     tuple((int(a.producer_id), int(a.first_offset)) for a in p.aborted_transactions))
                    for t in kio_body.responses for p in t.partitions]
        assert [(p.topic, p.partition, p.error_code, p.high_watermark, p.log_start_offset, bytes(p.records),
                 p.last_stable_offset, p.aborted_transactions) for p in view.partitions] == expected


def test_records_are_a_view_into_the_payload_not_a_copy() -> None:
    body = random_response(random.Random(1), 12)
    buffer = bytearray(encode_response(1, 12, 5, body))
    view = fetch_wire.parse(memoryview(buffer)[4:], 12)
    with_records = [p for p in view.partitions if len(p.records) > 0]
    assert with_records
    assert all(p.records.obj is buffer for p in with_records)


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_every_cut_response_is_malformed_not_a_crash(version: int) -> None:
    rng = random.Random(100 + version)
    for _ in range(20):
        payload = encode_response(1, version, 9, random_response(rng, version))[4:]
        for cut in range(len(payload)):
            try:
                fetch_wire.parse(memoryview(payload[:cut]), version)
            except fetch_wire.MalformedResponse:
                continue
            raise AssertionError(f"a response cut at byte {cut} of {len(payload)} parsed")


def test_garbage_and_unknown_versions_are_refused() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        garbage = memoryview(rng.randbytes(rng.randint(0, 64)))
        with contextlib.suppress(fetch_wire.MalformedResponse):  # anything else fails the test
            fetch_wire.parse(garbage, rng.choice(list(fetch_wire.VERSIONS)))
    with pytest.raises(fetch_wire.MalformedResponse, match="v13"):
        fetch_wire.parse(memoryview(b"\x00" * 64), 13)
    # A topic name that is not UTF-8.
    with pytest.raises(fetch_wire.MalformedResponse, match="not UTF-8"):
        fetch_wire.parse(memoryview(b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01"
                                    + b"\x00\x02\xff\xfe" + b"\x00" * 64), 4)
    # A count that would need more bytes than are left is refused before any loop runs on it.
    with pytest.raises(fetch_wire.MalformedResponse, match="topics count"):
        fetch_wire.parse(memoryview(b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00" + b"\x7f\xff\xff\xff"), 4)
