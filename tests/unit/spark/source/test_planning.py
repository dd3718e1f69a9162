"""`planning.Unanswered`: a partition whose leader did not answer stays at its position for the micro-batch (read
later: nothing lost, nothing twice), the others go on; the skip and the recovery are logged; a cluster that answers
nothing plans nothing, and fails the query after kafkaConsumer.pollTimeoutMs."""

from __future__ import annotations

import logging

import pytest

from insync.spark.source.planning import Unanswered
from insync.types import TopicPartition

A, B, C = TopicPartition("e", 0), TopicPartition("e", 1), TopicPartition("e", 2)


def test_an_unanswered_partition_stays_where_it_was_and_the_others_advance(caplog: pytest.LogCaptureFixture) -> None:
    unanswered = Unanswered(poll_timeout_ms=10_000)
    caplog.set_level(logging.WARNING)
    begin = {A: 10, B: 20}
    assert unanswered.hold(begin, {A: 15}, {B: "its leader did not answer ListOffsets within 3 s"}) == {A: 15, B: 20}
    assert "skipping e-1 in this micro-batch" in caplog.text
    assert "did not answer ListOffsets within 3 s" in caplog.text
    caplog.clear()
    assert unanswered.hold({A: 15, B: 20}, {A: 16}, {B: "again"}) == {A: 16, B: 20}
    assert caplog.text == ""  # told once, not at every micro-batch
    assert unanswered.hold({A: 16, B: 20}, {A: 16, B: 25}, {}) == {A: 16, B: 25}
    assert "answered again" in caplog.text and "after 2 micro-batches" in caplog.text


def test_a_new_partition_that_does_not_answer_is_left_out_until_it_does() -> None:
    assert Unanswered(10_000).hold({A: 1}, {A: 2}, {C: "no leader"}) == {A: 2}


def test_no_answer_at_all_plans_nothing_until_the_poll_timeout_then_fails_naming_it() -> None:
    unanswered = Unanswered(poll_timeout_ms=5_000)
    unanswered.nothing("Failed to get metadata", now_s=100.0)
    unanswered.nothing("Failed to get metadata", now_s=104.0)
    with pytest.raises(TimeoutError, match=r"kafkaConsumer.pollTimeoutMs=5000\): Failed to get metadata"):
        unanswered.nothing("Failed to get metadata", now_s=105.0)
    unanswered.hold({}, {A: 1}, {})  # an answer starts the count again
    unanswered.nothing("down", now_s=200.0)
