"""A seeded model run of three replicas under a toy controller: produces with acks=all, follower fetches,
ISR checks, broker crashes and restarts, clean elections, lost AlterPartition answers. After every step: no
acknowledged batch is missing from the leader, data below any replica's high watermark equals the leader's,
and a leader's high watermark never moves back within its epoch (Kafka's
EpochDrivenReplicationProtocolAcceptanceTest: shouldNotAllowDivergentLogs, shouldSurviveFastLeaderChange).
A failure names its seed."""

from __future__ import annotations

import random

import pytest
from repl_helpers import T0, TP, batch, config, fetch_round, follower_of, ids, log_bytes, new_partition

from insync import errors
from insync.errors import KafkaException
from insync.protocol.records import parse_header
from insync.replication.fetcher import FetcherSession
from insync.replication.messages import AlterPartitionItem, AlterPartitionResult
from insync.replication.partition import Partition
from insync.replication.results import ProduceWait
from insync.types import BrokerId, LeaderEpoch, PartitionEpoch

BROKERS = (1, 2, 3)
STEPS = 250


class Model:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.now = T0
        self.partitions = {b: new_partition(b, config(min_isr=2)) for b in BROKERS}
        self.alive = set(BROKERS)
        self.leader, self.epoch, self.partition_epoch, self.isr = 1, 1, 1, [1, 2, 3]
        self.sessions: dict[int, FetcherSession] = {}
        self.waiting: list[tuple[Partition, ProduceWait]] = []
        self.inbox: list[AlterPartitionItem] = []  # AlterPartition requests on their way to the controller
        self.unpublished = False
        self.acked: dict[int, bytes] = {}  # base offset -> batch bytes
        self.hw_seen: dict[tuple[int, int], int] = {}  # (broker, epoch) -> high watermark
        self.acked_verified: dict[int, int] = {}  # base offset -> leader epoch it was last found in
        self.prefix_verified: dict[int, tuple[int, int]] = {}  # broker -> (leader epoch, verified up to)
        self.publish()

    # --- Controller ---------------------------------------------------------------------------------------------

    def publish(self) -> None:
        """Send the current partition state to every live broker (leadership and ISR changes alike)."""
        for broker in sorted(self.alive):
            partition = self.partitions[broker]
            if broker == self.leader:
                partition.make_leader(LeaderEpoch(self.epoch), PartitionEpoch(self.partition_epoch), ids(self.isr),
                                      ids(BROKERS), self.now)
                self.sessions.pop(broker, None)
            elif partition.make_follower(BrokerId(self.leader), LeaderEpoch(self.epoch),
                                         PartitionEpoch(self.partition_epoch), ids(self.isr), ids(BROKERS),
                                         self.now) or broker not in self.sessions:
                self.start_fetching(broker)

    def start_fetching(self, broker: int) -> None:
        if self.leader == -1:
            self.sessions.pop(broker, None)
            return
        partition = self.partitions[broker]
        session = FetcherSession(BrokerId(broker), BrokerId(self.leader), lambda _tp: partition.follower)
        session.add_partition(TP, LeaderEpoch(self.epoch), follower_of(partition).fetch_position(), self.now)
        self.sessions[broker] = session

    def alter_partition(self, item: AlterPartitionItem) -> None:
        if item.leader_epoch != self.epoch or item.partition_epoch != self.partition_epoch:
            error = errors.FENCED_LEADER_EPOCH if item.leader_epoch != self.epoch else errors.INVALID_UPDATE_VERSION
            self.partitions[item.leader_id].on_alter_partition_result(item, AlterPartitionResult(TP, error), self.now)
            return
        if any(broker not in self.alive for broker in item.new_isr):
            self.partitions[item.leader_id].on_alter_partition_result(
                item, AlterPartitionResult(TP, errors.INELIGIBLE_REPLICA), self.now)
            return
        self.partition_epoch += 1
        self.isr = list(item.new_isr)
        if self.rng.random() < 0.7:
            result = AlterPartitionResult(TP, errors.NONE, BrokerId(self.leader), LeaderEpoch(self.epoch),
                                          PartitionEpoch(self.partition_epoch), item.new_isr)
            self.partitions[self.leader].on_alter_partition_result(item, result, self.now)
        if self.rng.random() < 0.5:
            self.publish()
        else:
            self.unpublished = True  # the ISR change reaches brokers later, with the propagation task (seed 003)

    def propagate(self) -> None:
        if self.unpublished:
            self.unpublished = False
            self.publish()

    def elect(self) -> None:
        candidates = [b for b in self.isr if b in self.alive and b != self.leader]
        if self.leader in self.alive:
            candidates.insert(0, self.leader)
        self.epoch += 1
        self.partition_epoch += 1
        if candidates:
            self.leader = candidates[0]
            self.isr = [b for b in self.isr if b in self.alive] or [self.leader]
        else:
            self.leader = -1  # offline: the ISR keeps its last members, so one of them must come back
        self.publish()

    # --- Actions ------------------------------------------------------------------------------------------------

    def produce(self) -> None:
        if self.leader == -1:
            return
        partition = self.partitions[self.leader]
        try:
            result = partition.append_records_as_leader(batch(self.rng.randint(1, 3), value=str(self.now).encode()),
                                                         -1, self.now)
        except KafkaException as exc:
            assert exc.error == errors.NOT_ENOUGH_REPLICAS
            return
        self.waiting.append((partition, result.wait))

    def fetch(self) -> None:
        followers = sorted(b for b in self.sessions if b in self.alive)
        if not followers or self.leader == -1:
            return
        self.fetch_from(self.rng.choice(followers), self.rng.choice([1, 200, 1 << 20]))

    def fetch_from(self, broker: int, max_bytes: int = 1 << 20) -> None:
        items: list[AlterPartitionItem] = []
        fetch_round(self.sessions[broker], {TP: self.partitions[self.leader]}, self.now, max_bytes=max_bytes,
                    alter_items=items)
        self.inbox.extend(items)

    def check_isr(self) -> None:
        if self.leader != -1:
            item = self.partitions[self.leader].maybe_shrink_isr(self.now)
            if item is not None:
                self.inbox.append(item)

    def deliver_alter_partitions(self) -> None:
        items, self.inbox = self.inbox, []
        for item in items:
            self.alter_partition(item)

    def crash_or_restart(self) -> None:
        broker = self.rng.choice(BROKERS)
        if broker in self.alive and len(self.alive) > 1:
            self.alive.discard(broker)
            self.sessions.pop(broker, None)
            if broker == self.leader:
                self.elect()
        elif broker not in self.alive:
            self.alive.add(broker)
            if self.leader == -1 and broker in self.isr:
                self.leader = broker
                self.elect()
            else:
                self.publish()

    def step(self) -> None:
        self.now += self.rng.choice([0, 10, 500, 3_000, 6_000])
        action = self.rng.choices([self.produce, self.fetch, self.check_isr, self.deliver_alter_partitions,
                                   self.propagate, self.crash_or_restart], weights=[4, 8, 2, 2, 1, 1])[0]
        action()
        self.settle_produces()

    def heal(self) -> None:
        """Every broker back, time passing with fetches and ISR checks: the replicas must converge."""
        for broker in BROKERS:
            if broker not in self.alive:
                self.alive.add(broker)
                if self.leader == -1 and broker in self.isr:
                    self.leader = broker
                    self.elect()
                else:
                    self.publish()
        for round_number in range(200):
            if round_number == 100:
                self.produce()  # a write after healing must be acknowledged
            self.now += 500
            for broker in sorted(self.sessions):
                self.fetch_from(broker)
            self.check_isr()
            self.deliver_alter_partitions()
            self.propagate()
            self.settle_produces()
            self.check()

    # --- Invariants ---------------------------------------------------------------------------------------------

    def settle_produces(self) -> None:
        still_waiting = []
        for partition, wait in self.waiting:
            status = partition.produce_status(wait)
            if status is None:
                still_waiting.append((partition, wait))
            elif status == errors.NONE:
                records = partition.log.read(wait.required_offset - 1, 1 << 20).records
                self.acked[parse_header(records).base_offset] = records[:parse_header(records).size]
        self.waiting = still_waiting

    def check(self) -> None:
        """Incremental: what was verified under the current leader epoch is not read again (a leader's data
        below its high watermark never changes; a replica that truncated is verified again from its start)."""
        if self.leader == -1:
            return
        current = self.partitions[self.leader]
        for base_offset, expected in self.acked.items():
            if self.acked_verified.get(base_offset) != self.epoch:
                found = current.log.read(base_offset, 1 << 20).records
                assert found[:len(expected)] == expected, f"acknowledged batch at {base_offset} lost or changed"
                self.acked_verified[base_offset] = self.epoch
        assert all(s.failed_partitions_count == 0 for s in self.sessions.values()), "a fetcher failed a partition"
        for broker in self.alive:
            partition = self.partitions[broker]
            epoch, offset = self.prefix_verified.get(broker, (-1, 0))
            if epoch != self.epoch or offset > partition.log_end_offset:
                offset = partition.log.log_start_offset
            self.prefix_verified[broker] = (self.epoch, self.check_prefix(partition, current, offset))
            if partition.is_leader:
                key = (broker, partition.leader_epoch)
                assert partition.high_watermark >= self.hw_seen.get(key, 0), "high watermark moved back"
                self.hw_seen[key] = partition.high_watermark

    @staticmethod
    def check_prefix(replica: Partition, leader: Partition, offset: int) -> int:
        """Compare the batches of `replica` below its high watermark, from `offset`, with the leader's. Returns
        where the comparison stopped."""
        offset = max(offset, replica.log.log_start_offset)
        for _ in range(10_000):
            if offset >= replica.high_watermark:
                return offset
            mine = replica.log.read(offset, 1).records
            header = parse_header(mine)
            theirs = leader.log.read(offset, 1).records
            assert mine[:header.size] == theirs[:header.size], f"broker {replica.broker_id} diverges at {offset}"
            offset = header.next_offset
        raise AssertionError("check_prefix did not finish")


@pytest.mark.parametrize("seed", range(30))
def test_no_acknowledged_write_is_lost_and_committed_logs_agree(seed: int) -> None:
    model = Model(seed)
    for step in range(STEPS):
        model.step()
        try:
            model.check()
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}, step {step}: {exc}") from exc
    model.heal()
    leader = model.partitions[model.leader]
    assert sorted(leader.isr) == list(BROKERS), f"seed {seed}: the ISR did not heal"
    logs = {broker: log_bytes(model.partitions[broker].log) for broker in BROKERS}  # type: ignore[arg-type]
    assert logs[1] == logs[2] == logs[3], f"seed {seed}: logs differ after healing"
    assert model.acked and not model.waiting, f"seed {seed}: acknowledged {len(model.acked)}, {model.waiting}"
