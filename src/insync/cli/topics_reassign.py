"""`insync topics reassign`, as `kafka-reassign-partitions.sh`: the same flags, JSON files and messages.

- `--generate --topics-to-move-json-file T --broker-list 1,2,3`: the current assignment and a proposal over the
  brokers listed (Kafka's rack-unaware placement); changes nothing.
- `--execute --reassignment-json-file F`: prints the current assignment (for a rollback) and starts the
  reassignments, refused while others run unless `--additional`. `--throttle R` first sets the topics'
  `leader.replication.throttled.replicas` (current replicas) and `follower.replication.throttled.replicas` (new
  ones), and R bytes/s on every broker involved.
- `--verify`: each reassignment completed or in progress; once none is in progress, the throttles are cleared
  (unless `--preserve-throttles`). `--cancel`: reverts those still running and clears the throttles likewise.
- `--list`: every reassignment in progress, with its adding and removing replicas.
The files are Kafka's (`log_dirs` other than "any" are refused: one log dir per broker). confluent-kafka has no
reassignment calls, so the tool sends those requests itself (`admin_requests`).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from typing import Any

from insync import admin_requests, errors
from insync.admin import ADMIN_TIMEOUT_S, admin_client, describe_rows, first_answer, kafka_error_text
from insync.config import THROTTLED_REPLICAS_KEYS, ConfigError
from insync.controller.replication_control import place_replicas
from insync.types import BrokerId

ANY_LOG_DIR = "any"
PARTITIONS_MAX = 10_000  # as many as one request may name (the controller's batch)
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LEADER_REPLICAS_KEY, FOLLOWER_REPLICAS_KEY = THROTTLED_REPLICAS_KEYS
MUST_VERIFY = ("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
               "throttle is removed.")
CANNOT_EXECUTE = ("Cannot execute because there is an existing partition assignment.  Use --additional to "
                  "override this and create a new partition assignment in addition to the existing one. The "
                  "--additional flag can also be used to change the throttle by resubmitting the current "
                  "reassignment.")

Assignment = dict[tuple[str, int], list[int]]


def _name(tp: tuple[str, int]) -> str:
    return f"{tp[0]}-{tp[1]}"


def _json_object(text: str) -> dict[str, Any]:
    """The file's JSON object, at version 1 (absent means 1, as Kafka's)."""
    try:
        data = json.loads(text)
    except ValueError:
        raise ConfigError("The input string is not a valid JSON") from None
    if not isinstance(data, dict):
        raise ConfigError(f"expected a JSON object, got {type(data).__name__}")
    if data.get("version", 1) != 1:
        raise ConfigError(f"Not supported version field value {data['version']}")
    return data


def _field(entry: object, key: str, kind: type, where: str) -> Any:
    if not isinstance(entry, dict) or key not in entry:
        raise ConfigError(f"{where}: missing field {key!r}")
    value = entry[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ConfigError(f"{where}: {key!r} must be a{'n' if kind is int else ''} {kind.__name__}, got {value!r}")
    return value


def parse_topics(text: str) -> list[str]:
    """The topics of a --topics-to-move-json-file; duplicates are refused with Kafka's words."""
    entries = _json_object(text).get("topics", [])
    if not isinstance(entries, list):
        raise ConfigError("'topics' must be a list")
    topics = [_field(e, "topic", str, f"topics[{i}]") for i, e in enumerate(entries)]
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise ConfigError(f"List of topics to reassign contains duplicate entries: {', '.join(duplicates)}")
    return topics


def parse_broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",")]
    except ValueError:
        raise ConfigError(f"--broker-list {text!r} is not a comma-separated list of broker ids") from None
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise ConfigError(f"Broker list contains duplicate entries: {', '.join(map(str, duplicates))}")
    return brokers


def parse_reassignment(text: str) -> Assignment:
    """The partitions of a --reassignment-json-file, checked as Kafka's tool checks them before executing."""
    entries = _json_object(text).get("partitions", [])
    if not isinstance(entries, list):
        raise ConfigError("'partitions' must be a list")
    if not entries:
        raise ConfigError("Partition reassignment list cannot be empty")
    if len(entries) > PARTITIONS_MAX:
        raise ConfigError(f"{len(entries)} partitions: at most {PARTITIONS_MAX} in one reassignment")
    out: Assignment = {}
    for i, entry in enumerate(entries):
        where = f"partitions[{i}]"
        tp = (_field(entry, "topic", str, where), _field(entry, "partition", int, where))
        replicas = _field(entry, "replicas", list, where)
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas):
            raise ConfigError(f"{where}: 'replicas' must be a list of broker ids, got {replicas!r}")
        log_dirs = entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
            raise ConfigError(f"Size of replicas list {replicas} is different from size of log dirs list "
                              f"{log_dirs} for partition {_name(tp)}")
        if any(d != ANY_LOG_DIR for d in log_dirs):
            raise ConfigError(f"{where}: log dirs other than \"any\" are not supported (a broker has one)")
        if not replicas:
            raise ConfigError("Partition replica list cannot be empty")
        if tp in out:
            raise ConfigError(f"Partition reassignment contains duplicate topic partitions: {_name(tp)}")
        repeated = sorted({r for r in replicas if replicas.count(r) > 1})
        if repeated:
            raise ConfigError(f"Partition replica lists may not contain duplicate entries: {_name(tp)} contains "
                              f"multiple entries for {','.join(map(str, repeated))}")
        out[tp] = replicas
    return out


