"""Issue 16 on real processes: retention never moves a leader's log start past its high watermark.

2 brokers, RF 2, min ISR 2, `segment.bytes=16384`, `retention.bytes=65536`, retention checked every 250 ms. The
follower is SIGSTOPped while acks=1 writes go on: the ISR shrinks to the leader, below min ISR, so the high
watermark must freeze (ListOffsets latest stops moving) and the log start must stay at or below it (ListOffsets
earliest), however much retention would like to delete. Resumed (SIGCONT, always, in `finally`), the follower
catches up from where it stopped, without restarting its log past records it never had.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import events, start, wait_until
from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster

pytestmark = pytest.mark.timeout(150)

TOPIC = "retained"
VALUE = b"v" * 400
ROUND_MESSAGES = 100  # 40 KB a round: a frozen HW lets retention.bytes=65536 want segments within two rounds
SAMPLES = 8


def _produce_round(producer: Producer) -> None:
    for _ in range(ROUND_MESSAGES):
        producer.produce(TOPIC, VALUE, partition=0)
        producer.poll(0)
    assert producer.flush(15) == 0, "acks=1 writes to the leader were not all answered"


def _offsets(consumer: Consumer) -> tuple[int, int]:
    """(earliest, latest) by ListOffsets to the leader: the log start and, for a consumer, the high watermark."""
    earliest, latest = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10, cached=False)
    return int(earliest), int(latest)


def test_a_frozen_high_watermark_bounds_retention_and_the_follower_catches_up(tmp_path: Path) -> None:
    spec = start(tmp_path, brokers=2, extra=["log.retention.check.interval.ms=250"])
    stopped: int | None = None
    try:
        ensure_topic(spec.bootstrap, TOPIC, 1, 2, {"min.insync.replicas": "2", "segment.bytes": "16384",
                                                    "retention.bytes": "65536"})
        [row] = describe_rows(spec.bootstrap, [TOPIC])
        leader = spec.node(row.leader)
        follower = next(b.node_id for b in spec.brokers if b.node_id != row.leader)
        producer = Producer({"bootstrap.servers": leader.address, "acks": 1, "linger.ms": 0,
                             "enable.idempotence": False})
        consumer = Consumer({"bootstrap.servers": leader.address, "group.id": "retention-bound",
                             "isolation.level": "read_uncommitted"})
        _produce_round(producer)
        wait_until(lambda: _offsets(consumer)[1] == ROUND_MESSAGES, 15, "the first round committed")

        cluster.signal_node(spec, follower, signal.SIGSTOP)
        stopped = follower
        for _ in range(60):  # bounded: the ISR shrinks after replica.lag.time.max.ms (4 s here)
            _produce_round(producer)
            if describe_rows(leader.address, [TOPIC])[0].isr == (row.leader,):
                break
        else:
            raise AssertionError("the ISR never shrank to the leader")
        frozen = _offsets(consumer)[1]
        written = frozen
        for _ in range(SAMPLES):
            _produce_round(producer)
            written += ROUND_MESSAGES
            time.sleep(0.3)  # retention runs every 250 ms
            earliest, latest = _offsets(consumer)
            assert latest == frozen, f"the HW moved from {frozen} to {latest} while the ISR was below min ISR"
            assert earliest <= latest, f"log start {earliest} past the high watermark {latest}"
        assert written - frozen >= SAMPLES * ROUND_MESSAGES  # retention had plenty it could have deleted
        # Retention did delete what lay below the HW, and earliest answers the log's real start: the first segment
        # left (the HW froze, so retention has stopped moving it by now).
        segments = sorted(int(p.stem) for p in (leader.log_dir / f"{TOPIC}-0").glob("*.log"))
        assert 0 < earliest == segments[0] <= frozen, (earliest, segments[:3], frozen)

        cluster.signal_node(spec, follower, signal.SIGCONT)
        stopped = None
        wait_until(lambda: len(describe_rows(leader.address, [TOPIC])[0].isr) == 2, 60,
                   f"broker {follower} back in the ISR")
        wait_until(lambda: _offsets(consumer)[1] >= written, 30, "the HW past every acks=1 write")
        skipped = [e for kind in ("truncate", "log_start_bounded") for e in events(spec, follower, kind)]
        assert skipped == [], f"the follower skipped records it never had: {skipped[:2]}"
        consumer.close()
    finally:
        if stopped is not None:
            cluster.signal_node(spec, stopped, signal.SIGCONT)
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
