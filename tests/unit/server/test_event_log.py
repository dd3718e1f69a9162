import json
from pathlib import Path

from insync.events import Event, EventType
from insync.server.event_log import EventLog


def test_events_are_lines_and_rejections_aggregate(tmp_path: Path) -> None:
    log = EventLog(tmp_path, broker_id=1)
    log.write([Event(10, 1, EventType.UNDER_MIN_ISR_START, "t", 0)])
    for now in range(100, 600, 10):
        log.count_rejection("t", 0, "NOT_ENOUGH_REPLICAS", now)
    log.flush_rejections(600)  # under a second: nothing yet
    log.flush_rejections(1200)
    log.count_rejection("t", 1, "NOT_ENOUGH_REPLICAS", 1300)
    log.close(1400)
    lines = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [(d["type"], d.get("count")) for d in lines] == [
        ("under_min_isr_start", None), ("produce_rejected", 50), ("produce_rejected", 1)]
    assert lines[1]["partition"] == 0 and lines[1]["error"] == "NOT_ENOUGH_REPLICAS"
    assert lines[1]["per_second"] == round(50 / 1.1, 2)


def test_reopen_appends(tmp_path: Path) -> None:
    for ts in (1, 2):
        log = EventLog(tmp_path, broker_id=2)
        log.write([Event(ts, 2, EventType.BROKER_FENCED, fields={"broker_id": 3})])
        log.close(ts)
    assert len((tmp_path / "events.jsonl").read_text().splitlines()) == 2
