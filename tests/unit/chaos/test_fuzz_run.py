"""Judging the broker's answers: decoded with the schema the request named, errors found wherever they nest, an
answer without an error to an API the broker does not serve counted as wrong."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from insync import errors
from insync.chaos import fuzz_run
from insync.chaos.fuzz_cases import FuzzCase
from insync.chaos.fuzz_run import any_error, judge
from insync.protocol.codec import API_VERSIONS_KEY, encode_request, encode_response, request_schema
from insync.protocol.kio import build_defaults, nested, response_class
from insync.wire.versions import BROKER_API_VERSIONS, METADATA, api_versions_response


def _payload(api_key: int, version: int, body: object) -> bytes:
    return encode_response(api_key, version, 7, body)[4:]


def test_an_answer_without_errors_is_ok() -> None:
    body = api_versions_response(3, BROKER_API_VERSIONS)
    assert judge(18, 3, _payload(18, 3, body), BROKER_API_VERSIONS) == ("ok", "")


def test_an_error_nested_in_a_topic_counts() -> None:
    cls = response_class(3, 12)
    topic = build_defaults(nested(cls, "MetadataResponseTopic"),
                           error_code=ErrorCode.unknown_topic_or_partition)
    body = build_defaults(cls, topics=(topic,))
    assert any_error(body)
    assert judge(3, 12, _payload(3, 12, body), BROKER_API_VERSIONS)[0] == "error"


def test_api_versions_above_the_table_is_answered_in_v0() -> None:
    body = api_versions_response(0, BROKER_API_VERSIONS, errors.UNSUPPORTED_VERSION)
    assert judge(18, 99, _payload(18, 0, body), BROKER_API_VERSIONS)[0] == "error"
    ok = api_versions_response(0, BROKER_API_VERSIONS)
    assert judge(18, 99, _payload(18, 0, ok), BROKER_API_VERSIONS)[0] == "wrong"


def test_an_undecodable_answer_is_wrong() -> None:
    outcome, detail = judge(3, 12, b"\x00\x00\x00\x07\x00\xff", BROKER_API_VERSIONS)
    assert outcome == "wrong" and "undecodable" in detail


def test_a_late_answer_is_slow_and_none_at_all_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request answered after ANSWER_TIMEOUT_S is kept as slow (with its seconds); one not answered by
    HANG_TIMEOUT_S is a hang."""
    monkeypatch.setattr(fuzz_run, "ANSWER_TIMEOUT_S", 0.05)
    monkeypatch.setattr(fuzz_run, "HANG_TIMEOUT_S", 0.5)
    metadata = request_schema(METADATA, 12)
    case = FuzzCase(0, METADATA, 12, "valid", encode_request(build_defaults(metadata, topics=None), 11))
    answer = encode_response(METADATA, 12, 11, build_defaults(response_class(METADATA, 12)))

    async def exchange(delay_s: float | None) -> tuple[str, str, bool]:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readexactly(len(case.frame))
            if delay_s is not None:
                await asyncio.sleep(delay_s)
                sentinel = await reader.readexactly(4)
                await reader.readexactly(int.from_bytes(sentinel, "big"))
                writer.write(answer + encode_response(API_VERSIONS_KEY, 0, 11 ^ 0x40000000,
                                                      build_defaults(response_class(API_VERSIONS_KEY, 0))))
            await asyncio.sleep(1)
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        async with server:
            stream = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
            try:
                return await fuzz_run.exchange(stream, case, BROKER_API_VERSIONS)
            finally:
                stream[1].close()

    outcome, detail, reusable = asyncio.run(exchange(0.2))
    assert outcome == "slow" and "answered (ok) after" in detail and reusable
    outcome, detail, _ = asyncio.run(exchange(None))
    assert (outcome, detail) == ("timeout", "no answer in 0.5 s")
    tally = fuzz_run.Tally()
    tally.add(case, "slow", "answered (ok) after 12.0 s")
    assert tally.failures == 0 and [s["index"] for s in tally.slow] == [0] and tally.problems == []
