"""`insync groups list|describe|delete|reset-offsets`, like `kafka-consumer-groups.sh --list`, `--describe`,
`--delete`, `--reset-offsets` (`groups_reset.py`) and `--delete-offsets`, over the Kafka protocol.

`describe` prints, per partition a group has committed or been assigned, the committed offset, the partition's
log end offset and their difference (the lag), and the member consuming it, in kafka-consumer-groups' columns. A
partition without a commit shows `-` for the offset and the lag. `delete` removes groups without members and
their offsets, and reports each group it could not delete with the broker's reason (NON_EMPTY_GROUP,
GROUP_ID_NOT_FOUND), exiting 1 then (Kafka's tool exits 0). `delete-offsets` sends OffsetDelete to the group's
coordinator (found through the first bootstrap address) and prints each partition's outcome as Kafka's tool does:
a group with members keeps the offsets of the topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC). It speaks only the Kafka protocol
(confluent-kafka's AdminClient), so it works against any Kafka-compatible cluster.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from insync import admin_requests, errors
from insync.admin import ADMIN_TIMEOUT_S, admin_client, kafka_error_text
from insync.cli import groups_reset
from insync.cli.groups_reset import describe_group
from insync.cli.topics_cmd import DEFAULT_BOOTSTRAP
from insync.config import ConfigError
from insync.types import TopicPartition

COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
           "CLIENT-ID")
NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: no committed offset


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("groups", help="list consumer groups, describe their offsets and lag")
    commands = parser.add_subparsers(dest="groups_command", metavar="ACTION")
    commands.required = True
    listing = commands.add_parser("list", help="every consumer group, with its state")
    listing.set_defaults(func=_list)
    describe = commands.add_parser("describe", help="committed offsets, lag and members of groups")
    describe.add_argument("groups", nargs="+")
    describe.set_defaults(func=_describe)
    delete = commands.add_parser("delete", help="delete groups without members, with their committed offsets")
    delete.add_argument("--group", action="append", required=True, help="a group to delete; repeatable")
    delete.set_defaults(func=_delete)
    reset = commands.add_parser("reset-offsets", help="move an inactive group's committed offsets")
    groups_reset.add_arguments(reset)
    reset.set_defaults(func=groups_reset.run)
    delete_offsets = commands.add_parser("delete-offsets", help="delete a group's committed offsets of some topics")
    delete_offsets.add_argument("--group", required=True, help="the consumer group")
    delete_offsets.add_argument("--topic", action="append", required=True, help="T or T:P,P; repeatable")
    delete_offsets.set_defaults(func=_delete_offsets)
    for sub in (listing, describe, delete, reset, delete_offsets):
        sub.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, help="host:port of any broker")


@dataclass(frozen=True, slots=True)
class LagRow:
    group: str
    topic: str
    partition: int
    committed: int | None
    log_end_offset: int
    member: tuple[str, str, str] | None  # consumer id, host, client id

    @property
    def lag(self) -> int | None:
        return None if self.committed is None else max(0, self.log_end_offset - self.committed)

    def cells(self) -> tuple[str, ...]:
        member = self.member or ("-", "-", "-")
        return (self.group, self.topic, str(self.partition), _or_dash(self.committed), str(self.log_end_offset),
                _or_dash(self.lag), *member)


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def _list(args: argparse.Namespace) -> int:
    admin = admin_client(args.bootstrap_server)  # held while its future is pending: librdkafka fails those of a freed one
    listed = admin.list_consumer_groups(request_timeout=ADMIN_TIMEOUT_S).result(timeout=ADMIN_TIMEOUT_S)
    for error in listed.errors:
        print(f"Warning: a broker did not list its groups: {error}", file=sys.stderr)
    for group in sorted(listed.valid, key=lambda g: g.group_id):
        print(f"{group.group_id}\t{str(group.state).rpartition('.')[2]}")
    return 0


def describe_rows(bootstrap: str, group_id: str) -> tuple[str, list[LagRow]]:
    """(the group's state, its rows); raises ConfigError for a group the cluster does not know."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = admin_client(bootstrap)
    description = describe_group(admin, group_id)
    state = str(description.state).rpartition(".")[2]
    members = {(tp.topic, tp.partition): (m.member_id, m.host, m.client_id)
               for m in description.members for tp in m.assignment.topic_partitions}
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)],
                                                request_timeout=ADMIN_TIMEOUT_S)[group_id].result(
        timeout=ADMIN_TIMEOUT_S)
    committed = {(tp.topic, tp.partition): tp.offset for tp in offsets.topic_partitions}
    if state == "DEAD" and not committed:
        raise ConfigError(f"consumer group {group_id!r} does not exist")
    keys = sorted(set(committed) | set(members))
    ends = _log_end_offsets(admin, keys)
    return state, [LagRow(group_id, topic, partition,
                          None if committed.get((topic, partition), NO_OFFSET) < 0 else committed[(topic, partition)],
                          ends[(topic, partition)], members.get((topic, partition)))
                   for topic, partition in keys]


