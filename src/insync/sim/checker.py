"""Invariants of a simulation run, checked incrementally after every event and completely at the end.

After every event (cheap, O(partitions led by the brokers that just acted)):
- a leader's high watermark never goes backwards within one leader epoch (a new leader may start lower and
  learn the HW from its followers, as in Kafka);
- at most one broker ever acts as leader for a given (partition, leader epoch).
Every `PREFIX_CHECK_INTERVAL_MS` of virtual time, and at the end: committed prefixes are identical.
At the end of a run, once every fault is healed and the cluster has quiesced:
- every batch acknowledged with acks=all is in the final leader's log below its HW, at the offset acknowledged,
  unless an unclean election happened (then lost writes are reported as such, not as violations);
- committed prefixes are identical: below min(HW) every replica holds the same batches (offset and CRC);
- what consumers read below the HW is still there, at the same offsets.
Violations are collected as readable strings; a run is good when the list is empty.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from insync.errors import KafkaException
from insync.sim.history import BatchId, History
from insync.types import TopicPartition

# Violations remembered per run: after this many, the run is broken enough.
VIOLATIONS_MAX = 1_000
# Comparing logs reads every batch header, so it runs periodically rather than after every event.
PREFIX_CHECK_INTERVAL_MS = 10_000


@dataclass(frozen=True, slots=True)
class BatchInfo:
    base_offset: int
    last_offset: int
    crc: int
    batch_id: BatchId


class ClusterView(Protocol):
    """What the checker may look at; implemented by the simulated cluster."""

    def leader_states(self, broker_id: int) -> Iterable[tuple[TopicPartition, int, int]]:
        """(partition, leader epoch, high watermark) for every partition this live broker leads."""

    def replica_brokers(self, topic_partition: TopicPartition) -> list[int]:
        """The live brokers hosting a replica of the partition."""

    def high_watermark(self, broker_id: int, topic_partition: TopicPartition) -> int: ...

    def batches(self, broker_id: int, topic_partition: TopicPartition, end_offset: int,
                start_offset: int = 0) -> list[BatchInfo]:
        """Headers of the replica's batches from the one holding `start_offset` to those starting below
        `end_offset`."""

    def current_leader(self, topic_partition: TopicPartition) -> int:
        """The leader in the controller's image (-1 when offline)."""


@dataclass(slots=True)
class FinalReport:
    lost_acked: int = 0
    lost_examples: list[str] = field(default_factory=list)
    duplicates: int = 0
    divergent: list[str] = field(default_factory=list)