def reassignment_json(assignment: Assignment) -> str:
    """Kafka's `formatAsReassignmentJson`: compact, partitions sorted by topic then partition."""
    partitions = [{"topic": t, "partition": p, "replicas": assignment[(t, p)],
                   "log_dirs": [ANY_LOG_DIR] * len(assignment[(t, p)])} for t, p in sorted(assignment)]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def propose(current: Assignment, brokers: Sequence[int], rng: random.Random) -> Assignment:
    """Each topic's partitions placed over `brokers` at the replication factor of its partition 0."""
    proposed: Assignment = {}
    for topic in sorted({t for t, _ in current}):
        count = sum(1 for t, _ in current if t == topic)
        factor = len(current[(topic, 0)])
        if factor > len(brokers):
            raise ConfigError(f"Replication factor: {factor} larger than available brokers: {len(brokers)}.")
        placed = place_replicas([BrokerId(b) for b in brokers], count, factor, rng)
        proposed.update({(topic, p): list(replicas) for p, replicas in enumerate(placed)})
    return proposed


def verify_lines(targets: Assignment, ongoing: set[tuple[str, int]], current: Assignment) -> list[str]:
    """Kafka's `partitionReassignmentStatesToString`."""
    lines = ["Status of partition reassignment:"]
    for tp in sorted(targets):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {_name(tp)} is still in progress.")
        elif current.get(tp, []) == targets[tp]:
            lines.append(f"Reassignment of partition {_name(tp)} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {_name(tp)}, but replica set is "
                         f"{','.join(map(str, current.get(tp, [])))} rather than {','.join(map(str, targets[tp]))}.")
    return lines


def list_lines(ongoing: Sequence[admin_requests.Reassignment]) -> list[str]:
    """Kafka's `curReassignmentsToString`."""
    if not ongoing:
        return ["No partition reassignments found."]
    lines = ["Current partition reassignments:"]
    for r in sorted(ongoing, key=lambda r: (r.topic, r.partition)):
        lines.append(f"{_name((r.topic, r.partition))}: replicas: {','.join(map(str, r.replicas))}."
                     + (f" adding: {','.join(map(str, r.adding))}." if r.adding else "")
                     + (f" removing: {','.join(map(str, r.removing))}." if r.removing else ""))
    return lines


def register(commands: Any, bootstrap_default: str) -> None:
    reassign = commands.add_parser("reassign", help="move partitions between brokers (kafka-reassign-partitions.sh)")
    actions = reassign.add_mutually_exclusive_group(required=True)
    for action, text in (("generate", "propose an assignment of the topics over --broker-list"),
                         ("execute", "start the reassignments of --reassignment-json-file"),
                         ("verify", "whether those reassignments completed"),
                         ("cancel", "cancel those still in progress (reverts them)"),
                         ("list", "the reassignments in progress")):
        actions.add_argument(f"--{action}", action="store_true", help=text)
    reassign.add_argument("--reassignment-json-file", metavar="F", help="Kafka's reassignment JSON")
    reassign.add_argument("--topics-to-move-json-file", metavar="T", help="with --generate: the topics to move")
    reassign.add_argument("--broker-list", metavar="L", help="with --generate: the brokers to place them on")
    reassign.add_argument("--additional", action="store_true",
                          help="with --execute: even while other reassignments are in progress")
    reassign.add_argument("--throttle", type=int, default=-1, metavar="BYTES_PER_S",
                          help="with --execute: throttle the copying to this rate (cleared by --verify)")
    reassign.add_argument("--preserve-throttles", action="store_true",
                          help="with --verify or --cancel: leave the throttles in place")
    reassign.add_argument("--bootstrap-server", default=bootstrap_default, help="host:port of any broker")
    reassign.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    needs = {"generate": ("topics_to_move_json_file", "broker_list"), "execute": ("reassignment_json_file",),
             "verify": ("reassignment_json_file",), "cancel": ("reassignment_json_file",), "list": ()}
    action = next(a for a in needs if getattr(args, a))
    missing = [f"--{n.replace('_', '-')}" for n in needs[action] if getattr(args, n) is None]
    if missing:
        raise ConfigError(f"--{action} needs {' and '.join(missing)}")
    if action == "generate":
        return _generate(args)
    if action == "list":
        return _print(list_lines(_ongoing(args.bootstrap_server)))
    with open(args.reassignment_json_file, encoding="utf-8") as f:
        targets = parse_reassignment(f.read())
    if action == "execute":
        return _execute(args.bootstrap_server, targets, args.additional, args.throttle)
    if action == "verify":
        ongoing = {(r.topic, r.partition) for r in _ongoing(args.bootstrap_server)}
        _print(verify_lines(targets, ongoing, _current(args.bootstrap_server, {t for t, _ in targets})))
    else:
        code = _cancel(args.bootstrap_server, targets)
        if code:
            return code
        ongoing = set()
    if not ongoing and not args.preserve_throttles:
        _clear_throttles(args.bootstrap_server, targets)
    return 0


