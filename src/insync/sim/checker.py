"""Invariants of a simulation run, checked incrementally after every event and completely at the end.

They are the properties of Kafka's TLA+ model of KIP-966 (github.com/Vanlightly/kafka-tlaplus) and of
`UnifiedLog.deletableSegments`. The committed offset of a partition is the largest HW any of its leaders has
had (since the last unclean election). After every event, cheaply: a leader's HW never goes backwards within an
epoch; one leader per (partition, epoch); a leader's log start is at or below its HW; a new leader holds every
committed offset and no leader's log end falls below it later; no running broker the controller names in the
ISR or ELR ends below it; the controller's ISR and ELR are disjoint, the ELR within the replicas and empty while
the ISR has min ISR members, and a leader is in the ISR. Every `PREFIX_CHECK_INTERVAL_MS`, and at the end,
committed prefixes are identical. At the end, once faults are healed and the cluster quiesced: every acks=all
acknowledged batch is in the final leader's log below its HW at its offset (lost writes after an unclean
election are reported as such), and what consumers read is still there. Violations are readable strings; a run
is good when there are none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

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


class LeaderState(NamedTuple):
    """One partition as its leader sees it (a tuple: built after every event, it must be cheap)."""

    topic_partition: TopicPartition
    leader_epoch: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


class PartitionImage(Protocol):
    """A partition in the controller's image (`controller.image.PartitionRegistration`)."""

    @property
    def leader(self) -> int: ...

    @property
    def replicas(self) -> tuple[int, ...]: ...

    @property
    def isr(self) -> tuple[int, ...]: ...

    @property
    def elr(self) -> tuple[int, ...]: ...


