"""Kafka's log lines and metadata as the events `rules.step` folds, so that `insync monitor` judges a Kafka cluster
with the same rules as an insync one. Pure: no IO, no clock.

`parse_line` reads one line with the wordings of the batch analysis (`analysis.kafka_lines.KINDS`, the same
patterns, run here with Python's `re`) into a fact. `Translator` keeps what it knows of each partition (leader, ISR,
replicas, min ISR, partition epoch) and of the brokers (fenced, shutting down), and turns facts and metadata
snapshots, in time order, into events: an ISR that lost replicas is an `isr_shrink` naming them and why (fenced by
the controller, out of sync at the leader), one that gained them an `isr_expand`, a whole one `under_replicated_end`;
leader changes (`shutdown` when the old leader was shutting down, `unclean` from the controller's words), offline,
under min ISR, refused produce requests and failed partitions. Kafka states one change in several places (the
leader's shrink, its commit, every replica's metadata, the poll): a statement of the ISR already known, or with an
older partition epoch, is no change, and the poll changes an ISR only when no log line spoke of it for
METADATA_GRACE_MS. A broker shutting down leaves ISRs for no fault: such removals make no event.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from insync.spark.analysis import kafka_lines as kl

METADATA_GRACE_MS = 2_000  # a poll restating an ISR differently this soon after a log line about it is stale
MIN_ISR_PATTERN = next(k for k in kl.KINDS if k.name == "produce_rejected").pattern
_LOG4J = re.compile(kl.LOG4J_RX)
_BODY = re.compile(kl.BODY_RX)
_CONTEXT = re.compile(kl.CONTEXT_RX)
_CTX_BROKER = re.compile(kl.CTX_BROKER_RX)
_PARTITION_CONTEXT = re.compile(kl.PARTITION_CONTEXT_RX)
_KINDS = tuple((k, re.compile(k.pattern), re.compile(k.context) if k.context else None) for k in kl.KINDS)
_OUT_OF_SYNC = re.compile(r"brokerId: (-?\d+), endOffset: (-?\d+|unknown), lastCaughtUpTimeMs: (-?\d+|unknown)")

Fact = dict[str, Any]
Event = dict[str, Any]


def log_time_ms(stamp: str) -> int:
    """A log4j timestamp (`2026-11-29 11:30:11,539`, the brokers' clock, UTC) in epoch ms."""
    return int(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC).timestamp() * 1000)


def line_time_ms(text: str) -> int | None:
    """The time of a log4j line, None for another (an exception's lines)."""
    prefixed = _LOG4J.match(text) if text[:1] == "[" or "| [" in text[:80] else None
    return None if prefixed is None else log_time_ms(prefixed.group(1))


def parse_line(text: str, previous_ts_ms: int | None = None) -> Fact | None:
    """One log line as a fact (`kind` a KINDS name, `ts_ms`, `broker` the one its context names, and the kind's
    slots), or None. A line without a log4j prefix is read only as the min-ISR refusal an exception states, at the
    time of the line before it (`previous_ts_ms`)."""
    prefixed = _LOG4J.match(text)
    if prefixed is None:
        if previous_ts_ms is None or kl.MIN_ISR_PHRASE not in text:
            return None
        found = re.match(MIN_ISR_PATTERN, text)
        return None if found is None else {"kind": "produce_rejected", "ts_ms": previous_ts_ms, "broker": None,
                                           "topic": found.group(3), "partition": int(found.group(4))}
    msg = prefixed.group(3)
    body_match = _BODY.match(msg)
    if body_match is None:
        return None
    body = body_match.group(1)
    for kind, pattern, context_rx in _KINDS:
        if context_rx is not None and context_rx.match(msg) is None:
            continue
        found = pattern.match(body)
        if found is not None:
            return _fact(kind, found, msg, log_time_ms(prefixed.group(1)))
    return None


