"""A log directory that fails: its partitions refuse with KAFKA_STORAGE_ERROR, the controller hears of it, and a
broker whose every log directory failed halts (Kafka's ReplicaManager.handleLogDirFailure)."""

from __future__ import annotations

import pytest
from broker_harness import TP, cluster_with_topic

from insync import errors
from insync.broker.core import BrokerCore
from insync.broker.dir_failure import LogDirFailures, directory_id
from insync.broker.messages import ProduceRequest, ProduceResponse
from insync.clock import ManualClock
from insync.config import BrokerConfig
from insync.controller.messages import BrokerHeartbeatRequest
from insync.protocol.records import build_batch
from insync.storage.disk import MemoryDisk
from insync.storage.log_manager import LogManager
from insync.types import BrokerId, TopicPartition


def test_the_last_log_dir_to_fail_halts_the_broker_with_kafkas_line() -> None:
    failures = LogDirFailures(("/d1", "/d2"))
    first = failures.fail("/d1", [TopicPartition("t", 1), TopicPartition("t", 0)])
    assert first is not None and first.partitions == (TopicPartition("t", 0), TopicPartition("t", 1))
    assert first.halt_message is None and failures.offline_directory_ids == (directory_id("/d1"),)
    assert failures.fail("/d1", []) is None  # reported once
    last = failures.fail("/d2", [])
    assert last is not None
    assert last.halt_message == "Shutdown broker because all log dirs in /d1, /d2 have failed"


def test_a_log_dir_not_of_the_broker_is_a_programmer_error() -> None:
    with pytest.raises(AssertionError, match="not one of the log directories"):
        LogDirFailures(("/d1",)).fail("/elsewhere", [])


def test_a_full_leader_refuses_the_produce_with_kafka_storage_error_and_halts() -> None:
    h = cluster_with_topic()
    h.produce(-1, 1)
    h.run(600)
    leader = h.leader()
    h.disks[leader.broker_id].set_full(f"/b{leader.broker_id}/")
    h.produce(-1, 2)
    h.run(0)
    answer = next(m for m in h.client if isinstance(m, ProduceResponse) and m.correlation_id == 2)
    assert answer.results[0].error is errors.KAFKA_STORAGE_ERROR
    assert leader.halt_message == f"Shutdown broker because all log dirs in /b{leader.broker_id} have failed"
    assert leader.partitions[TP].log.offline


def test_a_failed_dir_among_several_is_reported_in_the_next_heartbeat_at_once() -> None:
    h = cluster_with_topic()
    leader = h.leader()
    leader.dir_failures = LogDirFailures((f"/b{leader.broker_id}", "/other"))  # as a broker with two log dirs
    h.disks[leader.broker_id].set_full(f"/b{leader.broker_id}/")
    batch = build_batch([(b"k", b"v")])
    sent = leader.handle(h.clock.now, "client", ProduceRequest(3, 1, 30_000, ((TP, batch),)))
    heartbeats = [o.message for o in sent if isinstance(o.message, BrokerHeartbeatRequest)]
    assert heartbeats and heartbeats[0].offline_log_dirs == (directory_id(f"/b{leader.broker_id}"),)
    assert leader.halt_message is None and leader.fetchers.failed_partitions_count == 0


def test_with_another_log_dir_left_the_controller_moves_the_leadership_and_the_broker_keeps_running() -> None:
    h = cluster_with_topic()
    failed = h.leader()
    failed.dir_failures = LogDirFailures((f"/b{failed.broker_id}", "/other"))  # as a broker with two log dirs
    h.disks[failed.broker_id].set_full(f"/b{failed.broker_id}/")
    h.produce(-1, 4)
    h.run(3_000)  # the heartbeat naming the dir, the new leader's metadata, the ISR checks: nothing raises
    reg = h.controller.image.topic("t").partitions[0]
    assert reg.leader not in (failed.broker_id, -1) and failed.broker_id not in reg.isr
    assert TP in failed.offline_partitions and failed.halt_message is None
    assert not failed.fetchers.sessions  # it fetches nothing for the partition of its failed dir
    h.produce(-1, 5)
    h.run(0)
    answer = next(m for m in h.client if isinstance(m, ProduceResponse) and m.correlation_id == 5)
    assert answer.results[0].error is errors.NOT_ENOUGH_REPLICAS  # min ISR 2 of the two brokers: one is left


def test_a_log_dir_that_fails_while_its_logs_load_halts_the_broker_at_start() -> None:
    disk = MemoryDisk()
    disk.mkdir("/b1/t-0")
    disk.write_file("/b1/t-0/leader-epoch-checkpoint.tmp", b"")  # a checkpoint never renamed: deleted at open
    disk.set_full("/b1/")
    config = BrokerConfig({"node.id": 1})
    manager = LogManager.open("/b1", config, disk, ManualClock())
    assert manager.failure_channel.has_new
    core = BrokerCore(BrokerId(1), config, manager, 1, 0)
    core.start(0)  # the driver halts before it sends anything (server.halt)
    assert core.halt_message == "Shutdown broker because all log dirs in /b1 have failed"
