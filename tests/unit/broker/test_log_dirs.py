"""DescribeLogDirs, AlterReplicaLogDirs and DescribeProducers driven through `BrokerCore.handle`, as the server and
the simulator drive them: the core answers at once, from its log manager and partitions."""

from __future__ import annotations

from broker_harness import CORRELATION_ID, TP, Harness, answer, cluster_with_topic, follower

from insync import errors
from insync.broker.core import BrokerCore
from insync.broker.dir_failure import directory_id
from insync.broker.log_dirs import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    LogDirDescription,
)
from insync.broker.messages import ProduceRequest
from insync.broker.producers import ActiveProducer, DescribeProducersRequest, DescribeProducersResponse
from insync.protocol.control_records import marker_batch
from insync.protocol.records import build_batch, parse_header
from insync.storage.disk import MEMORY_VOLUME_BYTES
from insync.types import Outgoing, TopicPartition

T0 = 1_700_000_000_000
PRODUCER_ID, PRODUCER_EPOCH = 1000, 2


def describe(h: Harness, core: BrokerCore, partitions: frozenset[TopicPartition] | None = None
             ) -> LogDirDescription:
    request = DescribeLogDirsRequest(CORRELATION_ID, partitions)
    [log_dir] = answer(h, core, request, DescribeLogDirsResponse).log_dirs
    return log_dir


def alter(h: Harness, core: BrokerCore, *destinations: tuple[TopicPartition, str]) -> list[errors.KafkaError]:
    request = AlterReplicaLogDirsRequest(CORRELATION_ID, destinations)
    results = answer(h, core, request, AlterReplicaLogDirsResponse).results
    assert [tp for tp, _ in results] == [tp for tp, _ in destinations]
    return [error for _, error in results]


def producers(h: Harness, core: BrokerCore, tp: TopicPartition = TP
              ) -> tuple[errors.KafkaError, str | None, tuple[ActiveProducer, ...]]:
    request = DescribeProducersRequest(CORRELATION_ID, (tp,))
    [result] = answer(h, core, request, DescribeProducersResponse).results
    assert result.topic_partition == tp
    return result.error, result.message, result.producers


def test_describe_log_dirs_lists_each_log_with_its_size_and_the_volume() -> None:
    h = cluster_with_topic()
    h.produce(-1, 1, records=4)
    h.run(600)
    for core in h.cores.values():
        found = describe(h, core)
        log = core.log_manager.get(TP)
        assert log is not None and log.size_bytes > 0
        assert (found.path, found.error) == (core.log_manager.log_dir, errors.NONE)
        assert [(p.topic_partition, p.size_bytes, p.offset_lag) for p in found.partitions] == [(TP, log.size_bytes, 0)]
        assert found.total_bytes == MEMORY_VOLUME_BYTES > found.usable_bytes > 0
    assert describe(h, h.leader(), frozenset({TopicPartition("t", 5), TopicPartition("u", 0)})).partitions == ()
    assert [p.topic_partition for p in describe(h, h.leader(), frozenset({TP})).partitions] == [TP]


def test_a_log_without_a_hosted_replica_has_no_offset_lag_and_an_offline_log_is_left_out() -> None:
    h = cluster_with_topic()
    core = h.leader()
    stray = TopicPartition("gone", 0)
    core.log_manager.get_or_create(stray)  # a log on disk this broker no longer hosts a replica of
    assert [(p.topic_partition, p.offset_lag) for p in describe(h, core).partitions] == [(stray, -1), (TP, 0)]
    log = core.log_manager.get(TP)
    assert log is not None
    log.offline = True  # an I/O error took it offline
    assert [p.topic_partition for p in describe(h, core).partitions] == [stray]


def test_a_volume_that_cannot_be_read_makes_the_log_dir_a_storage_error() -> None:
    h = cluster_with_topic()
    core = h.leader()
    h.disks[core.broker_id].set_io_error(core.log_manager.log_dir, on_read=True, on_write=False)
    assert describe(h, core) == LogDirDescription(core.log_manager.log_dir, errors.KAFKA_STORAGE_ERROR)


