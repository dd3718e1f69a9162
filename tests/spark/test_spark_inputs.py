"""Finding log files: files as given, directories searched, missing or empty inputs named in the error."""

from __future__ import annotations

from pathlib import Path

import pytest

from insync.spark.analysis.inputs import discover


def test_directories_are_searched_for_event_and_kafka_logs(tmp_path: Path) -> None:
    (tmp_path / "b1").mkdir()
    (tmp_path / "b1" / "server.log").write_text("x\n")
    (tmp_path / "b1" / "server.log.2024-03-01-12").write_text("x\n")
    (tmp_path / "b1" / "state-change.log").write_text("x\n")
    (tmp_path / "b1" / "controller.log").write_text("x\n")
    (tmp_path / "b2").mkdir()
    (tmp_path / "b2" / "events.jsonl").write_text("{}\n")
    found = discover([str(tmp_path)])
    assert found.event_logs == (str(tmp_path / "b2" / "events.jsonl"),)
    assert [Path(p).name for p in found.kafka_logs] == ["controller.log", "server.log", "server.log.2024-03-01-12",
                                                        "state-change.log"]


def test_an_insync_nodes_server_log_is_not_read_twice(tmp_path: Path) -> None:
    """insync writes events.jsonl and server.log side by side: the events (with reasons) stand for the node."""
    (tmp_path / "events.jsonl").write_text("{}\n")
    (tmp_path / "server.log").write_text("x\n")
    found = discover([str(tmp_path)])
    assert found.event_logs == (str(tmp_path / "events.jsonl"),) and found.kafka_logs == ()
    explicit = discover([str(tmp_path / "events.jsonl"), str(tmp_path / "server.log")])
    assert len(explicit.kafka_logs) == 1


def test_files_are_classified_by_name(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text("{}\n")
    (tmp_path / "kafka.out").write_text("x\n")
    found = discover([str(tmp_path / "a.jsonl"), str(tmp_path / "kafka.out"), "hdfs://nn/logs/server.log"])
    assert found.event_logs == (str(tmp_path / "a.jsonl"),)
    assert found.kafka_logs == (str(tmp_path / "kafka.out"), "hdfs://nn/logs/server.log")


def test_a_missing_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="input path not found: .*nowhere"):
        discover([str(tmp_path / "nowhere")])


def test_a_directory_without_logs_is_named(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x\n")
    with pytest.raises(FileNotFoundError, match=f"no events.jsonl or server.log\\* files under {tmp_path}"):
        discover([str(tmp_path)])


def test_empty_logs_are_an_error(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").write_text("")
    with pytest.raises(FileNotFoundError, match="empty input"):
        discover([str(tmp_path)])
