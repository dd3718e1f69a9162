"""Array counts checked before kio's native reader: a count past the end of the request is refused as malformed
(kio would try to reserve it and abort the process), and well-formed requests walk to where kio ends."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest
from kio.serial import entity_reader

from insync.chaos.fuzz_cases import KIND_MUTATED, advertised_pairs, fuzz_case
from insync.protocol.codec import MalformedRequest, decode_request, request_schema
from insync.protocol.request_bounds import check_arrays
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