def test_a_failed_log_dir_is_a_storage_error() -> None:
    h = cluster_with_topic()
    core = h.leader()
    core.log_manager.failure_channel.maybe_add_offline_log_dir(core.log_manager.log_dir, "Error while append",
                                                               OSError(28, "No space left on device"))
    assert describe(h, core) == LogDirDescription(core.log_manager.log_dir, errors.KAFKA_STORAGE_ERROR)


def test_alter_replica_log_dirs_with_one_log_dir() -> None:
    h = cluster_with_topic()
    core = h.leader()
    own = core.log_manager.log_dir
    fits, too_long = TopicPartition("x" * 213, 0), TopicPartition("x" * 214, 0)  # + ".<32 hex>-future" <= 255
    assert alter(h, core, (TP, own), (TopicPartition("t", 3), own), (TP, "/elsewhere"), (fits, own),
                 (too_long, own)) == [errors.NONE, errors.BY_NAME["REPLICA_NOT_AVAILABLE"],
                                      errors.BY_NAME["LOG_DIR_NOT_FOUND"], errors.BY_NAME["REPLICA_NOT_AVAILABLE"],
                                      errors.INVALID_TOPIC_EXCEPTION]
    assert alter(h, core, (TP, own + "/")) == [errors.BY_NAME["LOG_DIR_NOT_FOUND"]]  # paths compared as given
    log = core.log_manager.get(TP)
    assert log is not None
    log.offline = True
    assert alter(h, core, (TP, own)) == [errors.KAFKA_STORAGE_ERROR]


def produce_idempotent(h: Harness, records: int) -> bytes:
    batch = build_batch([(b"k", b"v%d" % i) for i in range(records)], base_timestamp=T0,
                        producer_id=PRODUCER_ID, producer_epoch=PRODUCER_EPOCH, base_sequence=0)
    h.queue.append(("client", h.leader().broker_id, ProduceRequest(77, -1, 30_000, ((TP, batch),))))
    h.run(600)
    return batch


def test_describe_producers_answers_each_replicas_own_producer_state() -> None:
    h = cluster_with_topic()
    batch = produce_idempotent(h, 3)
    expected = (ActiveProducer(PRODUCER_ID, PRODUCER_EPOCH, 2, parse_header(batch, 0).max_timestamp),)
    assert producers(h, h.leader()) == (errors.NONE, None, expected)
    assert producers(h, follower(h)) == (errors.NONE, None, expected)  # as Kafka's, a follower answers too
    h.produce(-1, 2)  # a producer without an id is not tracked
    h.run(600)
    assert producers(h, h.leader())[2] == expected


def test_describe_producers_errors() -> None:
    h = cluster_with_topic()
    h.controller.create_topic("one", 1, 1, {}, h.clock.now)
    h.run(1_000)
    single = TopicPartition("one", 0)
    elsewhere = next(core for core in h.cores.values() if single not in core.partitions)
    assert producers(h, elsewhere, single)[0] is errors.NOT_LEADER_OR_FOLLOWER
    assert producers(h, h.leader(), TopicPartition("t", 4))[0] is errors.UNKNOWN_TOPIC_OR_PARTITION
    assert producers(h, h.leader(), TopicPartition("nope", 0))[0] is errors.UNKNOWN_TOPIC_OR_PARTITION
    error, message, _ = producers(h, h.leader(), TopicPartition("a/b", 0))
    assert error is errors.INVALID_TOPIC_EXCEPTION and message is not None and "'a/b'" in message
    log = h.leader().log_manager.get(TP)
    assert log is not None
    log.offline = True
    assert producers(h, h.leader())[:2] == (errors.KAFKA_STORAGE_ERROR, "the log of t-0 is offline")


def test_describe_producers_shows_an_open_transactions_start_and_the_last_markers_coordinator_epoch() -> None:
    h = cluster_with_topic()
    produce_idempotent(h, 2)  # offsets 0-1, outside a transaction
    batch = build_batch([(b"k", b"in a transaction")], base_timestamp=T0, producer_id=PRODUCER_ID,
                        producer_epoch=PRODUCER_EPOCH, base_sequence=2, is_transactional=True)
    h.queue.append(("client", h.leader().broker_id, ProduceRequest(78, -1, 30_000, ((TP, batch),))))
    h.run(600)
    (found,) = producers(h, h.leader())[2]
    assert (found.coordinator_epoch, found.current_txn_start_offset) == (-1, 2)
    marker = marker_batch(PRODUCER_ID, PRODUCER_EPOCH, 7, True, T0)
    h.queue.append(("client", h.leader().broker_id, ProduceRequest(79, -1, 30_000, ((TP, marker),), from_client=False)))
    h.run(600)
    (found,) = producers(h, h.leader())[2]
    assert (found.coordinator_epoch, found.current_txn_start_offset) == (7, -1)


