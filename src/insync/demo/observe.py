"""What the demo shows while it runs: partition state polled over the Kafka protocol, and every node's events.

`ClusterObserver` polls leader / replicas / ISR (Metadata) and the high watermark (ListOffsets) of the demo
topic, and tails each node's `events.jsonl`. `render()` builds the rich view: a partition table with URP,
under-min-ISR and offline flags, the workload's counters, and the latest events with their reasons.
`summarise()` turns the events of a time window into the per-act figures of the final table.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from insync.chaos.cluster import ClusterSpec
from insync.chaos.history import client_conf

EVENTS_SHOWN = 12
EVENT_LINES_MAX = 1_000_000
# A view that cannot be had quickly is shown as unknown: the acts pause and kill leaders, and a poll waiting out
# a dead leader would stretch every act's watch by its timeout.
METADATA_TIMEOUT_S = 1.0
WATERMARK_TIMEOUT_S = 0.3


@dataclass(frozen=True, slots=True)
class PartitionView:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    high_watermark: int


@dataclass
class EventTail:
    """Reads the new complete lines of one events.jsonl on every call."""

    path: Path
    position: int = 0

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as handle:
            handle.seek(self.position)
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]
        self.position += len(complete)
        events = []
        for line in complete.splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue  # a torn line from a SIGKILL
        return events


@dataclass
class ClusterObserver:
    spec: ClusterSpec
    topic: str
    min_isr: int
    partitions: list[PartitionView] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=EVENTS_SHOWN))
    _tails: list[EventTail] = field(default_factory=list)
    _admin: Any = None
    _consumer: Any = None

    def __post_init__(self) -> None:
        self._tails = [EventTail(node.log_dir / "events.jsonl") for node in self.spec.nodes]

    def poll(self) -> None:
        self.poll_events()
        with contextlib.suppress(Exception):  # a broker mid-restart: keep the last view
            self._poll_partitions()

    def poll_events(self) -> None:
        for tail in self._tails:
            for event in tail.read():
                if event.get("topic", self.topic) != self.topic:
                    continue  # another topic's: `__consumer_offsets`, created for the consumers' group.id
                if len(self.events) < EVENT_LINES_MAX:
                    self.events.append(event)
                self.recent.append(describe_event(event))

    def isrs_whole(self) -> bool:
        """Every partition of every topic (`__consumer_offsets` too) has all its replicas in its ISR: what an
        operator waits for before the next fault or roll. False while the cluster does not answer."""
        self._connect()
        try:
            topics = self._admin.list_topics(timeout=METADATA_TIMEOUT_S).topics
        except Exception:  # noqa: BLE001  # a broker mid-restart: not known to be whole
            return False
        return bool(topics) and all(topic.error is None and all(set(p.isrs) == set(p.replicas)
                                                                 for p in topic.partitions.values())
                                    for topic in topics.values())

    def _connect(self) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient(client_conf({"bootstrap.servers": self.spec.bootstrap}))
            self._consumer = Consumer(client_conf({"bootstrap.servers": self.spec.bootstrap,
                                                   "group.id": "insync-demo-view"}))

    def _poll_partitions(self) -> None:
        from confluent_kafka import TopicPartition

        self._connect()
        self._admin.poll(0)  # neither client is polled otherwise: serve their queued log lines
        self._consumer.poll(0)
        topic = self._admin.list_topics(self.topic, timeout=METADATA_TIMEOUT_S).topics.get(self.topic)
        if topic is None or topic.error is not None:
            return
        views = []
        for pid in sorted(topic.partitions):
            p = topic.partitions[pid]
            hw = -1  # unknown: offline, or its leader did not answer in time
            if p.leader >= 0:
                with contextlib.suppress(Exception):
                    _, hw = self._consumer.get_watermark_offsets(TopicPartition(self.topic, pid),
                                                                 timeout=WATERMARK_TIMEOUT_S)
            views.append(PartitionView(pid, p.leader, tuple(p.replicas), tuple(p.isrs), hw))
        self.partitions = views

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()


def describe_event(event: dict[str, Any]) -> str:
    where = f"{event.get('topic')}-{event.get('partition')}" if "topic" in event else "cluster"
    kind = event.get("type", "?")
    detail = ""
    if kind == "isr_shrink":
        reasons = ", ".join(f"{r['broker']}:{r['reason']}" for r in event.get("removed", []))
        detail = f"{event['isr_before']} -> {event['isr_after']} removed {reasons}"
    elif kind == "isr_expand":
        detail = f"{event['isr_before']} -> {event['isr_after']}"
    elif kind == "leader_change":
        detail = f"leader {event['leader_before']} -> {event['leader_after']} ({event['reason']})"
    elif kind in ("partition_failed", "produce_rejected"):
        detail = f"{event.get('error')} x{event.get('count', 1)}"
    elif kind.startswith("broker_"):
        detail = f"broker {event.get('broker_id')}"
    return f"{time.strftime('%H:%M:%S', time.gmtime(event['ts_ms'] / 1000))} n{event['broker']} {kind} {where} {detail}"


def render(observer: ClusterObserver, title: str, counters: dict[str, int]) -> Any:
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table

    table = Table(title=f"topic {observer.topic}  (min.insync.replicas={observer.min_isr})", expand=True)
    for column in ("partition", "leader", "replicas", "ISR", "HW", "state"):
        table.add_column(column)
    for p in observer.partitions:
        flags = []
        if p.leader < 0:
            flags.append("[bold red]OFFLINE[/]")
        if len(p.isr) < len(p.replicas):
            flags.append("[yellow]URP[/]")
        if len(p.isr) < observer.min_isr:
            flags.append("[red]UNDER-MIN-ISR[/]")
        table.add_row(str(p.partition), str(p.leader) if p.leader >= 0 else "none", ",".join(map(str, p.replicas)),
                      ",".join(map(str, p.isr)), str(p.high_watermark), " ".join(flags) or "[green]ok[/]")
    stats = "   ".join(f"{k}: {v}" for k, v in counters.items())
    events = "\n".join(observer.recent) or "(no events yet)"
    return Group(Panel(title, style="bold"), table, Panel(stats, title="workload"),
                 Panel(events, title="events (newest last)"))


@dataclass(frozen=True, slots=True)
class ActSummary:
    """One act's figures, with the broker it acted on and its time window (what the analysis of the act's cause is
    checked against)."""

    name: str
    shrinks: int
    expands: int
    urp_s: float
    offline_s: float
    acked: int
    produce_errors: int
    broker: int = -1
    start_ms: int = 0
    end_ms: int = 0


def summarise(name: str, events: list[dict[str, Any]], start_ms: int, end_ms: int, acked: int,
              produce_errors: int, broker: int = -1) -> ActSummary:
    window = [e for e in events if start_ms <= e["ts_ms"] <= end_ms]
    return ActSummary(name, sum(1 for e in window if e["type"] == "isr_shrink"),
                      sum(1 for e in window if e["type"] == "isr_expand"),
                      _interval_s(events, "under_replicated_start", "under_replicated_end", start_ms, end_ms),
                      _interval_s(events, "partition_offline", "partition_online", start_ms, end_ms),
                      acked, produce_errors, broker, start_ms, end_ms)


def _interval_s(events: list[dict[str, Any]], start_type: str, end_type: str, start_ms: int, end_ms: int) -> float:
    """Partition-seconds inside [start_ms, end_ms] between start and end events of each partition."""
    open_since: dict[tuple[str, int], int] = {}
    total_ms = 0
    for event in sorted(events, key=lambda e: e["ts_ms"]):
        key = (event.get("topic", ""), event.get("partition", -1))
        if event["type"] == start_type:
            open_since.setdefault(key, event["ts_ms"])
        elif event["type"] == end_type and key in open_since:
            began = open_since.pop(key)
            total_ms += max(0, min(event["ts_ms"], end_ms) - max(began, start_ms))
    total_ms += sum(max(0, end_ms - max(began, start_ms)) for began in open_since.values())
    return round(total_ms / 1000, 1)
