"""What a driver of `TransactionCoordinatorCore` decides without doing any I/O: shared by the asyncio coordinator
(`server.txn_coordinator`) and the simulator's (`sim.txn_coordinator`), so both run the same steps.

A driver writes each decision's state as one record of `__transaction_state` (`state_record`), reads a partition
back into the core when it comes to lead it (`replay_chunks`), maps a failed append to what the client reads
(`append_error`, Kafka's TransactionStateManager), and sends the markers of a prepared transaction to the leaders
of its partitions (`markers_by_leader`), retrying a partition until its answer is final (`marker_done`, Kafka's
TransactionMarkerRequestCompletionHandler). `leadership_changes` says which partitions it no longer coordinates and
which it must load, from the leader epochs it loaded and those its broker leads now.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from insync import errors
from insync.errors import KafkaError
from insync.metadata.image import MetadataImage
from insync.protocol.records import RecordSpec, build_batch, iter_records
from insync.storage.log import Log
from insync.transactions.coordinator import TransactionCoordinatorCore
from insync.transactions.log_records import (
    TxnMetadata,
    TxnRecordError,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from insync.types import TRANSACTION_STATE_TOPIC, TopicPartition

E = errors.BY_NAME
LOAD_CHUNK_BYTES = 1024 * 1024
SYNC_INTERVAL_MS = 500  # how often a driver looks for leadership changes of __transaction_state
MARKER_TIMEOUT_MS = 30_000
_MARKER_RETRY_MS = (50, 100, 200, 500, 1000)  # then every second, while the broker coordinates
MARKER_ATTEMPTS_MAX = 3_600
PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
# What a failed append of a state record reads to the client, as Kafka's TransactionStateManager maps it.
_APPEND_ERRORS = {
    **dict.fromkeys(("UNKNOWN_TOPIC_OR_PARTITION", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                     "REQUEST_TIMED_OUT"), E["COORDINATOR_NOT_AVAILABLE"]),
    **dict.fromkeys(("NOT_LEADER_OR_FOLLOWER", "KAFKA_STORAGE_ERROR"), E["NOT_COORDINATOR"]),
}
# Partitions a marker is not retried on (Kafka's TransactionMarkerRequestCompletionHandler): gone, or fenced.
_MARKER_FINAL = frozenset(("NONE", "UNKNOWN_TOPIC_OR_PARTITION", "INVALID_PRODUCER_EPOCH",
                           "TRANSACTION_COORDINATOR_FENCED"))
# Complete-state writes tried again (Kafka's TransactionMarkerChannelManager retries an append that found too few
# replicas): giving up would leave the transaction prepared, and its id refused, until the coordinator moves.
_COMPLETE_RETRIED = frozenset(("COORDINATOR_NOT_AVAILABLE", "CONCURRENT_TRANSACTIONS"))


def state_record(txn: TxnMetadata, now_ms: int) -> bytes:
    """The batch of one state change, keyed by the transactional id."""
    assert txn.transactional_id and txn.producer_id >= 0, txn
    return build_batch([RecordSpec(key=encode_key(txn.transactional_id), value=encode_value(txn))],
                       base_timestamp=now_ms)


def replay_record(state: TransactionCoordinatorCore, partition: int, key: bytes | None,
                  value: bytes | None) -> str | None:
    """Replay one record read back from `partition` into the core; the reason when it cannot be read."""
    assert partition >= 0, partition
    if key is None:
        return None
    try:
        transactional_id = decode_key(key)
        txn = None if value is None else decode_value(transactional_id, value)
    except TxnRecordError as exc:
        return f"Skipping an unreadable record of {TRANSACTION_STATE_TOPIC}-{partition}: {exc}"
    state.replay(partition, txn, transactional_id)
    return None


def replay_chunks(state: TransactionCoordinatorCore, partition: int, partition_log: Log
                  ) -> Iterator[tuple[int, list[str]]]:
    """Replay the partition's log to the end it has now, a chunk at a time: after each, (the offset reached, why
    records of it could not be read), so an asyncio driver can let others run in between. A failed read raises
    `KafkaException`."""
    offset, end = partition_log.log_start_offset, partition_log.log_end_offset
    while offset < end:  # bounded: each read advances past at least one batch
        result = partition_log.read(offset, LOAD_CHUNK_BYTES, max_offset=end)
        if not result.records or result.next_offset <= offset:
            break
        warnings = [warning for record in iter_records(result.records)
                    if (warning := replay_record(state, partition, record.key, record.value)) is not None]
        offset = result.next_offset
        yield offset, warnings


def append_error(error: KafkaError) -> KafkaError:
    """What the client reads when the append of its state record failed with `error`."""
    assert error is not errors.NONE
    return _APPEND_ERRORS.get(error.name, error)


def marker_retry_ms(attempt: int) -> int:
    """The wait before the next round of markers after `attempt` rounds left some partition without one."""
    assert attempt >= 0, attempt
    return _MARKER_RETRY_MS[min(attempt, len(_MARKER_RETRY_MS) - 1)]


def complete_retried(error: KafkaError) -> bool:
    """Whether the write of a Complete state that failed with `error` (as `append_error` reads it) is tried again,
    after `marker_retry_ms`, while this broker still coordinates the transaction."""
    return error.name in _COMPLETE_RETRIED


def marker_done(error: KafkaError) -> bool:
    """A partition's answer to a marker that ends its retries."""
    return error.name in _MARKER_FINAL


def markers_by_leader(image: MetadataImage, partitions: Iterable[TopicPartition]
                      ) -> tuple[set[TopicPartition], dict[int, list[TopicPartition]]]:
    """(partitions deleted meanwhile, which need no marker; the others by their leader, -1 for none)."""
    deleted: set[TopicPartition] = set()
    by_leader: dict[int, list[TopicPartition]] = {}
    for tp in sorted(partitions):  # in a fixed order: the simulator's runs must not depend on set order
        topic = image.topic(tp.topic)
        if topic is None or tp.partition not in topic.partitions:
            deleted.add(tp)
            continue
        by_leader.setdefault(topic.partitions[tp.partition].leader, []).append(tp)
    return deleted, by_leader


def leadership_changes(loaded: Mapping[int, int], leading: Mapping[int, int]
                       ) -> tuple[list[int], list[tuple[int, int]]]:
    """Given the partitions loaded (partition -> leader epoch) and those led now, (the loaded partitions to
    unload, the (partition, epoch) pairs to load)."""
    lost = [partition for partition, epoch in loaded.items() if leading.get(partition) != epoch]
    to_load = [(partition, epoch) for partition, epoch in sorted(leading.items()) if loaded.get(partition) != epoch]
    return lost, to_load


def led_state_partitions(leader_states: Iterable[tuple[TopicPartition, int, int]]) -> dict[int, int]:
    """The `__transaction_state` partitions among a broker's `leader_states()`, with their leader epochs."""
    return {tp.partition: epoch for tp, epoch, _ in leader_states if tp.topic == TRANSACTION_STATE_TOPIC}
