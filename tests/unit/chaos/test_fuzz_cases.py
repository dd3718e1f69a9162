"""The fuzzer's cases: deterministic from (seed, index), covering every advertised API and version, and valid
cases that insync's own decoder reads back as the API and version they were built for."""

from __future__ import annotations

from collections import Counter

from insync.chaos.fuzz_cases import KIND_MUTATED, KIND_VALID, advertised_pairs, fuzz_case
from insync.protocol.codec import UnsupportedRequest, decode_request
from insync.wire.versions import ADVERTISED_MIN_VERSIONS, BROKER_API_VERSIONS

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
