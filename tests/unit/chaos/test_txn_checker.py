"""The transactional checks on hand-made histories: each rule planted once, and what they must not flag.

The log the histories describe: transaction t0-0 (committed) wrote p0:0 and p1:1, t0-1 (aborted on purpose)
wrote p0:2 and p2:0; their markers take p0:1, p1:2, p0:3 and p2:1. A plain acks=all send is at p1:0 and p1:3.
"""

from __future__ import annotations

from pathlib import Path

from hand_history import HandHistory

from insync.chaos import checker
from insync.chaos.ops import HistoryWriter, read_history
from insync.chaos.txn_workload import LABEL

RC, RU = "read_committed", "read_uncommitted"
COMMITTED = {"t0-0.0": (0, 0), "t0-0.1": (1, 1)}
ABORTED = {"t0-1.0": (0, 2), "t0-1.1": (2, 0)}


class History(HandHistory):
    """Ops one a call, 10 ms apart."""

    def txn(self, name: str, records: dict[str, tuple[int, int]], end: str = "commit", outcome: str = "ok") -> History:
        self.op("t0", "invoke", "txn-begin", txn=name, label=LABEL).op("t0", "ok", "txn-begin", txn=name)
        for value, (partition, offset) in records.items():
            self.op("t0", "invoke", "send", value=value, label=LABEL, txn=name)
            self.op("t0", "ok", "send", value=value, partition=partition, offset=offset, txn=name)
        f = f"txn-{end}"
        return self.op("t0", "invoke", f, txn=name).op("t0", outcome, f, txn=name)

    def plain(self, value: str, partition: int, offset: int) -> History:
        self.op("p0", "invoke", "send", value=value, label="acks=all")
        return self.op("p0", "ok", "send", value=value, partition=partition, offset=offset)

    def reads(self, process: str, isolation: str, *records: tuple[int, int, str]) -> History:
        return self.op(process, "info", "assign", partitions=(0, 1, 2), label=isolation).poll(process, *records)

    def poll(self, process: str, *records: tuple[int, int, str]) -> History:
        return self.op(process, "ok", "poll", records=records)

    def complete(self, process: str, ends: dict[int, int]) -> History:
        for partition, end in ends.items():
            self.op(process, "ok", "complete-read", partition=partition, offset=end)
        return self


ENDS = {0: 4, 1: 4, 2: 2}
FINAL_RC = ((0, 0, "t0-0.0"), (1, 0, "p0-0"), (1, 1, "t0-0.1"), (1, 3, "p0-1"))
FINAL_RU = (*FINAL_RC, (0, 2, "t0-1.0"), (2, 0, "t0-1.1"))


def writes() -> History:
    return History().txn("t0-0", COMMITTED).plain("p0-0", 1, 0).txn("t0-1", ABORTED, end="abort") \
        .plain("p0-1", 1, 3)


def finals(h: History, rc: tuple[tuple[int, int, str], ...] = FINAL_RC) -> checker.Check:
    h.reads("final-ru", RU, *FINAL_RU).complete("final-ru", ENDS).reads("final", RC, *rc).complete("final", ENDS)
    return checker.check(h.ops)


def kinds(result: checker.Check) -> list[str]:
    return sorted(a.kind for a in result.anomalies)


def test_a_clean_transactional_history_has_no_anomaly_and_counts_its_transactions() -> None:
    h = writes().reads("r0", RC, (1, 0, "p0-0"), (1, 1, "t0-0.1"), (1, 3, "p0-1"), (0, 0, "t0-0.0"))
    result = finals(h)
    assert result.anomalies == () and result.ok, result.examples(5)
    assert result.transactions == {"committed": 1, "aborted": 1, "unknown": 0}
    assert result.complete_partitions == (0, 1, 2)


def test_a_read_committed_reader_jumping_over_aborted_records_is_no_poll_skip_but_a_read_uncommitted_one_is() -> None:
    h = writes().plain("p0-2", 0, 4)
    h.reads("r0", RC, (0, 0, "t0-0.0"), (0, 4, "p0-2")).reads("r1", RU, (0, 0, "t0-0.0"), (0, 4, "p0-2"))
    result = finals(h, (*FINAL_RC, (0, 4, "p0-2")))
    (skip,) = result.anomalies
    assert (skip.kind, skip.processes, skip.forbidden) == ("poll-skip", ("r1",), True)


def test_an_acks_1_write_lost_where_a_marker_now_is_is_no_poll_skip() -> None:
    h = writes().plain("p0-2", 0, 4)
    h.op("p1", "invoke", "send", value="p1-0", label="acks=1").op("p1", "ok", "send", value="p1-0", partition=0,
                                                                    offset=5)  # then truncated: a marker took 0:5
    h.plain("p0-3", 0, 6).reads("r0", RC, (0, 4, "p0-2"), (0, 6, "p0-3"))
    result = finals(h, (*FINAL_RC, (0, 4, "p0-2"), (0, 6, "p0-3")))
    assert kinds(result) == ["lost-write"] and result.ok  # the acks=1 loss, allowed


