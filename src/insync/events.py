"""The event schema: what brokers, the controller and the simulator report about replication health.

One event is one JSON object on one line of `events.jsonl` (DESIGN.md 7):
`{"v": 2, "ts_ms": ..., "broker": 1, "type": "isr_shrink", "topic": "t", "partition": 0, ...fields}`.
`EVENT_FIELDS` is the single definition of which fields each type carries; `json_schema()` derives the JSON
Schema from it (checked in as `events.schema.json`, kept equal by a test), and `Event.__post_init__` refuses an
event that lacks a required field, so a consumer (the Spark analysis) can rely on every line it reads.
In version 2 each `removed` entry of `isr_shrink` says whether a fetch from that replica was pending at the leader
(`fetch_pending`, `fetch_pending_since_ms`): the evidence that a leader, not its followers, was slow. Version 1
files lack only those keys and are still read (SCHEMA_VERSIONS_READ). The cores never write files: they return
`Event`s, and the server or simulator hands them to a sink.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

SCHEMA_VERSION = 2
SCHEMA_VERSIONS_READ = (1, 2)


class EventType(StrEnum):
    ISR_SHRINK = "isr_shrink"
    ISR_EXPAND = "isr_expand"
    ISR_KEPT_PENDING_READ = "isr_kept_pending_read"
    LEADER_CHANGE = "leader_change"
    PARTITION_OFFLINE = "partition_offline"
    PARTITION_ONLINE = "partition_online"
    UNDER_REPLICATED_START = "under_replicated_start"
    UNDER_REPLICATED_END = "under_replicated_end"
    UNDER_MIN_ISR_START = "under_min_isr_start"
    UNDER_MIN_ISR_END = "under_min_isr_end"
    PARTITION_FAILED = "partition_failed"
    PARTITION_UNFAILED = "partition_unfailed"
    LOG_START_BOUNDED = "log_start_bounded"
    TRUNCATE = "truncate"
    BROKER_REGISTERED = "broker_registered"
    BROKER_FENCED = "broker_fenced"
    BROKER_UNFENCED = "broker_unfenced"
    CONTROLLER_ELECTED = "controller_elected"
    PRODUCE_REJECTED = "produce_rejected"
    METADATA_PROPAGATED = "metadata_propagated"
    UNCLEAN_RECOVERY = "unclean_recovery"
    DENIED = "denied"


class ShrinkReason(StrEnum):
    STUCK = "stuck"  # no fetch within the lag time
    SLOW = "slow"  # fetching, but not caught up within the lag time
    MESSAGES = "messages"  # legacy replica.lag.max.messages rule


class LeaderChangeReason(StrEnum):
    CREATED = "created"
    FENCED = "fenced"
    SHUTDOWN = "shutdown"
    PREFERRED = "preferred"
    UNCLEAN = "unclean"
    ISR_CHANGE = "isr_change"
    UNFENCED = "unfenced"  # an offline partition back online when an ISR member returns
    LOG_DIR_FAILURE = "log_dir_failure"  # the leader's log directory failed (KIP-858)


# Fields each type must carry, beyond the common ones. Values are JSON Schema type names.
EVENT_FIELDS: dict[EventType, dict[str, str]] = {
    EventType.ISR_SHRINK: {"isr_before": "array", "isr_after": "array", "removed": "array",
                           "leader_epoch": "integer", "hw": "integer", "leo": "integer"},
    EventType.ISR_EXPAND: {"isr_before": "array", "isr_after": "array", "added": "array"},
    EventType.ISR_KEPT_PENDING_READ: {"replica": "integer", "pending_since_ms": "integer"},
    EventType.LEADER_CHANGE: {"leader_before": "integer", "leader_after": "integer", "leader_epoch": "integer",
                              "isr": "array", "reason": "string"},
    EventType.PARTITION_OFFLINE: {},
    EventType.PARTITION_ONLINE: {},
    EventType.UNDER_REPLICATED_START: {},
    EventType.UNDER_REPLICATED_END: {},
    EventType.UNDER_MIN_ISR_START: {},
    EventType.UNDER_MIN_ISR_END: {},
    EventType.PARTITION_FAILED: {"leader": "integer", "error": "string"},
    EventType.PARTITION_UNFAILED: {"leader": "integer"},
    EventType.LOG_START_BOUNDED: {"leader_log_start": "integer", "local_leo": "integer"},
    EventType.TRUNCATE: {"from_offset": "integer", "to_offset": "integer", "reason": "string"},
    EventType.BROKER_REGISTERED: {"broker_id": "integer", "broker_epoch": "integer"},
    EventType.BROKER_FENCED: {"broker_id": "integer"},
    EventType.BROKER_UNFENCED: {"broker_id": "integer"},
    EventType.CONTROLLER_ELECTED: {"controller_epoch": "integer"},
    EventType.PRODUCE_REJECTED: {"error": "string", "count": "integer"},
    EventType.METADATA_PROPAGATED: {"changes": "integer"},
    # An unclean election by the recovery rule (KIP-966): who led, what each replica reported
    # ({broker, last_epoch, log_end_offset}), what each other replica gives up ({broker, from_offset, to_offset,
    # records}: offsets [from, to) truncated away), and why (the strategy, or "ElectLeaders" for an operator's).
    EventType.UNCLEAN_RECOVERY: {"leader_after": "integer", "leader_epoch": "integer", "strategy": "string",
                                 "reported": "array", "lost": "array", "records_lost": "integer"},
    # A request the authorizer refused: who, from where, what on which resource, in which API.
    EventType.DENIED: {"principal": "string", "host": "string", "operation": "string", "resource_type": "string",
                       "resource": "string", "api": "string"},
}

# Types that concern one partition carry topic and partition.
BROKER_LEVEL = frozenset({EventType.BROKER_REGISTERED, EventType.BROKER_FENCED, EventType.BROKER_UNFENCED,
                          EventType.CONTROLLER_ELECTED, EventType.METADATA_PROPAGATED, EventType.DENIED})

# What the entries of an array field hold, where the analysis reads them (the JSON Schema says so).
ARRAY_ITEMS: dict[str, dict[str, Any]] = {
    "removed": {"type": "object", "required": ["broker", "leo", "last_caught_up_ms", "last_fetch_ms", "reason"],
                "properties": {"broker": {"type": "integer"}, "leo": {"type": "integer"},
                               "last_caught_up_ms": {"type": "integer"}, "last_fetch_ms": {"type": "integer"},
                               "reason": {"type": "string"}, "fetch_pending": {"type": "boolean"},
                               "fetch_pending_since_ms": {"type": ["integer", "null"]}}},
}

_PY_TYPES: dict[str, tuple[type, ...]] = {"array": (list, tuple), "integer": (int,), "string": (str,)}


@dataclass(frozen=True, slots=True)
class Event:
    ts_ms: int
    broker: int
    type: EventType
    topic: str | None = None
    partition: int | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.ts_ms >= 0, self
        partition_level = self.type not in BROKER_LEVEL
        assert (self.topic is not None and self.partition is not None) == partition_level, self
        for name, json_type in EVENT_FIELDS[self.type].items():
            assert name in self.fields, f"{self.type} event lacks {name}"
            value = self.fields[name]
            assert isinstance(value, _PY_TYPES[json_type]) and not isinstance(value, bool), (name, value)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"v": SCHEMA_VERSION, "ts_ms": self.ts_ms, "broker": self.broker,
                               "type": str(self.type)}
        if self.topic is not None:
            out["topic"] = self.topic
            out["partition"] = self.partition
        for name, value in self.fields.items():
            out[name] = list(value) if isinstance(value, tuple) else value
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=False)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one events.jsonl line, derived from EVENT_FIELDS."""
    variants = []
    for event_type, fields in EVENT_FIELDS.items():
        required = ["v", "ts_ms", "broker", "type"]
        props: dict[str, Any] = {"type": {"const": str(event_type)}}
        if event_type not in BROKER_LEVEL:
            required += ["topic", "partition"]
        for name, json_type in fields.items():
            props[name] = {"type": json_type, **({"items": ARRAY_ITEMS[name]} if name in ARRAY_ITEMS else {})}
            required.append(name)
        variants.append({"properties": props, "required": required})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "insync event",
        "type": "object",
        "properties": {
            "v": {"enum": list(SCHEMA_VERSIONS_READ)},
            "ts_ms": {"type": "integer", "minimum": 0},
            "broker": {"type": "integer"},
            "type": {"enum": [str(t) for t in EventType]},
            "topic": {"type": "string"},
            "partition": {"type": "integer", "minimum": 0},
        },
        "oneOf": variants,
    }
