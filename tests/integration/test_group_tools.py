"""`insync groups reset-offsets` and `insync groups delete` against a real broker, checked through confluent-kafka:
a dry run (the default) changes nothing, `--execute` commits the plan, each scenario lands where Kafka's tool
would put it (clamped to the log), an active group is refused, and `delete` deletes what it may and names the
rest with the broker's reason."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import start, wait_until
from insync.admin import ensure_topic
from insync.chaos import cluster
from insync.cli.main import main

pytestmark = pytest.mark.timeout(180)

BASE_MS = 1_600_000_000_000  # record i of a partition is stamped BASE_MS + 1000 * i
COUNTS = {0: 10, 1: 4}


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from confluent_kafka import Producer

    spec = start(tmp_path_factory.mktemp("group-tools"), 1, ["group.initial.rebalance.delay.ms=200"])
    try:
        ensure_topic(spec.bootstrap, "tools", 2, 1, {})
        producer = Producer({"bootstrap.servers": spec.bootstrap})
        for partition, count in COUNTS.items():
            for i in range(count):
                producer.produce("tools", value=b"v", partition=partition, timestamp=BASE_MS + 1000 * i)
        assert producer.flush(30) == 0
        yield spec.bootstrap
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


def consumer(bootstrap: str, group_id: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False,
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})


def commit(bootstrap: str, group_id: str, offsets: dict[int, int]) -> None:
    from confluent_kafka import TopicPartition

    c = consumer(bootstrap, group_id)
    c.commit(offsets=[TopicPartition("tools", p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


def committed(bootstrap: str, group_id: str) -> dict[int, int]:
    from confluent_kafka import TopicPartition

    c = consumer(bootstrap, group_id)
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition("tools", p) for p in COUNTS],
                                                              timeout=20) if tp.offset >= 0}
    finally:
        c.close()


def reset(bootstrap: str, group_id: str, *args: str) -> int:
    return main(["groups", "reset-offsets", "--group", group_id, *args, "--bootstrap-server", bootstrap])


def test_reset_offsets_scenarios(bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    commit(bootstrap, "resettable", {0: 5, 1: 2})
    assert reset(bootstrap, "resettable", "--topic", "tools", "--to-earliest") == 0
    out, err = capsys.readouterr()
    assert "WARN: No action will be performed as the --execute option is missing." in err
    assert out.splitlines() == ["", "GROUP           TOPIC           PARTITION  NEW-OFFSET",
                                "resettable      tools           0          0", "resettable      tools           1          0"]
    assert committed(bootstrap, "resettable") == {0: 5, 1: 2}, "a dry run changes nothing"
    assert reset(bootstrap, "resettable", "--topic", "tools", "--to-latest", "--execute") == 0
    assert committed(bootstrap, "resettable") == COUNTS
    assert reset(bootstrap, "resettable", "--topic", "tools:0", "--shift-by", "-3", "--execute") == 0
    assert reset(bootstrap, "resettable", "--topic", "tools:1", "--shift-by", "100", "--execute") == 0
    assert committed(bootstrap, "resettable") == {0: 7, 1: 4}
    assert "New offset (104) is higher than latest offset for topic partition tools-1. Value will be set to 4." in (
        capsys.readouterr().err)
    at = datetime.datetime.fromtimestamp((BASE_MS + 3000) / 1000, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.000")
    assert reset(bootstrap, "resettable", "--all-topics", "--to-datetime", at, "--execute") == 0
    assert committed(bootstrap, "resettable") == {0: 3, 1: 3}
    # The same instant written with a zone; on partition 1 nothing is that late, so it goes to its log end.
    assert reset(bootstrap, "resettable", "--topic", "tools", "--to-datetime",
                 at.replace(".000", ".500+00:00"), "--execute") == 0
    assert committed(bootstrap, "resettable") == {0: 4, 1: 4}, "partition 1 has nothing that late: its log end"
    assert "Warn: Partition 1 from topic tools is empty. Falling back to latest known offset." in capsys.readouterr().err
    assert reset(bootstrap, "resettable", "--all-topics", "--to-offset", "2", "--dry-run") == 0
    out, err = capsys.readouterr()
    assert out.split()[-1] == "2" and "WARN" not in err
    assert committed(bootstrap, "resettable") == {0: 4, 1: 4}


def test_reset_offsets_refuses_an_active_group_and_unknown_partitions(
        bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    live = consumer(bootstrap, "live")
    live.subscribe(["tools"])
    wait_until(lambda: live.poll(0.2) is None and bool(live.assignment()), 60, "the group to be Stable")
    try:
        assert reset(bootstrap, "live", "--topic", "tools", "--to-earliest", "--execute") == 1
        assert ("Assignments can only be reset if the group 'live' is inactive, but the current state is Stable."
                in capsys.readouterr().err)
        assert reset(bootstrap, "idle-never", "--topic", "tools:7", "--to-earliest") == 1
        assert 'The partitions "tools-7" do not exist' in capsys.readouterr().err
        assert reset(bootstrap, "idle-never", "--topic", "no-such-topic", "--to-earliest") == 1
        assert "topic 'no-such-topic' does not exist" in capsys.readouterr().err
        assert reset(bootstrap, "idle-never", "--topic", "tools:0", "--shift-by", "1") == 1
        assert "Cannot shift offset for partition tools-0" in capsys.readouterr().err
    finally:
        live.close()


def test_delete_deletes_what_it_may_and_names_the_rest(bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    commit(bootstrap, "doomed", {0: 1})
    busy = consumer(bootstrap, "busy")
    busy.subscribe(["tools"])
    wait_until(lambda: busy.poll(0.2) is None and bool(busy.assignment()), 60, "the group to be Stable")
    d = ["--bootstrap-server", bootstrap]
    assert main(["groups", "delete", "--group", "doomed", "--group", "busy", "--group", "nope", *d]) == 1
    out, err = capsys.readouterr()
    assert "Error: Deletion of some consumer groups failed:" in err
    assert "* Group 'busy' could not be deleted due to: NON_EMPTY_GROUP" in err
    assert "* Group 'nope' could not be deleted due to: GROUP_ID_NOT_FOUND" in err
    assert "These consumer groups were deleted successfully: 'doomed'" in out
    assert committed(bootstrap, "doomed") == {}
    busy.close()
    assert main(["groups", "delete", "--group", "busy", *d]) == 0
    assert capsys.readouterr().out.strip() == "Deletion of requested consumer groups ('busy') was successful."


def test_delete_offsets_prints_each_partition_as_kafkas_tool(bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    d = ["--bootstrap-server", bootstrap]
    commit(bootstrap, "pruned", {0: 3, 1: 2})
    assert main(["groups", "delete-offsets", "--group", "pruned", "--topic", "tools:0", *d]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == ["Request succeeded for deleting offsets from group pruned.", "",
                                "TOPIC           PARTITION  STATUS", "tools           0          Successful"]
    assert committed(bootstrap, "pruned") == {1: 2}
    assert main(["groups", "delete-offsets", "--group", "pruned", "--topic", "tools", "--topic", "gone", *d]) == 1
    out, err = capsys.readouterr()
    assert "Encountered some partition-level error" in err
    assert "gone            -          Error: This server does not host this topic-partition." in out
    assert "tools           1          Successful" in out and committed(bootstrap, "pruned") == {}
    assert main(["groups", "delete-offsets", "--group", "never-was", "--topic", "tools:0", *d]) == 1
    assert "Error: The group id does not exist." in capsys.readouterr().err
    member = consumer(bootstrap, "subscriber")
    member.subscribe(["tools"])
    wait_until(lambda: member.poll(0.2) is None and bool(member.assignment()), 60, "the group to be Stable")
    try:
        assert main(["groups", "delete-offsets", "--group", "subscriber", "--topic", "tools:1", *d]) == 1
        assert ("tools           1          Error: Deleting offsets of a topic is forbidden while the consumer group "
                "is actively subscribed to it." in capsys.readouterr().out)
    finally:
        member.close()


def test_kafka_pythons_reset_lands_where_the_tool_does(bootstrap: str) -> None:
    """kafka-python's admin reset (ListOffsets, then OffsetCommit without a member) agrees with the tool, and
    like Kafka the broker refuses it for a group with members (UNKNOWN_MEMBER_ID)."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient, OffsetSpec, OffsetTimestamp

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        specs = {TopicPartition("tools", 0): OffsetTimestamp(BASE_MS + 3500), TopicPartition("tools", 1): OffsetSpec.EARLIEST}
        answer = admin.reset_group_offsets("kp-reset", specs)
        assert {tp.partition: (r["error"].__name__, r["offset"]) for tp, r in answer.items()} == {
            0: ("NoError", 4), 1: ("NoError", 0)}
        assert committed(bootstrap, "kp-reset") == {0: 4, 1: 0}
        assert main(["groups", "reset-offsets", "--group", "kp-reset", "--topic", "tools:1", "--to-datetime",
                     datetime.datetime.fromtimestamp((BASE_MS + 1000) / 1000, datetime.UTC).strftime(
                         "%Y-%m-%dT%H:%M:%S.000"), "--execute", "--bootstrap-server", bootstrap]) == 0
        assert committed(bootstrap, "kp-reset") == {0: 4, 1: 1}
        member = consumer(bootstrap, "kp-live")
        member.subscribe(["tools"])
        wait_until(lambda: member.poll(0.2) is None and bool(member.assignment()), 60, "the group to be Stable")
        try:
            refused = admin.reset_group_offsets("kp-live", {TopicPartition("tools", 0): OffsetSpec.EARLIEST})
            assert [r["error"].__name__ for r in refused.values()] == ["UnknownMemberIdError"]
        finally:
            member.close()
    finally:
        admin.close()