def _print(lines: list[str]) -> int:
    print("\n".join(lines))
    return 0


def _ongoing(bootstrap: str) -> list[admin_requests.Reassignment]:
    answer = first_answer(bootstrap, lambda a: admin_requests.list_partition_reassignments(a, ADMIN_TIMEOUT_S))
    if answer is None:
        raise ConfigError(f"no broker of {bootstrap} answered ListPartitionReassignments")
    error, ongoing = answer
    if error is not errors.NONE:
        raise ConfigError(f"ListPartitionReassignments failed: {error.name}")
    return ongoing


def _current(bootstrap: str, topics: set[str]) -> Assignment:
    """The replicas of every partition of `topics` that exist (unknown topics have none)."""
    known = sorted(topics & set(admin_client(bootstrap).list_topics(timeout=ADMIN_TIMEOUT_S).topics))
    return {(r.topic, r.partition): list(r.replicas) for r in describe_rows(bootstrap, known)} if known else {}


def _generate(args: argparse.Namespace) -> int:
    with open(args.topics_to_move_json_file, encoding="utf-8") as f:
        topics = parse_topics(f.read())
    brokers = parse_broker_list(args.broker_list)
    current = {(r.topic, r.partition): list(r.replicas) for r in describe_rows(args.bootstrap_server, topics)}
    live = set(admin_client(args.bootstrap_server).list_topics(timeout=ADMIN_TIMEOUT_S).brokers)
    proposed = propose(current, [b for b in brokers if b in live], random.Random())
    print(f"Current partition replica assignment\n{reassignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}")
    return 0


