"""Array counts checked before kio's native reader: a count past the end of the request is refused as malformed
(kio would try to reserve it and abort the process), and well-formed requests walk to where kio ends."""

from __future__ import annotations

import dataclasses
import datetime
import struct
import subprocess
import sys
import typing
import uuid
from collections import Counter
from collections.abc import Callable

import bounds_reference
import pytest
from kio.index import KioIndexError
from kio.serial import entity_reader
from kio.serial.errors import DecodeError, InvalidUnicode

from insync.chaos.fuzz_cases import KIND_MUTATED, KINDS, FuzzCase, advertised_pairs, fuzz_case
from insync.protocol.codec import MalformedRequest, decode_request, encode_request, peek, request_schema
from insync.protocol.request_bounds import DEPTH_MAX, check_arrays
from insync.wire.versions import ADVERTISED_MIN_VERSIONS, BROKER_API_VERSIONS

# A Fetch v16 (flexible) whose partitions array claims about 10 billion elements: found by atheris
# (tests/unit/protocol/test_codec_atheris.py); it aborted a broker before the check.
HUGE_COUNT_FETCH = bytes.fromhex(
    "0001001000" "26ca00000000" "cacacacaca36353535353535" "2dca0000000000000003" + "ca" * 20 + "2626")


def test_a_count_past_the_end_is_malformed() -> None:
    with pytest.raises(MalformedRequest, match="elements in"):
        decode_request(HUGE_COUNT_FETCH, BROKER_API_VERSIONS)


def test_a_legacy_count_past_the_end_is_malformed() -> None:
    # Metadata v1: header (key, version, correlation id, client id ""), then a topics array claiming 2**31-1.
    frame = struct.pack(">hhih", 3, 1, 9, 0) + struct.pack(">i", 2**31 - 1)
    with pytest.raises(MalformedRequest, match="elements in"):
        decode_request(frame, BROKER_API_VERSIONS)


def test_a_null_where_the_schema_allows_none_is_malformed_and_where_it_allows_one_is_not() -> None:
    # Metadata v1's topics may be null (every topic); ListOffsets v1's topics may not (Kafka's parser's words).
    assert decode_request(struct.pack(">hhih", 3, 1, 9, 0) + struct.pack(">i", -1), BROKER_API_VERSIONS).body.topics \
        is None
    list_offsets = struct.pack(">hhih", 2, 1, 9, 0) + struct.pack(">ii", -1, -1)  # replica id, then topics null
    with pytest.raises(MalformedRequest, match="non-nullable field topics was serialized as null"):
        decode_request(list_offsets, BROKER_API_VERSIONS)


