"""A small cluster history with known truth, written as insync events.jsonl and Kafka 2.x / 3.x server.log files.

Episodes (ids in time order): 1 burst (Kafka 2.x legacy-0: both followers back within 3 s), 2 unknown (legacy-1,
one removal, no reason), 3 follower (insync: broker 3 out of three partitions), 4 leader (insync: every follower
of leader 2's partitions), 5 burst (insync payments-1, by message count, back in 1.5 s), 6 slow (insync
payments-1, one slow follower out 100 s), 7 follower (Kafka 3.x: broker 2 out of logs-0 and logs-1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from insync.events import Event, EventType

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z, insync events
T1 = 1_709_294_400_000  # 2024-03-01T12:00:00Z, Kafka 3.x server.log
T2 = 1_559_347_200_000  # 2019-06-01T00:00:00Z, Kafka 2.x server.log
HORIZON = T1 + 300_000  # the last event: the broker's start line in the 3.x log


def _removed(brokers: list[int], reason: str, ts: int) -> list[dict[str, Any]]:
    return [{"broker": b, "leo": 900, "last_caught_up_ms": ts - 30_000, "last_fetch_ms": ts - 100, "reason": reason}
            for b in brokers]


def shrink(ts: int, leader: int, topic: str, p: int, before: list[int], removed: list[int], reason: str) -> str:
    after = [b for b in before if b not in removed]
    return Event(ts, leader, EventType.ISR_SHRINK, topic, p, {
        "isr_before": before, "isr_after": after, "removed": _removed(removed, reason, ts), "leader_epoch": 5,
        "hw": 1000, "leo": 1000}).to_json()


def expand(ts: int, leader: int, topic: str, p: int, before: list[int], added: list[int]) -> str:
    return Event(ts, leader, EventType.ISR_EXPAND, topic, p, {
        "isr_before": before, "isr_after": sorted(before + added),
        "added": [{"broker": b, "leo": 1000} for b in added]}).to_json()


def plain(ts: int, broker: int, event_type: EventType, topic: str, p: int, **fields: Any) -> str:
    return Event(ts, broker, event_type, topic, p, fields).to_json()


BROKER1_EVENTS = [
    plain(T0 - 10_000, 2, EventType.LEADER_CHANGE, "orders", 2, leader_before=1, leader_after=2, leader_epoch=5,
          isr=[1, 2, 3], replicas=[1, 2, 3], reason="preferred"),
    shrink(T0, 1, "orders", 0, [1, 2, 3], [3], "stuck"),
    shrink(T0 + 2_000, 1, "payments", 0, [1, 3, 4], [3], "stuck"),
    "not json at all",
    expand(T0 + 90_000, 1, "orders", 0, [1, 2], [3]),
    '{"v":1,"ts_ms":1700000100000,"broker":1,"type":"isr_shrink","topic":"orders","partition":0,'
    '"isr_before":[1,2,3],"isr_after":[1,2],"leader_epoch":5,"hw":1,"leo":1}',
    plain(T0 + 500_000, 1, EventType.PARTITION_OFFLINE, "payments", 0),
    plain(T0 + 520_000, 1, EventType.PARTITION_ONLINE, "payments", 0),
    plain(T0 + 520_000, 4, EventType.LEADER_CHANGE, "payments", 0, leader_before=-1, leader_after=4,
          leader_epoch=6, isr=[4], reason="unclean"),
]
BROKER2_EVENTS = [
    shrink(T0 + 1_000, 2, "orders", 1, [1, 2, 3], [3], "stuck"),
    expand(T0 + 95_000, 2, "orders", 1, [1, 2], [3]),
    shrink(T0 + 200_000, 2, "orders", 2, [1, 2, 3], [1, 3], "slow"),
    plain(T0 + 200_000, 2, EventType.UNDER_MIN_ISR_START, "orders", 2),
    shrink(T0 + 201_000, 2, "orders", 3, [2, 3, 4], [3, 4], "slow"),
    expand(T0 + 230_000, 2, "orders", 2, [2], [1, 3]),
    plain(T0 + 230_000, 2, EventType.UNDER_MIN_ISR_END, "orders", 2),
    expand(T0 + 231_000, 2, "orders", 3, [2], [3, 4]),
    '{"v":3,"ts_ms":1700000300000,"broker":2,"type":"controller_elected","controller_epoch":3}',
    "",
]
BROKER4_EVENTS = [
    shrink(T0 + 400_000, 4, "payments", 1, [2, 3, 4], [2, 3], "messages"),
    expand(T0 + 401_500, 4, "payments", 1, [4], [2, 3]),
    shrink(T0 + 600_000, 4, "payments", 1, [2, 3, 4], [2], "slow"),
    expand(T0 + 700_000, 4, "payments", 1, [3, 4], [2]),
    Event(T0 + 650_000, 4, EventType.DENIED, fields={  # a refused request: counted, in no partition's history
        "principal": "User:bob", "host": "127.0.0.1", "operation": "WRITE", "resource_type": "TOPIC",
        "resource": "payments", "api": "PRODUCE"}).to_json(),
]

KAFKA3_LOG = [
    "[2024-03-01 12:00:00,000] INFO [Partition logs-0 broker=1] Shrinking ISR from 1,2,3 to 1,3. Leader: "
    "(highWatermark: 1000, endOffset: 1010). Out of sync replicas: (brokerId: 2, endOffset: 950, "
    "lastCaughtUpTimeMs: 1709294370000). (kafka.cluster.Partition)",
    "[2024-03-01 12:00:00,010] INFO [Partition logs-0 broker=1] ISR updated to 1,3  and version updated to 8 "
    "(kafka.cluster.Partition)",
    "[2024-03-01 12:00:00,500] INFO [Partition logs-1 broker=1] Shrinking ISR from 3,2,1 to 1,3. Leader: "
    "(highWatermark: 20, endOffset: 20). Out of sync replicas: (brokerId: 2, endOffset: unknown, "
    "lastCaughtUpTimeMs: unknown). (kafka.cluster.Partition)",
    "[2024-03-01 12:00:00,510] INFO [Partition logs-1 broker=1] ISR updated to 1,3 (under-min-isr) and version "
    "updated to 4 (kafka.cluster.Partition)",
    "[2024-03-01 12:00:30,000] INFO [Partition logs-0 broker=1] ISR updated to 1,2,3  and version updated to 9 "
    "(kafka.cluster.Partition)",
    "[2024-03-01 12:00:40,000] INFO [Partition logs-1 broker=1] ISR updated to 1,2,3  and version updated to 5 "
    "(kafka.cluster.Partition)",
    "[2024-03-01 12:01:00,000] INFO [Broker id=1] Leader logs-2 with topic id Some(q5vQ1bJZRmGuDGa0nW2y6A) starts "
    "at leader epoch 3 from offset 10 with partition epoch 5, high watermark 10, ISR [1,2], adding replicas [] and "
    "removing replicas [] . Previous leader Some(2) and previous leader epoch was 2. (state.change.logger)",
    "[2024-03-01 12:01:01,000] INFO [Broker id=1] Follower logs-3 starts at leader epoch 2 from offset 5 with "
    "partition epoch 3 and high watermark 5. Current leader is 2. Previous leader Some(2) and previous leader epoch "
    "was 1. (state.change.logger)",
    "[2024-03-01 12:02:00,000] ERROR [ReplicaManager broker=1] Error processing append operation on partition "
    "logs-4 (kafka.server.ReplicaManager)",
    "org.apache.kafka.common.errors.NotEnoughReplicasException: The size of the current ISR Set(1) is insufficient "
    "to satisfy the min.isr requirement of 2 for partition logs-4",
    "\tat kafka.cluster.Partition.appendRecordsToLeader(Partition.scala:1)",
    "[2024-03-01 12:03:00,000] WARN [ReplicaFetcher replicaId=1, leaderId=3, fetcherId=0] Partition logs-5 marked "
    "as failed (kafka.server.ReplicaFetcherThread)",
    "[2024-03-01 12:04:00,000] INFO [Partition logs-0 broker=1] Shrinking ISR from 1,2,3 to",
    "[2024-03-01 12:0",
    "[2024-03-01 12:05:00,000] INFO [KafkaServer id=1] started (kafka.server.KafkaServer)",
]

KAFKA2_LOG = [
    "[2019-06-01 00:00:00,000] INFO [Partition legacy-0 broker=2] Shrinking ISR from 2,1,3 to 2. Leader: "
    "(highWatermark: 100, endOffset: 120). Out of sync replicas: (brokerId: 1, endOffset: 90) (brokerId: 3, "
    "endOffset: 80). (kafka.cluster.Partition)",
    "[2019-06-01 00:00:00,005] INFO [Partition legacy-0 broker=2] ISR updated to [2] and zkVersion updated to [11] "
    "(kafka.cluster.Partition)",
    "[2019-06-01 00:00:02,000] INFO [Partition legacy-0 broker=2] Expanding ISR from 2 to 2,1 "
    "(kafka.cluster.Partition)",
    "[2019-06-01 00:00:02,001] INFO [Partition legacy-0 broker=2] ISR updated to [2,1] and zkVersion updated to "
    "[12] (kafka.cluster.Partition)",
    "[2019-06-01 00:00:03,000] INFO [Partition legacy-0 broker=2] Expanding ISR from 2,1 to 2,1,3 "
    "(kafka.cluster.Partition)",
    "[2019-06-01 00:00:03,001] INFO [Partition legacy-0 broker=2] ISR updated to [2,1,3] and zkVersion updated to "
    "[13] (kafka.cluster.Partition)",
    "[2019-06-01 00:01:00,000] INFO [Broker id=2] Leader legacy-1 starts at leader epoch 7 from offset 300 with "
    "high watermark 300 ISR [2,3] addingReplicas [] removingReplicas []. Previous leader epoch was 6. "
    "(state.change.logger)",
    "[2019-06-01 00:01:01,000] INFO [Partition legacy-2 broker=2] legacy-2 starts at Leader Epoch 4 from offset 50. "
    "Previous Leader Epoch was: 3 (kafka.cluster.Partition)",
    "[2019-06-01 00:01:02,000] INFO [Broker id=2] Follower legacy-3 starts at leader epoch 5 from offset 70 with "
    "high watermark 70. Previous leader epoch was 4. (state.change.logger)",
    "[2019-06-01 00:02:00,000] INFO [Partition legacy-1 broker=2] ISR updated to 2 and version updated to [14] "
    "(kafka.cluster.Partition)",
    "[2019-06-01 00:03:00,000] INFO [Partition legacy-1 broker=2] ISR updated to 2,3 and version updated to 15 "
    "(kafka.cluster.Partition)",
    "[2019-06-01 00:05:00,000] INFO [Partition legacy-0 broker=2] Expanding ISR from 2,1,3 to two "
    "(kafka.cluster.Partition)",
]


def write(root: Path) -> Path:
    """The scenario's log files under `root` (one directory per broker, as a log-dir collection would be)."""
    files = {"broker-1/events.jsonl": BROKER1_EVENTS, "broker-2/events.jsonl": BROKER2_EVENTS,
             "broker-4/events.jsonl": BROKER4_EVENTS, "kafka3/server.log": KAFKA3_LOG,
             "kafka2/server.log.2019-06-01-00": KAFKA2_LOG}
    for name, lines in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root
