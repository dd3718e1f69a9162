"""The checker on hand-made histories: each anomaly once, and the histories it must not flag."""

from __future__ import annotations

from pathlib import Path

import pytest
from hand_history import HandHistory
from hypothesis import given
from hypothesis import strategies as st

from insync.chaos import checker
from insync.chaos.ops import HistoryWriter, Op, read_history
from insync.config import ConfigError

ALL = "acks=all,idempotent"


class H(HandHistory):
    """A history written by hand, one op a call, 10 ms apart."""

    def send(self, value: str, partition: int, offset: int | None, label: str = ALL, outcome: str = "ok") -> H:
        self.op(value.split("-")[0], "invoke", "send", value=value, label=label)
        if outcome == "ok":
            return self.op(value.split("-")[0], "ok", "send", value=value, partition=partition, offset=offset)
        return self.op(value.split("-")[0], outcome, "send", value=value, error="REQUEST_TIMED_OUT")

    def poll(self, process: str, *records: tuple[int, int, str]) -> H:
        return self.op(process, "ok", "poll", records=records)

    def complete(self, process: str, partition: int, end: int) -> H:
        return self.op(process, "ok", "complete-read", partition=partition, offset=end)

    def check(self) -> checker.Check:
        return checker.check(self.ops)


def kinds(result: checker.Check) -> list[str]:
    return sorted(a.kind for a in result.anomalies)


def clean() -> H:
    """Three writes to partition 0, read by a consumer and completely by the final reader."""
    h = H().send("p0-0", 0, 0).send("p0-1", 0, 1).send("p0-2", 0, 2)
    h.poll("c0", (0, 0, "p0-0"), (0, 1, "p0-1")).poll("c0", (0, 2, "p0-2"))
    return h.poll("final", (0, 0, "p0-0"), (0, 1, "p0-1"), (0, 2, "p0-2")).complete("final", 0, 3)


def test_a_clean_history_has_no_anomaly() -> None:
    result = clean().check()
    assert result.anomalies == () and result.ok
    assert result.sends == {"ok": 3} and result.reads == 6 and result.complete_partitions == (0,)
    assert set(result.counts) == set(checker.KINDS) and not any(result.counts.values())


def test_lost_write_absent_from_a_complete_read_even_if_a_consumer_saw_it() -> None:
    h = H().send("p0-0", 0, 0).send("p0-1", 0, 1).poll("c0", (0, 0, "p0-0"), (0, 1, "p0-1"))
    result = h.poll("final", (0, 0, "p0-0")).complete("final", 0, 1).check()
    [lost] = result.anomalies
    assert (lost.kind, lost.partition, lost.offsets, lost.values, lost.labels) == \
        ("lost-write", 0, (1,), ("p0-1",), (ALL,))
    assert lost.forbidden and not result.ok


def test_lost_write_without_a_complete_read_when_a_later_offset_was_read() -> None:
    result = H().send("p0-0", 0, 0).send("p0-1", 0, 1).poll("c0", (0, 1, "p0-1")).check()
    assert kinds(result) == ["lost-write"] and result.anomalies[0].values == ("p0-0",)


def test_unseen_when_nothing_read_that_far_and_no_complete_read() -> None:
    result = H().send("p0-0", 0, 0).send("p0-1", 0, 1).poll("c0", (0, 0, "p0-0")).check()
    [unseen] = result.anomalies
    assert unseen.kind == "unseen" and unseen.values == ("p0-1",) and not unseen.forbidden and result.ok


def test_an_acknowledgement_without_an_offset_is_checked_by_value() -> None:
    """librdkafka acknowledges a batch whose answer it lost once a later one's sequence is accepted, with no
    offset: found by value in the complete read, else lost; unseen (never lost) without a complete read."""
    h = H().send("p0-0", 0, None).send("p0-1", 0, 1).send("p0-2", 0, None)
    result = h.poll("final", (0, 0, "p0-0"), (0, 1, "p0-1")).complete("final", 0, 2).check()
    [lost] = result.anomalies
    assert (lost.kind, lost.offsets, lost.values, lost.detail) == \
        ("lost-write", (), ("p0-2",), "acknowledged at partition 0")
    partial = H().send("p0-0", 0, 0).send("p0-1", 0, None).poll("c0", (0, 0, "p0-0")).check()
    assert kinds(partial) == ["unseen"] and partial.ok


