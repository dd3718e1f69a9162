"""The Kafka error table: codes, names and retriability as Kafka has them."""

from insync import errors


def test_error_table_matches_kafka() -> None:
    assert errors.by_code(19).name == "NOT_ENOUGH_REPLICAS"
    assert errors.by_code(20).name == "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    assert errors.by_code(2) is errors.CORRUPT_MESSAGE and errors.CORRUPT_MESSAGE.retriable
    assert errors.by_code(6) is errors.NOT_LEADER_OR_FOLLOWER
    assert errors.by_code(9999) is errors.UNKNOWN_SERVER_ERROR
    codes = [e.code for e in errors.ALL_ERRORS]
    assert len(codes) == len(set(codes)) and len(codes) > 100
