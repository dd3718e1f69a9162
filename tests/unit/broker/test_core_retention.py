"""Retention never moves a log start past the high watermark (issue 16): a leader whose ISR is below min ISR
keeps its HW frozen, and acks=1 writes go on; size retention must not delete what no follower has yet."""

from __future__ import annotations

from broker_harness import TP, Harness

from insync.broker.messages import ProduceResponse


def _starved_leader() -> tuple[Harness, int]:
    """Two brokers, min ISR 2, small segments and retention.bytes; the follower stops processing anything,
    leaves the ISR, and the leader takes 60 acks=1 batches while its HW stays where the follower left it."""
    h = Harness({"broker.session.timeout.ms": 600_000, "log.segment.bytes": 600, "log.retention.bytes": 1_200,
                 "log.retention.check.interval.ms": 1_000})
    h.run(3_000)
    h.controller.create_topic("t", 1, 2, {}, h.clock.now)
    h.run(1_000)
    follower = next(b for b, core in h.cores.items() if not core.leader_states())
    h.produce(-1, 1)
    h.run(600)
    stuck = h.cores.pop(follower)
    for correlation in range(2, 62):
        h.produce(1, correlation)
        h.run(300)
    h.cores[follower] = stuck
    return h, follower


def test_size_retention_stops_at_the_frozen_high_watermark_of_a_leader_below_min_isr() -> None:
    h, _ = _starved_leader()
    leader = h.leader().partitions[TP]
    assert leader.is_under_min_isr and leader.high_watermark == 3
    assert all(m.results[0].error.code == 0 for m in h.client if isinstance(m, ProduceResponse))
    log = leader.log
    assert log.log_end_offset == 3 + 60 * 3 and len(log.segments) > 3, "segments rolled: retention had work"
    assert log.log_start_offset <= leader.high_watermark
    assert log.segments[1].base_offset > leader.high_watermark  # the first segment holds the HW: it stays


def test_the_follower_back_catches_up_without_skipping_records() -> None:
    h, follower = _starved_leader()
    h.run(30_000)  # the follower fetches again, rejoins the ISR; the HW moves and retention resumes
    leader = h.leader().partitions[TP]
    replica = h.cores[follower].partitions[TP]
    assert replica.log_end_offset == leader.log_end_offset == leader.high_watermark == 183
    events = [e for e in h.cores[follower].drain_events() if e.type.value in ("truncate", "log_start_bounded")]
    assert events == [], "the follower restarted its log at the leader's log start: records were skipped"
