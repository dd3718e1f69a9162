"""Log dir layout: Kafka's names, the placement rule, and what start-up makes of a move's leftovers."""

from __future__ import annotations

import pytest

from insync.storage.log_dir_layout import (
    LogDirLayoutError,
    LogKind,
    LogName,
    delete_name,
    future_name,
    next_log_dir,
    parse_log_name,
    plan_start_up,
)
from insync.types import TopicPartition

TP = TopicPartition("orders.eu-1", 7)
TOKEN = "0123456789abcdef0123456789abcdef"


def test_names_round_trip_as_kafka_spells_them() -> None:
    assert future_name(TP, TOKEN) == f"orders.eu-1-7.{TOKEN}-future"
    assert delete_name(TP, TOKEN) == f"orders.eu-1-7.{TOKEN}-delete"
    assert parse_log_name("orders.eu-1-7") == LogName(TP, LogKind.CURRENT)
    assert parse_log_name(future_name(TP, TOKEN)) == LogName(TP, LogKind.FUTURE)
    assert parse_log_name(delete_name(TP, TOKEN)) == LogName(TP, LogKind.DELETE)
    for other in ("events.jsonl", "replication-offset-checkpoint", f"orders-0.{TOKEN}-stray", "orders-0.abc-future"):
        assert parse_log_name(other) is None


def test_a_new_log_goes_to_the_dir_with_fewest_logs_the_first_listed_among_equals() -> None:
    assert next_log_dir(("/a", "/b", "/c"), {}) == "/a"
    assert next_log_dir(("/a", "/b", "/c"), {"/a": 2, "/b": 1, "/c": 1}) == "/b"
    assert next_log_dir(("/a", "/b"), {"/a": 0, "/b": 3, "/gone": 0}) == "/a"


def test_a_partition_in_two_dirs_is_refused_naming_both() -> None:
    with pytest.raises(LogDirLayoutError, match=r"/a/orders.eu-1-7 and /b/orders.eu-1-7"):
        plan_start_up({"/a": ["orders.eu-1-7"], "/b": ["orders.eu-1-7"]})


def test_a_future_copy_beside_its_current_log_resumes_and_delete_copies_go() -> None:
    plan = plan_start_up({"/a": ["orders.eu-1-7", "events.jsonl", delete_name(TopicPartition("x", 0), TOKEN)],
                          "/b": [future_name(TP, TOKEN)]})
    assert plan.current == {TP: ("/a", "orders.eu-1-7")}
    assert plan.future == {TP: ("/b", future_name(TP, TOKEN))}
    assert plan.promote == {} and plan.delete == [("/a", delete_name(TopicPartition("x", 0), TOKEN))]


def test_a_future_copy_left_alone_by_a_swap_is_promoted() -> None:
    plan = plan_start_up({"/a": [delete_name(TP, TOKEN)], "/b": [future_name(TP, TOKEN)]})
    assert plan.current == {} and plan.future == {}
    assert plan.promote == {TP: ("/b", future_name(TP, TOKEN))}
    assert plan.delete == [("/a", delete_name(TP, TOKEN))]


def test_a_future_copy_alone_without_a_delete_copy_is_refused() -> None:
    with pytest.raises(LogDirLayoutError, match=r"/b/orders.eu-1-7\..*-future is a future copy of orders.eu-1-7"):
        plan_start_up({"/a": [], "/b": [future_name(TP, TOKEN)]})
