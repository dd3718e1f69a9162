"""The transactional checks of a run, in Jepsen's terms, over each partition's final log and its read_committed
view.

`read_partition` takes, from a partition's final leader, the data batches of its log below the high watermark
and what a read_committed consumer sees: the production read path answers Fetch requests at READ_COMMITTED
(below the last stable offset, with the aborted transactions the read meets) and `committed_batches` filters
them as Kafka's consumer does (`CompletedFetch`: a batch of an aborted producer is skipped until its ABORT
marker; control batches never reach the application). `check_transactions` compares both with the producers'
history: no aborted read (a transaction that must have aborted is never visible), no torn transaction (visible
on all of its partitions or none), no lost committed write (a transaction EndTxn committed is wholly in the logs
and visible), no duplicate batch, and no transaction left hanging (the last stable offset reaches the high
watermark once every producer is done). It is pure over its inputs, so a test can plant a violation in them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from insync.broker.core import BrokerCore
from insync.broker.messages import (
    READ_COMMITTED,
    ConsumerFetchPartition,
    ConsumerFetchRequest,
    ConsumerFetchResponse,
)
from insync.protocol.control_records import ABORT, AbortedTxn, marker_type
from insync.protocol.records import BatchHeader, iter_batches
from insync.sim.txn_rules import ABORTED_READ, LOST_WRITE, TORN, txn_violations
from insync.sim.txn_workload import TxnAttempt, TxnHistory
from insync.types import Offset, Outgoing, TopicPartition

BatchKey = tuple[int, int, int]  # (producer id, producer epoch, base sequence) of a data batch
READ_BYTES = 1 << 20
CHECKER_ADDRESS = "txn-checker"
EXAMPLES_MAX = 5  # violations of one kind listed in full; the rest are counted


@dataclass(slots=True)
class PartitionTxnView:
    log: list[BatchKey]  # the data batches below the high watermark, in offset order
    visible: list[BatchKey]  # those a read_committed consumer reads
    high_watermark: int
    last_stable_offset: int


def _key(header: BatchHeader) -> BatchKey:
    return header.producer_id, header.producer_epoch, header.base_sequence


def committed_batches(records: bytes, aborted: tuple[AbortedTxn, ...]) -> list[BatchHeader]:
    """The data batches of one read_committed fetch answer a consumer hands to its application."""
    return [header for _, header in committed_positions(records, aborted)]


def committed_positions(records: bytes, aborted: tuple[AbortedTxn, ...]) -> list[tuple[int, BatchHeader]]:
    """`committed_batches` with each batch's position in `records`, to decode its records there."""
    pending = sorted(aborted, key=lambda txn: txn.first_offset)
    next_aborted = 0
    aborted_producers: set[int] = set()
    out: list[tuple[int, BatchHeader]] = []
    for position, header in iter_batches(records, verify_crc=False):
        if header.producer_id >= 0:
            while next_aborted < len(pending) and pending[next_aborted].first_offset <= header.last_offset:
                aborted_producers.add(pending[next_aborted].producer_id)
                next_aborted += 1
            if header.is_control and marker_type(records, position) == ABORT:
                aborted_producers.discard(header.producer_id)
            elif header.is_transactional and header.producer_id in aborted_producers:
                continue
        if not header.is_control:
            out.append((position, header))
    return out


def read_partition(core: BrokerCore, tp: TopicPartition, now_ms: int) -> PartitionTxnView:
    """The partition's log and read_committed view on `core`, its leader."""
    partition = core.partitions.get(tp)
    assert partition is not None and partition.is_leader, tp
    hw, lso = partition.high_watermark, partition.last_stable_offset
    log = partition.log
    logged: list[BatchKey] = []
    offset = log.log_start_offset
    while offset < hw:  # bounded: each read moves past at least one batch
        result = log.read(offset, READ_BYTES, hw)
        if not result.records or result.next_offset <= offset:
            break
        logged.extend(_key(h) for _, h in iter_batches(result.records, verify_crc=False) if not h.is_control)
        offset = result.next_offset
    visible = [_key(h) for part in read_committed(core, tp, now_ms)
               for h in committed_batches(part.records, part.aborted_transactions or ())]
    return PartitionTxnView(logged, visible, hw, lso)


