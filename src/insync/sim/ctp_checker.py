"""The exactly-once checks of a consume-transform-produce run, over the read_committed views of its three
partitions at the end of the run.

`read_ctp` reads, from each partition's final leader, what a read_committed consumer sees: the input records
(offset and value) below the input's last stable offset, the output records (the input offset in the key, the
transformed value), and the positions committed to the offsets partition. `check_ctp` compares them: the committed
positions only move forward; every committed input record below the last committed position appears in the output
exactly once (no duplicate, no loss), in input order, transformed, and nothing else does, so the committed position
matches the count of committed output; and the processor caught up with the input's committed end. It is pure
over its inputs, so a test can plant a violation in them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from insync.broker.core import BrokerCore
from insync.protocol.records import decode_records
from insync.sim.ctp_workload import INPUT, OFFSETS, OUTPUT, transform
from insync.sim.txn_checker import committed_positions, listed, read_committed
from insync.types import TopicPartition


@dataclass(slots=True)
class CtpView:
    input: list[tuple[int, bytes]]  # (offset, value) of the committed input records, in offset order
    input_end: int  # the input's last stable offset
    output: list[tuple[int, bytes]]  # (input offset, value) of the committed output records, in offset order
    positions: list[int]  # the committed positions, in offset order


def _committed(core: BrokerCore, tp: TopicPartition, now_ms: int) -> list[tuple[int, bytes, bytes]]:
    return [(record.offset, record.key or b"", record.value or b"") for part in read_committed(core, tp, now_ms)
            for position, _ in committed_positions(part.records, part.aborted_transactions or ())
            for record in decode_records(part.records, position)]


def read_ctp(leaders: dict[int, BrokerCore], topic: str, now_ms: int) -> CtpView:
    """The view of the three partitions, from `leaders` (each partition's leader by partition number)."""
    tps = {p: TopicPartition(topic, p) for p in (INPUT, OUTPUT, OFFSETS)}
    partition = leaders[INPUT].partitions.get(tps[INPUT])
    assert partition is not None and partition.is_leader, tps[INPUT]
    return CtpView([(offset, value) for offset, _, value in _committed(leaders[INPUT], tps[INPUT], now_ms)],
                   partition.last_stable_offset,
                   [(int(key), value) for _, key, value in _committed(leaders[OUTPUT], tps[OUTPUT], now_ms)],
                   [int(value) for _, _, value in _committed(leaders[OFFSETS], tps[OFFSETS], now_ms)])


def check_ctp(view: CtpView) -> list[str]:
    """Every violation of the properties in the module docstring, as readable strings."""
    found: list[list[str]] = [[] for _ in range(6)]
    for before, after in zip(view.positions, view.positions[1:], strict=False):
        if after <= before:
            found[0].append(f"committed position went from {before} to {after}")
    position = view.positions[-1] if view.positions else 0
    inputs = {offset: value for offset, value in view.input}
    expected = [offset for offset, _ in view.input if offset < position]
    for offset, count in sorted(Counter(offset for offset, _ in view.output).items()):
        if count > 1:
            found[1].append(f"duplicate: input record {offset} is in the output {count} times")
    written = {offset for offset, _ in view.output}
    for offset in expected:
        if offset not in written:
            found[2].append(f"lost: input record {offset}, below the committed position {position}, is not in the "
                            f"output")
    for offset, value in view.output:
        if offset >= position or offset not in inputs:
            found[3].append(f"output record for input {offset}, which is no committed input record below the "
                            f"committed position {position}")
        elif value != transform(inputs[offset]):
            found[3].append(f"output record for input {offset} is {value!r}, not the transform of {inputs[offset]!r}")
    firsts = list(dict.fromkeys(offset for offset, _ in view.output))
    if firsts != sorted(firsts):
        found[4].append(f"output out of input order: {firsts[:20]}")
    if len(view.output) != len(expected):
        found[4].append(f"committed position {position} covers {len(expected)} input records, but the output "
                        f"holds {len(view.output)}")
    behind = [offset for offset, _ in view.input if offset >= position]
    if behind:
        found[5].append(f"the processor did not catch up: committed position {position}, {len(behind)} committed "
                        f"input records from {behind[0]} below the input's end {view.input_end} not processed")
    return listed(found)