def _log_end_offsets(admin: Any, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # public, not in the stubs

    if not keys:
        return {}
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    futures = admin.list_offsets({TopicPartition(t, p): latest for t, p in keys},
                                 request_timeout=ADMIN_TIMEOUT_S)
    return {(tp.topic, tp.partition): future.result(timeout=ADMIN_TIMEOUT_S).offset for tp, future in futures.items()}


def _describe(args: argparse.Namespace) -> int:
    failed = 0
    for group_id in args.groups:
        try:
            state, rows = describe_rows(args.bootstrap_server, group_id)
        except ConfigError as exc:
            print(f"Error: {exc}", file=sys.stderr)
            failed += 1
            continue
        if not any(r.member for r in rows):
            print(f"\nConsumer group '{group_id}' has no active members (state {state}).")
        table = [COLUMNS, *(r.cells() for r in rows)]
        widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
        print()
        for line in table:
            print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
    return 1 if failed else 0


def _delete(args: argparse.Namespace) -> int:
    """Kafka's ConsumerGroupService.deleteGroups, with its messages."""
    from confluent_kafka import KafkaException

    admin = admin_client(args.bootstrap_server)
    group_ids = list(dict.fromkeys(args.group))
    futures = admin.delete_consumer_groups(group_ids, request_timeout=ADMIN_TIMEOUT_S)
    failed: dict[str, str] = {}
    for group_id in group_ids:
        try:
            futures[group_id].result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            failed[group_id] = kafka_error_text(exc)
    deleted = ", ".join(f"'{g}'" for g in group_ids if g not in failed)
    if not failed:
        print(f"Deletion of requested consumer groups ({deleted}) was successful.")
        return 0
    print("\nError: Deletion of some consumer groups failed:", file=sys.stderr)
    for group_id, reason in failed.items():
        print(f"* Group '{group_id}' could not be deleted due to: {reason}", file=sys.stderr)
    if deleted:
        print(f"\nThese consumer groups were deleted successfully: {deleted}")
    return 1


def _delete_offsets(args: argparse.Namespace) -> int:
    """Kafka's ConsumerGroupService.deleteOffsets, with its messages; exits 1 when anything was refused."""
    scopes = [groups_reset.parse_topic_arg(arg) for arg in args.topic]
    whole = [s.topic for s in scopes if s.partitions is None]
    known = admin_client(args.bootstrap_server).list_topics(timeout=ADMIN_TIMEOUT_S).topics if whole else {}
    rows: dict[TopicPartition, str] = {}
    partitions: list[TopicPartition] = [TopicPartition(s.topic, p) for s in scopes for p in s.partitions or ()]
    for topic in whole:
        found = known.get(topic)
        if found is None or found.error is not None:
            rows[TopicPartition(topic, -1)] = f"Error: {errors.BY_NAME['UNKNOWN_TOPIC_OR_PARTITION'].message}"
        else:
            partitions += [TopicPartition(topic, p) for p in sorted(found.partitions)]
    address = args.bootstrap_server.split(",")[0]
    error, answers = admin_requests.delete_group_offsets(address, args.group, list(dict.fromkeys(partitions)),
                                                         ADMIN_TIMEOUT_S)
    rows.update((tp, "Successful" if e is errors.NONE else f"Error: {e.message}") for tp, e in answers)
    failed = error is not errors.NONE or any(status != "Successful" for status in rows.values())
    if error is not errors.NONE:
        print(f"\nError: {error.message}", file=sys.stderr)
    elif failed:
        print("\nError: Encountered some partition-level error, see the follow-up details.", file=sys.stderr)
    else:
        print(f"Request succeeded for deleting offsets from group {args.group}.")
    width = max(15, *(len(tp.topic) for tp in rows)) if rows else 15
    print(f"\n{'TOPIC':<{width}} {'PARTITION':<10} STATUS")
    for tp in sorted(rows):
        print(f"{tp.topic:<{width}} {tp.partition if tp.partition >= 0 else '-':<10} {rows[tp]}")
    return 1 if failed else 0
