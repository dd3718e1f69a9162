"""SIGKILL the leader under an idempotent acks=all producer, restart it, and check the histories and the logs.

3 brokers, RF 3, min ISR 2. Afterwards: every acknowledged message is read back exactly once and in order,
the restarted broker is back in the ISR, and the replicas' logs are identical up to the high watermark
(compared batch by batch from `insync log dump`)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import events, start, wait_until
from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster, history

pytestmark = pytest.mark.timeout(180)

TOPIC = "failover"

# Long enough that waiting it out shows through a loaded machine's slow restart (Python's start, catch-up).
CLEAN_STOP_SESSION_MS = 30_000


def leader_of(spec: cluster.ClusterSpec, partition: int, without: int = -1) -> int:
    """The leader as the live brokers report it (a dead bootstrap broker would only slow the client down)."""
    bootstrap = ",".join(b.address for b in spec.brokers if b.node_id != without)
    return next(r.leader for r in describe_rows(bootstrap, [TOPIC]) if r.partition == partition)


def dumped_batches(spec: cluster.ClusterSpec, broker: int, partition: int, below: int) -> list[str]:
    """(baseOffset, lastOffset, count, crc) of every batch under the high watermark, from `insync log dump`."""
    directory = spec.node(broker).log_dir / f"{TOPIC}-{partition}"
    out = subprocess.run([sys.executable, "-m", "insync.cli.main", "log", "dump", str(directory)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    batches = []
    for line in out.splitlines():
        if not line.startswith("baseOffset:"):
            continue
        tokens = line.split()
        fields = {k.rstrip(":"): v for k, v in zip(tokens[0::2], tokens[1::2], strict=False)}
        if int(fields["lastOffset"]) < below:
            batches.append(f"{fields['baseOffset']}-{fields['lastOffset']}-{fields['count']}-{fields['crc']}")
    return batches


@pytest.mark.slow
def test_leader_sigkill_and_restart_loses_nothing(tmp_path: Path) -> None:
    spec = start(tmp_path)
    try:
        ensure_topic(spec.bootstrap, TOPIC, 3, 3, {"min.insync.replicas": "2"})
        workload = history.ProduceWorkload(spec.bootstrap, TOPIC, rate=400, run_id="fo")
        workload.start()
        time.sleep(3)
        victim = leader_of(spec, 0)
        spec = cluster.stop_node(spec, victim, deadline_s=0, sig=signal.SIGKILL)
        wait_until(lambda: leader_of(spec, 0, without=victim) not in (victim, -1), 45, "a new leader for partition 0")
        time.sleep(3)
        spec = cluster.start_node(spec, victim)
        cluster.wait_listening(spec.node(victim))
        time.sleep(3)
        produced = workload.stop()
        verdict = history.verdict(produced, history.read_back(spec.bootstrap, TOPIC, "fo"))
        assert verdict.acked > 1000, verdict
        assert (verdict.lost, verdict.duplicated, verdict.reordered) == (0, 0, 0), verdict

        wait_until(lambda: all(len(r.isr) == 3 for r in describe_rows(spec.bootstrap, [TOPIC])), 30,
                   f"broker {victim} back in every ISR")
        cluster.down(spec, 10.0)  # graceful: logs flushed, high watermarks checkpointed
        for partition in range(3):
            hws = [_checkpointed_hw(spec.node(b).log_dir, partition) for b in (1, 2, 3)]
            below = min(hws)
            assert below > 0
            dumps = [dumped_batches(spec, b, partition, below) for b in (1, 2, 3)]
            assert dumps[0] == dumps[1] == dumps[2], f"partition {partition} diverges below {below}"
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


def _checkpointed_hw(log_dir: Path, partition: int) -> int:
    lines = (log_dir / "replication-offset-checkpoint").read_text().splitlines()[2:]
    for line in lines:
        topic, p, offset = line.split()
        if topic == TOPIC and int(p) == partition:
            return int(offset)
    raise AssertionError(f"no checkpointed high watermark for {TOPIC}-{partition} in {log_dir}")


def test_a_clean_stop_hands_leadership_over_and_the_restart_registers_at_once(tmp_path: Path) -> None:
    """Kafka's controlled shutdown: SIGTERM on a leader moves its leaderships to in-sync followers before it exits
    (no partition goes offline, reason `shutdown`), and it is fenced, so its restart registers without waiting out
    its old session (30 s here: a restart that waited would rejoin 25 s or more after it began)."""
    spec = start(tmp_path, extra=[f"broker.session.timeout.ms={CLEAN_STOP_SESSION_MS}"])
    try:
        ensure_topic(spec.bootstrap, TOPIC, 3, 3, {"min.insync.replicas": "2"})
        wait_until(lambda: all(len(r.isr) == 3 for r in describe_rows(spec.bootstrap, [TOPIC])), 30, "full ISRs")
        victim = leader_of(spec, 0)
        stopping = time.monotonic()
        spec = cluster.stop_node(spec, victim, deadline_s=15)  # SIGTERM, and wait for the exit
        stopped_s = time.monotonic() - stopping
        assert stopped_s < 5, f"the clean stop took {stopped_s:.1f} s"
        moved = [e for e in events(spec, cluster.CONTROLLER_ID, "leader_change") if e.get("leader_before") == victim]
        assert moved and {e["reason"] for e in moved} == {"shutdown"}, moved
        assert all(e["leader_after"] not in (victim, -1) for e in moved), moved  # to a follower, not offline
        assert not events(spec, cluster.CONTROLLER_ID, "partition_offline")
        # KIP-966: the clean stop proves itself to the next registration with the epoch of the life it ended.
        epoch = [e for e in events(spec, cluster.CONTROLLER_ID, "broker_registered") if e["broker_id"] == victim]
        marker = json.loads((spec.node(victim).log_dir / ".kafka_cleanshutdown").read_text())
        assert marker == {"version": 0, "brokerEpoch": epoch[-1]["broker_epoch"]}, marker
        restarting = time.monotonic()
        spec = cluster.start_node(spec, victim)
        wait_until(lambda: all(len(r.isr) == 3 for r in describe_rows(spec.bootstrap, [TOPIC])), 30,
                   f"broker {victim} back in every ISR")
        rejoined_s = time.monotonic() - restarting
        assert rejoined_s < CLEAN_STOP_SESSION_MS / 1000 - 10, \
            f"the restart took {rejoined_s:.1f} s to rejoin: it waited for its old session?"
        registrations = [e for e in events(spec, cluster.CONTROLLER_ID, "broker_registered")
                         if e.get("broker_id") == victim]
        assert len(registrations) == 2  # the first try of the new incarnation was accepted
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
