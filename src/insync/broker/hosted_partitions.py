"""The partitions a broker hosts, by topic partition, and what the broker core asks of all of them at once.

`HostedPartitions` is the core's table (a dict: the fetch server, the fetcher sessions and the queries read it as
one); a partition enters it when metadata first gives this broker a replica and leaves it when metadata stops it.
The questions across the table are here: which partitions this broker leads, every high watermark (for the
checkpoint and retention), what bounds each compacted log's cleaning, and what the cleaner asks of each
partition's producer state.
"""

from __future__ import annotations

from collections.abc import Sequence

from insync.protocol.control_records import AbortedTxn
from insync.replication import producer_state
from insync.replication.partition import Partition
from insync.storage.log_manager import LogManager
from insync.types import TopicPartition


class HostedPartitions(dict[TopicPartition, Partition]):
    def leader(self, tp: TopicPartition) -> Partition | None:
        """The partition if this broker leads it, else None."""
        partition = self.get(tp)
        return partition if partition is not None and partition.is_leader else None

    def leader_states(self) -> list[tuple[TopicPartition, int, int]]:
        """(partition, leader epoch, high watermark) of each partition this broker leads."""
        return [(tp, p.leader_epoch, p.high_watermark) for tp, p in self.items() if p.is_leader]

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: partition.high_watermark for tp, partition in self.items()}

    def stable_offsets_of_compacted(self, log_manager: LogManager) -> dict[TopicPartition, int]:
        """What bounds each compacted log's cleaning: its last stable offset (Kafka's first unstable offset bounds
        the cleaner, so an open transaction's records are not cleaned before its marker). Followers bound it by
        their own, as every Kafka replica cleans its own copy."""
        return {tp: partition.last_stable_offset for tp in log_manager.compacted_logs()
                if (partition := self.get(tp)) is not None}

    def in_transaction(self, tp: TopicPartition, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer, in this epoch, has a transaction open on a partition this broker leads: its next
        batches there need no verification with the coordinator (Kafka's `hasOngoingTransaction`)."""
        partition = self.leader(tp)
        if partition is None:
            return False
        entry = partition.producer_state.entry(producer_id)
        return entry is not None and entry.producer_epoch == producer_epoch and \
            partition.producer_state.transactions.open_transaction(producer_id) is not None

    def start_verification(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                           bumps_epoch: bool, base_sequence: int) -> int | None:
        """A verification guard for the producer's batch on a partition this broker leads (None where it does
        not): `verification_holds` says whether no batch or marker of the producer was appended since."""
        partition = self.leader(tp)
        if partition is None:
            return None
        return partition.producer_state.verifications.start(producer_id, producer_epoch, bumps_epoch, base_sequence)

    def verification_holds(self, tp: TopicPartition, producer_id: int, token: int) -> bool:
        partition = self.leader(tp)
        return partition is not None and partition.producer_state.verifications.holds(producer_id, token)

    # --- What the log cleaner asks (storage's `ProducerStates`) ----------------------------------------------

    def producer_last_offsets(self, tp: TopicPartition) -> dict[int, int]:
        """Each producer's last offset in the partition: the cleaner keeps that batch (its last sequence)."""
        partition = self.get(tp)
        if partition is None:
            return {}
        return {producer_id: entry.batches[-1].last_offset
                for producer_id, entry in partition.producer_state.entries() if entry.batches}

    def aborted_transactions(self, tp: TopicPartition, below_offset: int) -> list[AbortedTxn]:
        """The partition's aborted transactions starting below `below_offset`: the cleaner drops their records."""
        partition = self.get(tp)
        if partition is None:
            return []
        return [txn for txn in partition.producer_state.transactions.aborted() if txn.first_offset < below_offset]

    def forget_aborted_transactions(self, tp: TopicPartition, emptied: Sequence[AbortedTxn]) -> bool:
        """The aborted transactions a clean left without records leave the partition's index and its snapshots."""
        partition = self.get(tp)
        if partition is None:
            return False
        producer_state.forget_aborted(partition.producer_state, partition.log, emptied)
        return True
