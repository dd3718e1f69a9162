"""insync's `__consumer_offsets` read by Kafka's own decoder (`kafka-dump-log --offsets-decoder`, Kafka 4.1): a
group's membership record and its offset commit come out with the generation, protocol, member and offset the
insync coordinator gave them, so a Kafka tool or a replica reading the bytes sees Kafka's formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka import KafkaConsumer

from insync.admin import ensure_topic
from insync.chaos import cluster, kafka_dist, kafka_tools
from insync.groups.offsets import partition_for
from insync.types import OFFSETS_TOPIC

pytestmark = pytest.mark.timeout(300)
GROUP = "decoded-by-kafka"
SETTINGS = ["offsets.topic.replication.factor=1", "offsets.topic.num.partitions=5", "group.initial.rebalance.delay.ms=0"]


def test_kafkas_offsets_decoder_reads_the_groups_records(tmp_path: Path) -> None:
    spec = cluster.up(str(tmp_path / "cluster"), 1, 0, SETTINGS)
    try:
        ensure_topic(spec.bootstrap, "decoded", 2, 1, {})
        consumer = KafkaConsumer("decoded", bootstrap_servers=spec.bootstrap, group_id=GROUP,
                                 enable_auto_commit=False, auto_offset_reset="earliest")
        try:
            for _ in range(60):  # bounded: the join completes within a few polls
                consumer.poll(timeout_ms=500)
                if consumer.assignment():
                    break
            assert consumer.assignment(), "the consumer got no assignment"
            member_id = consumer._coordinator._generation.member_id  # noqa: SLF001 - what the record must name
            consumer_id = consumer.config["client_id"]
            consumer.commit()
        finally:
            consumer.close()
        segments = sorted((spec.brokers[0].log_dir / f"{OFFSETS_TOPIC}-{partition_for(GROUP, 5)}").glob("*.log"))
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 20.0)
    ran = kafka_tools.run(kafka_dist.assemble("4.1"), "kafka-dump-log",
                          ["--offsets-decoder", "--files", ",".join(map(str, segments))])
    assert ran.exit_code == 0, ran.stderr[-2000:]
    decoded = [json.loads(line.split("payload: ", 1)[1]) for line in ran.stdout.splitlines() if "payload: " in line]
    keys = [json.loads(line.split("key: ", 1)[1].split(" payload: ", 1)[0]) for line in ran.stdout.splitlines()
            if " key: " in line and "payload: " in line]
    groups = [(k, v) for k, v in zip(keys, decoded, strict=True) if k["type"] == "2"]
    assert groups, ran.stdout[-3000:]
    assert all(k["data"]["group"] == GROUP and v["version"] == "3" for k, v in groups), groups
    (stable, empty) = (v["data"] for _, v in groups[-2:])  # the rebalance's end, then Empty once it left
    assert (stable["protocolType"], stable["protocol"], stable["leader"]) == ("consumer", "range", member_id), stable
    assert [(m["memberId"], m["clientId"]) for m in stable["members"]] == [(member_id, consumer_id)], stable
    assert (empty["generation"], empty["protocol"], empty["members"]) == (stable["generation"] + 1, None, []), empty
    commits = [(k["data"], v["data"]["offset"]) for k, v in zip(keys, decoded, strict=True) if k["type"] == "1"]
    assert ({"group": GROUP, "topic": "decoded", "partition": 0}, 0) in commits, commits
