"""Purgatory: delayed produce (acks=all) completing on the high watermark or expiring, delayed fetch (follower
min bytes, consumer high watermark, forced), polling in the order added, deadlines, dropping, and the bound."""

from __future__ import annotations

import pytest
from repl_helpers import T0, TP, batch, handle_follower_fetch, ids, leader

from insync import errors
from insync.replication.messages import AlterPartitionResult
from insync.replication.partition import Partition
from insync.replication.purgatory import DelayedFetch, DelayedProduce, Purgatory, PurgatoryFullError
from insync.types import BrokerId, LeaderEpoch, Offset, PartitionEpoch, TopicPartition

OTHER = TopicPartition("other", 0)


def produce(partition: Partition, count: int, now_ms: int) -> DelayedProduce[str]:
    wait = partition.append_records_as_leader(batch(count), -1, now_ms).wait
    return DelayedProduce(f"produce@{now_ms}", {partition.topic_partition: (partition, wait)})


def follower_fetch(partition: Partition, broker: int, offset: int, now_ms: int) -> bool:
    result = handle_follower_fetch(partition, BrokerId(broker), Offset(offset), partition.leader_epoch,
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


def test_follower_delayed_fetch_waits_for_min_bytes_appended_to_its_partitions() -> None:
    operation: DelayedFetch[str] = DelayedFetch("fetch", [TP, OTHER], 100, follower=True)
    operation.on_high_watermark_advanced()  # a follower waits for bytes, not for the high watermark
    assert not operation.try_complete()
    operation.on_append(60)
    assert not operation.try_complete()
    operation.on_append(40)  # on the other partition: the bytes add up across the fetch's partitions
    assert operation.try_complete() and operation.bytes_appended == 100 and not operation.expired
    zero: DelayedFetch[str] = DelayedFetch("fetch", [TP], 0, follower=True)
    assert not zero.try_complete()  # parked because it had nothing: waits for a byte
    zero.on_append(1)
    assert zero.try_complete()


def test_consumer_delayed_fetch_waits_for_the_high_watermark_and_any_fetch_can_be_forced() -> None:
    consumer: DelayedFetch[str] = DelayedFetch("consumer", [TP], 1, follower=False)
    consumer.on_append(1_000)  # uncommitted data is not for consumers
    assert not consumer.try_complete() and consumer.bytes_appended == 0
    consumer.on_high_watermark_advanced()
    assert consumer.try_complete()
    follower: DelayedFetch[str] = DelayedFetch("follower", [TP], 100, follower=True)
    follower.force()  # leadership moved
    assert follower.try_complete()
    assert DelayedFetch("dup", [TP, TP, OTHER], 1, follower=True).keys == (TP, OTHER)


def test_poll_returns_completed_and_expired_operations_in_the_order_added() -> None:
    purgatory: Purgatory[DelayedFetch[int]] = Purgatory("fetch")
    operations = [DelayedFetch(n, [TP if n % 2 else OTHER], 1, follower=False) for n in range(4)]
    deadlines = [T0 + 900, T0 + 100, T0 + 50, T0 + 900]
    for operation, deadline in zip(operations, deadlines, strict=True):
        purgatory.add(operation, deadline, operation.keys)
    for operation in purgatory.watchers(TP):
        operation.on_high_watermark_advanced()
    assert [op.context for op in purgatory.watchers(TP)] == [1, 3]
    assert purgatory.poll(T0 + 60, [TP]) == [operations[1], operations[2], operations[3]]  # not deadline order
    assert [op.expired for op in operations] == [False, False, True, False]
    assert len(purgatory) == 1 and purgatory.next_deadline_ms() == T0 + 900
    assert purgatory.poll(T0 + 899, [TP, OTHER]) == []  # nothing told operation 0 it may complete
    assert purgatory.poll(T0 + 900, []) == [operations[0]] and operations[0].expired


def test_an_operation_without_keys_waits_for_its_deadline() -> None:
    purgatory: Purgatory[DelayedFetch[str]] = Purgatory("fetch")
    operation: DelayedFetch[str] = DelayedFetch("no partitions", [], 1, follower=False)
    purgatory.add(operation, T0 + 10, operation.keys)
    assert purgatory.watched_keys() == [] and purgatory.poll(T0 + 9, []) == []
    assert purgatory.expire(T0 + 10) == [operation]


def test_remove_where_drops_operations_without_completing_them() -> None:
    purgatory: Purgatory[DelayedFetch[str]] = Purgatory("fetch")
    for source in ("a", "b", "a"):
        purgatory.add(DelayedFetch(source, [TP], 1, follower=True), T0 + 10, [TP])
    assert purgatory.remove_where(lambda operation: operation.context == "a") == 2
    assert [op.context for op in purgatory.watchers(TP)] == ["b"] and purgatory.next_deadline_ms() == T0 + 10
    assert purgatory.remove_where(lambda operation: operation.context == "b") == 1
    assert purgatory.next_deadline_ms() is None and purgatory.watched_keys() == []


def test_purgatory_is_bounded() -> None:
    purgatory: Purgatory[DelayedFetch[int]] = Purgatory("fetch", capacity=2)
    for n in range(2):
        purgatory.add(DelayedFetch(n, [TP], 1, follower=True), T0 + n, [TP])
    with pytest.raises(PurgatoryFullError, match="fetch purgatory holds 2 operations"):
        purgatory.add(DelayedFetch(3, [TP], 1, follower=True), T0, [TP])


def test_completed_operations_do_not_accumulate_in_the_deadline_heap() -> None:
    purgatory: Purgatory[DelayedFetch[int]] = Purgatory("fetch")
    for n in range(1_000):
        purgatory.add(DelayedFetch(n, [TP], 1, follower=True), T0 + 10_000 + n, [TP])
        if n % 10 == 9:
            for operation in purgatory.watchers(TP):
                operation.on_append(1)
            assert len(purgatory.check(TP)) == 10
    assert len(purgatory) == 0 and purgatory.next_deadline_ms() is None
    assert len(purgatory._deadlines) <= 2 * len(purgatory) + 64  # noqa: SLF001 - the bound is the point
