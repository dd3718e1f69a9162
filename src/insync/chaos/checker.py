"""The verdict on a history (chaos/ops.py), with the anomaly names of Jepsen's Kafka workload.

From the values seen at each (partition, offset) and the offsets each value was seen at:
- `lost-write`: acknowledged, absent from a complete read of its partition, or, without one, never read though a
  read reached a higher offset (Jepsen's rule); `unseen`: acknowledged, never read, without that evidence;
- `duplicate`: one value at two or more offsets; `inconsistent-offsets`: one offset holding two or more values;
  `nonmonotonic-send`: one producer's acknowledged sends to a partition at offsets that go down in send order;
- `nonmonotonic-poll` and `poll-skip` (an offset known to hold a value jumped over); an `assign` op resets a
  process's positions and a `seek` that partition's, so rereading after a rebalance is neither;
  `unacknowledged-but-present`, for information: a failed or unknown send, read anyway.
Each anomaly carries its records, producer labels and the faults active in its window. `forbidden` says which the
producers' guarantees rule out: lost writes under acks=all, duplicates and reordered sends from an idempotent
producer (unless its client bumped its epoch in between: `client_defect`), inconsistent offsets unless an acks=1
write is involved, any poll anomaly, and all chaos/txn_checker.py finds in the transactional producer's records."""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace

from insync.chaos import txn_checker
from insync.chaos.ops import Op
from insync.chaos.txn_workload import LABEL as TXN

KINDS = ("lost-write", "unseen", "duplicate", "inconsistent-offsets", "nonmonotonic-send", "nonmonotonic-poll",
         "poll-skip", "unacknowledged-but-present", "aborted-read", "torn-transaction")
INFORMATION = ("unseen", "unacknowledged-but-present")
# A write acknowledged and then lost was lost by a fault around its acknowledgement: its window reaches this far
# past the acknowledgement (a leader killed a few seconds after acking, before its followers fetched).
LOSS_WINDOW_MS = 10_000.0


@dataclass(frozen=True, slots=True)
class Anomaly:
    kind: str
    partition: int | None
    offsets: tuple[int, ...]
    values: tuple[str, ...]
    processes: tuple[str, ...]
    labels: tuple[str, ...]
    window_ms: tuple[float, float]
    faults: tuple[str, ...] = ()
    detail: str = ""
    client_defect: str = ""  # a known client defect the history shows at work in the window: not the log's doing

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "forbidden": self.forbidden}

    @property
    def forbidden(self) -> bool:
        if self.kind in INFORMATION or self.client_defect:
            return False
        if TXN in self.labels and self.kind in ("lost-write", "duplicate", "nonmonotonic-send"):
            return True
        if self.kind == "lost-write":
            return any("acks=all" in label for label in self.labels)
        if self.kind in ("duplicate", "nonmonotonic-send"):
            return any("idempotent" in label for label in self.labels)
        if self.kind == "inconsistent-offsets":
            return not any("acks=1" in label for label in self.labels)
        return True


@dataclass(frozen=True, slots=True)
class Send:
    value: str
    process: str
    label: str
    invoke_ms: float
    outcome: str = "none"  # ok | fail | info | none (no completion in the history)
    done_ms: float | None = None
    partition: int | None = None
    offset: int | None = None


@dataclass(frozen=True, slots=True)
class Check:
    anomalies: tuple[Anomaly, ...]
    sends: dict[str, int]  # outcome -> count
    reads: int  # records polled, all processes
    complete_partitions: tuple[int, ...]
    faults: tuple[tuple[str, float, float], ...]
    counts: dict[str, int] = field(default_factory=dict)
    transactions: dict[str, int] = field(default_factory=dict)  # outcome -> count, with a transactional producer

    @property
    def forbidden(self) -> tuple[Anomaly, ...]:
        return tuple(a for a in self.anomalies if a.forbidden)

    @property
    def ok(self) -> bool:
        return not self.forbidden

    def examples(self, count: int) -> list[dict[str, object]]:
        """The first `count` anomalies as JSON, the forbidden ones first."""
        ordered = sorted(self.anomalies, key=lambda a: not a.forbidden)
        return [a.to_json() for a in ordered[:count]]

    def counts_by_label(self) -> dict[str, dict[str, int]]:
        table: dict[str, Counter[str]] = defaultdict(Counter)
        for anomaly in self.anomalies:
            for label in anomaly.labels or ("-",):
                table[label][anomaly.kind] += 1
        return {label: dict(kinds) for label, kinds in sorted(table.items())}


