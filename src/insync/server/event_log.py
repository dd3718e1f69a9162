"""`events.jsonl`: the replication-health events of one node, one JSON object per line, as they happen.

Each event is written with a single `write` of a complete line on an unbuffered file opened for append, so a
SIGKILL loses at most the line being written and readers (the Spark analysis) skip a torn last line. Events come
from the cores at the rate of state changes (never per record or per fetch); `produce_rejected`, the one type
that could follow request rates, arrives already aggregated per second by the broker core.
(The Kafka-worded `server.log` lines come from the cores themselves, through `kafkalog`.)
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from insync.events import Event

log = logging.getLogger("insync.events")

EVENTS_FILE = "events.jsonl"
DROPPED_REPORT_EVERY = 1000


class EventLog:
    def __init__(self, directory: str | Path) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        self.path = Path(directory) / EVENTS_FILE
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.counts: Counter[str] = Counter()  # events written, by type (the ISR meters read these)
        self.dropped = 0  # events the disk refused

    def write(self, events: Iterable[Event]) -> None:
        """A disk that refuses the line (full, failing) loses the event, not the broker: the partition logs in the
        same directory meet the error too and take it offline (`storage.log_dir_failure`)."""
        for event in events:
            try:
                os.write(self._fd, (event.to_json() + "\n").encode())
            except OSError as exc:
                self.dropped += 1
                if self.dropped == 1 or self.dropped % DROPPED_REPORT_EVERY == 0:
                    log.warning("Dropped %d events: cannot write %s: %s", self.dropped, self.path, exc)
                continue
            self.counts[str(event.type)] += 1

    def close(self) -> None:
        os.close(self._fd)
