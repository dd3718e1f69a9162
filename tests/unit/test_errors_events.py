import json
from pathlib import Path

import pytest

import insync
from insync import errors
from insync.events import EVENT_FIELDS, Event, EventType, json_schema


def test_error_table_matches_kafka() -> None:
    assert errors.by_code(19).name == "NOT_ENOUGH_REPLICAS"
    assert errors.by_code(20).name == "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    assert errors.by_code(2) is errors.CORRUPT_MESSAGE and errors.CORRUPT_MESSAGE.retriable
    assert errors.by_code(6) is errors.NOT_LEADER_OR_FOLLOWER
    assert errors.by_code(9999) is errors.UNKNOWN_SERVER_ERROR
    codes = [e.code for e in errors.ALL_ERRORS]
    assert len(codes) == len(set(codes)) and len(codes) > 100


def test_schema_file_is_derived_from_the_table() -> None:
    path = Path(insync.__file__).with_name("events.schema.json")
    assert json.loads(path.read_text()) == json_schema()
    assert {v["properties"]["type"]["const"] for v in json_schema()["oneOf"]} == {str(t) for t in EventType}
    assert set(EVENT_FIELDS) == set(EventType)


def test_event_round_trip_and_refusal() -> None:
    event = Event(5, 1, EventType.ISR_EXPAND, "t", 0, {"isr_before": [1], "isr_after": [1, 2],
                                                         "added": [{"broker": 2, "leo": 10}]})
    line = json.loads(event.to_json())
    assert line == {"v": 2, "ts_ms": 5, "broker": 1, "type": "isr_expand", "topic": "t", "partition": 0,
                    "isr_before": [1], "isr_after": [1, 2], "added": [{"broker": 2, "leo": 10}]}
    with pytest.raises(AssertionError, match="lacks added"):
        Event(5, 1, EventType.ISR_EXPAND, "t", 0, {"isr_before": [1], "isr_after": [1, 2]})
    with pytest.raises(AssertionError):
        Event(5, 1, EventType.BROKER_FENCED, "t", 0, {"broker_id": 2})
