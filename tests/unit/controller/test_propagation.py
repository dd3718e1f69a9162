"""Seed 003's claims about ISR change propagation, checked exactly, plus the published-offset contract."""

from __future__ import annotations

import pytest
from ctrl_harness import Harness

from insync.controller.propagation import MetadataLog, PropagationConfig
from insync.controller.replication_control import AlterPartitionData
from insync.events import EventType
from insync.metadata.records import PartitionChangeRecord, PartitionRecord, TopicRecord

T = "00000000-0000-4000-8000-000000000001"
START = 0


class Isr:
    """A stream of ISR-only changes of one partition, as AlterPartition commits them."""

    def __init__(self) -> None:
        self.epoch = 0

    def change(self) -> PartitionChangeRecord:
        self.epoch += 1
        return PartitionChangeRecord(T, 0, (1, 2) if self.epoch % 2 else (1, 2, 3), None, 0, self.epoch)


def new_log(config: PropagationConfig | None = None) -> MetadataLog:
    return MetadataLog(config or PropagationConfig(), [TopicRecord("t", T)], START)


def run(log: MetadataLog, changes_at: list[int], until: int) -> list[tuple[int, int]]:
    """Append one ISR change at each time in `changes_at`, tick at every check; (time, offset) of publications."""
    isr = Isr()
    pending = sorted(changes_at)
    publications = []
    now = START
    while now <= until:
        next_change = pending[0] if pending else until + 1
        now = min(next_change, log.next_check_ms())
        if now > until:
            break
        if pending and now == next_change:
            pending.pop(0)
            assert log.append([isr.change()], now) is None  # ISR-only: never published at once
        else:
            publication = log.tick(now)
            if publication is not None:
                publications.append((now, publication.published_offset))
    return publications


def test_fifty_isr_changes_within_three_seconds_take_at_most_two_propagations() -> None:
    for burst_start in (1_000, 2_400, 61_000, 123_456):  # soon after start, and after a quiet minute
        log = new_log()
        changes = [burst_start + i * 60 for i in range(50)]  # 50 changes over 2.94 s
        publications = run(log, changes, burst_start + 20_000)
        assert 1 <= len(publications) <= 2, (burst_start, publications)
        assert publications[-1][1] == log.end_offset == 51  # all of them reached brokers


@pytest.mark.parametrize("change_at", [0, 1, 1_250, 2_499, 2_500, 2_501, 4_999, 70_000, 70_001, 300_000])
def test_a_lone_isr_change_propagates_five_to_seven_and_a_half_seconds_after_it_happened(change_at: int) -> None:
    log = new_log()
    publications = run(log, [change_at], change_at + 20_000)
    assert len(publications) == 1
    delay = publications[0][0] - change_at
    assert 5_000 <= delay <= 7_500, delay


def test_continuous_churn_still_propagates_at_least_every_sixty_seconds() -> None:
    log = new_log()
    changes = list(range(500, 300_000, 1_000))  # a change every second for five minutes
    publications = run(log, changes, 300_000)
    times = [START] + [t for t, _ in publications]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert len(publications) >= 4
    assert max(gaps) <= 60_000, gaps
    assert min(gaps) >= 60_000  # and no more often: the blackout never passes during churn


def test_intervals_are_configurable() -> None:
    log = new_log(PropagationConfig(check_interval_ms=100, blackout_ms=300, max_interval_ms=1_000))
    publications = run(log, [1_050], 5_000)
    assert [t for t, _ in publications] == [1_400]


def test_non_isr_records_publish_at_once_carrying_pending_isr_changes() -> None:
    log = new_log()
    isr = Isr()
    assert log.append([isr.change()], 1_000) is None
    assert log.published_offset == 1
    publication = log.append([PartitionChangeRecord(T, 0, None, 2, 1, 2)], 1_100)  # a leadership change
    assert publication is not None and publication.immediate and publication.changes == 2
    assert log.published_offset == log.end_offset == 3
    assert log.tick(10_000) is None  # nothing left pending
    assert log.propagations == 1


def test_records_since_returns_only_published_records_with_offsets() -> None:
    log = new_log()
    log.append([PartitionRecord(T, 0, (1,), (1,), 1, 0, 0)], 10)
    log.append([Isr().change()], 20)
    records, published = log.records_since(0, 100)
    assert published == 2 and [o for o, _ in records] == [0, 1]
    assert log.records_since(1, 1) == ([(1, PartitionRecord(T, 0, (1,), (1,), 1, 0, 0))], 2)
    assert log.records_since(2, 10) == ([], 2)
    assert log.records_since(99, 10) == ([], 2)  # a broker ahead of a restarted controller gets nothing


def test_controller_batches_isr_changes_from_alter_partition() -> None:
    h = Harness()
    h.start(1, 2, 3)
    h.controller.create_topic("t", 1, 3, {}, h.now)
    h.drain()
    published = h.controller.published_offset
    propagations = h.controller.propagations
    reg = h.partition("t")
    item = AlterPartitionData(h.topic_id("t"), 0, reg.leader_epoch, reg.partition_epoch, (reg.leader,))
    result = h.controller.alter_partition(reg.leader, h.epochs[reg.leader], [item], h.now)
    assert result.response[0].isr == (reg.leader,)  # the leader learns at once...
    assert h.controller.published_offset == published  # ...other brokers do not, yet
    for _ in range(4):  # keep brokers alive while the checks run
        h.advance(2_500)
        h.heartbeat_all(1, 2, 3)
        h.controller.tick(h.now)
    assert h.controller.published_offset == h.controller.image.offset
    assert h.controller.propagations == propagations + 1
    propagated = [e for e in h.drain() if e.type is EventType.METADATA_PROPAGATED]
    assert [e.fields["changes"] for e in propagated] == [1]
    records, _ = h.controller.records_since(published, 10)
    assert [r for _, r in records] == list(result.records)
