"""Finding the logs to analyse: insync `events.jsonl` files and Kafka `server.log*`, `state-change.log*` and
`controller.log*` files (the ZooKeeper controller logs its elections there, unclean ones included).

A path that is a file is taken as given (`*.jsonl` is an insync event log, anything else a Kafka log); a
directory is searched recursively. URIs (`hdfs://...`, `s3a://...`) are passed to Spark unchanged, for clusters
whose executors cannot see local files. A missing path, or finding nothing to read, is an error naming the path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from insync.limits import ANALYSIS_INPUT_FILES_MAX

KAFKA_LOG_PREFIXES = ("server.log", "state-change.log", "controller.log")
EVENT_LOG_NAME = "events.jsonl"


@dataclass(frozen=True, slots=True)
class Inputs:
    event_logs: tuple[str, ...]  # insync events.jsonl
    kafka_logs: tuple[str, ...]  # Kafka server.log, state-change.log and controller.log, rotated ones included


def _is_uri(path: str) -> bool:
    return "://" in path


def _is_event_log(name: str) -> bool:
    return name.endswith((".jsonl", ".jsonl.gz"))


def _is_kafka_log(name: str) -> bool:
    return name.startswith(KAFKA_LOG_PREFIXES)


def _walk(directory: str) -> tuple[list[str], list[str]]:
    events: list[str] = []
    kafka: list[str] = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()  # deterministic order, so line numbers and examples are stable between runs
        # An insync node writes events.jsonl and, beside it, server.log with the same changes in Kafka's words
        # (without the removal reasons): in a directory walk the events stand for that node, so nothing is
        # counted twice. Kafka logs named explicitly are always read.
        has_events = EVENT_LOG_NAME in files
        for name in sorted(files):
            full = os.path.join(root, name)
            if name == EVENT_LOG_NAME:
                events.append(full)
            elif _is_kafka_log(name) and not has_events:
                kafka.append(full)
            if len(events) + len(kafka) > ANALYSIS_INPUT_FILES_MAX:
                raise OSError(f"more than {ANALYSIS_INPUT_FILES_MAX} log files under {directory}")
    return events, kafka


def discover(paths: Sequence[str]) -> Inputs:
    """The log files under `paths`; raises FileNotFoundError naming the first missing or empty path."""
    if not paths:
        raise FileNotFoundError("no input paths given")
    events: list[str] = []
    kafka: list[str] = []
    for path in paths:
        if _is_uri(path):
            (events if _is_event_log(path) else kafka).append(path)
        elif os.path.isdir(path):
            found_events, found_kafka = _walk(path)
            if not found_events and not found_kafka:
                raise FileNotFoundError(f"no {EVENT_LOG_NAME} or server.log* files under {path}")
            events += found_events
            kafka += found_kafka
        elif os.path.isfile(path):
            (events if _is_event_log(os.path.basename(path)) else kafka).append(os.path.abspath(path))
        else:
            raise FileNotFoundError(f"input path not found: {path}")
    local = [p for p in events + kafka if not _is_uri(p)]
    if local and len(local) == len(events) + len(kafka) and all(os.path.getsize(p) == 0 for p in local):
        raise FileNotFoundError(f"empty input: every log file under {', '.join(paths)} is empty")
    assert events or kafka
    return Inputs(tuple(dict.fromkeys(events)), tuple(dict.fromkeys(kafka)))