def read_committed(core: BrokerCore, tp: TopicPartition, now_ms: int) -> Iterator[ConsumerFetchPartition]:
    """The answers of the fetches a read_committed consumer sends `core`, its leader, to read `tp` from its log
    start to its last stable offset."""
    partition = core.partitions.get(tp)
    assert partition is not None and partition.is_leader, tp
    offset = partition.log.log_start_offset
    while offset < partition.last_stable_offset:  # bounded: each read moves past at least one batch
        request = ConsumerFetchRequest(0, ((tp, Offset(offset)),), 0, READ_BYTES, isolation_level=READ_COMMITTED)
        (answer,) = [c.message for c in core.handle(now_ms, CHECKER_ADDRESS, request) if isinstance(c, Outgoing)]
        assert isinstance(answer, ConsumerFetchResponse), answer
        (part,) = answer.partitions
        if not part.records:
            break
        yield part
        offset = max(h.last_offset for _, h in iter_batches(part.records, verify_crc=False)) + 1


def check_transactions(history: TxnHistory, views: dict[TopicPartition, PartitionTxnView]) -> list[str]:
    """Every violation of the properties in the module docstring, as readable strings."""
    owner: dict[tuple[TopicPartition, BatchKey], TxnAttempt] = {}
    for attempt in history.attempts:
        for tp, sequence in attempt.batches.items():
            owner[(tp, (attempt.producer_id, attempt.producer_epoch, sequence))] = attempt
    present: dict[int, set[TopicPartition]] = {}
    visible: dict[int, set[TopicPartition]] = {}
    found: list[list[str]] = [[] for _ in range(6)]
    for tp, view in sorted(views.items()):
        for key, count in Counter(view.log).items():
            if count > 1:
                found[0].append(f"{tp}: duplicate: batch {key} is in the log {count} times")
        for keys, where in ((view.log, present), (view.visible, visible)):
            for key in keys:
                writer = owner.get((tp, key))
                if writer is None:
                    found[1].append(f"{tp}: batch {key} was written by no transaction of the history")
                else:
                    where.setdefault(id(writer), set()).add(tp)
        if view.last_stable_offset < view.high_watermark:
            found[2].append(f"{tp}: hanging transaction: last stable offset {view.last_stable_offset} below the "
                            f"high watermark {view.high_watermark} after every producer finished")
    for attempt in history.attempts:
        written = set(attempt.batches)
        if not written:
            continue
        seen, there, must = visible.get(id(attempt), set()), present.get(id(attempt), set()), attempt.must_be()
        name = f"transaction of {attempt.transactional_id} (producer {attempt.producer_id} epoch " \
               f"{attempt.producer_epoch}, {attempt.outcome})"
        broken = txn_violations(must, written, there & written, seen & written)
        if ABORTED_READ in broken:
            found[3].append(f"aborted read: {name} must have aborted, but read_committed sees it on {_names(seen)}")
        if LOST_WRITE in broken:
            found[4].append(f"lost committed write: {name} is missing from {_names(written - there)}")
        if TORN in broken:
            found[5].append(f"torn transaction: read_committed sees {name} on {_names(seen) or 'no partition'} "
                            f"but not on {_names(written - seen)}")
    return listed(found)


def listed(found: list[list[str]]) -> list[str]:
    """Violations found by kind, as reported: the first few of each kind in full, the rest counted."""
    out: list[str] = []
    for kind in found:
        out.extend(kind[:EXAMPLES_MAX])
        if len(kind) > EXAMPLES_MAX:
            out.append(f"... and {len(kind) - EXAMPLES_MAX} more like the one above")
    return out


def _names(tps: set[TopicPartition]) -> str:
    return ", ".join(str(tp) for tp in sorted(tps))
