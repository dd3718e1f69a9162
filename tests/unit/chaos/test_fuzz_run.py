"""Judging the broker's answers: decoded with the schema the request named, errors found wherever they nest, an
answer without an error to an API the broker does not serve counted as wrong."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from insync import errors
from insync.chaos.fuzz_run import any_error, judge
from insync.protocol.codec import encode_response
from insync.protocol.kio import build_defaults, nested, response_class
from insync.wire.versions import BROKER_API_VERSIONS, api_versions_response


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