def _execute(bootstrap: str, targets: Assignment, additional: bool, throttle: int) -> int:
    running = _ongoing(bootstrap)
    if not additional and running:
        print(CANNOT_EXECUTE)
        return 1
    live = set(admin_client(bootstrap).list_topics(timeout=ADMIN_TIMEOUT_S).brokers)
    unknown = next((b for replicas in targets.values() for b in replicas if b not in live), None)
    if unknown is not None:
        raise ConfigError(f"Unknown broker id {unknown}")
    current = _current(bootstrap, {t for t, _ in targets})
    missing = [_name(tp) for tp in sorted(targets) if tp not in current]
    if missing:
        raise ConfigError(f"Unable to find partition: {', '.join(missing)}")
    print(f"Current partition replica assignment\n\n{reassignment_json({tp: current[tp] for tp in targets})}"
          "\n\nSave this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0:
        print(MUST_VERIFY)
        _throttle(bootstrap, moves(running, targets, current), throttle)
    asked: dict[tuple[str, int], list[int] | None] = {tp: replicas for tp, replicas in targets.items()}
    refused = _alter(bootstrap, asked)
    if refused:
        print("Error reassigning partition(s):\n" + "\n".join(refused), file=sys.stderr)
        return 1
    print(f"Successfully started partition reassignment{'' if len(targets) == 1 else 's'} for "
          + ",".join(_name(tp) for tp in sorted(targets)))
    return 0


def _cancel(bootstrap: str, targets: Assignment) -> int:
    running = sorted({(r.topic, r.partition) for r in _ongoing(bootstrap)} & set(targets))
    if not running:
        print("None of the specified partition reassignments are active.")
        return 0
    refused = _alter(bootstrap, dict.fromkeys(running))
    if refused:
        print(f"Error cancelling partition reassignment{'' if len(refused) == 1 else 's'} for:\n"
              + "\n".join(refused), file=sys.stderr)
        return 1
    print(f"Successfully cancelled partition reassignment{'' if len(running) == 1 else 's'} for: "
          + ",".join(_name(tp) for tp in running))
    return 0


def _alter(bootstrap: str, targets: dict[tuple[str, int], list[int] | None]) -> list[str]:
    """AlterPartitionReassignments of `targets`; "t-p: message" for each partition refused."""
    answer = first_answer(bootstrap, lambda a: admin_requests.alter_partition_reassignments(a, targets,
                                                                                           ADMIN_TIMEOUT_S))
    if answer is None:
        raise ConfigError(f"no broker of {bootstrap} answered AlterPartitionReassignments")
    error, message, outcomes = answer
    if error is not errors.NONE:
        raise ConfigError(f"AlterPartitionReassignments failed: {error.name}: {message or error.message}")
    return [f"{_name(tp)}: {detail or refusal.message}" for tp, (refusal, detail) in sorted(outcomes.items())
            if refusal is not errors.NONE]


Moves = dict[tuple[str, int], tuple[set[int], set[int]]]


def moves(running: Sequence[admin_requests.Reassignment], targets: Assignment, current: Assignment) -> Moves:
    """(sources, destinations) of each moving partition, the running reassignments' first (Kafka's
    `calculateProposedMoveMap`): sources are the replicas it copies from, destinations the new ones."""
    out: Moves = {(r.topic, r.partition): (set(r.replicas) - set(r.adding), set(r.adding)) for r in running}
    for tp, replicas in targets.items():
        sources = out[tp][0] if tp in out else set(current[tp])
        out[tp] = (sources, set(replicas) - sources)
    return out


def throttled_replicas(planned: Moves) -> dict[str, dict[str, str]]:
    """Each topic's leader and follower throttled-replica lists (Kafka's `calculateLeaderThrottles` and
    `calculateFollowerThrottles`): partition:source and partition:destination pairs, sorted."""
    out: dict[str, dict[str, str]] = {}
    for topic in sorted({t for t, _ in planned}):
        mine = {p: move for (t, p), move in planned.items() if t == topic}
        out[topic] = {
            LEADER_REPLICAS_KEY: ",".join(sorted(f"{p}:{b}" for p, (sources, _) in mine.items() for b in sources)),
            FOLLOWER_REPLICAS_KEY: ",".join(sorted(f"{p}:{b}" for p, (_, dests) in mine.items() for b in dests))}
    return out


def _throttle(bootstrap: str, planned: Moves, rate: int) -> None:
    """Kafka's `modifyReassignmentThrottle`: the topics' lists, then both rates on every broker involved."""
    brokers = sorted({b for sources, dests in planned.values() for b in sources | dests})
    _alter_configs(bootstrap, [("topic", t, dict(lists)) for t, lists in throttled_replicas(planned).items()])
    _alter_configs(bootstrap, [("broker", str(b), dict.fromkeys(RATE_KEYS, str(rate))) for b in brokers])
    print(f"The inter-broker throttle limit was set to {rate} B/s")


def _clear_throttles(bootstrap: str, targets: Assignment) -> None:
    """Kafka's `clearAllThrottles`: both rates off every broker of the cluster, the replica lists off the plan's
    topics."""
    brokers = sorted(admin_client(bootstrap).list_topics(timeout=ADMIN_TIMEOUT_S).brokers)
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
          + ",".join(map(str, brokers)))
    _alter_configs(bootstrap, [("broker", str(b), dict.fromkeys(RATE_KEYS)) for b in brokers])
    topics = sorted({t for t, _ in targets})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}")
    _alter_configs(bootstrap, [("topic", t, dict.fromkeys(THROTTLED_REPLICAS_KEYS)) for t in topics])


def _alter_configs(bootstrap: str, resources: list[tuple[str, str, dict[str, str | None]]]) -> None:
    """IncrementalAlterConfigs of (type, name, {key: value, or None to delete}); raises ConfigError naming the
    first resource refused."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    admin = admin_client(bootstrap)
    asked = [ConfigResource(kind, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.DELETE if value is None
                    else AlterConfigOpType.SET) for key, value in values.items()])
        for kind, name, values in resources]
    topics = [r for r in asked if r.restype == ConfigResource.Type.TOPIC]
    calls = [topics] if topics else []
    calls += [[r] for r in asked if r.restype != ConfigResource.Type.TOPIC]  # librdkafka: one broker per call
    for call in calls:
        for resource, future in admin.incremental_alter_configs(call, request_timeout=ADMIN_TIMEOUT_S).items():
            try:
                future.result(timeout=ADMIN_TIMEOUT_S)
            except Exception as exc:  # KafkaException carries the broker's error name
                raise ConfigError(f"could not alter the configs of {resource}: {kafka_error_text(exc)}") from None
