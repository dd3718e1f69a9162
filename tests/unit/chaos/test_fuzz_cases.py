"""The fuzzer's cases: deterministic from (seed, index), covering every advertised API and version, valid cases
that insync's own decoder reads back as the API and version they were built for, and the guard that finds a real
broker's registration or heartbeat in a case's bytes."""

from __future__ import annotations

import struct
from collections import Counter

from insync.chaos.fuzz_cases import KIND_MUTATED, KIND_VALID, advertised_pairs, fuzz_case, names_a_broker
from insync.protocol.codec import (
    API_VERSIONS_KEY,
    UnsupportedRequest,
    decode_request,
    encode_request,
    request_schema,
)
from insync.protocol.kio import build_defaults
from insync.wire.versions import (
    ADVERTISED_MIN_VERSIONS,
    BROKER_API_VERSIONS,
    BROKER_HEARTBEAT,
    CONTROLLER_API_VERSIONS,
)

PAIRS = advertised_pairs(BROKER_API_VERSIONS, ADVERTISED_MIN_VERSIONS)
CASES = 3000


def test_a_case_depends_only_on_seed_and_index() -> None:
    assert fuzz_case(5, 1234, PAIRS) == fuzz_case(5, 1234, PAIRS)
    assert [fuzz_case(5, i, PAIRS).frame for i in range(50)] != [fuzz_case(6, i, PAIRS).frame for i in range(50)]


def test_pairs_cover_every_advertised_version() -> None:
    expected = sum(high - ADVERTISED_MIN_VERSIONS.get(key, low) + 1 for key, (low, high) in BROKER_API_VERSIONS.items())
    assert len(PAIRS) == expected
    assert (0, 0) in PAIRS and (0, 13) in PAIRS  # Produce from v0, as advertised though not served below v3


def test_cases_reach_every_pair_and_kind() -> None:
    cases = [fuzz_case(1, i, PAIRS) for i in range(CASES)]
    assert len({(c.api_key, c.api_version) for c in cases}) == len(PAIRS)
    kinds = Counter(c.kind for c in cases)
    assert set(kinds) == {"valid", "boundary", "mutated"}, kinds
    assert any(not c.consistent for c in cases if c.kind == KIND_MUTATED)


def test_valid_cases_decode_as_what_they_were_built_for() -> None:
    decoded = 0
    for case in (fuzz_case(2, i, PAIRS) for i in range(CASES)):
        if case.kind != KIND_VALID:
            continue
        assert case.consistent
        try:
            request = decode_request(case.frame[4:], BROKER_API_VERSIONS)
        except UnsupportedRequest:
            assert case.api_key == 0 and case.api_version < 3, (case.api_key, case.api_version)
            continue
        assert (request.api_key, request.api_version, request.correlation_id) == \
            (case.api_key, case.api_version, case.index)
        decoded += 1
    assert decoded > CASES // 4


def test_a_registration_or_heartbeat_of_a_real_broker_is_found_in_any_frame_the_server_reads() -> None:
    heartbeat = build_defaults(request_schema(BROKER_HEARTBEAT, 1), broker_id=2, broker_epoch=5)
    frame = encode_request(heartbeat, 9)
    assert names_a_broker(frame, CONTROLLER_API_VERSIONS, frozenset({2}))
    assert not names_a_broker(frame, CONTROLLER_API_VERSIONS, frozenset({1, 3}))
    assert not names_a_broker(frame, BROKER_API_VERSIONS, frozenset({2}))  # not served there: refused
    versions = encode_request(build_defaults(request_schema(API_VERSIONS_KEY, 0)), 8)
    # A size prefix that lies splits the bytes into other frames: the second one here is the heartbeat.
    assert names_a_broker(versions + frame, CONTROLLER_API_VERSIONS, frozenset({2}))
    assert not names_a_broker(frame[:-1], CONTROLLER_API_VERSIONS, frozenset({2}))  # never read in full
    assert not names_a_broker(struct.pack(">i", -1) + frame, CONTROLLER_API_VERSIONS, frozenset({2}))


def test_broker_ids_given_change_only_broker_id_fields() -> None:
    controller_pairs = advertised_pairs(CONTROLLER_API_VERSIONS, ADVERTISED_MIN_VERSIONS)
    same = [i for i in range(500) if fuzz_case(3, i, PAIRS) == fuzz_case(3, i, PAIRS, ())]
    assert len(same) == 500  # the brokers' cases are those of before
    assert any(fuzz_case(3, i, controller_pairs, (900,)) != fuzz_case(3, i, controller_pairs) for i in range(500))
