"""`alert_log`: what a log holds of a monitor, recovered from its own records, decides what a replayed
micro-batch writes; the alerts file survives a line cut short by a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from insync.spark.monitor import alert_log
from insync.spark.monitor.alert_log import AlertFile, Written, written_of


def alert(kind: str, since_ms: int, batch: int, monitor: str = "m1") -> dict[str, Any]:
    return {"v": 1, "kind": kind, "topic": "t", "partition": 0, "since_ms": since_ms, "due_ms": since_ms,
            "emitted_ms": since_ms + 5, "cause": "c", "evidence": {}, "monitor": monitor, "batch": batch}


def test_a_replayed_batch_writes_only_what_the_log_lacks_and_a_new_batch_writes_everything() -> None:
    a, b, c = alert("urp", 1, 7), alert("flapping", 2, 7), alert("urp", 3, 8)
    held = Written(7, frozenset({alert_log.alert_id(a)}))  # the stop came after a, before b
    assert held.missing(7, [a, b]) == [b]
    assert held.missing(6, [alert("urp", 0, 6)]) == []
    assert held.missing(8, [c]) == [c]
    assert held.after(7, [b]) == Written(7, frozenset({alert_log.alert_id(a), alert_log.alert_id(b)}))
    assert held.after(8, [c]) == Written(8, frozenset({alert_log.alert_id(c)}))
    assert held.after(6, [c]) == held


def test_the_last_batch_of_this_monitor_is_recovered_ignoring_other_monitors_and_older_records() -> None:
    records = [alert("urp", 1, 3), alert("urp", 2, 5), alert("flapping", 3, 5), alert("urp", 4, 9, monitor="m2"),
               {"v": 1, "kind": "urp", "topic": "t", "partition": 0, "since_ms": 0}]
    found = written_of(records, "m1")
    assert found.batch == 5
    assert found.alerts == {("urp", "t", 0, 2), ("flapping", "t", 0, 3)}
    assert written_of(records, "m3") == Written()


def test_the_alerts_file_drops_a_line_cut_short_and_its_batch_is_written_again_whole(tmp_path: Path) -> None:
    path = tmp_path / "alerts.jsonl"
    whole, cut = alert("urp", 1, 4), alert("flapping", 2, 4)
    path.write_text(json.dumps(whole) + "\n" + json.dumps(cut)[:25])
    log = AlertFile(path)
    found = log.recover("m1")
    assert found == Written(4, frozenset({alert_log.alert_id(whole)}))
    log.append(found.missing(4, [whole, cut]))
    assert [json.loads(line) for line in path.read_text().splitlines()] == [whole, cut]


def test_the_alerts_file_recovers_from_its_tail_and_skips_lines_that_are_not_json(tmp_path: Path,
                                                                                   monkeypatch: Any) -> None:
    path = tmp_path / "alerts.jsonl"
    lines = [json.dumps(alert("urp", i, i)) for i in range(200)] + ["not json"]
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(alert_log, "FILE_TAIL_BYTES", 1000)  # the tail starts inside a line: that piece is skipped
    assert AlertFile(path).recover("m1") == Written(199, frozenset({("urp", "t", 0, 199)}))
    assert AlertFile(tmp_path / "none.jsonl").recover("m1") == Written()


def test_a_checkpoint_keeps_its_monitor_id_and_a_new_checkpoint_gets_a_new_one(tmp_path: Path) -> None:
    first = alert_log.monitor_id(tmp_path)
    assert alert_log.monitor_id(tmp_path) == first
    other = tmp_path / "other"
    other.mkdir()
    assert alert_log.monitor_id(other) != first
    assert not list(tmp_path.glob("*.tmp"))