def test_acks_1_loss_is_reported_but_not_forbidden() -> None:
    h = H().send("p1-0", 0, 0, label="acks=1").send("p1-1", 0, 1, label="acks=1")
    result = h.poll("final", (0, 0, "p1-0")).complete("final", 0, 1).check()
    assert kinds(result) == ["lost-write"] and result.ok
    assert result.counts_by_label() == {"acks=1": {"lost-write": 1}}


def test_duplicate_one_value_at_two_offsets() -> None:
    h = H().send("p0-0", 0, 0).poll("final", (0, 0, "p0-0"), (0, 1, "p0-0")).complete("final", 0, 2)
    [dup] = h.check().anomalies
    assert (dup.kind, dup.offsets, dup.values, dup.forbidden) == ("duplicate", (0, 1), ("p0-0",), True)


def test_duplicate_from_a_producer_without_idempotence_is_not_forbidden() -> None:
    h = H().send("p2-0", 0, 0, label="acks=all").poll("final", (0, 0, "p2-0"), (0, 1, "p2-0"))
    assert kinds(h.check()) == ["duplicate"] and h.check().ok


def resent_after_a_bump(bumper: str, between: bool) -> H:
    """p0-0 written at 0 and, retried under a new epoch, at 1 (acknowledged there), as in librdkafka#4953."""
    h = H().op("p0", "invoke", "send", value="p0-0", label=ALL)
    if between:
        h.op(bumper, "info", "epoch-bump", label="PID{Id:7,Epoch:1}")
    h.op("p0", "ok", "send", value="p0-0", partition=0, offset=1)
    if not between:
        h.op(bumper, "info", "epoch-bump", label="PID{Id:7,Epoch:1}")
    return h.poll("final", (0, 0, "p0-0"), (0, 1, "p0-0")).complete("final", 0, 2)


def test_an_idempotent_duplicate_across_its_clients_epoch_bump_is_the_clients_defect_not_forbidden() -> None:
    [dup] = resent_after_a_bump("p0", between=True).check().anomalies
    assert (dup.kind, dup.client_defect, dup.forbidden) == ("duplicate", "confluentinc/librdkafka#4953", False)
    assert "bumped its epoch to PID{Id:7,Epoch:1}" in dup.detail and dup.to_json()["forbidden"] is False


@pytest.mark.parametrize(("bumper", "between"), [("p0", False), ("p1", True)])
def test_an_epoch_bump_after_the_send_or_by_another_producer_excuses_nothing(bumper: str, between: bool) -> None:
    [dup] = resent_after_a_bump(bumper, between).check().anomalies
    assert (dup.kind, dup.client_defect, dup.forbidden) == ("duplicate", "", True)


def test_inconsistent_offsets_across_readers_and_against_the_acknowledgement() -> None:
    h = H().send("p0-0", 0, 0).send("p0-1", 0, 1).poll("c0", (0, 0, "p0-0"), (0, 1, "p0-1"))
    h.poll("r0", (0, 0, "p0-0"), (0, 1, "p0-9"))
    inconsistent = [a for a in h.check().anomalies if a.kind == "inconsistent-offsets"]
    assert [(a.partition, a.offsets, a.values) for a in inconsistent] == [(0, (1,), ("p0-1", "p0-9"))]
    assert inconsistent[0].forbidden


def test_an_acks_1_offset_truncated_and_reused_is_not_forbidden() -> None:
    h = H().send("p1-0", 0, 0, label="acks=1").send("p0-0", 0, 0)
    result = h.poll("final", (0, 0, "p0-0")).complete("final", 0, 1).check()
    assert kinds(result) == ["inconsistent-offsets", "lost-write"] and result.ok


def test_nonmonotonic_send_an_idempotent_producer_reordered() -> None:
    h = H().send("p0-0", 0, 1).send("p0-1", 0, 0).send("p0-2", 1, 0).send("p0-3", 0, 2)
    h.send("p2-0", 0, 4, label="acks=1").send("p2-1", 0, 3, label="acks=1")
    result = h.poll("final", *((0, o, v) for o, v in enumerate(["p0-1", "p0-0", "p0-3", "p2-1", "p2-0"])))
    result.poll("final", (1, 0, "p0-2")).complete("final", 1, 1)
    [reordered, allowed] = result.complete("final", 0, 5).check().anomalies
    assert (reordered.kind, reordered.offsets, reordered.values, reordered.forbidden) == \
        ("nonmonotonic-send", (1, 0), ("p0-0", "p0-1"), True)
    assert (allowed.kind, allowed.values, allowed.forbidden) == ("nonmonotonic-send", ("p2-0", "p2-1"), False)


