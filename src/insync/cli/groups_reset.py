"""`insync groups reset-offsets`, as `kafka-consumer-groups.sh --reset-offsets` (Kafka's GroupOffsetsResetter).

The scope is `--topic T` (every partition of T) or `--topic T:0,2` (those partitions), repeatable, or
`--all-topics` (every partition the group has committed offsets for). The scenario is one of `--to-earliest`,
`--to-latest`, `--to-offset N`, `--shift-by N` (from the committed offset) and `--to-datetime
YYYY-MM-DDTHH:mm:SS.sss[zone]` (UTC when no zone is given, as Kafka's Utils.getDateTime reads it). Offsets
outside [log start, log end] are moved to the nearest end with a warning, as Kafka does.

Like Kafka's tool it refuses a group with members (a live consumer would overwrite the reset with its next
commit), prints the plan as GROUP TOPIC PARTITION NEW-OFFSET, and changes nothing without `--execute`.
Departures: a refused or failed reset exits 1 (Kafka's tool exits 0), and `--by-duration`, `--to-current`,
`--from-file` and `--export` are not offered.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from insync.admin import ADMIN_TIMEOUT_S, admin_client, kafka_error_text
from insync.config import ConfigError

DESCRIBE_ATTEMPTS = 5
RETRY_BACKOFF_S = 0.5
INACTIVE_STATES = ("Empty", "Dead")
# confluent-kafka's ConsumerGroupState names -> Kafka's
STATE_NAMES = {"EMPTY": "Empty", "DEAD": "Dead", "STABLE": "Stable", "PREPARING_REBALANCING": "PreparingRebalance",
               "COMPLETING_REBALANCING": "CompletingRebalance", "UNKNOWN": "Unknown"}
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})(Z|[+-]\d{2}(?::?\d{2})?)")
DRY_RUN_WARNING = ("WARN: No action will be performed as the --execute option is missing. You should add the "
                   "--dry-run option explicitly if you are scripting this command.")


@dataclass(frozen=True, slots=True)
class Scope:
    topic: str
    partitions: tuple[int, ...] | None  # None: every partition of the topic


def parse_topic_arg(arg: str) -> Scope:
    """Kafka's parseTopicsWithPartitions: `topic` or `topic:p,p,...`."""
    if ":" not in arg:
        return Scope(arg, None)
    parts = arg.split(":")
    if len(parts) != 2 or not parts[0]:
        raise ConfigError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    partitions = []
    for text in parts[1].split(","):  # bounded by the argument's length
        if not text.isdigit():
            raise ConfigError(f"Invalid partition '{text}' specified in topic arg '{arg}'")
        partitions.append(int(text))
    return Scope(parts[0], tuple(partitions))


def parse_datetime_ms(text: str) -> int:
    """Kafka's Utils.getDateTime: epoch milliseconds of `yyyy-MM-ddTHH:mm:ss.SSS` with an optional zone (Z, +08,
    +0800, +08:00); without one the time is UTC."""
    if "T" not in text:
        raise ConfigError("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format")
    match = _DATETIME.fullmatch(text if re.search(r"[+Z-]", text.split("T", 1)[1]) else text + "Z")
    if match is None:
        raise ConfigError(f'Unparseable date: "{text}" (expected YYYY-MM-DDTHH:mm:SS.sss, optionally with a zone)')
    zone = match[8].replace(":", "")
    offset = datetime.timedelta(0) if zone == "Z" else (1 if zone[0] == "+" else -1) * datetime.timedelta(
        hours=int(zone[1:3]), minutes=int(zone[3:5] or 0))
    try:
        year, month, day, hour, minute, second, millis = (int(match[i]) for i in range(1, 8))
        moment = datetime.datetime(year, month, day, hour, minute, second, millis * 1000,
                                   tzinfo=datetime.timezone(offset))
    except ValueError as exc:
        raise ConfigError(f'Unparseable date: "{text}" ({exc})') from None
    return int(moment.timestamp() * 1000)


def clamp(tp: tuple[str, int], offset: int, log_start: int, log_end: int) -> int:
    """Kafka's checkOffsetsRange, with its warnings."""
    if offset > log_end:
        print(f"New offset ({offset}) is higher than latest offset for topic partition {tp[0]}-{tp[1]}. "
              f"Value will be set to {log_end}.", file=sys.stderr)
        return log_end
    if offset < log_start:
        print(f"New offset ({offset}) is lower than earliest offset for topic partition {tp[0]}-{tp[1]}. "
              f"Value will be set to {log_start}.", file=sys.stderr)
        return log_start
    return offset


def shifted(committed: Mapping[tuple[str, int], int], tp: tuple[str, int], shift_by: int) -> int:
    if tp not in committed:
        raise ConfigError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current committed "
                          "offset")
    return committed[tp] + shift_by


def format_plan(group_id: str, plan: Mapping[tuple[str, int], int]) -> str:
    """Kafka's printOffsetsToReset: a blank line, the header, a row per partition, each padded to Kafka's widths."""
    if not plan:
        return ""
    topic_width = max(15, *(len(topic) for topic, _ in plan))
    group_width = max(15, len(group_id))
    rows = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
    rows += [(group_id, topic, str(partition), str(offset)) for (topic, partition), offset in sorted(plan.items())]
    return "\n" + "\n".join(f"{g:<{group_width}} {t:<{topic_width}} {p:<10} {o}" for g, t, p, o in rows) + "\n"


