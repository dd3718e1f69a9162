"""Eligible Leader Replicas (KIP-966) on real processes: the last replica standing dies, and the partition comes back
without an unclean election and without losing an acknowledged write.

3 brokers, RF 3, min ISR 2, one partition, an idempotent acks=all confluent-kafka producer running throughout.
Both followers stop cleanly, one after the other, so the ISR shrinks to the leader; the second follower leaves while
the ISR is below min ISR, so it stays eligible (the high watermark stood still from then on: it has every committed
record). The leader is then SIGKILLed and the followers restarted, the leader not. With ELR (the default) the
eligible follower leads at once and nothing acknowledged is lost; with `eligible.leader.replicas.enable=false`
(Kafka 3.x) the partition stays offline until the dead leader itself returns.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from conftest import events, start, wait_until
from insync.admin import PartitionRow, describe_rows, ensure_topic
from insync.chaos import cluster, history

pytestmark = pytest.mark.timeout(240)

TOPIC = "standing"
RATE = 200  # the workload's writes per second


def _row(spec: cluster.ClusterSpec, alive: set[int]) -> PartitionRow:
    bootstrap = ",".join(b.address for b in spec.brokers if b.node_id in alive)
    return next(r for r in describe_rows(bootstrap, [TOPIC]) if r.partition == 0)


def _acknowledged(workload: history.ProduceWorkload, count: int, how: str) -> None:
    """Until `count` more of the workload's writes are acknowledged."""
    target = len(workload.history.acked) + count
    wait_until(lambda: len(workload.history.acked) >= target, 30, f"{count} more writes acknowledged {how}")


def _shrink_to_the_leader(spec: cluster.ClusterSpec,
                          workload: history.ProduceWorkload) -> tuple[cluster.ClusterSpec, int, int, int]:
    """Stop both followers cleanly (the later one while the ISR is below min ISR); returns (spec, leader, first
    follower stopped, second follower stopped)."""
    wait_until(lambda: len(_row(spec, {1, 2, 3}).isr) == 3, 30, "a full ISR")
    row = _row(spec, {1, 2, 3})
    leader = row.leader
    first, second = [b for b in row.replicas if b != leader]
    spec = cluster.stop_node(spec, first, deadline_s=15)
    wait_until(lambda: set(_row(spec, {leader, second}).isr) == {leader, second}, 30,
               f"broker {first} out of the ISR")
    _acknowledged(workload, RATE, f"by the ISR {sorted((leader, second))}")
    spec = cluster.stop_node(spec, second, deadline_s=15)
    wait_until(lambda: list(_row(spec, {leader}).isr) == [leader], 30,
               f"the ISR shrunk to the leader {leader}")
    return spec, leader, first, second


def _run(tmp_path: Path, elr: bool) -> None:
    spec = start(tmp_path, extra=[f"eligible.leader.replicas.enable={'true' if elr else 'false'}"])
    workload = history.ProduceWorkload(spec.bootstrap, TOPIC, rate=RATE, run_id="elr")
    try:
        ensure_topic(spec.bootstrap, TOPIC, 1, 3, {"min.insync.replicas": "2"})
        workload.start()
        _acknowledged(workload, 2 * RATE, "by the full ISR")
        spec, leader, first, second = _shrink_to_the_leader(spec, workload)
        spec = cluster.stop_node(spec, leader, deadline_s=0, sig=signal.SIGKILL)
        for broker in (first, second):
            spec = cluster.start_node(spec, broker)
            cluster.wait_listening(spec.node(broker))
        if elr:
            wait_until(lambda: _row(spec, {first, second}).leader == second, 45,
                       f"the eligible replica {second} leading while {leader} is still down")
        else:
            # A window in which no leader may be elected: both followers registered and unfenced long since,
            # Kafka 3.x keeps waiting for the dead leader.
            time.sleep(8)
            assert _row(spec, {first, second}).leader == -1
            spec = cluster.start_node(spec, leader)
            cluster.wait_listening(spec.node(leader))
            wait_until(lambda: _row(spec, {1, 2, 3}).leader == leader, 45,
                       f"the old leader {leader} back in charge")
        alive = {first, second} if elr else {1, 2, 3}
        wait_until(lambda: len(_row(spec, alive).isr) >= 2, 45, "the partition back at min ISR")
        _acknowledged(workload, 2 * RATE, "again, at min ISR")
        produced = workload.stop()
        bootstrap = ",".join(spec.node(b).address for b in alive)
        verdict = history.verdict(produced, history.read_back(bootstrap, TOPIC, "elr"))
        assert verdict.acked > 500, verdict
        assert (verdict.lost, verdict.reordered) == (0, 0), verdict
        unclean = [e for e in events(spec, cluster.CONTROLLER_ID, "leader_change") if e.get("reason") == "unclean"]
        assert not unclean, unclean
    finally:
        workload.stop()
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


def test_the_eligible_replica_leads_when_the_last_isr_member_dies(tmp_path: Path) -> None:
    _run(tmp_path, elr=True)


@pytest.mark.slow
def test_without_elr_the_partition_waits_for_the_dead_leader(tmp_path: Path) -> None:
    _run(tmp_path, elr=False)
