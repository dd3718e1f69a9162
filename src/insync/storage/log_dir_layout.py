"""Where a broker's partition logs live among its log dirs (JBOD): names, placement, and what start-up finds.

Kafka's names, so operators recognise them: a partition's log is `<topic>-<partition>`; a replica being moved to
another log dir of the same broker is copied into `<topic>-<partition>.<32 hex>-future` there; the copy it
replaced is renamed `<topic>-<partition>.<32 hex>-delete` before it is deleted. A new replica goes to the online
dir holding the fewest logs, future ones included (Kafka's `LogManager.nextLogDirs`). `plan_start_up` reads the
names found in every dir and says what to open, resume, promote and delete; it is pure so that the rules a
crash in the middle of a move relies on are tested without files:
- a partition in two dirs is refused, naming both (a future copy beside it is not a duplicate);
- a future copy whose partition is also present is resumed: the move was not finished;
- a future copy alone, beside a `-delete` copy of the same partition, is promoted: the swap renames the old copy
  to `-delete` only once the future one holds everything, so it is the one to serve;
- a future copy alone without one is refused: no crash of a move leaves that, so something else removed the log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from insync.limits import PARTITIONS_PER_BROKER_MAX
from insync.types import TopicPartition

FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
_CURRENT_NAME = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d+)$")
_MARKED_NAME = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d+)\.(?P<token>[0-9a-f]{32})"
                          r"(?P<suffix>-future|-delete)$")


class LogKind(Enum):
    CURRENT = "current"
    FUTURE = "future"
    DELETE = "delete"


class LogDirLayoutError(Exception):
    """Start-up found logs it cannot serve without choosing between copies: the operator must."""


@dataclass(frozen=True, slots=True)
class LogName:
    topic_partition: TopicPartition
    kind: LogKind


def parse_log_name(name: str) -> LogName | None:
    """What a directory name in a log dir stands for, or None for anything else (checkpoints, events.jsonl)."""
    match = _CURRENT_NAME.match(name)
    if match is not None:
        return LogName(TopicPartition(match.group("topic"), int(match.group("partition"))), LogKind.CURRENT)
    match = _MARKED_NAME.match(name)
    if match is None:
        return None
    kind = LogKind.FUTURE if match.group("suffix") == FUTURE_SUFFIX else LogKind.DELETE
    return LogName(TopicPartition(match.group("topic"), int(match.group("partition"))), kind)


def future_name(tp: TopicPartition, token: str) -> str:
    assert re.fullmatch(r"[0-9a-f]{32}", token), token
    return f"{tp}.{token}{FUTURE_SUFFIX}"


def delete_name(tp: TopicPartition, token: str) -> str:
    assert re.fullmatch(r"[0-9a-f]{32}", token), token
    return f"{tp}.{token}{DELETE_SUFFIX}"


def next_log_dir(online_dirs: Sequence[str], log_counts: Mapping[str, int]) -> str:
    """The online dir with the fewest logs, the first listed among equals (Kafka's `nextLogDirs`)."""
    assert online_dirs, "no online log dir to place a log in"
    return min(online_dirs, key=lambda d: (log_counts.get(d, 0), online_dirs.index(d)))


@dataclass(slots=True)
class StartUpPlan:
    """Directory names (relative to their log dir) by what start-up does with them."""

    current: dict[TopicPartition, tuple[str, str]] = field(default_factory=dict)  # tp -> (log dir, name)
    future: dict[TopicPartition, tuple[str, str]] = field(default_factory=dict)  # resumed moves
    promote: dict[TopicPartition, tuple[str, str]] = field(default_factory=dict)  # future logs to serve
    delete: list[tuple[str, str]] = field(default_factory=list)


def plan_start_up(listings: Mapping[str, Sequence[str]]) -> StartUpPlan:
    """`listings`: each online log dir -> the names in it. Raises LogDirLayoutError (see the module docstring)."""
    plan = StartUpPlan()
    deleted: set[TopicPartition] = set()
    for log_dir, names in listings.items():
        for name in names:
            parsed = parse_log_name(name)
            if parsed is None:
                continue
            tp = parsed.topic_partition
            if parsed.kind is LogKind.DELETE:
                plan.delete.append((log_dir, name))
                deleted.add(tp)
                continue
            found = plan.current if parsed.kind is LogKind.CURRENT else plan.future
            previous = found.get(tp)
            if previous is not None:
                raise LogDirLayoutError(
                    f"Duplicate {parsed.kind.value} log directories for {tp} are found in both "
                    f"{previous[0]}/{previous[1]} and {log_dir}/{name}: delete the one that is not to be served")
            assert len(found) < PARTITIONS_PER_BROKER_MAX, "more partitions than a broker may hold"
            found[tp] = (log_dir, name)
    for tp in sorted(set(plan.future) - set(plan.current)):
        log_dir, name = plan.future.pop(tp)
        if tp not in deleted:
            raise LogDirLayoutError(f"{log_dir}/{name} is a future copy of {tp} with no current log and no "
                                    f"'{DELETE_SUFFIX}' copy beside it: move it to {tp} to serve it, or delete it")
        plan.promote[tp] = (log_dir, name)
    return plan