def test_aborted_read_a_read_committed_reader_returns_an_aborted_record() -> None:
    result = finals(writes().reads("r0", RC, (2, 0, "t0-1.1")))
    anomaly, torn = result.anomalies  # and torn, as the simulator's rule has it: seen in part
    assert anomaly.kind == "aborted-read" and anomaly.forbidden and anomaly.labels == (LABEL,)
    assert torn.kind == "torn-transaction" and torn.forbidden
    assert anomaly.values == ("t0-1.1",) and "r0" in anomaly.processes


def test_aborted_read_of_a_transaction_never_committed_in_the_final_read() -> None:
    h = writes().op("t0", "invoke", "txn-begin", txn="t0-2", label=LABEL).op("t0", "ok", "txn-begin", txn="t0-2")
    h.op("t0", "invoke", "send", value="t0-2.0", label=LABEL, txn="t0-2")
    h.op("t0", "ok", "send", value="t0-2.0", partition=2, offset=2, txn="t0-2")  # then the producer was fenced
    result = finals(h, (*FINAL_RC, (2, 2, "t0-2.0")))
    assert kinds(result) == ["aborted-read"] and not result.ok  # all it wrote is seen: not torn
    assert result.transactions == {"committed": 1, "aborted": 2, "unknown": 0}


def test_torn_transaction_the_complete_read_committed_read_shows_part_of_a_committed_one() -> None:
    result = finals(writes(), tuple(r for r in FINAL_RC if r[2] != "t0-0.1"))
    (anomaly,) = result.anomalies
    assert anomaly.kind == "torn-transaction" and anomaly.forbidden and anomaly.values == ("t0-0.1",)


def test_torn_transaction_a_reader_passes_over_a_committed_record_between_two_it_read() -> None:
    result = finals(writes().reads("r0", RC, (1, 0, "p0-0"), (1, 3, "p0-1")))
    (anomaly,) = result.anomalies
    assert anomaly.kind == "torn-transaction" and "r0" in anomaly.processes and anomaly.offsets == (1,)


def test_a_seek_between_two_reads_is_no_pass_over() -> None:
    h = writes().reads("r0", RC, (1, 0, "p0-0")).op("r0", "info", "seek", partition=1, offset=0)
    assert finals(h.poll("r0", (1, 3, "p0-1"))).anomalies == ()


def test_lost_write_a_committed_record_in_neither_complete_read() -> None:
    h = writes()
    ru = tuple(r for r in FINAL_RU if r[2] != "t0-0.1")
    h.reads("final-ru", RU, *ru).complete("final-ru", ENDS)
    result = checker.check(h.reads("final", RC, *(r for r in FINAL_RC if r[2] != "t0-0.1"))
                           .complete("final", ENDS).ops)
    skip, anomaly = result.anomalies  # the read_uncommitted reader jumped over its offset
    assert anomaly.kind == "lost-write" and anomaly.forbidden and anomaly.values == ("t0-0.1",)
    assert skip.kind == "poll-skip" and skip.processes == ("final-ru",)


def test_duplicate_a_committed_record_at_two_offsets() -> None:
    result = finals(writes().reads("r0", RC, (1, 1, "t0-0.1"), (1, 3, "t0-0.1")))
    assert "duplicate" in kinds(result) and all(a.forbidden for a in result.anomalies)


def test_an_unknown_commit_may_go_either_way_but_all_or_nothing() -> None:
    unknown = {"t0-2.0": (0, 4), "t0-2.1": (2, 2)}
    both = ((0, 4, "t0-2.0"), (2, 2, "t0-2.1"))
    committed = writes().txn("t0-2", unknown, outcome="info")
    assert finals(committed, (*FINAL_RC, *both)).anomalies == ()
    assert finals(writes().txn("t0-2", unknown, outcome="info")).anomalies == ()
    assert finals(writes().txn("t0-2", unknown, outcome="info")).transactions["unknown"] == 1
    torn = finals(writes().txn("t0-2", unknown, outcome="info"), (*FINAL_RC, both[0]))
    assert kinds(torn) == ["torn-transaction"] and not torn.ok
    unanswered = writes().txn("t0-2", unknown)
    unanswered.ops.pop()  # the commit's invoke, and nothing after it
    assert finals(unanswered, (*FINAL_RC, *both)).anomalies == ()


def test_nonmonotonic_send_within_the_committed_stream() -> None:
    h = writes().txn("t0-2", {"t0-2.0": (1, 0)})  # after t0-0's record at 1:1
    result = finals(h, (*FINAL_RC, (1, 0, "t0-2.0")))
    assert "nonmonotonic-send" in kinds(result) and not result.ok


def test_transactional_ops_round_trip_through_the_file(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path / "history.jsonl")
    writer.append("t0", "invoke", "txn-commit", txn="t0-3")
    writer.append("t0", "info", "txn-commit", txn="t0-3", error="_TIMED_OUT")
    writer.close()
    ops = read_history(tmp_path / "history.jsonl")
    assert [(op.f, op.type, op.txn, op.error) for op in ops] == [("txn-commit", "invoke", "t0-3", None),
                                                                 ("txn-commit", "info", "t0-3", "_TIMED_OUT")]