def test_nonmonotonic_poll_and_poll_skip_within_a_consumer() -> None:
    h = clean()
    h.poll("c1", (0, 1, "p0-1")).poll("c1", (0, 1, "p0-1"))
    h.poll("c2", (0, 0, "p0-0"), (0, 2, "p0-2"))
    result = h.check()
    assert kinds(result) == ["nonmonotonic-poll", "poll-skip"]
    skip = next(a for a in result.anomalies if a.kind == "poll-skip")
    assert (skip.processes, skip.offsets, skip.labels, skip.forbidden) == (("c2",), (0, 2), (ALL,), True)


def test_a_skip_names_what_its_client_reported_in_between_and_stays_forbidden() -> None:
    h = clean().poll("r0", (0, 0, "p0-0"))
    h.op("r0", "info", "client-error", partition=0, error="_LOG_TRUNCATION: Partition log truncation detected")
    h.op("r0", "info", "client-error", partition=1, error="_AUTO_OFFSET_RESET: another partition's")
    [skip] = h.poll("r0", (0, 2, "p0-2")).check().anomalies
    assert (skip.kind, skip.forbidden) == ("poll-skip", True)
    assert skip.detail == "r0 polled 0:0 then 0:2, its client reporting _LOG_TRUNCATION: Partition log truncation detected"


def test_examples_list_the_forbidden_anomalies_first() -> None:
    h = H().send("p1-0", 0, 0, label="acks=1").send("p0-0", 0, 1).send("p0-1", 0, 2)
    result = h.poll("final", (0, 2, "p0-1")).complete("final", 0, 3).check()
    assert [(a["kind"], a["values"], a["forbidden"]) for a in result.examples(2)] == \
        [("lost-write", ("p0-0",), True), ("lost-write", ("p1-0",), False)]


def test_no_poll_anomaly_across_a_rebalance_or_a_seek() -> None:
    h = clean()
    h.poll("c1", (0, 2, "p0-2")).op("c1", "info", "assign", partitions=(0, 1)).poll("c1", (0, 0, "p0-0"))
    h.poll("r0", (0, 0, "p0-0")).op("r0", "info", "seek", partition=0, offset=2).poll("r0", (0, 2, "p0-2"))
    h.op("r0", "info", "seek", partition=0, offset=0).poll("r0", (0, 0, "p0-0"))
    assert clean().check().anomalies == h.check().anomalies == ()


def test_a_failed_seek_moves_nothing() -> None:
    h = clean().poll("r0", (0, 2, "p0-2")).op("r0", "fail", "seek", partition=0, offset=0).poll("r0", (0, 0, "p0-0"))
    assert kinds(h.check()) == ["nonmonotonic-poll"]


def test_a_gap_nothing_fills_is_not_a_skip() -> None:
    h = H().send("p0-0", 0, 0).send("p0-1", 0, 2).poll("c0", (0, 0, "p0-0")).poll("c0", (0, 2, "p0-1"))
    assert h.check().anomalies == ()


def test_unacknowledged_but_present_is_information() -> None:
    h = H().send("p0-0", 0, None, outcome="info").send("p0-1", 0, None, outcome="fail")
    result = h.poll("final", (0, 0, "p0-0")).complete("final", 0, 1).check()
    assert kinds(result) == ["unacknowledged-but-present"] and result.ok
    assert result.sends == {"info": 1, "fail": 1}


def test_anomalies_name_the_faults_active_in_their_window() -> None:
    h = H().op("nemesis", "info", "start", fault="pause broker 2").send("p0-0", 0, 0)
    h.op("nemesis", "info", "stop", fault="pause broker 2")
    for _ in range(1200):  # two minutes later: past the loss window of p0-0
        h.op("c9", "ok", "poll")
    h.op("nemesis", "info", "start", fault="kill broker 1").send("p0-1", 0, 1)
    result = h.poll("final").complete("final", 0, 2).check()
    assert [(a.values, a.faults) for a in result.anomalies] == [(("p0-0",), ("pause broker 2",)),
                                                                 (("p0-1",), ("kill broker 1",))]
    assert [f[0] for f in result.faults] == ["pause broker 2", "kill broker 1"]


