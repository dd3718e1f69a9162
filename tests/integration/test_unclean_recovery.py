"""Unclean recovery (KIP-966) on real processes: `insync topics elect-leaders --unclean --dry-run` shows what each
choice would discard, and `--unclean` elects the replica that loses least (ElectLeaders UNCLEAN).

3 brokers, RF 3, one partition. The followers stop cleanly one after the other while acks=all writes go on, so
the first one stopped holds 100 records and the second 150; the leader, alone in the ISR, takes 30 more with
acks=1 and is SIGKILLed. The followers come back: the partition is offline (its ISR member is dead; with the
default strategy Balanced, the ELR holding it makes the controller wait for it). The dry run reads both logs
and changes nothing; the unclean election then picks the longer log.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import events, start, wait_until
from insync.admin import PartitionRow, describe_rows, ensure_topic
from insync.chaos import cluster

pytestmark = pytest.mark.timeout(240)

TOPIC = "recover"


def _row(spec: cluster.ClusterSpec, alive: tuple[int, ...]) -> PartitionRow:
    bootstrap = ",".join(spec.node(b).address for b in alive)
    return describe_rows(bootstrap, [TOPIC])[0]


def _produce(bootstrap: str, count: int, acks: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks})
    for i in range(count):
        producer.produce(TOPIC, value=f"v{i}".encode())
    assert producer.flush(30) == 0


def _elect(spec: cluster.ClusterSpec, alive: tuple[int, ...], *flags: str) -> subprocess.CompletedProcess[str]:
    bootstrap = ",".join(spec.node(b).address for b in alive)
    return subprocess.run([sys.executable, "-m", "insync.cli.main", "topics", "elect-leaders", TOPIC, *flags,
                           "--bootstrap-server", bootstrap], capture_output=True, text=True, timeout=60)


def test_dry_run_then_unclean_election_of_the_longest_log(tmp_path: Path) -> None:
    spec = start(tmp_path)
    try:
        ensure_topic(spec.bootstrap, TOPIC, 1, 3, {})
        wait_until(lambda: len(_row(spec, (1, 2, 3)).isr) == 3, 30, "a full ISR")
        row = _row(spec, (1, 2, 3))
        leader = row.leader
        shorter, longer = [b for b in row.replicas if b != leader]
        _produce(spec.bootstrap, 100, "all")
        spec = cluster.stop_node(spec, shorter, deadline_s=15)
        wait_until(lambda: shorter not in _row(spec, (leader, longer)).isr, 30, f"{shorter} out of the ISR")
        _produce(spec.node(leader).address, 50, "all")
        spec = cluster.stop_node(spec, longer, deadline_s=15)
        wait_until(lambda: _row(spec, (leader,)).isr == (leader,), 30, "the ISR down to the leader")
        _produce(spec.node(leader).address, 30, "1")
        spec = cluster.stop_node(spec, leader, deadline_s=0, sig=signal.SIGKILL)
        for broker in (shorter, longer):
            spec = cluster.start_node(spec, broker)
            cluster.wait_listening(spec.node(broker))
        alive = (shorter, longer)
        wait_until(lambda: _row(spec, alive).leader == -1, 45, "the partition offline")
        offline = _row(spec, alive)
        assert (offline.isr, offline.elr) == ((), (leader,))  # the dead leader alone is eligible (KIP-966)

        dry = _elect(spec, alive, "--unclean", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        out = dry.stdout
        assert f"broker {shorter}: offsets 0-99, last leader epoch 0" in out, out
        assert f"broker {longer}: offsets 0-149, last leader epoch 0" in out, out
        assert f"broker {leader}: not reachable" in out, out
        assert (f"Electing {longer} (the recovery rule's choice: highest last leader epoch, then longest log): "
                f"0 records discarded\n\t\tbroker {shorter} discards nothing") in out, out
        assert f"Electing {shorter}: 50 records discarded\n\t\tbroker {longer} discards 50 records (offsets 100-149)" \
            in out, out
        assert _row(spec, alive).leader == -1  # a dry run changes nothing

        # The replicas report their logs with their heartbeats; until the controller has both, it refuses.
        wait_until(lambda: _elect(spec, alive, "--unclean").returncode == 0, 30, "an unclean election")
        wait_until(lambda: _row(spec, alive).leader == longer, 30, f"{longer} leading")
        (recovery,) = events(spec, cluster.CONTROLLER_ID, "unclean_recovery")
        assert (recovery["strategy"], recovery["leader_after"], recovery["records_lost"]) == ("ElectLeaders", longer, 0)
        assert recovery["lost"] == [{"broker": shorter, "from_offset": 100, "to_offset": 100, "records": 0}]
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