@dataclass
class _Seen:
    """Everything the history says about where values are."""
    values_at: dict[tuple[int, int], dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    offsets_of: dict[str, set[tuple[int, int]]] = field(default_factory=lambda: defaultdict(set))
    read_by: dict[str, float] = field(default_factory=dict)  # value -> first time read
    known: dict[int, list[int]] = field(default_factory=dict)  # partition -> sorted offsets holding a value
    plain: dict[int, list[int]] = field(default_factory=dict)  # the same, without transactional values only
    max_read: dict[int, int] = field(default_factory=dict)
    complete: dict[int, set[str]] = field(default_factory=dict)  # partition -> values of its complete read
    complete_uncommitted: dict[int, set[str]] = field(default_factory=dict)  # the same, read_uncommitted
    reads: int = 0
    read_at: set[tuple[int, int]] = field(default_factory=set)  # (partition, offset) where a read found a value

    def observe(self, partition: int, offset: int, value: str, time_ms: float) -> None:
        self.values_at[(partition, offset)].setdefault(value, time_ms)
        self.offsets_of[value].add((partition, offset))


def check(ops: Sequence[Op]) -> Check:
    end_ms = max((op.time_ms for op in ops), default=0.0)
    faults = fault_intervals(ops, end_ms)
    sends = collect_sends(ops)
    seen = _collect_reads(ops, sends)
    plain = {value: send for value, send in sends.items() if send.label != TXN}
    found = [*_value_anomalies(plain, seen, end_ms), *_offset_anomalies(seen, sends), *_send_order_anomalies(plain),
             *_poll_anomalies(ops, seen, sends), *_txn_anomalies(ops, sends, seen)]
    bumps = _epoch_bumps(ops)
    anomalies = tuple(_with_client_defect(_with_faults(a, faults), bumps) for a in found)
    txns = txn_checker.collect(ops)
    return Check(anomalies, dict(Counter(s.outcome for s in sends.values())), seen.reads,
                 tuple(sorted(seen.complete)), tuple(faults),
                 {kind: sum(1 for a in anomalies if a.kind == kind) for kind in KINDS},
                 txn_checker.counts(txns) if txns else {})


def _txn_anomalies(ops: Sequence[Op], sends: dict[str, Send], seen: _Seen) -> Iterable[Anomaly]:
    located = {v: (s.partition, s.offset) for v, s in sends.items()
               if s.label == TXN and s.outcome == "ok" and s.partition is not None}
    for f in txn_checker.check(ops, located, seen.offsets_of, seen.complete, seen.complete_uncommitted):
        yield Anomaly(f.kind, f.partition, f.offsets, f.values, f.processes, (TXN,), f.window_ms, detail=f.detail)


def fault_intervals(ops: Iterable[Op], end_ms: float) -> list[tuple[str, float, float]]:
    """(fault, start, stop) from the nemesis's start/stop ops; a fault never stopped lasts to the end, one that
    failed to start never began."""
    open_at: dict[str, float] = {}
    intervals = []
    for op in ops:
        if op.f == "start" and op.type != "fail" and op.fault is not None:
            open_at.setdefault(op.fault, op.time_ms)
        elif op.f == "stop" and op.fault is not None and op.fault in open_at:
            intervals.append((op.fault, open_at.pop(op.fault), op.time_ms))
    intervals.extend((fault, start, end_ms) for fault, start in open_at.items())
    return sorted(intervals, key=lambda i: i[1])


def collect_sends(ops: Iterable[Op]) -> dict[str, Send]:
    sends: dict[str, Send] = {}
    for op in ops:
        if op.f != "send" or op.value is None:
            continue
        if op.type == "invoke":
            sends[op.value] = Send(op.value, op.process, op.label or "-", op.time_ms)
        elif op.value in sends:
            send = sends[op.value]
            sends[op.value] = Send(send.value, send.process, send.label, send.invoke_ms, op.type, op.time_ms,
                                   op.partition, op.offset)
    return sends


def _collect_reads(ops: Sequence[Op], sends: dict[str, Send]) -> _Seen:
    seen = _Seen()
    uncommitted = txn_checker.uncommitted_readers(ops)
    by_process: dict[tuple[str, int], set[str]] = defaultdict(set)
    for op in ops:
        if op.f == "poll" and op.type == "ok":
            for partition, offset, value in op.records:
                seen.observe(partition, offset, value, op.time_ms)
                seen.read_at.add((partition, offset))
                seen.read_by.setdefault(value, op.time_ms)
                seen.max_read[partition] = max(seen.max_read.get(partition, -1), offset)
                by_process[(op.process, partition)].add(value)
                seen.reads += 1
        elif op.f == "complete-read" and op.type == "ok" and op.partition is not None:
            complete = seen.complete_uncommitted if op.process in uncommitted else seen.complete
            complete[op.partition] = by_process[(op.process, op.partition)]
    for send in sends.values():
        if send.outcome == "ok" and send.partition is not None and send.offset is not None:
            seen.observe(send.partition, send.offset, send.value, send.done_ms or send.invoke_ms)
    offsets: dict[int, set[int]] = defaultdict(set)
    plain: dict[int, set[int]] = defaultdict(set)
    for (partition, offset), values in seen.values_at.items():
        if (partition, offset) not in seen.read_at and all(v in sends and "acks=1" in sends[v].label for v in values):
            continue  # only a truncatable acknowledgement says so: a transaction marker may hold it now
        offsets[partition].add(offset)
        if any(value not in sends or sends[value].label != TXN for value in values):
            plain[partition].add(offset)
    seen.known = {p: sorted(o) for p, o in offsets.items()}
    seen.plain = {p: sorted(o) for p, o in plain.items()}
    return seen


def _value_anomalies(sends: dict[str, Send], seen: _Seen, end_ms: float) -> Iterable[Anomaly]:
    for send in sends.values():
        window = (send.invoke_ms, send.done_ms if send.done_ms is not None else end_ms)
        where = sorted(seen.offsets_of.get(send.value, ()))
        if len(where) > 1:
            yield Anomaly("duplicate", where[0][0], tuple(o for _, o in where), (send.value,), (send.process,),
                          (send.label,), window, detail=f"at {', '.join(f'{p}:{o}' for p, o in where)}")
        if send.outcome != "ok":
            if send.value in seen.read_by:
                yield Anomaly("unacknowledged-but-present", where[0][0] if where else None,
                              tuple(o for _, o in where), (send.value,), (send.process,), (send.label,), window,
                              detail=f"send {send.outcome}, read anyway")
            continue
        # librdkafka's idempotent producer acknowledges a batch whose answer it lost once a later batch's sequence
        # is accepted, and reports no offset for it: still checked for loss, by value.
        assert send.partition is not None, send
        kind = _missing_kind(send, seen)
        if kind is not None:
            at = f"{send.partition}:{send.offset}" if send.offset is not None else f"partition {send.partition}"
            yield Anomaly(kind, send.partition, () if send.offset is None else (send.offset,), (send.value,),
                          (send.process,), (send.label,), (send.invoke_ms, window[1] + LOSS_WINDOW_MS),
                          detail=f"acknowledged at {at}")


def _missing_kind(send: Send, seen: _Seen) -> str | None:
    assert send.partition is not None
    complete = seen.complete.get(send.partition)
    if complete is not None:
        return None if send.value in complete else "lost-write"
    if send.value in seen.read_by:
        return None
    passed = send.offset is not None and seen.max_read.get(send.partition, -1) > send.offset
    return "lost-write" if passed else "unseen"


def _offset_anomalies(seen: _Seen, sends: dict[str, Send]) -> Iterable[Anomaly]:
    for (partition, offset), values in sorted(seen.values_at.items()):
        if len(values) < 2:
            continue
        times = sorted(values.values())
        names = tuple(sorted(values))
        labels = tuple(sorted({sends[v].label for v in names if v in sends}))
        processes = tuple(sorted({sends[v].process for v in names if v in sends}))
        yield Anomaly("inconsistent-offsets", partition, (offset,), names, processes, labels, (times[0], times[1]),
                      detail=f"{len(names)} values at {partition}:{offset}")


def _send_order_anomalies(sends: dict[str, Send]) -> Iterable[Anomaly]:
    """A producer's acknowledged sends to one partition whose offsets go down in the order they were sent."""
    highest: dict[tuple[str, int], Send] = {}  # (process, partition) -> the send with the highest offset so far
    for send in sorted(sends.values(), key=lambda s: s.invoke_ms):
        if send.outcome != "ok" or send.partition is None or send.offset is None:
            continue
        before = highest.get((send.process, send.partition))
        if before is not None and before.offset is not None and send.offset < before.offset:
            yield Anomaly("nonmonotonic-send", send.partition, (before.offset, send.offset), (before.value, send.value),
                          (send.process,), (send.label,), (before.invoke_ms, send.done_ms or send.invoke_ms),
                          detail=f"{send.process} sent {before.value} before {send.value}, acknowledged at "
                                 f"{send.partition}:{before.offset} and {send.partition}:{send.offset}")
            continue
        highest[(send.process, send.partition)] = send


def _poll_anomalies(ops: Sequence[Op], seen: _Seen, sends: dict[str, Send]) -> Iterable[Anomaly]:
    last: dict[tuple[str, int], tuple[int, str, float]] = {}  # (process, partition) -> (offset, value, time)
    uncommitted = txn_checker.uncommitted_readers(ops)
    reported: dict[tuple[str, int], list[tuple[float, str]]] = defaultdict(list)  # what the client said, when
    for op in ops:
        if op.f == "client-error" and op.partition is not None:
            reported[(op.process, op.partition)].append((op.time_ms, op.error or "?"))
    for op in ops:
        if op.f == "assign":
            for key in [k for k in last if k[0] == op.process]:
                del last[key]
        elif op.f == "seek" and op.type != "fail" and op.partition is not None:
            last.pop((op.process, op.partition), None)
        elif op.f == "poll" and op.type == "ok":
            for partition, offset, value in op.records:
                before = last.get((op.process, partition))
                last[(op.process, partition)] = (offset, value, op.time_ms)
                if before is None:
                    continue
                # a read_committed reader jumps over aborted records: txn_checker judges what it jumps over
                known = seen.known if op.process in uncommitted else seen.plain
                kind = _step_kind(before[0], offset, known.get(partition, []))
                if kind is not None:
                    labels = tuple(sorted({sends[v].label for v in (before[1], value) if v in sends}))
                    said = [e for at, e in reported.get((op.process, partition), ()) if before[2] <= at <= op.time_ms]
                    yield Anomaly(kind, partition, (before[0], offset), (before[1], value), (op.process,), labels,
                                  (before[2], op.time_ms), detail=f"{op.process} polled {partition}:{before[0]} "
                                  f"then {partition}:{offset}" + (f", its client reporting {'; '.join(said)}"
                                                                  if said else ""))


def _step_kind(previous: int, offset: int, known: list[int]) -> str | None:
    if offset <= previous:
        return "nonmonotonic-poll"
    between = bisect.bisect_left(known, offset) - bisect.bisect_right(known, previous)
    return "poll-skip" if between > 0 else None


def _epoch_bumps(ops: Iterable[Op]) -> dict[str, list[tuple[float, str]]]:
    bumps: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for op in ops:
        if op.f == "epoch-bump":
            bumps[op.process].append((op.time_ms, op.label or "?"))
    return bumps


def _with_client_defect(anomaly: Anomaly, bumps: dict[str, list[tuple[float, str]]]) -> Anomaly:
    """An idempotent producer's duplicate or reordered sends with an epoch bump of its client in their window:
    librdkafka resent, renumbered under the new epoch, a batch the old epoch had written, which no broker can
    tell from a new one (confluentinc/librdkafka#4953; Kafka's Java producer retries without the bump)."""
    if anomaly.kind not in ("duplicate", "nonmonotonic-send") or TXN in anomaly.labels or len(anomaly.processes) != 1:
        return anomaly
    low, high = anomaly.window_ms
    within = [pid for at, pid in bumps.get(anomaly.processes[0], ()) if low <= at <= high]
    if not within:
        return anomaly
    return replace(anomaly, client_defect="confluentinc/librdkafka#4953",
                   detail=f"{anomaly.detail}; resent after its client bumped its epoch to {', '.join(within)} "
                          "(librdkafka renumbers retried batches under the new epoch: confluentinc/librdkafka#4953)")


def _with_faults(anomaly: Anomaly, faults: Sequence[tuple[str, float, float]]) -> Anomaly:
    low, high = anomaly.window_ms
    active = tuple(dict.fromkeys(name for name, start, stop in faults if start <= high and stop >= low))
    return replace(anomaly, faults=active)
