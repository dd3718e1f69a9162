"""The ISR changes this broker's leaders propose to the controller (AlterPartition, KIP-497), until answered.

`IsrProposals` keeps the one proposal of each partition that awaits the controller's answer, puts it on the wire
(topic id, the members' broker epochs of KIP-903, RECOVERED) and hands it to the controller channel, which batches
and retries the requests. An answer goes back to the partition that proposed; the proposal stays while the
partition waits for the metadata that carries it, goes when settled, and is sent again when the partition asks to
retry. A leader the controller still records RECOVERING (KIP-704) proposes its ISR unchanged at once.
"""

from __future__ import annotations

from collections.abc import Mapping

from insync import errors
from insync.broker.controller_channel import ControllerChannel
from insync.broker.metadata import BrokerMetadata
from insync.controller.messages import AlterPartitionResponse
from insync.controller.replication_control import AlterPartitionData
from insync.metadata.records import LEADER_RECOVERED
from insync.replication.messages import AlterPartitionItem, AlterPartitionResult
from insync.replication.partition import Partition
from insync.replication.results import AlterOutcome
from insync.types import (
    UNKNOWN_BROKER_EPOCH,
    BrokerId,
    LeaderEpoch,
    Outgoing,
    PartitionEpoch,
    TopicPartition,
)


class IsrProposals:
    def __init__(self, broker_id: BrokerId, channel: ControllerChannel, metadata: BrokerMetadata) -> None:
        self.broker_id = broker_id
        self.channel = channel
        self.metadata = metadata
        self._items: dict[TopicPartition, AlterPartitionItem] = {}

    def propose(self, now_ms: int, tp: TopicPartition, item: AlterPartitionItem, retry: bool = False
                ) -> list[Outgoing]:
        assert item.topic_partition == tp, (item, tp)
        topic_id = self.metadata.topic_id(tp.topic)
        if topic_id is None:
            return []
        self._items[tp] = item
        # Every proposal says RECOVERED: like Kafka's leader, this one counts itself recovered once it leads.
        wire = AlterPartitionData(topic_id, tp.partition, item.leader_epoch, item.partition_epoch,
                                  tuple(item.new_isr), LEADER_RECOVERED, self._isr_broker_epochs(item))
        return self.channel.propose(now_ms, tp, wire, retry)

    def _isr_broker_epochs(self, item: AlterPartitionItem) -> tuple[int, ...]:
        """KIP-903: each member's broker epoch as the partition knows it from its fetches (-1: unknown), and this
        broker's own from its registration, which the partition does not know."""
        known = item.new_isr_broker_epochs or tuple(UNKNOWN_BROKER_EPOCH for _ in item.new_isr)
        return tuple(self.channel.broker_epoch if broker == self.broker_id else epoch
                     for broker, epoch in zip(item.new_isr, known, strict=True))

    def propose_recovered(self, now_ms: int, tp: TopicPartition, partition: Partition) -> list[Outgoing]:
        """KIP-704: a leader the controller still records RECOVERING (elected uncleanly) asks at once, with its
        ISR unchanged, to be recorded RECOVERED: insync's log needs no recovery beyond what opening it did.
        Consumers get NOT_LEADER_OR_FOLLOWER from it until the controller accepts."""
        if not (partition.is_leader and partition.recovering) or partition.isr_state.is_inflight \
                or tp in self._items:
            return []
        item = AlterPartitionItem(tp, self.broker_id, partition.leader_epoch, partition.partition_epoch,
                                  partition.isr)
        return self.propose(now_ms, tp, item)

    def withdraw(self, tp: TopicPartition) -> None:
        """`tp`'s proposal no longer stands (its leadership or replica went): neither sent nor matched to an answer."""
        self.channel.withdraw(tp)
        self._items.pop(tp, None)

    def on_response(self, now_ms: int, response: AlterPartitionResponse,
                    partitions: Mapping[TopicPartition, Partition]) -> tuple[list[Outgoing], list[TopicPartition]]:
        """Each answer to the partition that proposed: what to send, and the partitions whose high watermark
        advanced."""
        matched, sent = self.channel.on_alter_partition(now_ms, response)
        outgoing: list[Outgoing] = list(sent)
        advanced: list[TopicPartition] = []
        for tp, _, raw in matched:
            item = self._items.get(tp)
            partition = partitions.get(tp)
            if item is None or partition is None:
                continue
            result = AlterPartitionResult(tp, raw.error, BrokerId(raw.leader), LeaderEpoch(raw.leader_epoch),
                                          PartitionEpoch(raw.partition_epoch), tuple(BrokerId(b) for b in raw.isr))
            outcome = partition.on_alter_partition_result(item, result, now_ms)
            if outcome.outcome is AlterOutcome.RETRY:
                outgoing.extend(self.propose(now_ms, tp, item, retry=True))
            elif outcome.outcome is not AlterOutcome.AWAITING_METADATA:
                self._items.pop(tp, None)
            if (partition.is_leader and partition.recovering and raw.error is errors.NONE
                    and raw.leader_epoch == partition.leader_epoch and raw.leader_recovery_state == LEADER_RECOVERED):
                # The controller recorded RECOVERED: adopt its answer as metadata (as Kafka's Partition does).
                partition.make_leader(result.leader_epoch, result.partition_epoch, result.isr, partition.replicas,
                                      now_ms)
            if outcome.high_watermark_advanced:
                advanced.append(tp)
        return outgoing, advanced