class Checker:
    """Collects violations; `after_event` runs after every scheduler event for the brokers marked dirty."""

    def __init__(self, view: ClusterView) -> None:
        self._view = view
        self.violations: list[str] = []
        self._hw_by_leader: dict[tuple[int, TopicPartition, int], int] = {}
        self._leader_of_epoch: dict[tuple[TopicPartition, int], int] = {}
        self._verified: dict[TopicPartition, int] = {}  # committed prefix already compared, per partition
        self.checks = 0

    def violation(self, now_ms: int, text: str) -> None:
        if len(self.violations) < VIOLATIONS_MAX:
            self.violations.append(f"t={now_ms}ms: {text}")

    def check_broker(self, now_ms: int, broker_id: int) -> None:
        """The incremental invariants for one broker that just handled an event."""
        self.checks += 1
        hw_by_leader = self._hw_by_leader
        leader_of_epoch = self._leader_of_epoch
        for tp, epoch, hw in self._view.leader_states(broker_id):
            key = (broker_id, tp, epoch)
            previous = hw_by_leader.get(key)
            if previous is not None and hw < previous:
                self.violation(now_ms, f"{tp}: HW went backwards on leader {broker_id} epoch {epoch}: "
                                       f"{previous} -> {hw}")
            hw_by_leader[key] = hw
            owner = leader_of_epoch.setdefault((tp, epoch), broker_id)
            if owner != broker_id:
                self.violation(now_ms, f"{tp}: brokers {owner} and {broker_id} both led epoch {epoch}")

    def forget_broker(self, broker_id: int) -> None:
        """A restarted broker's HW starts again from its checkpoint; leadership history is kept."""
        for key in [key for key in self._hw_by_leader if key[0] == broker_id]:
            del self._hw_by_leader[key]

    # End of run ---------------------------------------------------------------------------------------

    def final_check(self, now_ms: int, history: History, partitions: list[TopicPartition],
                    unclean_elections: int) -> FinalReport:
        report = FinalReport()
        logs: dict[TopicPartition, dict[int, BatchInfo]] = {}
        for tp in partitions:
            logs[tp] = self._check_prefixes(now_ms, tp, report)
        found_ids: Counter[BatchId] = Counter()
        for by_offset in logs.values():
            found_ids.update(info.batch_id for info in by_offset.values())
        report.duplicates = sum(count - 1 for count in found_ids.values() if count > 1)
        for ack in history.acks:
            if ack.acks != -1:
                continue
            info = logs.get(ack.topic_partition, {}).get(ack.base_offset)
            if info is None or info.batch_id != ack.batch_id:
                report.lost_acked += 1
                if len(report.lost_examples) < 10:
                    report.lost_examples.append(f"{ack.topic_partition} offset {ack.base_offset} batch {ack.batch_id}")
        if report.lost_acked and not unclean_elections:
            self.violation(now_ms, f"{report.lost_acked} acks=all writes lost, e.g. {report.lost_examples[:3]}")
        for (tp, offset), batch_id in history.consumed.items():
            info = logs.get(tp, {}).get(offset)
            if (info is None or info.batch_id != batch_id) and not unclean_elections:
                self.violation(now_ms, f"{tp}: consumed batch {batch_id} at {offset} is gone from the log")
        for conflict in history.consumed_conflicts:
            self.violation(now_ms, conflict)
        return report

    def check_prefixes(self, now_ms: int, partitions: list[TopicPartition]) -> None:
        """During the run: committed prefixes of live replicas agree (skipping partitions without a leader)."""
        for tp in partitions:
            leader = self._view.current_leader(tp)
            if leader >= 0 and leader in self._view.replica_brokers(tp):
                # Only what became committed since the last check: the final check reads everything again.
                self._check_prefixes(now_ms, tp, FinalReport(), self._verified.get(tp, 0))

    def _check_prefixes(self, now_ms: int, tp: TopicPartition, report: FinalReport,
                        start: int = 0) -> dict[int, BatchInfo]:
        """Compare replicas from `start` to below the smallest HW; return the leader's committed batches
        by base offset."""
        leader = self._view.current_leader(tp)
        replicas = self._view.replica_brokers(tp)
        if leader < 0 or leader not in replicas:
            self.violation(now_ms, f"{tp}: no live leader at the end of the run (leader {leader})")
            return {}
        leader_hw = self._view.high_watermark(leader, tp)
        try:
            leader_batches = self._view.batches(leader, tp, leader_hw, start)
        except KafkaException as exc:
            self.violation(now_ms, f"{tp}: the leader's log cannot be read: {exc}")
            return {}
        committed = {info.base_offset: info for info in leader_batches if info.last_offset < leader_hw}
        first_committed = min(committed, default=leader_hw)
        verified = leader_hw
        for broker in replicas:
            if broker == leader:
                continue
            end = min(leader_hw, self._view.high_watermark(broker, tp))
            verified = min(verified, end)
            try:
                theirs = [info for info in self._view.batches(broker, tp, end, start) if info.last_offset < end]
            except KafkaException:
                continue  # this replica's log went offline after an I/O error: nothing to compare
            for info in theirs:
                mine = committed.get(info.base_offset)
                if mine is None and info.base_offset < first_committed:
                    continue  # below the leader's log start (retention, DeleteRecords)
                if mine is None or (mine.crc, mine.last_offset) != (info.crc, info.last_offset):
                    text = (f"{tp}: replicas {leader} and {broker} diverge at offset {info.base_offset} "
                            f"below HW {end}")
                    report.divergent.append(text)
                    self.violation(now_ms, text)
                    break
        self._verified[tp] = max(start, verified)
        return committed