def test_history_round_trips_through_the_file(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path / "history.jsonl")
    writer.append("p0", "invoke", "send", value="p0-0", label=ALL)
    writer.append("p0", "ok", "send", value="p0-0", partition=1, offset=7)
    writer.append("final", "ok", "poll", records=((1, 7, "p0-0"),))
    writer.append("c0", "info", "assign", partitions=(0, 1))
    writer.close()
    ops = read_history(tmp_path / "history.jsonl")
    assert [(o.process, o.type, o.f) for o in ops] == [("p0", "invoke", "send"), ("p0", "ok", "send"),
                                                      ("final", "ok", "poll"), ("c0", "info", "assign")]
    assert ops[1].offset == 7 and ops[2].records == ((1, 7, "p0-0"),) and ops[3].partitions == (0, 1)
    assert [o.time_ms for o in ops] == sorted(o.time_ms for o in ops)


@pytest.mark.parametrize(("line", "message"), [
    ('{"time_ms": 1, "process": "p0", "type": "maybe", "f": "send"}', "type must be one of"),
    ('{"time_ms": 1, "process": "p0", "type": "ok", "f": "fly"}', "f must be one of"),
    ('{"time_ms": 1, "process": "p0", "type": "ok", "f": "send", "colour": 1}', "unknown field colour"),
    ('{"process": "p0", "type": "ok", "f": "send"}', "time_ms"),
    ('[1, 2]', "not a JSON object"),
    ('{"time_ms": 1', "h.jsonl:2"),
])
def test_a_malformed_history_line_is_named(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"time_ms": 0, "process": "p0", "type": "invoke", "f": "send", "value": "p0-0"}\n' + line + "\n")
    with pytest.raises(ConfigError, match=message):
        read_history(path)


@st.composite
def clean_histories(draw: st.DrawFn) -> tuple[H, list[tuple[int, int, str]]]:
    """A faultless run: sends acknowledged at consecutive offsets of 2 partitions, a consumer reading chunks in
    order with rebalances that go back to any earlier offset, and a complete final read."""
    h, logs = H(), {0: [], 1: []}
    for i in range(draw(st.integers(1, 30))):
        producer, partition = draw(st.sampled_from(["p0", "p1", "p2"])), draw(st.integers(0, 1))
        label = {"p0": ALL, "p1": "acks=all", "p2": "acks=1"}[producer]
        value = f"{producer}-{i}"
        h.send(value, partition, len(logs[partition]), label=label)
        logs[partition].append(value)
    for partition, log in logs.items():
        position = 0
        while position < len(log):  # bounded: each pass reads at least one record
            if draw(st.booleans()):
                h.op("c0", "info", "assign", partitions=(0, 1))
                position = draw(st.integers(0, position))
            end = draw(st.integers(position + 1, len(log)))
            h.poll("c0", *((partition, o, log[o]) for o in range(position, end)))
            position = end
    records = [(p, o, v) for p, log in logs.items() for o, v in enumerate(log)]
    h.poll("final", *records)
    for partition, log in logs.items():
        h.complete("final", partition, len(log))
    return h, records


@given(clean_histories())
def test_a_faultless_history_never_has_an_anomaly(case: tuple[H, list[tuple[int, int, str]]]) -> None:
    h, _ = case
    assert h.check().anomalies == ()


@given(clean_histories(), st.data())
def test_an_acknowledged_record_missing_from_the_final_read_is_always_lost(
        case: tuple[H, list[tuple[int, int, str]]], data: st.DataObject) -> None:
    h, records = case
    missing = data.draw(st.sampled_from(records))
    final = next(i for i, op in enumerate(h.ops) if op.process == "final")
    h.ops[final] = Op(h.ops[final].time_ms, "final", "ok", "poll", records=tuple(r for r in records if r != missing))
    lost = [a for a in h.check().anomalies if a.kind == "lost-write"]
    assert [(a.partition, a.offsets, a.values) for a in lost] == [(missing[0], (missing[1],), (missing[2],))]
