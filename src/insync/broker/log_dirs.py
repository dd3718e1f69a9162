"""DescribeLogDirs and AlterReplicaLogDirs: what a broker holds in its log directory, answered at once.

Kafka's `ReplicaManager.describeLogDirs` and `alterReplicaLogDirs` (KIP-113), for a broker with one log dir
(insync reads only the first of `log.dirs`):
- DescribeLogDirs lists the log dir by the path the broker was given, its volume's size and usable bytes (v4),
  and per log the bytes of its segments and its offset lag (high watermark less log end offset, floored at 0,
  or -1 for a log this broker no longer hosts a replica of). Only the partitions asked for are listed; a volume
  that fails to answer makes the dir KAFKA_STORAGE_ERROR.
- AlterReplicaLogDirs: with one dir there is nowhere to move to: the broker's own dir answers NONE for a replica
  it hosts, REPLICA_NOT_AVAILABLE for one it does not, any other path LOG_DIR_NOT_FOUND, and a name too long for
  Kafka's "-future" directory INVALID_TOPIC_EXCEPTION, in Kafka's order of checks.
A failed log dir is KAFKA_STORAGE_ERROR, as Kafka's offline ones; a log offline alone (a fault injected on its
files) is left out of DescribeLogDirs and answers AlterReplicaLogDirs with KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from dataclasses import dataclass

from insync import errors
from insync.broker.queries import Partitions
from insync.errors import KafkaError
from insync.storage.log import Log
from insync.storage.log_manager import LogManager
from insync.types import TopicPartition

INVALID_OFFSET_LAG = -1  # Kafka's DescribeLogDirsResponse.INVALID_OFFSET_LAG: no hosted replica to compare with
# Kafka's future log directory is "<topic>-<partition>.<32 hex digits>-future" and must fit a file name.
_FUTURE_DIR_EXTRA_CHARS = len(".") + 32 + len("-future")
FILE_NAME_MAX = 255


@dataclass(frozen=True, slots=True)
class DescribeLogDirsRequest:
    correlation_id: int
    partitions: frozenset[TopicPartition] | None  # None: every log


@dataclass(frozen=True, slots=True)
class LogDirPartition:
    topic_partition: TopicPartition
    size_bytes: int
    offset_lag: int  # insync never has future logs (is_future_key is always false)


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    path: str
    error: KafkaError
    partitions: tuple[LogDirPartition, ...] = ()
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass(frozen=True, slots=True)
class DescribeLogDirsResponse:
    correlation_id: int
    log_dirs: tuple[LogDirDescription, ...]


@dataclass(frozen=True, slots=True)
class AlterReplicaLogDirsRequest:
    correlation_id: int
    destinations: tuple[tuple[TopicPartition, str], ...]  # each partition once, with the path asked last


@dataclass(frozen=True, slots=True)
class AlterReplicaLogDirsResponse:
    correlation_id: int
    results: tuple[tuple[TopicPartition, KafkaError], ...]


def describe_log_dirs(log_manager: LogManager, partitions: Partitions, request: DescribeLogDirsRequest
                      ) -> DescribeLogDirsResponse:
    path = log_manager.log_dir
    failed = DescribeLogDirsResponse(request.correlation_id, (LogDirDescription(path, errors.KAFKA_STORAGE_ERROR),))
    if log_manager.failure_channel.is_offline(path):
        return failed
    try:
        space = log_manager.disk.space(path)
    except OSError:
        return failed
    asked = request.partitions
    described = tuple(LogDirPartition(tp, log.size_bytes, _offset_lag(partitions, tp, log))
                      for tp, log in sorted(log_manager.all_logs().items())
                      if not log.offline and (asked is None or tp in asked))
    found = LogDirDescription(path, errors.NONE, described, space.total_bytes, space.usable_bytes)
    return DescribeLogDirsResponse(request.correlation_id, (found,))


def _offset_lag(partitions: Partitions, tp: TopicPartition, log: Log) -> int:
    partition = partitions.get(tp)
    if partition is None:
        return INVALID_OFFSET_LAG
    return max(partition.high_watermark - log.log_end_offset, 0)


def alter_replica_log_dirs(log_manager: LogManager, partitions: Partitions, request: AlterReplicaLogDirsRequest
                           ) -> AlterReplicaLogDirsResponse:
    return AlterReplicaLogDirsResponse(request.correlation_id, tuple(
        (tp, _alter_replica_log_dir(log_manager, partitions, tp, path)) for tp, path in request.destinations))


def _alter_replica_log_dir(log_manager: LogManager, partitions: Partitions, tp: TopicPartition,
                           path: str) -> KafkaError:
    if len(f"{tp.topic}-{tp.partition}") + _FUTURE_DIR_EXTRA_CHARS > FILE_NAME_MAX:
        return errors.INVALID_TOPIC_EXCEPTION
    if path != log_manager.log_dir:  # Kafka compares absolute paths as given: no normalising
        return errors.BY_NAME["LOG_DIR_NOT_FOUND"]
    if tp not in partitions:
        return errors.BY_NAME["REPLICA_NOT_AVAILABLE"]
    log = log_manager.get(tp)
    assert log is not None, f"{tp} is hosted without a log"
    return errors.KAFKA_STORAGE_ERROR if log.offline else errors.NONE
