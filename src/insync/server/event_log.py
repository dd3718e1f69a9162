"""`events.jsonl`: the replication-health events of one node, one JSON object per line, as they happen.

Each event is written with a single `write` of a complete line on an unbuffered file opened for append, so a
SIGKILL loses at most the line being written and readers (the Spark analysis) skip a torn last line. Events come
from the cores at the rate of state changes (never per record or per fetch); `produce_rejected` is the one type
that could follow request rates, so it is aggregated per (topic, partition, error) and flushed once a second.
(The Kafka-worded `server.log` lines come from the cores themselves, through `kafkalog`.)
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from insync.events import Event, EventType

EVENTS_FILE = "events.jsonl"
REJECTION_FLUSH_MS = 1000


class EventLog:
    def __init__(self, directory: str | Path, broker_id: int) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        self.path = Path(directory) / EVENTS_FILE
        self.broker_id = broker_id
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._rejections: dict[tuple[str, int, str], int] = {}
        self._rejections_since_ms: int | None = None
        self.counts: Counter[str] = Counter()  # events written, by type (the ISR meters read these)

    def write(self, events: Iterable[Event]) -> None:
        for event in events:
            os.write(self._fd, (event.to_json() + "\n").encode())
            self.counts[str(event.type)] += 1

    def count_rejection(self, topic: str, partition: int, error: str, now_ms: int) -> None:
        """One rejected produce; written as an aggregate `produce_rejected` event by `flush_rejections`."""
        key = (topic, partition, error)
        self._rejections[key] = self._rejections.get(key, 0) + 1
        if self._rejections_since_ms is None:
            self._rejections_since_ms = now_ms

    def flush_rejections(self, now_ms: int, force: bool = False) -> None:
        since = self._rejections_since_ms
        if since is None or (not force and now_ms - since < REJECTION_FLUSH_MS):
            return
        window_s = max(1.0, (now_ms - since) / 1000)
        events = [Event(now_ms, self.broker_id, EventType.PRODUCE_REJECTED, topic, partition,
                        {"error": error, "count": count, "per_second": round(count / window_s, 2)})
                  for (topic, partition, error), count in sorted(self._rejections.items())]
        self._rejections.clear()
        self._rejections_since_ms = None
        self.write(events)

    def close(self, now_ms: int) -> None:
        self.flush_rejections(now_ms, force=True)
        os.close(self._fd)
