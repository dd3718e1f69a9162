"""The demo's monitor: which alerts an act waits for, and Spark's stderr kept out of the acts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from insync.demo.monitor import DemoMonitor, _stderr_to


def test_alerted_matches_kind_topic_and_partition(tmp_path: Path) -> None:
    monitor = DemoMonitor(tmp_path / "spark.log")
    monitor._on_batch([{"kind": "under_replicated", "topic": "demo", "partition": 0},
                       {"kind": "leader_side", "topic": "demo", "partition": 1}], {})
    assert not monitor.alerted("leader_side", "demo", 0)
    assert not monitor.alerted("leader_side", "other", 1)
    assert monitor.alerted("leader_side", "demo", 1)
    assert monitor.alerted("under_replicated", "demo", 0)


def test_a_child_started_meanwhile_keeps_the_file_as_stderr(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "spark.log"
    with _stderr_to(log):
        child = subprocess.Popen([sys.executable, "-c",
                                  "import sys, time; time.sleep(0.3); sys.stderr.write('from the child')"])
    os.write(2, b"from the parent")  # after the block: this process's own stderr again
    assert child.wait(timeout=30) == 0
    assert log.read_text() == "from the child"
    assert "from the parent" in capfd.readouterr().err
