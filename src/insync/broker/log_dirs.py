"""DescribeLogDirs and AlterReplicaLogDirs: what a broker holds in each of its log dirs, answered at once.

Kafka's `ReplicaManager.describeLogDirs` and `alterReplicaLogDirs` (KIP-113), over every dir of `log.dirs`.
DescribeLogDirs lists each dir by its configured path with its volume's size and usable bytes (v4), and per log
its segments' bytes and offset lag (high watermark less log end, floored at 0; -1 for a replica no longer
hosted); a future copy moving there has `is_future_key` and its lag behind the current log. An offline dir, or
one whose volume fails to answer, is KAFKA_STORAGE_ERROR with no partitions; an offline log is left out.
AlterReplicaLogDirs checks in Kafka's order: a name too long for "-future" is INVALID_TOPIC_EXCEPTION; a path
not among the dirs LOG_DIR_NOT_FOUND; an offline dir KAFKA_STORAGE_ERROR; a partition not hosted
REPLICA_NOT_AVAILABLE, its dir remembered for when the log comes (Kafka's `maybeUpdatePreferredLogDir`); an
offline log, or any offline dir while a future copy would be made, KAFKA_STORAGE_ERROR. Otherwise the move starts
(`storage.replica_moves`), or is cancelled when the log is already in the dir asked for.
"""

from __future__ import annotations

import os
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
    offset_lag: int
    is_future: bool


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
    return DescribeLogDirsResponse(request.correlation_id, tuple(
        _describe_dir(log_manager, partitions, path, request.partitions) for path in log_manager.log_dirs))


def _describe_dir(log_manager: LogManager, partitions: Partitions, path: str,
                  asked: frozenset[TopicPartition] | None) -> LogDirDescription:
    if path in log_manager.offline_dirs:
        return LogDirDescription(path, errors.KAFKA_STORAGE_ERROR)
    try:
        space = log_manager.disk.space(path)
    except OSError:
        return LogDirDescription(path, errors.KAFKA_STORAGE_ERROR)
    described = [LogDirPartition(tp, log.size_bytes, _offset_lag(partitions, tp, log), False)
                 for tp, log in sorted(log_manager.all_logs().items())
                 if not log.offline and (asked is None or tp in asked) and os.path.dirname(log.directory) == path]
    for tp, future in sorted(log_manager.moves.future_logs().items()):
        current = log_manager.get(tp)
        if current is None or future.offline or (asked is not None and tp not in asked):
            continue
        if os.path.dirname(future.directory) == path:  # Kafka's lag of a future copy: behind the current log
            lag = max(current.log_end_offset - future.log_end_offset, 0)
            described.append(LogDirPartition(tp, future.size_bytes, lag, True))
    return LogDirDescription(path, errors.NONE, tuple(described), space.total_bytes, space.usable_bytes)


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
    if path not in log_manager.log_dirs:  # Kafka compares absolute paths as given: no normalising
        return errors.BY_NAME["LOG_DIR_NOT_FOUND"]
    if path in log_manager.offline_dirs:
        return errors.KAFKA_STORAGE_ERROR
    log = log_manager.get(tp)
    if log is not None and log.offline:
        return errors.KAFKA_STORAGE_ERROR
    if tp not in partitions or log is None:
        log_manager.preferred_dirs[tp] = path
        return errors.BY_NAME["REPLICA_NOT_AVAILABLE"]
    if os.path.dirname(log.directory) != path and log_manager.offline_dirs:
        return errors.KAFKA_STORAGE_ERROR  # Kafka makes no future copy while a dir is offline: it may hold one
    log_manager.moves.start(tp, path)
    return errors.NONE