# Talking to the cluster ------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", required=True, help="the consumer group whose offsets to reset")
    scope = parser.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", help="T (every partition) or T:P,P (those); repeatable")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has committed")
    scenario = parser.add_mutually_exclusive_group(required=True)
    scenario.add_argument("--to-earliest", action="store_true", help="the log start offset")
    scenario.add_argument("--to-latest", action="store_true", help="the log end offset")
    scenario.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    scenario.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)")
    scenario.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                          help="the first offset at or after this time (UTC unless a zone is given)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the new offsets only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")


def run(args: argparse.Namespace) -> int:
    timestamp_ms = None if args.to_datetime is None else parse_datetime_ms(args.to_datetime)
    scopes = [] if args.all_topics else [parse_topic_arg(arg) for arg in args.topic]
    admin = admin_client(args.bootstrap_server)  # held while its futures are pending
    state = group_state(admin, args.group)
    if state not in INACTIVE_STATES:
        raise ConfigError(f"Assignments can only be reset if the group '{args.group}' is inactive, but the current "
                          f"state is {state}.")
    committed = committed_offsets(admin, args.group)
    partitions = sorted(committed) if args.all_topics else resolve(admin, scopes)
    plan = new_offsets(admin, args, partitions, committed, timestamp_ms)
    if not args.execute:
        if not args.dry_run:
            print(DRY_RUN_WARNING, file=sys.stderr)
    else:
        commit(admin, args.group, plan)
    print(format_plan(args.group, plan), end="")
    return 0


def describe_group(admin: Any, group_id: str) -> Any:
    """The group's description. librdkafka returns a coordinator that is loading or moving as an error (Kafka's
    Java admin client retries it): retry those a few times."""
    from confluent_kafka import KafkaException

    for attempt in range(DESCRIBE_ATTEMPTS):
        try:
            return admin.describe_consumer_groups([group_id], request_timeout=ADMIN_TIMEOUT_S)[group_id].result(
                timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            if not exc.args[0].retriable() or attempt == DESCRIBE_ATTEMPTS - 1:
                raise ConfigError(f"cannot describe consumer group {group_id!r}: {exc.args[0].str()}") from None
            time.sleep(RETRY_BACKOFF_S)
    raise AssertionError("unreachable")


def group_state(admin: Any, group_id: str) -> str:
    return STATE_NAMES.get(describe_group(admin, group_id).state.name, "Unknown")


def committed_offsets(admin: Any, group_id: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)],
                                               request_timeout=ADMIN_TIMEOUT_S)[group_id].result(timeout=ADMIN_TIMEOUT_S)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def resolve(admin: Any, scopes: Sequence[Scope]) -> list[tuple[str, int]]:
    """The partitions the scopes name; every one must exist (Kafka's checkAllTopicPartitionsValid)."""
    metadata = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
    chosen: list[tuple[str, int]] = []
    for scope in scopes:  # bounded by the arguments
        topic = metadata.get(scope.topic)
        known = set() if topic is None or topic.error is not None else set(topic.partitions)
        if scope.partitions is None and not known:
            raise ConfigError(f"topic '{scope.topic}' does not exist")
        missing = [p for p in scope.partitions or () if p not in known]
        if missing:
            names = ",".join(f"{scope.topic}-{p}" for p in missing)
            raise ConfigError(f'The partitions "{names}" do not exist')
        chosen += [(scope.topic, p) for p in (scope.partitions or sorted(known))]
    return sorted(dict.fromkeys(chosen))


def list_offsets(admin: Any, partitions: Sequence[tuple[str, int]], spec: Any) -> dict[tuple[str, int], int]:
    from confluent_kafka import KafkaException, TopicPartition

    if not partitions:
        return {}
    futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions}, request_timeout=ADMIN_TIMEOUT_S)
    try:
        return {(tp.topic, tp.partition): f.result(timeout=ADMIN_TIMEOUT_S).offset for tp, f in futures.items()}
    except KafkaException as exc:
        raise ConfigError(f"cannot list offsets: {kafka_error_text(exc)}") from None


def new_offsets(admin: Any, args: argparse.Namespace, partitions: Sequence[tuple[str, int]],
                committed: Mapping[tuple[str, int], int], timestamp_ms: int | None) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # public, not in the stubs

    starts = list_offsets(admin, partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]
    ends = list_offsets(admin, partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]
    if args.to_earliest:
        return starts
    if args.to_latest:
        return ends
    if timestamp_ms is not None:
        found = list_offsets(admin, partitions, OffsetSpec.for_timestamp(timestamp_ms))
        for (topic, partition), offset in found.items():
            if offset < 0:
                print(f"Warn: Partition {partition} from topic {topic} is empty. Falling back to latest known "
                      "offset.", file=sys.stderr)
        return {tp: offset if offset >= 0 else ends[tp] for tp, offset in found.items()}
    wanted = {tp: args.to_offset if args.to_offset is not None else shifted(committed, tp, args.shift_by)
              for tp in partitions}
    return {tp: clamp(tp, offset, starts[tp], ends[tp]) for tp, offset in wanted.items()}


def commit(admin: Any, group_id: str, plan: Mapping[tuple[str, int], int]) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

    offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(plan.items())]
    future = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id, offsets)],
                                                request_timeout=ADMIN_TIMEOUT_S)[group_id]
    try:
        result = future.result(timeout=ADMIN_TIMEOUT_S)
    except KafkaException as exc:
        raise ConfigError(f"cannot reset the offsets of group '{group_id}': {kafka_error_text(exc)}") from None
    failed = [f"{tp.topic}-{tp.partition}: {tp.error.name()}" for tp in result.topic_partitions if tp.error]
    if failed:
        raise ConfigError(f"cannot reset the offsets of group '{group_id}': {', '.join(failed)}")
