"""The librdkafka suite runner's reading of test.c's table, the allowlist and test-runner's summary
(tools/compat/run_librdkafka_tests.py; the suite itself runs in `make compat`)."""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_librdkafka_tests",
                                                  ROOT / "tools" / "compat" / "run_librdkafka_tests.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


TABLE = """
struct test tests[] = {
    _TEST(0000_unittests,
          TEST_F_LOCAL,
          _THRES(.ucpu = 100.0)),
    _TEST(0001_multiobj, 0),
    _TEST(0009_mock_cluster,
          TEST_F_LOCAL,
          TEST_BRKVER(0, 11, 0, 0)),
    _TEST(0028_long_topicnames,
          TEST_F_KNOWN_ISSUE,
          TEST_BRKVER(0, 9, 0, 0)),
    _TEST(0055_producer_latency, TEST_F_KNOWN_ISSUE_WIN32),
    _TEST(0103_transactions,
          0,
          TEST_BRKVER(0, 11, 0, 0),
          .scenario = "default,ak23"),
    _TEST(0107_topic_recreate,
          0,
          TEST_BRKVER_TOPIC_ADMINAPI,
          .scenario = "noautocreate"),
    _TEST(8001_fetch_from_follower_mock_manual, TEST_F_MANUAL),
};
"""


def test_broker_facing_tests_are_the_table_entries_neither_local_nor_manual_with_their_scenario(
        tmp_path: Path) -> None:
    (tmp_path / "test.c").write_text(TABLE)
    assert runner().broker_tests(tmp_path) == {
        "0001_multiobj": "default", "0028_long_topicnames": "default", "0055_producer_latency": "default",
        "0103_transactions": "default", "0107_topic_recreate": "noautocreate"}


def test_every_scenario_of_librdkafkas_table_has_a_cluster_setup() -> None:
    module = runner()
    assert set(module.SCENARIO_CONFIG) == {"default", "noautocreate"}


def test_the_allowlist_names_each_excluded_test_with_a_reason() -> None:
    module = runner()
    excluded = module.read_allowlist(module.DEFAULT_ALLOWLIST)
    assert excluded and all(name[:4].isdigit() and reason for name, reason in excluded.items())


def test_summary_rows_are_read_without_colours() -> None:
    module = runner()
    output = ("\x1b[32m 0001_multiobj                            |     PASSED |   1.173s \x1b[0m|\n"
              "|\x1b[36m 0053_stats                               |    SKIPPED |   0.200s \x1b[0m|")
    rows = dict(module._SUMMARY_ROW.findall(module._ANSI.sub("", "|" + output)))
    assert rows == {"0001_multiobj": "PASSED", "0053_stats": "SKIPPED"}


def test_tests_run_two_at_once_and_a_dead_cluster_is_replaced_only_between_tests(monkeypatch: Any,
                                                                                  tmp_path: Path) -> None:
    """At most `--jobs` tests at once, every outcome reported, and a restart waits until none is running."""
    module = runner()
    lock = threading.Lock()
    state = {"running": 0, "most": 0, "starts": 0, "alive_checks": 0}
    restarted_while_running: list[int] = []

    def start(directory: Path, scenario: str) -> Any:
        with lock:
            state["starts"] += 1
            if state["running"]:
                restarted_while_running.append(state["running"])
        return SimpleNamespace(bootstrap="127.0.0.1:1")

    def alive(directory: Path) -> bool:
        state["alive_checks"] += 1
        return state["alive_checks"] != 3  # a node dies once, before the third test

    def run_test(tests_dir: Path, name: str, *rest: Any) -> Any:
        with lock:
            state["running"] += 1
            state["most"] = max(state["most"], state["running"])
        time.sleep(0.05)
        with lock:
            state["running"] -= 1
        return module.Outcome(name, "PASSED", "", 0.05)

    monkeypatch.setattr(module, "start_cluster", start)
    monkeypatch.setattr(module, "stop_cluster", lambda directory: None)
    monkeypatch.setattr(module, "cluster_alive", alive)
    monkeypatch.setattr(module, "kafka_path", lambda work: None)
    monkeypatch.setattr(module, "run_test", run_test)
    names = [f"00{n:02d}_t" for n in range(6)]
    args = SimpleNamespace(jobs=2, kafka_version="4.1", timeout_s=10.0)
    outcomes = module.run_scenario(tmp_path, "default", names, tmp_path, args)
    assert sorted(o.name for o in outcomes) == names and state["most"] == 2
    assert state["starts"] == 2 and restarted_while_running == []
