"""Purgatory: delayed produce (acks=all) completing on the high watermark or expiring, delayed fetch on min bytes,
deadlines, and the bound."""

from __future__ import annotations

import pytest
from repl_helpers import T0, TP, batch, ids, leader

from insync import errors
from insync.replication.messages import AlterPartitionResult
from insync.replication.partition import Partition
from insync.replication.purgatory import DelayedFetch, DelayedProduce, Purgatory, PurgatoryFullError
from insync.types import BrokerId, LeaderEpoch, Offset, PartitionEpoch, TopicPartition


def produce(partition: Partition, count: int, now_ms: int) -> DelayedProduce[str]:
    wait = partition.append_records_as_leader(batch(count), -1, now_ms).wait
    return DelayedProduce(f"produce@{now_ms}", {partition.topic_partition: (partition, wait)})


def follower_fetch(partition: Partition, broker: int, offset: int, now_ms: int) -> bool:
    result = partition.handle_follower_fetch(BrokerId(broker), Offset(offset), partition.leader_epoch,
                                             LeaderEpoch(-1), Offset(0), 1 << 20, now_ms)
    return result.high_watermark_advanced


def test_delayed_produce_completes_when_the_high_watermark_passes_it() -> None:
    partition = leader(1, isr=(1, 2), replicas=(1, 2))
    purgatory: Purgatory[DelayedProduce[str]] = Purgatory("produce")
    operation = produce(partition, 3, T0)
    assert not operation.try_complete()
    purgatory.add(operation, T0 + 30_000, operation.keys)
    assert purgatory.check(TP) == [] and len(purgatory) == 1
    assert follower_fetch(partition, 2, 3, T0 + 5)
    assert purgatory.check(TP) == [operation] and len(purgatory) == 0
    assert operation.results() == {TP: errors.NONE} and not operation.expired


def test_delayed_produce_expires_with_request_timed_out() -> None:
    partition = leader(1, isr=(1, 2), replicas=(1, 2))
    purgatory: Purgatory[DelayedProduce[str]] = Purgatory("produce")
    first, second = produce(partition, 1, T0), produce(partition, 1, T0 + 10)
    purgatory.add(first, T0 + 100, first.keys)
    purgatory.add(second, T0 + 110, second.keys)
    assert purgatory.next_deadline_ms() == T0 + 100
    assert purgatory.expire(T0 + 99) == []
    assert purgatory.expire(T0 + 100) == [first]
    assert first.expired and first.results() == {TP: errors.REQUEST_TIMED_OUT}
    assert purgatory.next_deadline_ms() == T0 + 110 and purgatory.watched(TP) == 1


def test_delayed_produce_learns_that_leadership_moved() -> None:
    partition = leader(1, isr=(1, 2), replicas=(1, 2))
    purgatory: Purgatory[DelayedProduce[str]] = Purgatory("produce")
    operation = produce(partition, 1, T0)
    purgatory.add(operation, T0 + 30_000, operation.keys)
    partition.make_follower(BrokerId(2), LeaderEpoch(2), PartitionEpoch(2), ids((2,)), ids((1, 2)), T0 + 1)
    assert purgatory.check(TP) == [operation]
    assert operation.results() == {TP: errors.NOT_LEADER_OR_FOLLOWER}
    assert purgatory.next_deadline_ms() is None


def test_delayed_produce_over_several_partitions_waits_for_all() -> None:
    first = leader(1, isr=(1, 2), replicas=(1, 2))
    second = leader(1, isr=(1,), replicas=(1, 2), topic_partition=TopicPartition("other", 0))
    waits = {p.topic_partition: (p, p.append_records_as_leader(batch(1), -1, T0).wait) for p in (first, second)}
    operation: DelayedProduce[int] = DelayedProduce(7, waits)
    purgatory: Purgatory[DelayedProduce[int]] = Purgatory("produce")
    purgatory.add(operation, T0 + 1_000, operation.keys)
    assert purgatory.check(second.topic_partition) == []  # `other` is done, `events` is not
    item = first.maybe_shrink_isr(T0 + 20_000)
    assert item is not None
    first.on_alter_partition_result(item, AlterPartitionResult(TP, errors.NONE, BrokerId(1), LeaderEpoch(1),
                                                               PartitionEpoch(2), ids((1,))), T0 + 20_000)
    assert purgatory.check(TP) == [operation]
    assert operation.results() == {TP: errors.NONE, second.topic_partition: errors.NONE}
    assert operation.context == 7


def test_delayed_fetch_waits_for_min_bytes_or_an_answer_now() -> None:
    available = {TP: 0}
    probe_answers: dict[TopicPartition, int | None] = available  # type: ignore[assignment]
    operation: DelayedFetch[str] = DelayedFetch("fetch", [(TP, Offset(0))], 100,
                                                lambda tp, _offset: probe_answers[tp])
    purgatory: Purgatory[DelayedFetch[str]] = Purgatory("fetch")
    purgatory.add(operation, T0 + 500, operation.keys)
    available[TP] = 60
    assert purgatory.check(TP) == []
    available[TP] = 120
    assert purgatory.check(TP) == [operation] and not operation.expired
    waiting: DelayedFetch[str] = DelayedFetch("fetch", [(TP, Offset(0))], 100, lambda _tp, _offset: None)
    assert waiting.try_complete()  # e.g. leadership moved: answer at once
    quiet: DelayedFetch[str] = DelayedFetch("fetch", [(TP, Offset(0))], 100, lambda _tp, _offset: 0)
    purgatory.add(quiet, T0 + 500, quiet.keys)
    assert purgatory.expire(T0 + 500) == [quiet] and quiet.expired


def test_purgatory_is_bounded() -> None:
    purgatory: Purgatory[DelayedFetch[int]] = Purgatory("fetch", capacity=2)
    for n in range(2):
        purgatory.add(DelayedFetch(n, [(TP, Offset(0))], 1, lambda _tp, _offset: 0), T0 + n, [TP])
    with pytest.raises(PurgatoryFullError, match="fetch purgatory holds 2 operations"):
        purgatory.add(DelayedFetch(3, [(TP, Offset(0))], 1, lambda _tp, _offset: 0), T0, [TP])


def test_completed_operations_do_not_accumulate_in_the_deadline_heap() -> None:
    purgatory: Purgatory[DelayedFetch[int]] = Purgatory("fetch")
    ready = {"now": False}
    for n in range(1_000):
        purgatory.add(DelayedFetch(n, [(TP, Offset(0))], 1, lambda _tp, _o: 1 if ready["now"] else 0),
                      T0 + 10_000 + n, [TP])
        if n % 10 == 9:
            ready["now"] = True
            assert len(purgatory.check(TP)) == 10
            ready["now"] = False
    assert len(purgatory) == 0 and purgatory.next_deadline_ms() is None
    assert len(purgatory._deadlines) <= 2 * len(purgatory) + 64  # noqa: SLF001 - the bound is the point
