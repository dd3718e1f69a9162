"""Events: the JSON schema file derived from the table, and an event's line and refusals."""

import json
from pathlib import Path

import pytest

import insync
from insync.events import EVENT_FIELDS, Event, EventType, json_schema


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