def test_a_producers_last_timestamp_is_unknown_when_its_batch_cannot_be_read() -> None:
    h = cluster_with_topic()
    produce_idempotent(h, 3)
    core = h.leader()
    h.disks[core.broker_id].set_io_error(f"{core.log_manager.log_dir}/{TP}", on_read=True, on_write=False)
    [producer] = producers(h, core)[2]
    assert (producer.last_sequence, producer.last_timestamp) == (2, -1)


def two_dir_cluster() -> Harness:
    return cluster_with_topic(broker_config={"log.dirs": "/d1,/d2"})


def test_describe_log_dirs_answers_each_dir_and_an_offline_one_as_a_storage_error() -> None:
    h = two_dir_cluster()
    core = h.leader()
    first, second = core.log_manager.log_dirs
    answered = answer(h, core, DescribeLogDirsRequest(CORRELATION_ID, None), DescribeLogDirsResponse).log_dirs
    assert [(d.path, d.error, [p.topic_partition for p in d.partitions]) for d in answered] == [
        (first, errors.NONE, [TP]), (second, errors.NONE, [])]
    core.log_manager.failure_channel.maybe_add_offline_log_dir(second, "a test's failed dir", OSError(5, "EIO"))
    # The next call takes the failed dir: the answer, and a heartbeat naming the dir to the controller at once.
    to_client, to_controller = core.handle(h.clock.now, "client", DescribeLogDirsRequest(CORRELATION_ID, None))
    assert isinstance(to_controller, Outgoing) and to_controller.destination == "controller"
    assert to_controller.message.offline_log_dirs == (directory_id(second),)
    assert isinstance(to_client, Outgoing) and isinstance(to_client.message, DescribeLogDirsResponse)
    answered = to_client.message.log_dirs
    assert answered[1] == LogDirDescription(second, errors.KAFKA_STORAGE_ERROR)
    assert alter(h, core, (TP, second)) == [errors.KAFKA_STORAGE_ERROR]


def test_alter_replica_log_dirs_moves_the_replica_while_it_is_written() -> None:
    h = two_dir_cluster()
    core = h.leader()
    first, second = core.log_manager.log_dirs
    h.produce(-1, 1, records=4)
    h.run(600)
    core.log_manager.moves.set_rate(0)  # held, so the future copy shows in DescribeLogDirs
    assert alter(h, core, (TP, second)) == [errors.NONE]
    answered = answer(h, core, DescribeLogDirsRequest(CORRELATION_ID, None), DescribeLogDirsResponse).log_dirs
    assert [(p.topic_partition, p.is_future, p.offset_lag) for p in answered[1].partitions] == [(TP, True, 4)]
    core.log_manager.moves.set_rate(2**63 - 1)
    h.produce(-1, 1, records=3)
    h.run(600)
    log = core.log_manager.get(TP)
    assert log is not None and core.log_manager.dir_of(TP) == second and not core.log_manager.moves.active
    assert log.log_end_offset == core.partitions[TP].high_watermark == 7
    assert alter(h, core, (TP, second)) == [errors.NONE]  # already there: nothing to do


def test_a_dir_asked_for_a_replica_not_hosted_yet_is_where_it_is_created() -> None:
    h = two_dir_cluster()
    core = h.leader()
    first = core.log_manager.log_dirs[0]  # it holds TP: without the request, the new log would go to the other
    coming = TopicPartition("later", 0)
    assert alter(h, core, (coming, first), (TP, "/b9/d1")) == [
        errors.BY_NAME["REPLICA_NOT_AVAILABLE"], errors.BY_NAME["LOG_DIR_NOT_FOUND"]]
    h.controller.create_topic("later", 1, 2, {}, h.clock.now)
    h.run(1_000)
    assert core.log_manager.dir_of(coming) == first
