"""The librdkafka suite runner's reading of test.c's table, the allowlist and test-runner's summary
(tools/compat/run_librdkafka_tests.py; the suite itself runs in `make compat`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

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