def _fact(kind: kl.LineKind, found: re.Match[str], msg: str, ts_ms: int) -> Fact:
    fact: Fact = {"kind": kind.name, "ts_ms": ts_ms, "broker": None}
    for slot, group in kind.groups.items():
        value = found.group(group)
        if value not in (None, ""):
            fact[slot] = value
    said = _CONTEXT.match(msg)
    if said is not None:
        context = said.group(1) or said.group(2)
        broker = _CTX_BROKER.search(context)
        fact["broker"] = int(broker.group(1)) if broker else None
        named = _PARTITION_CONTEXT.match(context)
        if named is not None and "topic" not in fact:
            fact["topic"], fact["partition"] = named.group(1) or named.group(3), named.group(2) or named.group(4)
    for slot in ("partition", "leader", "partition_epoch", "broker_id", "leader_epoch"):
        if slot in fact:
            fact[slot] = int(fact[slot])
    if "broker" in kind.groups and fact.get("broker") is not None:  # 0.10's shutdown line names its broker
        fact["broker"] = int(fact["broker"])
    for slot in ("isr_before", "isr_after", "replicas"):
        if slot in kind.groups:
            fact[slot] = ids(fact.get(slot, ""))
    if "out_of_sync" in fact:
        fact["out_of_sync"] = {int(b): {"leo": leo, "caught_up_ms": caught} for b, leo, caught
                               in _OUT_OF_SYNC.findall(fact["out_of_sync"])}
    return fact


def ids(text: str) -> list[int]:
    return sorted(int(x) for x in re.findall(r"-?\d+", text))


