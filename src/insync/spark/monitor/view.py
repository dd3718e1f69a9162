"""What `insync monitor` (and the demo beside its acts) shows: partitions in trouble now, and the latest alerts."""

from __future__ import annotations

import datetime
import threading
from collections import deque
from typing import Any

from rich.console import Group
from rich.table import Table

ALERTS_SHOWN = 12
PARTITIONS_SHOWN = 30


class MonitorView:
    """Fed by the query's micro-batches (`on_batch`, from Spark's callback thread), read by `render`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.trouble: dict[str, str] = {}  # "topic-partition" -> status line, for partitions in trouble
        self.alerts: deque[dict[str, Any]] = deque(maxlen=ALERTS_SHOWN)
        self.alerts_total = 0
        self.batches = 0

    def on_batch(self, alerts: list[dict[str, Any]], statuses: dict[str, str]) -> None:
        with self._lock:
            self.batches += 1
            self.alerts.extend(alerts)
            self.alerts_total += len(alerts)
            for name, line in statuses.items():
                if line:
                    self.trouble[name] = line
                else:
                    self.trouble.pop(name, None)

    def render(self, title: str = "insync monitor") -> Group:
        with self._lock:
            trouble = sorted(self.trouble.items())[:PARTITIONS_SHOWN]
            alerts = list(self.alerts)
            caption = f"{self.batches} micro-batches, {self.alerts_total} alerts"
        partitions = Table(title=f"{title}: partitions in trouble", caption=caption)
        partitions.add_column("partition", no_wrap=True)
        partitions.add_column("what and why")
        for name, line in trouble:
            partitions.add_row(name, line)
        recent = Table(title="latest alerts (also in __insync_alerts)")
        for column in ("due (UTC)", "delay s", "alert", "partition", "cause"):
            recent.add_column(column, no_wrap=column != "cause")
        for alert in reversed(alerts):
            due = datetime.datetime.fromtimestamp(alert["due_ms"] / 1000, datetime.UTC).strftime("%H:%M:%S.%f")[:-3]
            recent.add_row(due, f"{(alert['emitted_ms'] - alert['due_ms']) / 1000:.1f}", alert["kind"],
                           f"{alert['topic']}-{alert['partition']}", alert["cause"])
        return Group(partitions, recent)
