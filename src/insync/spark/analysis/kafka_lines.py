"""The wordings of Kafka's log lines that `logparse` reads: log4j's layout, each kind of line a version from 0.10 to
4.x writes about ISRs, leaders, offline partitions and brokers coming and going (KINDS), and the event types that
only Kafka logs produce.

A LineKind is a cheap announcement (what the line starts with or contains), the full pattern the line must then
match, and where its capture groups go (SLOTS); `logparse` runs one regular expression per line to validate and
rearrange it. Kafka writes these facts to four places: each broker's server.log (`kafka.cluster.Partition`: shrink,
expand, the AlterPartition commit), each broker's state-change.log (the leader and follower transitions, and the
ISR every broker learns from the controller's metadata), the KRaft controller's controller.log (fencing, controlled
shutdowns, unfencing, ELR and unclean elections) and the ZooKeeper controller's controller.log and state-change.log
(a broker's ZooKeeper session lost, controlled shutdowns, OfflinePartition and OnlinePartition).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pyspark.sql import Column

from insync.events import EventType

# Types that only Kafka logs produce (insync reports these facts with its own types).
ISR_UPDATE = "isr_update"  # the commit line `ISR updated to ...` (2.8+ has no expand line, only this)
FOLLOWER_START = "follower_start"
# Before 2.7 a leader wrote its ISR change to ZooKeeper itself; `Cached zkVersion [v] not equal to that in zookeeper,
# skip updating ISR` says the write lost (the controller had changed the partition) and the ISR stayed as it was:
# the shrink or expand line just before it, for that partition, did not happen (KAFKA-2729 loops on it).
ISR_CHANGE_REFUSED = "isr_change_refused"
# A broker (or KRaft controller) beginning or ending its shutdown: 0.10's `[Kafka Server 0], shutting down`, 1.x-3.x
# ZooKeeper mode's `[KafkaServer id=1] shutting down` / `Starting controlled shutdown` / `shut down completed`, KRaft's
# `[BrokerServer id=1] Transition from STARTED to SHUTTING_DOWN`, `[BrokerLifecycleManager id=1] Beginning controlled
# shutdown.` and `[ControllerServer id=1] shutting down`. What its log said before is no evidence after it (`health`).
BROKER_SHUTDOWN = "broker_shutdown"
SHUTDOWN_PHRASES = ("shutting down", "shut down completed", "Starting controlled shutdown",
                    "Beginning controlled shutdown.")
# Who says it: the server (its context, or none while it starts: `shutting down (kafka.server.KafkaServer)`).
SHUTDOWN_CONTEXT_RX = (r"^(?:\[(?:(?:Kafka|Broker|Controller)Server|BrokerLifecycleManager) id=\d+\] |"
                       r"\[Kafka Server \d+\], (?:shutting down|shut down completed|Starting controlled shutdown)"
                       r"(?: \(|$)|(?:shutting down|shut down completed)(?: \(|$))")
# A broker's own start (`[KafkaRaftServer nodeId=1] Kafka Server started`, ZooKeeper mode's `[KafkaServer id=1]
# started`): whatever stopped it is over.
BROKER_STARTED = "broker_started"
STARTED_CONTEXT_RX = r"^\[(?:KafkaRaftServer nodeId|KafkaServer id)=\d+\] "
# The controller granting a broker's controlled shutdown (or an immediate one, without moving its leaders first):
# the ISR changes that follow are the shutdown's, not a fault's. `broker_id` says which broker.
CONTROLLED_SHUTDOWN = "controlled_shutdown"
# The controller dropping a broker it lost (KRaft: its session timed out; ZooKeeper: its session expired) and taking
# it back: insync's own event types, with `broker_id` the broker they are about.
BROKER_FENCED = str(EventType.BROKER_FENCED)
BROKER_UNFENCED = str(EventType.BROKER_UNFENCED)

# `docker compose logs` puts `service  | ` before each line: the log4j line follows it unchanged.
LOG4J_RX = r"^(?:[\w.-]+ *\| )?\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3})\] ([A-Z]+) (.*)$"
LOG4J_FORMAT = "yyyy-MM-dd HH:mm:ss,SSS"
# The message without its context (`[Partition t-0 broker=1] `, before 1.0 `Partition [t,0] on broker 1: `) and
# log4j's `%c` suffix (` (kafka.cluster.Partition)`).
OLD_CONTEXT = r"Partition \[[^\]]*\] on broker \d+"
BODY_RX = rf"^(?:\[[^\]]*\] |{OLD_CONTEXT}: )?(.*?)(?: \([\w.$]+\))?$"
CONTEXT_RX = rf"^(?:\[([^\]]*)\]|({OLD_CONTEXT}):) "
# A line's context naming its partition: `Partition t-0 broker=1`, or before 1.0 `Partition [t,0] on broker 1`.
PARTITION_CONTEXT_RX = r"^Partition (?:(.+)-(\d+) broker=|\[(.+),(\d+)\] on broker )\d+$"
# The broker a line's context names (`[Partition t-0 broker=1]`, `[Broker id=1]`, `[QuorumController id=0]`...).
CTX_BROKER_RX = (r"(?:(?:broker|Broker id|replicaId|Controller id|(?:Kafka|Broker|Controller)Server id"
                 r"|BrokerLifecycleManager id|KafkaRaftServer nodeId)=|on broker )(\d+)")
SEP = "\u0001"  # joins the captured groups of a line into one string, split once
MIN_ISR_PHRASE = "min.isr requirement"
APPEND_ERROR_PHRASE = "Error processing append operation"

# Slots every kind's groups are rearranged into (empty when the line's wording has no such value).
SLOTS = ("topic", "partition", "isr_before", "isr_after", "leader_epoch", "hw", "leo", "out_of_sync",
         "commit_flag", "min_isr", "leader", "detail", "topic_id", "broker", "partition_epoch", "replicas", "broker_id")


@dataclass(frozen=True, slots=True)
class LineKind:
    name: str  # the event type it becomes
    announce: Callable[[Column], Column]  # cheap test: the line claims to be this kind
    pattern: str  # full-line pattern it must then match
    groups: Mapping[str, int]  # slot -> capture group
    # Who must say it: a pattern the message with its context must match too (a line said by another is ignored).
    context: str | None = None

    def claims(self, body: Column, msg: Column) -> Column:
        """The line announces this kind (and is said by whom the kind requires)."""
        announced = self.announce(body)
        return announced if self.context is None else announced & msg.rlike(self.context)

    def template(self) -> str:
        return SEP.join(f"${self.groups[slot]}" if slot in self.groups else "" for slot in SLOTS)


KINDS: tuple[LineKind, ...] = (
    # Before 1.0 the shrink and expand lines name their partition again: `Shrinking ISR for partition [t,0] from`.
    LineKind("isr_shrink", lambda b: b.startswith("Shrinking ISR "),
             r"^Shrinking ISR (?:for partition \[[^\]]*\] )?from ([0-9,]*) to ([0-9,]*)(?:\. Leader: \(highWatermark: (-?\d+|unknown), "
             r"endOffset: (-?\d+|unknown)\)\. Out of sync replicas: (.*?))?\.?$",
             {"isr_before": 1, "isr_after": 2, "hw": 3, "leo": 4, "out_of_sync": 5}),
    LineKind("isr_expand", lambda b: b.startswith("Expanding ISR "),
             r"^Expanding ISR (?:for partition \[[^\]]*\] )?from ([0-9,]*) to ([0-9,]*)\.?$", {"isr_before": 1, "isr_after": 2}),
    # 2.4-2.7 `[1,2] and zkVersion updated to [7]`, 2.8-3.4 `1,2 and version ...`, 3.5+ `1,2  and` or
    # `1,2 (under-min-isr) and`: the group between the list and `and` tells which.
    LineKind(ISR_UPDATE, lambda b: b.startswith("ISR updated to "),
             r"^ISR updated to \[?([0-9,]*)\]?( \(under-min-isr\) |  | )and (?:zkVersion|version) updated to "
             r"\[?(\d+)\]?\.?$", {"isr_after": 1, "commit_flag": 2, "partition_epoch": 3}),
    LineKind(ISR_CHANGE_REFUSED, lambda b: b.startswith("Cached zkVersion "),
             r"^Cached zkVersion \[?-?\d+\]? not equal to that in zookeeper, skip updating ISR\.?$", {}),
    # 3.3+: an AlterPartition the controller refused; the line restates the ISR that stays committed.
    LineKind(ISR_UPDATE, lambda b: b.startswith("Failed to alter partition to ")
             & b.contains(" reset to the latest committed state "),
             r"^Failed to alter partition to .* since the controller rejected the request with \w+\. Partition state "
             r"has been reset to the latest committed state CommittedPartitionState\(isr=Set\(([0-9, ]*)\),.*$",
             {"isr_after": 1}),
    # What every replica learns from the KRaft controller's metadata when its role stays: the committed ISR (the
    # controller's own changes, fencing's among them, appear nowhere else at INFO), the leader and the replicas.
    # The same line saying the broker already has a newer partition epoch restates nothing and is ignored.
    LineKind(ISR_UPDATE, lambda b: b.startswith("Skipped the become-") & b.contains(" since it is already "),
             r"^Skipped the become-(?:leader|follower) state change for (.+?)-(\d+) with topic id (?:Some\()?([\w-]+)\)? "
             r"and partition state LeaderAndIsrPartitionState\(topicName='[^']*', partitionIndex=\d+, "
             r"controllerEpoch=-?\d+, leader=(-?\d+), leaderEpoch=(\d+), isr=\[([0-9, ]*)\], partitionEpoch=(\d+), "
             r"replicas=\[([0-9, ]*)\],.* since it is already (?:the leader|a follower) with leader epoch \d+\..*$",
             {"topic": 1, "partition": 2, "topic_id": 3, "leader": 4, "leader_epoch": 5, "isr_after": 6,
              "partition_epoch": 7, "replicas": 8}),
    # The ZooKeeper controller's state-change.log when it takes a replica it lost out of an ISR (2.8+ with the
    # recovery state): the ISR it wrote, with the leader, leader epoch and zkVersion.
    LineKind(ISR_UPDATE, lambda b: b.startswith("Partition ") & b.contains(" after removing replica "),
             r"^Partition (.+?)-(\d+) state changed to \(Leader:(-?\d+),ISR:([0-9,]*),(?:LeaderRecoveryState:\w+,)?"
             r"LeaderEpoch:(\d+),ZkVersion:(\d+),ControllerEpoch:\d+\) after removing replica \d+ from the ISR as part "
             r"of transition to \w+$",
             {"topic": 1, "partition": 2, "leader": 3, "isr_after": 4, "leader_epoch": 5, "partition_epoch": 6}),
    LineKind("leader_change", lambda b: b.startswith("Leader ") & b.contains(" starts at leader epoch "),
             r"^Leader (.+?)-(\d+)(?: with topic id (?:Some\()?([\w-]+)\)?)? starts at leader epoch (\d+) from offset "
             r"(-?\d+) with (?:partition epoch (\d+), )?high watermark (-?\d+),? ISR \[([0-9,]*)\].*$",
             {"topic": 1, "partition": 2, "topic_id": 3, "leader_epoch": 4, "leo": 5, "partition_epoch": 6, "hw": 7,
              "isr_after": 8}),
    LineKind("leader_change", lambda b: b.contains(" starts at Leader Epoch "),  # 2.0-2.5
             r"^(.+?)-(\d+) starts at Leader Epoch (\d+) from offset (-?\d+)\. Previous Leader Epoch was: -?\d+$",
             {"topic": 1, "partition": 2, "leader_epoch": 3, "leo": 4}),
    # The ZooKeeper controller's unclean election (controller.log; 0.10 `[t,0]` and `3,4`, later `t-0` and `[3,4]`):
    # the new leader is the ISR, and the records only the old ISR had are lost.
    LineKind("leader_change", lambda b: b.contains("No broker in ISR is alive for "),
             r"^(?:\[\w+\]: )?No broker in ISR is alive for \[(.+),(\d+)\]\. Elect leader ((\d+)) from live brokers "
             r"[0-9,]+\. There's potential data (loss)\.$",
             {"topic": 1, "partition": 2, "leader": 3, "isr_after": 4, "detail": 5}),
    LineKind("leader_change", lambda b: b.contains("No broker in ISR is alive for "),
             r"^(?:\[\w+\]: )?No broker in ISR is alive for (.+)-(\d+)\. Elect leader ((\d+)) from live brokers "
             r"\[[0-9,]*\]\. There's potential data (loss)\.$",
             {"topic": 1, "partition": 2, "leader": 3, "isr_after": 4, "detail": 5}),
    # The KRaft controller's unclean election (PartitionChangeBuilder, 3.x and 4.x, which adds the previous partition
    # and the change record): by topic id; the new leader alone is the ISR.
    LineKind("leader_change", lambda b: b.startswith("Setting new leader for topicId ")
             & b.contains(" using an unclean election"),
             r"^Setting new leader for topicId ([\w-]+), partition (\d+) to (\d+) using an unclean (election)"
             r"(?:\. Previous partition: .*)?$", {"topic_id": 1, "partition": 2, "leader": 3, "isr_after": 3, "detail": 4}),
    # The KRaft controller's election from the ELR (KIP-966, 3.9 without the previous partition and change record):
    # the ISR was empty, and the new leader alone is the ISR.
    LineKind("leader_change", lambda b: b.startswith("Setting new leader for topicId ") & b.contains(" using ELR"),
             r"^Setting new leader for topicId ([\w-]+), partition (\d+) to (\d+) using ELR(?:\. Previous partition: .*)?$",
             {"topic_id": 1, "partition": 2, "leader": 3, "isr_after": 3}),
    LineKind(FOLLOWER_START, lambda b: b.startswith("Follower ") & b.contains(" starts at leader epoch "),
             r"^Follower (.+?)-(\d+) starts at leader epoch (\d+) from offset (-?\d+) with "
             r"(?:partition epoch (\d+) and )?high watermark (-?\d+)\.(?: Current leader is (-?\d+)\.)?.*$",
             {"topic": 1, "partition": 2, "leader_epoch": 3, "leo": 4, "partition_epoch": 5, "hw": 6, "leader": 7}),
    LineKind("produce_rejected", lambda b: b.contains(MIN_ISR_PHRASE),
             r"^.*The size of the current ISR \w*[(\[]([0-9, ]*)[)\]] is insufficient to satisfy the min\.isr "
             r"requirement of (\d+) for partition (.+)-(\d+)\s*$",
             {"isr_after": 1, "min_isr": 2, "topic": 3, "partition": 4}),
    LineKind("partition_failed", lambda b: b.contains(" marked as failed"),
             r"^.*Partition (.+)-(\d+) marked as failed.*$", {"topic": 1, "partition": 2}),
    # The ZooKeeper controller's state-change.log (TRACE before 2.6, INFO since KAFKA-8470). A failed election
    # out of OfflinePartition leaves the partition offline, so it counts as offline too. It is listed before the
    # online kind, whose announcement it also makes.
    LineKind("partition_offline", lambda b: b.contains(" failed to change state for partition ")
             & b.contains(" from OfflinePartition to OnlinePartition"),
             r"^Controller \d+ epoch \d+ failed to change state for partition (.+)-(\d+) from OfflinePartition to "
             r"OnlinePartition$", {"topic": 1, "partition": 2}),
    LineKind("partition_offline", lambda b: b.startswith("Changed partition ") & b.endswith(" to OfflinePartition"),
             r"^Changed partition (.+)-(\d+) state from \w+ to OfflinePartition$", {"topic": 1, "partition": 2}),
    LineKind("partition_online", lambda b: b.startswith("Changed partition ")
             & b.contains(" from OfflinePartition to OnlinePartition"),
             r"^Changed partition (.+)-(\d+) (?:state )?from OfflinePartition to OnlinePartition(?: with .*)?$",
             {"topic": 1, "partition": 2}),
    # Only the server's own lines: a fetcher manager also logs `[ReplicaFetcherManager on broker 0] shutting down`.
    # 0.10's server names itself with a comma, which is no context (`[Kafka Server 0], shutting down`): the broker
    # id is taken from the line. Later versions' context (`[KafkaServer id=1] `) gives it.
    LineKind(BROKER_SHUTDOWN, lambda b: b.isin(*SHUTDOWN_PHRASES)
             | (b.startswith("Transition from ") & b.endswith(" to SHUTTING_DOWN"))
             | (b.startswith("[Kafka Server ") & b.contains("], ")),
             r"^(?:\[Kafka Server (\d+)\], )?(?:shutting down|shut down completed|Starting controlled shutdown|"
             r"Beginning controlled shutdown\.|Transition from \w+ to SHUTTING_DOWN)$", {"broker": 1},
             SHUTDOWN_CONTEXT_RX),
    LineKind(BROKER_STARTED, lambda b: b.isin("Kafka Server started", "started"), r"^(?:Kafka Server )?started$", {},
             STARTED_CONTEXT_RX),
    # The KRaft controller (controller.log, `[QuorumController id=0] `), 3.x and 4.x (which adds the epoch).
    LineKind(BROKER_FENCED, lambda b: b.startswith("Fencing broker "),
             r"^Fencing broker (\d+)(?: at epoch -?\d+)? because its session has timed out\.$", {"broker_id": 1}),
    LineKind(BROKER_FENCED, lambda b: b.startswith("Unfenced broker ") & b.endswith(" granted fencing"),
             r"^Unfenced broker (\d+) has requested and been granted fencing$", {"broker_id": 1}),
    LineKind(BROKER_UNFENCED, lambda b: b.startswith("The request from broker ") & b.contains(" to unfence has been "),
             r"^The request from broker (\d+) to unfence has been granted because it has caught up with the offset of "
             r"its register broker record -?\d+\.$", {"broker_id": 1}),
    LineKind(CONTROLLED_SHUTDOWN, lambda b: b.contains("enced broker ") & b.endswith(" shutdown."),
             r"^(?:Unfenced|Fenced) broker (\d+) has requested and been granted (?:a controlled|an immediate) "
             r"shutdown\.$", {"broker_id": 1}),
    LineKind(CONTROLLED_SHUTDOWN, lambda b: b.startswith("enterControlledShutdown["),
             r"^enterControlledShutdown\[(\d+)\]: changing \d+ partition\(s\)$", {"broker_id": 1}),
    # The ZooKeeper controller (controller.log, `[Controller id=2] `): a broker's session expired or it restarted
    # (several brokers at once: the first is taken), a broker asking for its controlled shutdown.
    LineKind(BROKER_FENCED, lambda b: b.startswith("Broker failure callback for "),
             r"^Broker failure callback for (\d+)(?:,\d+)*$", {"broker_id": 1}),
    LineKind(str(EventType.BROKER_REGISTERED), lambda b: b.startswith("New broker startup callback for "),
             r"^New broker startup callback for (\d+)(?:,\d+)*$", {"broker_id": 1}),
    LineKind(CONTROLLED_SHUTDOWN, lambda b: b.startswith("Shutting down broker "), r"^Shutting down broker (\d+)$",
             {"broker_id": 1}),
)
