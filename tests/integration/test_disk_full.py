"""A broker's log dir fills up under acks=all traffic: the broker halts as Kafka's does with one log dir, the others
take over, nothing acknowledged is lost, and after space returns and a restart it rejoins every ISR.

Each broker's log dir is a 32 MB tmpfs (chaos/small_disk.py, root only) mounted before the cluster starts and
unmounted at the end, whatever happened.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from conftest import start, wait_until
from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster, history, small_disk

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

REASON = small_disk.unavailable()
if REASON is not None:
    pytest.skip(f"needs a small file system: {REASON}", allow_module_level=True)

TOPIC = "full"
HALT_LINE = "Shutdown broker because all log dirs in"


def leader_of(spec: cluster.ClusterSpec, partition: int, without: int = -1) -> int:
    bootstrap = ",".join(b.address for b in spec.brokers if b.node_id != without)
    return next(r.leader for r in describe_rows(bootstrap, [TOPIC]) if r.partition == partition)


def test_a_full_log_dir_halts_its_broker_and_loses_nothing_acknowledged(tmp_path: Path) -> None:
    data_dirs = [tmp_path / f"node-{b}" / "data" for b in (1, 2, 3)]
    with small_disk.mounted(data_dirs, 32):
        spec = start(tmp_path)
        try:
            ensure_topic(spec.bootstrap, TOPIC, 3, 3, {"min.insync.replicas": "2"})
            victim = wait_until(lambda: max(leader_of(spec, 0), 0), 30, "a leader for partition 0")
            workload = history.ProduceWorkload(spec.bootstrap, TOPIC, rate=300, run_id="df")
            workload.start()
            wait_until(lambda: len(workload.history.acked) > 300, 30, "acks=all traffic flowing")
            pid = spec.node(victim).pid
            assert pid is not None
            assert small_disk.fill(spec.node(victim).log_dir) > 0
            wait_until(lambda: not cluster.pid_alive(pid), 30, f"broker {victim} halting on its full log dir")
            halted = (Path(spec.node(victim).directory) / "stdout.log").read_text(errors="replace")
            assert HALT_LINE in halted, halted[-3000:]
            wait_until(lambda: leader_of(spec, 0, without=victim) not in (victim, -1), 30,
                       "a new leader for partition 0")
            before = len(workload.history.acked)
            time.sleep(3)
            assert len(workload.history.acked) > before + 100, "produces did not go on through the other leaders"

            small_disk.free(spec.node(victim).log_dir)
            spec = cluster.start_node(spec, victim)
            cluster.wait_listening(spec.node(victim))
            wait_until(lambda: all(len(r.isr) == 3 for r in describe_rows(spec.bootstrap, [TOPIC])), 60,
                       f"broker {victim} back in every ISR")
            produced = workload.stop()
            verdict = history.verdict(produced, history.read_back(spec.bootstrap, TOPIC, "df"))
            assert verdict.acked > 1000, verdict
            assert (verdict.lost, verdict.duplicated, verdict.reordered) == (0, 0, 0), verdict
        finally:
            cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
