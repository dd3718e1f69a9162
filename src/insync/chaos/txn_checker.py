"""The transactional producer's checks (chaos/txn_workload.py), in Jepsen's terms, over a campaign history.

A transaction's outcome is what its ops settle: committed (a `txn-commit` ok), aborted (no commit tried, or an
aborted one: only a commit can commit it), unknown (a commit without an `ok`: either way, but all or nothing).
Its records are judged by sim/txn_rules.py, as the simulator's are, with `written` its records located on a
partition read completely read_committed or read by any read_committed reader, `present` those not proven absent
(in neither complete read, read_committed or read_uncommitted) and `visible` those a read_committed read returned.
Beside them, a read_committed reader that passed over a record of a committed or visible transaction in one pass
(an offset between two it read, with no seek or rebalance between) read a `torn-transaction`. A committed
transaction's record at two offsets is a `duplicate`, and one producer's committed records going down in offset
in a partition in the order sent a `nonmonotonic-send`. Every finding is forbidden.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field

from insync.chaos.ops import Op
from insync.sim.txn_rules import ABORTED_READ, LOST_WRITE, TORN, txn_violations

READ_UNCOMMITTED = "read_uncommitted"
Located = Mapping[str, tuple[int, int | None]]  # value -> (partition, offset) of its acknowledged send


@dataclass(slots=True)
class Txn:
    name: str
    process: str
    begin_ms: float
    end_ms: float
    values: list[str] = field(default_factory=list)  # its sends, in the order sent
    commit: str = "none"  # the txn-commit's completion: ok | fail | info (none came) | none (never tried)

    @property
    def must(self) -> str | None:
        if self.commit == "ok":
            return "committed"
        return "aborted" if self.commit in ("none", "fail") else None


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    txn: str
    partition: int | None
    offsets: tuple[int, ...]
    values: tuple[str, ...]
    processes: tuple[str, ...]
    window_ms: tuple[float, float]
    detail: str


def collect(ops: Iterable[Op]) -> dict[str, Txn]:
    txns: dict[str, Txn] = {}
    for op in ops:
        if op.txn is None:
            continue
        txn = txns.setdefault(op.txn, Txn(op.txn, op.process, op.time_ms, op.time_ms))
        txn.end_ms = op.time_ms
        if op.f == "send" and op.type == "invoke" and op.value is not None:
            txn.values.append(op.value)
        elif op.f == "txn-commit" and txn.commit != "ok":
            txn.commit = "info" if op.type == "invoke" else op.type  # a commit never completed may have committed
    return txns


def uncommitted_readers(ops: Iterable[Op]) -> set[str]:
    return {op.process for op in ops if op.f == "assign" and op.label == READ_UNCOMMITTED}


def counts(txns: Mapping[str, Txn]) -> dict[str, int]:
    out = {"committed": 0, "aborted": 0, "unknown": 0}
    for txn in txns.values():
        out[txn.must or "unknown"] += 1
    return out


def check(ops: Sequence[Op], located: Located, offsets_of: Mapping[str, Set[tuple[int, int]]],
          complete: Mapping[int, Set[str]], complete_uncommitted: Mapping[int, Set[str]]) -> list[Finding]:
    """Every finding of the module docstring. `complete` holds the values of each partition read completely
    read_committed, `complete_uncommitted` read_uncommitted."""
    txns = collect(ops)
    uncommitted = uncommitted_readers(ops)
    read: dict[str, dict[str, float]] = defaultdict(dict)  # value -> read_committed process -> first time
    for op in ops:
        if op.f == "poll" and op.type == "ok" and op.process not in uncommitted:
            for _, _, value in op.records:
                read[value].setdefault(op.process, op.time_ms)
    found = [f for txn in txns.values() for f in _judged(txn, located, read, complete, complete_uncommitted)]
    visible = {name for name, txn in txns.items() if txn.must == "committed" or any(v in read for v in txn.values)}
    found += _passed_over(ops, uncommitted, txns, visible - {f.txn for f in found}, located)  # one finding a txn
    found += _duplicates(txns, visible, offsets_of)
    found += _send_order(txns, located)
    return found


def _judged(txn: Txn, located: Located, read: Mapping[str, Mapping[str, float]], complete: Mapping[int, Set[str]],
            complete_uncommitted: Mapping[int, Set[str]]) -> Iterable[Finding]:
    on_complete = {v for v in txn.values if v in located and located[v][0] in complete}
    written = on_complete | {v for v in txn.values if v in read}
    absent = {v for v in on_complete if v not in complete[located[v][0]]
              and v not in complete_uncommitted.get(located[v][0], ())}
    visible = {v for v in written if v in read}
    window = (txn.begin_ms, txn.end_ms)
    for kind in txn_violations(txn.must, written, written - absent, visible):
        missing = {ABORTED_READ: visible, LOST_WRITE: absent, TORN: written - visible}[kind]
        readers = tuple(sorted({p for v in visible for p in read[v]}))
        shown = sorted(visible if kind == ABORTED_READ else missing)
        where = sorted({located[v] for v in shown if v in located}, key=lambda at: (at[0], at[1] or -1))
        detail = {ABORTED_READ: f"{txn.name} ({txn.commit} commit) read by {', '.join(readers)}: {shown}",
                  LOST_WRITE: f"{txn.name} committed, absent from the complete reads: {shown}",
                  TORN: f"{txn.name} ({txn.commit} commit) read in part: {sorted(visible)} read, {shown} not"}[kind]
        yield Finding(kind, txn.name, where[0][0] if where else None, tuple(o for _, o in where if o is not None),
                      tuple(shown), (txn.process, *readers), window, detail)


def _passed_over(ops: Sequence[Op], uncommitted: Set[str], txns: Mapping[str, Txn], visible: Set[str],
                 located: Located) -> Iterable[Finding]:
    """Per read_committed process and partition, each pass (from an assign or seek to the next) read offsets
    low..high; a record of a visible transaction acknowledged strictly between them and not read was torn."""
    owner = {v: txns[name] for name in visible for v in txns[name].values}
    at: dict[int, list[tuple[int, str]]] = defaultdict(list)  # partition -> sorted (offset, value) of `owner`
    for value in owner:
        partition, offset = located.get(value, (-1, None))
        if offset is not None:
            bisect.insort(at[partition], (offset, value))
    passes: dict[tuple[str, int], tuple[int, int, set[str], float]] = {}  # -> (low, high, values, first time)
    reported: set[str] = set()  # one torn transaction is one finding, however many readers saw it torn

    def close(key: tuple[str, int], now_ms: float) -> Iterable[Finding]:
        low, high, values, since = passes.pop(key)
        for offset, value in at[key[1]][bisect.bisect_right(at[key[1]], (low, "\uffff")):]:
            if offset >= high:
                break
            txn = owner[value]
            if value not in values and txn.name not in reported:
                reported.add(txn.name)
                yield Finding(TORN, txn.name, key[1], (offset,), (value,), (txn.process, key[0]), (since, now_ms),
                              f"{key[0]} read {key[1]}:{low} to {key[1]}:{high} without {value} at "
                              f"{key[1]}:{offset} ({txn.name}, {txn.must or 'unknown outcome'}, read elsewhere)")

    for op in ops:
        if op.process in uncommitted:
            continue
        if op.f == "assign" or op.f == "seek" and op.type != "fail":
            for key in [k for k in passes if k[0] == op.process and (op.f == "assign" or k[1] == op.partition)]:
                yield from close(key, op.time_ms)
        elif op.f == "poll" and op.type == "ok":
            for partition, offset, value in op.records:
                low, high, values, since = passes.get((op.process, partition), (offset, offset, set(), op.time_ms))
                values.add(value)
                passes[(op.process, partition)] = (min(low, offset), max(high, offset), values, since)
    end_ms = max((op.time_ms for op in ops), default=0.0)
    for key in list(passes):
        yield from close(key, end_ms)


def _duplicates(txns: Mapping[str, Txn], visible: Set[str],
                offsets_of: Mapping[str, Set[tuple[int, int]]]) -> Iterable[Finding]:
    for name in sorted(visible):
        txn = txns[name]
        for value in txn.values:
            where = sorted(offsets_of.get(value, ()))
            if len(where) > 1:
                yield Finding("duplicate", name, where[0][0], tuple(o for _, o in where), (value,), (txn.process,),
                              (txn.begin_ms, txn.end_ms), f"{value} ({name}) at {', '.join(f'{p}:{o}' for p, o in where)}")


def _send_order(txns: Mapping[str, Txn], located: Located) -> Iterable[Finding]:
    """The committed stream of each producer in each partition: offsets rise in the order its records were sent."""
    highest: dict[tuple[str, int], tuple[int, str]] = {}
    for txn in sorted(txns.values(), key=lambda t: t.begin_ms):
        if txn.must != "committed":
            continue
        for value in txn.values:
            partition, offset = located.get(value, (-1, None))
            if offset is None:
                continue
            before = highest.get((txn.process, partition))
            if before is not None and offset < before[0]:
                yield Finding("nonmonotonic-send", txn.name, partition, (before[0], offset), (before[1], value), (txn.process,),
                              (txn.begin_ms, txn.end_ms), f"{before[1]} sent before {value}, at {partition}:{before[0]} "
                              f"and {partition}:{offset}")
                continue
            highest[(txn.process, partition)] = (offset, value)