class ClusterView(Protocol):
    """What the checker may look at; implemented by the simulated cluster."""

    def leader_states(self, broker_id: int) -> Iterable[LeaderState]:
        """Every partition this live broker leads."""

    def candidate_log_ends(self, broker_id: int) -> Iterable[tuple[TopicPartition, int]]:
        """(partition, local log end offset) of every partition whose ISR or ELR in the controller's image names
        this broker, when it is running (alive, and caught up with its own registration); else nothing."""

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
    """Collects violations; `check_broker` runs after every step of a broker, `check_image` after every change
    of the controller's image, `check_prefixes` periodically and `final_check` at the end."""

    def __init__(self, view: ClusterView) -> None:
        self._view = view
        self.violations: list[str] = []
        self._hw_by_leader: dict[tuple[int, TopicPartition, int], int] = {}
        self._leader_of_epoch: dict[tuple[TopicPartition, int], int] = {}
        self._committed: dict[TopicPartition, int] = {}  # the largest HW of any leader (since an unclean one)
        self._newest_epoch: dict[TopicPartition, int] = {}  # of any leader seen, or of an unclean election
        self._verified: dict[TopicPartition, int] = {}  # committed prefix already compared, per partition
        self._verified_leader: dict[TopicPartition, int] = {}  # the leader it was compared against
        self._committed_batches: dict[TopicPartition, dict[int, BatchInfo]] = {}  # by base offset
        self._lacking_candidates: set[tuple[int, TopicPartition, int]] = set()  # bounded by VIOLATIONS_MAX
        self.checks = 0

    def violation(self, now_ms: int, text: str) -> None:
        if len(self.violations) < VIOLATIONS_MAX:
            self.violations.append(f"t={now_ms}ms: {text}")

    def check_broker(self, now_ms: int, broker_id: int) -> None:
        """The incremental invariants for one broker that just handled an event."""
        self.checks += 1
        hw_by_leader = self._hw_by_leader
        committed = self._committed
        for tp, epoch, hw, log_start, leo in self._view.leader_states(broker_id):
            key = (broker_id, tp, epoch)
            previous = hw_by_leader.get(key)
            if previous is None:
                self._new_leader(now_ms, broker_id, tp, epoch, leo)  # leader completeness: its LEO
            elif hw < previous:
                self.violation(now_ms, f"{tp}: HW went backwards on leader {broker_id} epoch {epoch}: "
                                       f"{previous} -> {hw}")
            hw_by_leader[key] = hw
            if log_start > hw:
                self.violation(now_ms, f"{tp}: log start offset {log_start} above the high watermark {hw} on "
                                       f"leader {broker_id} epoch {epoch}")
            newest = self._newest_epoch.get(tp, -1)
            if epoch < newest:
                continue  # a deposed leader not told yet (paused, cut off): it may still hold a shorter log
            self._newest_epoch[tp] = epoch
            if hw > committed.get(tp, 0):
                committed[tp] = hw
            elif leo < committed.get(tp, 0):
                self.violation(now_ms, f"{tp}: committed records lost: leader {broker_id} epoch {epoch} ends at "
                                       f"{leo}, below the committed offset {committed[tp]}")
                committed[tp] = leo  # reported once: what is left is what counts from now on
        for tp, leo in self._view.candidate_log_ends(broker_id):
            lacking = (broker_id, tp, committed.get(tp, 0))
            if leo < lacking[2] and lacking not in self._lacking_candidates:
                self._lacking_candidates.add(lacking)  # reported once per committed offset
                self.violation(now_ms, f"{tp}: leader candidate completeness: broker {broker_id}, in the ISR or "
                                       f"ELR, ends at {leo}, below the committed offset {lacking[2]}")

    def _new_leader(self, now_ms: int, broker_id: int, tp: TopicPartition, epoch: int, leo: int) -> None:
        owner = self._leader_of_epoch.setdefault((tp, epoch), broker_id)
        if owner != broker_id:
            self.violation(now_ms, f"{tp}: brokers {owner} and {broker_id} both led epoch {epoch}")
        committed = self._committed.get(tp, 0)
        if leo < committed and epoch >= self._newest_epoch.get(tp, -1):
            self.violation(now_ms, f"{tp}: leader completeness: broker {broker_id} leads epoch {epoch} with its "
                                   f"log ending at {leo}, below the committed offset {committed}")
            self._committed[tp] = leo  # reported once

    def unclean_election(self, tp: TopicPartition, leader_epoch: int) -> None:
        """An unclean election gives committed records up knowingly: the committed offset starts again."""
        self._committed[tp] = 0
        self._committed_batches.pop(tp, None)
        self._newest_epoch[tp] = max(self._newest_epoch.get(tp, -1), leader_epoch)

    def check_image(self, now_ms: int, partitions: Iterable[tuple[TopicPartition, PartitionImage, int]]) -> None:
        """KIP-966's metadata invariants on the controller's image (run when it changed), given each partition's
        min ISR."""
        for tp, reg, min_isr in partitions:
            elr = reg.elr
            if elr and (set(elr) & set(reg.isr) or not set(elr) <= set(reg.replicas) or len(reg.isr) >= min_isr):
                self.violation(now_ms, f"{tp}: ELR {list(elr)} must be disjoint from the ISR {list(reg.isr)}, "
                                       f"within the replicas {list(reg.replicas)}, and empty at min ISR {min_isr}")
            if reg.leader >= 0 and reg.leader not in reg.isr:
                self.violation(now_ms, f"{tp}: leader {reg.leader} is not in the ISR {list(reg.isr)}")

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
                # Only what became committed since the last check, unless the leader changed: a new leader is
                # compared from its log start (the final check reads everything again).
                start = self._verified.get(tp, 0) if self._verified_leader.get(tp) == leader else 0
                self._verified_leader[tp] = leader
                self._check_prefixes(now_ms, tp, FinalReport(), start)

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
        self._compare_with_history(now_ms, tp, leader, committed, max(start, first_committed), leader_hw)
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

    def _compare_with_history(self, now_ms: int, tp: TopicPartition, leader: int, committed: dict[int, BatchInfo],
                              start: int, end: int) -> None:
        """No committed record lost or changed: the leader's committed batches in [start, end) are those that
        earlier checks saw committed there (on whichever leader), and those are remembered for later ones."""
        known = self._committed_batches.setdefault(tp, {})
        for base, info in committed.items():
            seen = known.setdefault(base, info)
            if (seen.crc, seen.last_offset) != (info.crc, info.last_offset):
                self.violation(now_ms, f"{tp}: committed batch at offset {base} changed on leader {leader}")
                return
        for base, seen in known.items():
            if start <= base and seen.last_offset < end and base not in committed:
                self.violation(now_ms, f"{tp}: committed batch at offset {base} is gone from leader {leader}")
                return
