import json
from pathlib import Path

from insync.events import Event, EventType
from insync.server.event_log import EventLog


def test_events_are_whole_lines_counted_by_type(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.write([Event(10, 1, EventType.UNDER_MIN_ISR_START, "t", 0),
               Event(11, 1, EventType.PRODUCE_REJECTED, "t", 0, {"error": "NOT_ENOUGH_REPLICAS", "count": 50})])
    log.close()
    lines = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [(d["type"], d.get("count")) for d in lines] == [("under_min_isr_start", None), ("produce_rejected", 50)]
    assert log.counts == {"under_min_isr_start": 1, "produce_rejected": 1}


def test_reopen_appends(tmp_path: Path) -> None:
    for ts in (1, 2):
        log = EventLog(tmp_path)
        log.write([Event(ts, 2, EventType.BROKER_FENCED, fields={"broker_id": 3})])
        log.close()
    assert len((tmp_path / "events.jsonl").read_text().splitlines()) == 2


def test_a_disk_that_refuses_the_line_drops_the_event_not_the_broker(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    log = EventLog(tmp_path)

    def full(fd: int, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("insync.server.event_log.os.write", full)
    log.write([Event(1, 2, EventType.BROKER_FENCED, fields={"broker_id": 3})] * 2)
    monkeypatch.undo()
    log.write([Event(2, 2, EventType.BROKER_FENCED, fields={"broker_id": 3})])
    log.close()
    assert log.dropped == 2 and log.counts == {"broker_fenced": 1}