def test_the_process_survives_the_request_that_aborted_it() -> None:
    code = ("from insync.protocol.codec import decode_request, MalformedRequest\n"
            "from insync.wire.versions import BROKER_API_VERSIONS\n"
            f"try:\n    decode_request({HUGE_COUNT_FETCH!r}, BROKER_API_VERSIONS)\n"
            "except MalformedRequest:\n    print('refused')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and "refused" in result.stdout, result.stderr[-2000:]


def test_well_formed_requests_walk_to_where_kio_ends() -> None:
    pairs = advertised_pairs(BROKER_API_VERSIONS, ADVERTISED_MIN_VERSIONS)
    walked = 0
    for index in range(1500):
        case = fuzz_case(11, index, pairs)
        if case.kind == KIND_MUTATED or (case.api_key == 0 and case.api_version < 3):
            continue
        frame = case.frame[4:]
        schema = request_schema(case.api_key, case.api_version)
        _, header_size = entity_reader(schema.__header_schema__)(frame, 0)
        _, body_size = entity_reader(schema)(frame, header_size)
        assert check_arrays(frame, header_size, schema) == header_size + body_size, case.index
        walked += 1
    assert walked > 500


def test_the_compiled_walk_agrees_with_the_plain_walk_on_fuzzed_requests() -> None:
    """Both reach the same offset or both refuse, except where the plain walk refuses a value (kio's reader reads
    values, the compiled walk only their lengths): kio's reader then refuses the request right after the check."""
    pairs = advertised_pairs(BROKER_API_VERSIONS, ADVERTISED_MIN_VERSIONS)
    outcomes: Counter[tuple[str, str]] = Counter()
    for index in range(5000):
        case = fuzz_case(23, index, pairs)
        frame = case.frame[4:]
        for schema in _schemas(case):
            try:
                _, header_size = entity_reader(schema.__header_schema__)(frame, 0)
            except Exception:  # decode_request refuses it before the check
                continue
            plain = _verdict(bounds_reference.check_arrays, frame, header_size, schema)
            compiled = _verdict(check_arrays, frame, header_size, schema)
            if isinstance(plain, int):
                assert compiled == plain, (index, schema)
                outcome = "walked"
            elif isinstance(compiled, int):
                assert isinstance(plain, InvalidUnicode) or str(plain) in _VALUE_REFUSALS, (index, schema, plain)
                with pytest.raises((ValueError, DecodeError)):
                    entity_reader(schema)(frame, header_size)
                outcome = "left to kio"
            else:
                assert isinstance(compiled, ValueError), (index, schema, compiled)
                outcome = "refused"
            outcomes[case.kind, outcome] += 1
    assert {(kind, "walked") for kind in KINDS} | {(KIND_MUTATED, "refused")} <= set(outcomes), outcomes
    assert outcomes[KIND_MUTATED, "refused"] > 200 and outcomes[KIND_MUTATED, "left to kio"] > 0, outcomes


# kio's words when it refuses a value rather than a length or a count (besides invalid UTF-8)
_VALUE_REFUSALS = ("Invalid boolean value", "timedelta milliseconds overflow")


def _schemas(case: FuzzCase) -> list[type]:
    """The schema the frame's header names (as decode_request reads it) and the one the case was built from."""
    payload = case.frame[4:]
    key_versions = [peek(payload)[:2]] if len(payload) >= 8 else []
    found = []
    for api_key, api_version in [*key_versions, (case.api_key, case.api_version)]:
        try:
            schema = request_schema(api_key, api_version)
        except KioIndexError:  # a mutated api key or version, or Produce v0-2 that kio does not know
            continue
        if schema not in found:
            found.append(schema)
    return found


def _verdict(check: Callable[[bytes, int, type], int], frame: bytes, offset: int, schema: type) -> int | Exception:
    try:
        return check(frame, offset, schema)
    except Exception as exc:  # the plain walk lets kio's own errors through as well as ValueError
        return exc


def _fetch(version: int, partitions: tuple[dict[str, typing.Any], ...]) -> tuple[bytes, int, type]:
    """(frame without its size, header size, schema) of a Fetch of one topic and these partitions' fields."""
    schema = request_schema(1, version)
    topic_cls = typing.get_args(typing.get_type_hints(schema)["topics"])[0]
    partition_cls = typing.get_args(typing.get_type_hints(topic_cls)["partitions"])[0]
    names = {spec.name for spec in dataclasses.fields(partition_cls)}
    common = {"current_leader_epoch": 3, "fetch_offset": 10, "last_fetched_epoch": 3, "log_start_offset": 0,
              "partition_max_bytes": 1 << 20}
    topic = topic_cls(**({"topic_id": uuid.UUID(int=1)} if version >= 13 else {"topic": "t"}),
                      partitions=tuple(partition_cls(**{k: v for k, v in (common | p).items() if k in names})
                                       for p in partitions))
    fields = {"replica_id": -1, "max_wait": datetime.timedelta(milliseconds=500), "min_bytes": 1, "max_bytes": 1 << 20,
              "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": (topic,),
              "forgotten_topics_data": (), "rack_id": ""}
    names = {spec.name for spec in dataclasses.fields(schema)}
    frame = encode_request(schema(**{k: v for k, v in fields.items() if k in names}), 1)[4:]
    return frame, entity_reader(schema.__header_schema__)(frame, 0)[1], schema


def test_partitions_with_and_without_tagged_fields_walk_to_where_kio_ends() -> None:
    # Fetch v17's partitions are fixed fields then tagged fields: one carrying a tag is walked field by field.
    for tagged in ((), (1,)):
        partitions = tuple({"partition": i} | ({"replica_directory_id": uuid.UUID(int=9)} if i in tagged else {})
                           for i in range(3))
        frame, header_size, schema = _fetch(17, partitions)
        _, body_size = entity_reader(schema)(frame, header_size)
        assert check_arrays(frame, header_size, schema) == header_size + body_size


def test_fixed_size_elements_past_the_end_are_refused_by_their_whole_width() -> None:
    # Fetch v11's partitions are 28 bytes each: a count of 3 over 2 partitions fits the bytes left, 3 x 28 does not.
    frame, header_size, schema = _fetch(11, ({"partition": 7001}, {"partition": 7002}))
    at = frame.index(struct.pack(">ii", 2, 7001))
    lying = frame[:at] + struct.pack(">i", 3) + frame[at + 4:]
    with pytest.raises(ValueError, match="array partitions of 3 elements past the end"):
        check_arrays(lying, header_size, schema)
    with pytest.raises(DecodeError):
        bounds_reference.check_arrays(lying, header_size, schema)


def test_nesting_deeper_than_any_schema_is_refused() -> None:
    def chain(levels: int) -> type:
        cls = dataclasses.make_dataclass("Leaf", [("value", int, dataclasses.field(metadata={"kafka_type": "int32"}))])
        for level in range(levels - 1):
            cls = dataclasses.make_dataclass(f"Level{level}", [("child", cls)])
        return cls

    assert check_arrays(bytes(4), 0, chain(DEPTH_MAX + 1)) == bounds_reference.check_arrays(
        bytes(4), 0, chain(DEPTH_MAX + 1)) == 4
    for check in (check_arrays, bounds_reference.check_arrays):
        with pytest.raises(ValueError, match="nests deeper"):
            check(bytes(4), 0, chain(DEPTH_MAX + 2))