@dataclass(frozen=True, slots=True)
class PartitionMeta:
    """One partition as the cluster's metadata states it (the poll)."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int | None = None
    elr: tuple[int, ...] | None = None


@dataclass(slots=True)
class _Partition:
    leader: int = -1
    isr: list[int] | None = None
    replicas: list[int] = field(default_factory=list)
    epoch: int | None = None
    min_isr: int | None = None
    under_min: bool = False
    offline: bool = False
    logged_ms: int = -1  # when a log line last stated this partition's ISR or leader


@dataclass(slots=True)
class Translator:
    """Facts and snapshots in, `rules` events out (see the module doc). Feed them in time order."""

    partitions: dict[tuple[str, int], _Partition] = field(default_factory=dict)
    topic_names: dict[str, str] = field(default_factory=dict)  # topic id -> name
    fenced: dict[int, int] = field(default_factory=dict)  # broker -> when the controller fenced it
    stopping: set[int] = field(default_factory=set)
    brokers: set[int] = field(default_factory=set)  # the cluster's brokers, from the poll

    def all_stopping(self) -> bool:
        """Every broker of the cluster is shutting down (a clean `cluster down`): its clock stops."""
        return bool(self.brokers) and self.brokers <= self.stopping

    def troubled(self) -> list[tuple[str, int]]:
        """The partitions under-replicated, under min ISR or offline now."""
        return [key for key, p in self.partitions.items()
                if p.offline or p.under_min or (p.isr is not None and bool(set(p.replicas) - set(p.isr)))]

    def fact(self, f: Mapping[str, Any]) -> list[Event]:
        kind, ts = f["kind"], int(f["ts_ms"])
        if kind in (kl.BROKER_SHUTDOWN, kl.CONTROLLED_SHUTDOWN):
            broker = f.get("broker_id", f.get("broker"))
            if broker is not None:
                self.stopping.add(int(broker))
            return []
        if kind in (kl.BROKER_STARTED, kl.BROKER_UNFENCED, "broker_registered"):
            broker = f.get("broker_id", f.get("broker"))
            self.stopping.discard(broker)
            self.fenced.pop(broker, None)
            return []
        if kind == kl.BROKER_FENCED:
            self.fenced[int(f["broker_id"])] = ts
            return []
        if f.get("topic_id") and f.get("topic"):
            self.topic_names[f["topic_id"]] = f["topic"]
        topic = f.get("topic") or self.topic_names.get(f.get("topic_id", ""))
        if topic is None or f.get("partition") is None:
            return []
        key = (topic, int(f["partition"]))
        p = self.partitions.setdefault(key, _Partition())
        base = {"ts_ms": ts, "topic": topic, "partition": key[1]}
        if f.get("replicas"):
            p.replicas = list(f["replicas"])
        if kind in ("isr_shrink", "isr_expand", kl.ISR_UPDATE, "leader_change", kl.FOLLOWER_START):
            p.logged_ms = ts
        if kind == "isr_shrink":
            return self._isr(p, base, f["isr_after"], f.get("broker"), None, f.get("out_of_sync") or {})
        if kind in ("isr_expand", kl.ISR_UPDATE):
            return self._isr(p, base, f["isr_after"], f.get("leader", f.get("broker")), f.get("partition_epoch"))
        if kind == "leader_change":
            unclean = f.get("detail") in ("loss", "election")
            leader = int(f.get("leader", f.get("broker", -1)))
            events = self._leader(p, base, leader, "unclean" if unclean else None)
            if "isr_after" in f:
                events += self._isr(p, base, f["isr_after"], leader, f.get("partition_epoch"))
            return events
        if kind == kl.FOLLOWER_START and "leader" in f:
            return self._leader(p, base, int(f["leader"]), None)
        if kind == "produce_rejected":
            return [{**base, "type": "produce_rejected", "count": 1}]
        if kind == "partition_failed":
            return [{**base, "type": "partition_failed", "broker": f.get("broker"), "error": "marked as failed"}]
        if kind == "partition_offline":  # no leader: a leader shutting down made it so, or a fault did
            if p.offline:
                return []
            if p.leader != -1:
                return self._leader(p, base, -1, None)
            p.offline = True
            return [{**base, "type": kind}]
        if kind == "partition_online" and p.offline:
            p.offline = False
            return [{**base, "type": kind}]
        return []

    def snapshot(self, ts_ms: int, rows: Iterable[PartitionMeta], brokers: Iterable[int] = ()) -> list[Event]:
        """A poll of the cluster's metadata at `ts_ms`: replicas and min ISR always, the leader and the ISR where
        no log line spoke of the partition for METADATA_GRACE_MS (the line is the better witness: it has its
        partition epoch and the leader's reasons)."""
        self.brokers = set(brokers) or self.brokers
        events: list[Event] = []
        for row in rows:
            p = self.partitions.setdefault((row.topic, row.partition), _Partition())
            p.replicas = sorted(row.replicas)
            if row.min_isr is not None:
                p.min_isr = row.min_isr
            if p.isr is not None and ts_ms - p.logged_ms < METADATA_GRACE_MS:
                continue
            base = {"ts_ms": ts_ms, "topic": row.topic, "partition": row.partition, "source": "metadata"}
            events += self._leader(p, base, row.leader, None)
            events += self._isr(p, base, sorted(row.isr), row.leader, None)
        return events

    def _leader(self, p: _Partition, base: Mapping[str, Any], leader: int, reason: str | None) -> list[Event]:
        if leader == p.leader and reason is None:
            return []
        before = p.leader
        p.leader = leader
        why = reason or ("shutdown" if before in self.stopping else "isr_change")
        events: list[Event] = []
        if before != -1 or leader != -1 or reason:
            events.append({**base, "type": "leader_change", "leader_before": before, "leader_after": leader,
                           "isr": list(p.isr or []), "reason": why})
        if leader == -1 and not p.offline:
            p.offline = True
            events.append({**base, "type": "partition_offline"})
        elif leader != -1 and p.offline:
            p.offline = False
            events.append({**base, "type": "partition_online"})
        return events

    def _isr(self, p: _Partition, base: Mapping[str, Any], isr: Sequence[int], leader: int | None,
             epoch: int | None, out_of_sync: Mapping[int, Any] | None = None) -> list[Event]:
        if epoch is not None and p.epoch is not None and epoch <= p.epoch:
            return []  # restated, or older than what is known
        if epoch is not None:
            p.epoch = epoch
        if leader is not None and leader >= 0:
            p.leader = leader
        before, after = p.isr, sorted(isr)
        p.isr = after
        if before is None:  # first sight: under-replicated already (the monitor started during a fault)
            before = sorted(set(p.replicas) | set(after)) if p.replicas else after
        events: list[Event] = []
        removed = [b for b in before if b not in after and b not in self.stopping]
        if removed:
            events.append({**base, "type": "isr_shrink", "broker": p.leader, "isr_before": list(before),
                           "isr_after": after, "removed": [self._removal(b, (out_of_sync or {}).get(b))
                                                           for b in removed]})
        if any(b not in before for b in after):
            events.append({**base, "type": "isr_expand", "broker": p.leader, "isr_before": list(before),
                           "isr_after": after})
        if p.replicas and set(after) >= set(p.replicas) and before != after:
            events.append({**base, "type": "under_replicated_end"})
        if p.min_isr is not None and (len(after) < p.min_isr) != p.under_min:
            p.under_min = not p.under_min
            events.append({**base, "type": "under_min_isr_start" if p.under_min else "under_min_isr_end"})
        return events

    def _removal(self, broker: int, printed: Mapping[str, Any] | None) -> dict[str, Any]:
        if broker in self.fenced:
            return {"broker": broker, "reason": f"fenced by the controller (its session timed out at "
                                                f"{self.fenced[broker]})"}
        if printed is not None:
            return {"broker": broker, "reason": "out of sync at the leader", "leo": printed["leo"],
                    "last_caught_up_ms": printed["caught_up_ms"]}
        return {"broker": broker, "reason": "left the ISR"}
