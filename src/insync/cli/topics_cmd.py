"""`insync topics create|list|describe|alter|delete|elect-leaders|reassign`, like Kafka's tools.

It speaks only the Kafka protocol (confluent-kafka's AdminClient), so it works against any Kafka-compatible
cluster. `describe` prints one line per partition in kafka-topics' 4.x format (with `Elr` and `LastKnownElr`,
from DescribeTopicPartitions) and takes its filters (`--under-replicated-partitions`,
`--under-min-isr-partitions`, `--unavailable-partitions`). `alter` adds partitions and sets and deletes topic
config overrides (IncrementalAlterConfigs); the broker validates them, so keys insync does not know are still
accepted by a Kafka cluster. `elect-leaders` moves leadership back to each partition's preferred replica (as
`kafka-leader-election.sh`); `--unclean` elects leaders of offline partitions among out-of-sync replicas (insync's
controller elects the one that loses least), and `--unclean --dry-run` prints, per offline partition, each
replica's log and what each choice would discard. `reassign` is `kafka-reassign-partitions.sh`'s
(`cli.topics_reassign`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from insync import admin_requests
from insync.admin import ADMIN_TIMEOUT_S, admin_client, describe_rows, kafka_error_text
from insync.cli import topics_reassign
from insync.config import ConfigError, validate_topic_configs
from insync.properties import parse_overrides

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("topics", help="create, list, describe and delete topics")
    commands = parser.add_subparsers(dest="topics_command", metavar="ACTION")
    commands.required = True

    create = commands.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, default=1)
    create.add_argument("--replication-factor", type=int, default=1)
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config")
    create.set_defaults(func=_create)

    listing = commands.add_parser("list", help="list topic names")
    listing.set_defaults(func=_list)

    describe = commands.add_parser("describe", help="leader, replicas and ISR of each partition")
    describe.add_argument("names", nargs="*", help="topics (default: all)")
    describe.add_argument("--under-replicated-partitions", action="store_true")
    describe.add_argument("--under-min-isr-partitions", action="store_true")
    describe.add_argument("--unavailable-partitions", action="store_true")
    describe.set_defaults(func=_describe)

    alter = commands.add_parser("alter", help="add partitions, set or delete topic config overrides")
    alter.add_argument("name")
    alter.add_argument("--partitions", type=int, help="the new partition count (an increase)")
    alter.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="set an override")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                       help="delete an override (back to the broker default)")
    alter.set_defaults(func=_alter)

    elect = commands.add_parser("elect-leaders", help="move leadership back to the preferred replicas, or elect "
                                                     "leaders of offline partitions uncleanly (--unclean)")
    elect.add_argument("names", nargs="*", help="topics (default: every partition of the cluster)")
    elect.add_argument("--unclean", action="store_true",
                       help="elect an out-of-sync replica for each offline partition, the one that loses least "
                            "(kafka-leader-election.sh --election-type unclean); data may be lost")
    elect.add_argument("--dry-run", action="store_true",
                       help="with --unclean: print what each choice would discard, change nothing")
    elect.set_defaults(func=_elect_leaders)

    delete = commands.add_parser("delete", help="delete a topic")
    delete.add_argument("name")
    delete.set_defaults(func=_delete)

    for sub in (create, listing, describe, alter, elect, delete):
        sub.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, help="host:port of any broker")
    topics_reassign.register(commands, DEFAULT_BOOTSTRAP)


def _wait(admin: Any, futures: dict[str, Any], verb: str, what: str = "") -> int:
    """Wait for each topic's future while `admin` stays referenced (librdkafka fails futures of a freed handle).
    Prints "<verb> topic <name><what>." or the error."""
    failed = 0
    for name, future in futures.items():
        try:
            future.result(timeout=ADMIN_TIMEOUT_S)
            print(f"{verb} topic {name}{what}.")
        except Exception as exc:  # KafkaException carries the broker's error name
            print(f"Error: topic {name} not {verb.lower()}{what}: {kafka_error_text(exc)}", file=sys.stderr)
            failed += 1
    del admin
    return 1 if failed else 0


def _create(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    if args.partitions < 1:
        raise ConfigError(f"--partitions must be at least 1, got {args.partitions}")
    if args.replication_factor < 1:
        raise ConfigError(f"--replication-factor must be at least 1, got {args.replication_factor}")
    configs = parse_overrides(args.config)
    validate_topic_configs(configs)
    topic = NewTopic(args.name, num_partitions=args.partitions, replication_factor=args.replication_factor,
                     config=configs)
    admin = admin_client(args.bootstrap_server)
    return _wait(admin, admin.create_topics([topic], operation_timeout=ADMIN_TIMEOUT_S), "Created")


def _alter(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
    )

    sets = parse_overrides(args.config)
    if not sets and not args.delete_config and args.partitions is None:
        raise ConfigError("topics alter needs --partitions N, --config KEY=VALUE or --delete-config KEY")
    if args.partitions is not None and args.partitions < 1:
        raise ConfigError(f"--partitions must be at least 1, got {args.partitions}")
    both = sorted(set(sets) & set(args.delete_config))
    if both:
        raise ConfigError(f"{', '.join(both)}: both set and deleted in one command")
    admin = admin_client(args.bootstrap_server)
    if args.partitions is not None:
        grown = admin.create_partitions([NewPartitions(args.name, args.partitions)], request_timeout=ADMIN_TIMEOUT_S)
        if _wait(admin, grown, "Altered", f" ({args.partitions} partitions)"):
            return 1
    if not sets and not args.delete_config:
        return 0
    entries = [ConfigEntry(key, str(value), incremental_operation=AlterConfigOpType.SET) for key, value in sets.items()]
    entries += [ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE) for key in args.delete_config]
    futures = admin.incremental_alter_configs([ConfigResource("topic", args.name, incremental_configs=entries)],
                                              request_timeout=ADMIN_TIMEOUT_S)
    return _wait(admin, {resource.name: future for resource, future in futures.items()}, "Altered", " (configs)")


def _elect_leaders(args: argparse.Namespace) -> int:
    """Preferred election (a partition whose preferred replica already leads is not a failure), or with
    `--unclean` an unclean one (`--dry-run`: its cost, choice by choice)."""
    from confluent_kafka import ElectionType, TopicPartition

    if args.dry_run and not args.unclean:
        raise ConfigError("--dry-run needs --unclean: it shows what an unclean election would discard")
    if args.unclean and args.dry_run:
        return _unclean_dry_run(args.bootstrap_server, args.names)
    admin = admin_client(args.bootstrap_server)
    partitions = None
    if args.names:
        partitions = [TopicPartition(row.topic, row.partition) for row in describe_rows(args.bootstrap_server,
                                                                                        args.names)]
    election = ElectionType.UNCLEAN if args.unclean else ElectionType.PREFERRED
    try:
        # No request_timeout: confluent-kafka 2.x's elect_leaders fails to parse its own keyword arguments
        # ("more argument specifiers than keyword list entries"); the client's socket.timeout.ms bounds it.
        outcomes = admin.elect_leaders(election, partitions).result(timeout=ADMIN_TIMEOUT_S)
    except Exception as exc:
        print(f"Error: election not done: {kafka_error_text(exc)}", file=sys.stderr)
        return 1
    failed = 0
    for tp, error in sorted(outcomes.items(), key=lambda item: (item[0].topic, item[0].partition)):
        # Each value is None or a KafkaError (some client versions wrap it in a KafkaException).
        error = error.args[0] if isinstance(error, Exception) and error.args else error
        if error is None:
            print(f"Elected {'a leader uncleanly' if args.unclean else 'the preferred leader'} of "
                  f"{tp.topic}-{tp.partition}.")
        elif error.name() == "ELECTION_NOT_NEEDED":
            print(f"{tp.topic}-{tp.partition}: " + ("it has a leader." if args.unclean
                                                    else "the preferred leader already leads."))
        else:
            print(f"Error: {tp.topic}-{tp.partition}: {error.name()}: {error.str()}", file=sys.stderr)
            failed += 1
    if not outcomes:
        print("No partition is offline." if args.unclean else "Every preferred replica that can lead already does.")
    return 1 if failed else 0


def _unclean_dry_run(bootstrap: str, names: list[str]) -> int:
    """For each offline partition (of the named topics, or of the cluster): every replica's log and what each
    choice of leader would make the others discard. Reads only; nothing is elected."""
    admin = admin_client(bootstrap)
    metadata = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    unknown = [name for name in names if name not in metadata.topics]
    if unknown:
        raise ConfigError(f"unknown topic{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
    addresses = {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}
    described: list[admin_requests.PartitionDescription] = []
    for address in bootstrap.split(","):
        try:
            described, _ = admin_requests.describe_topic_partitions(address.strip(), names, ADMIN_TIMEOUT_S)
            break
        except OSError:
            continue
    offline = [d for d in described if d.leader < 0]
    for d in described:
        if names and d.leader >= 0:
            print(f"{d.topic}-{d.partition}: led by {d.leader}, no unclean election needed.")
    for d in offline:
        print("\n".join(_plan_lines(admin_requests.unclean_plan(d, addresses, ADMIN_TIMEOUT_S))))
    if not offline:
        print("No partition is offline.")
    return 0


def _plan_lines(plan: admin_requests.UncleanPlan) -> list[str]:
    d = plan.partition
    lines = [f"{d.topic}-{d.partition}: offline (leader epoch {d.leader_epoch}, Isr: {_ids(d.isr)}, "
             f"Elr: {_ids(d.elr)}, LastKnownElr: {_ids(d.last_known_elr)}). Replica logs:"]
    lines += [f"\tbroker {log.broker}: offsets {log.log_start_offset}-{log.log_end_offset - 1}, last leader epoch "
              f"{log.last_epoch}" if log.log_end_offset > log.log_start_offset else
              f"\tbroker {log.broker}: empty log at offset {log.log_end_offset}" for log in plan.logs]
    lines += [f"\tbroker {b}: not reachable (no log known; it cannot be elected)" for b in plan.unreachable]
    if not plan.choices:
        return [*lines, "\tNo replica can be elected: none is reachable."]
    for rank, choice in enumerate(plan.choices):
        why = " (the recovery rule's choice: highest last leader epoch, then longest log)" if rank == 0 else ""
        lines.append(f"\tElecting {choice.leader}{why}: {choice.records_lost} records discarded")
        lines += [f"\t\tbroker {loss.broker} discards {loss.records} records (offsets {loss.from_offset}-"
                  f"{loss.to_offset - 1})" if loss.records else f"\t\tbroker {loss.broker} discards nothing"
                  for loss in choice.losses]
    return lines


def _ids(brokers: tuple[int, ...]) -> str:
    return ",".join(map(str, brokers))


def _delete(args: argparse.Namespace) -> int:
    admin = admin_client(args.bootstrap_server)
    return _wait(admin, admin.delete_topics([args.name], operation_timeout=ADMIN_TIMEOUT_S), "Deleted")


def _list(args: argparse.Namespace) -> int:
    metadata = admin_client(args.bootstrap_server).list_topics(timeout=ADMIN_TIMEOUT_S)
    for name in sorted(metadata.topics):
        print(name)
    return 0


def _describe(args: argparse.Namespace) -> int:
    rows = describe_rows(args.bootstrap_server, args.names)
    filtered = [r for r in rows if r.matches(args.under_replicated_partitions, args.under_min_isr_partitions,
                                             args.unavailable_partitions)]
    any_filter = args.under_replicated_partitions or args.under_min_isr_partitions or args.unavailable_partitions
    current = None
    for row in filtered:
        if row.topic != current and not any_filter:
            count = sum(1 for r in rows if r.topic == row.topic)
            print(f"Topic: {row.topic}\tTopicId: {row.topic_id}\tPartitionCount: {count}"
                  f"\tReplicationFactor: {row.replication_factor}\tConfigs: min.insync.replicas={row.min_isr}")
            current = row.topic
        print(row.line())
    return 0
