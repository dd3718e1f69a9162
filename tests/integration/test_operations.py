"""What operators see on a live cluster: the Prometheus endpoint with Kafka's names, events.jsonl, server.log in
Kafka's wording, and each `insync chaos` command through the CLI."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from conftest import events, start, wait_until
from insync import faults
from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster
from insync.cli.main import main

pytestmark = pytest.mark.timeout(180)


FAILED_PARTITIONS = 'FailedPartitionsCount{clientId="Replica"}'  # Kafka's ReplicaFetcherManager tag


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def test_metrics_events_logs_and_chaos_commands(tmp_path: Path) -> None:
    spec = start(tmp_path, extra=["fault.injection.enable=true"])
    d = ["--dir", spec.directory]
    try:
        ensure_topic(spec.bootstrap, "ops", 2, 3, {"min.insync.replicas": "2"})
        controller = scrape(spec.controller.metrics_port)
        assert controller["ActiveControllerCount"] == 1 and controller["OfflinePartitionsCount"] == 0
        row = describe_rows(spec.bootstrap, ["ops"])[0]
        follower = next(b for b in row.replicas if b != row.leader)
        metrics = scrape(spec.node(follower).metrics_port)
        for name in ("UnderReplicatedPartitions", "UnderMinIsrPartitionCount", FAILED_PARTITIONS,
                     'MaxLag{clientId="Replica"}', 'DeadThreadCount{clientId="Replica"}', "IsrShrinksPerSec_total",
                     "IsrExpandsPerSec_total"):
            assert name in metrics, name
        every_broker = [scrape(b.metrics_port) for b in spec.brokers]
        assert any(k.startswith('RequestsPerSec_total{request="Metadata"}') for m in every_broker for k in m)

        # Seed 002 live: one partition's appends fail on a follower; it is marked failed, the other keeps going.
        assert main(["chaos", "fail-partition", str(follower), "ops", "0", *d]) == 0
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": spec.bootstrap, "acks": "1"})

        def produced_and_failed() -> bool:  # keep writing: the broker polls its faults file every 200 ms
            for partition in (0, 1):
                producer.produce("ops", value=b"x", partition=partition)
            assert producer.flush(30) == 0
            return scrape(spec.node(follower).metrics_port)[FAILED_PARTITIONS] == 1

        wait_until(produced_and_failed, 20, "FailedPartitionsCount = 1 on the follower")
        assert [(e["topic"], e["partition"]) for e in events(spec, follower, "partition_failed")] == [("ops", 0)]
        log_text = (spec.node(follower).log_dir / "server.log").read_text()
        assert "Partition ops-0 marked as failed" in log_text
        wait_until(lambda: follower not in describe_rows(spec.bootstrap, ["ops"])[0].isr, 20,
                 "the failed follower leaves ops-0's ISR")
        assert follower in describe_rows(spec.bootstrap, ["ops"])[1].isr  # its other partition is fine
        leader_log = (spec.node(row.leader).log_dir / "server.log").read_text()
        assert "Shrinking ISR from" in leader_log and "Out of sync replicas: (brokerId: " in leader_log

        assert main(["chaos", "delay", str(follower), "--ms", "20", *d]) == 0
        assert main(["chaos", "slow-reads", str(row.leader), "--topic", "ops", "--partition", "1", "--ms", "10",
                     *d]) == 0
        assert faults.read_faults(spec.node(follower).directory).delay_ms == 20
        assert main(["chaos", "clear", str(follower), *d]) == 0
        assert main(["chaos", "clear", str(row.leader), *d]) == 0

        # A restart reopens the failed log: the follower replicates ops-0 again and rejoins its ISR.
        assert main(["chaos", "kill", str(follower), *d]) == 0
        assert main(["chaos", "restart", str(follower), *d]) == 0
        wait_until(lambda: all(len(r.isr) == 3 for r in describe_rows(spec.bootstrap, ["ops"])), 30,
                 "every ISR full again")

        assert main(["chaos", "pause", str(follower), *d]) == 0
        assert main(["chaos", "resume", str(follower), *d]) == 0
        assert main(["cluster", "status", *d]) == 0
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
    assert main(["chaos", "pause", "1", *d]) == 1  # not running: one line, exit 1
