"""`insync acls`, like `kafka-acls.sh`: add, list and remove ACLs with its flags and output.

    insync acls --bootstrap-server H:P [--command-config FILE] --add
                (--allow-principal P | --deny-principal P)... [--allow-host H] [--deny-host H]
                [--operation OP]... (--topic T | --group G | --cluster | --transactional-id I)...
                [--resource-pattern-type literal|prefixed] [--producer [--idempotent] | --consumer]
    insync acls ... --list [--topic T | --group G | --cluster | --transactional-id I] [--principal P]
    insync acls ... --remove [principals, hosts, operations, resources as for --add] [--force]

Defaults, `--producer`, `--consumer` and `--list`/`--remove` without a resource are kafka-acls.sh's; unlike it,
`--remove` does not ask for confirmation (`--force` is accepted and changes nothing). The cluster needs an
authorizer (`authorizer.class.name`); the principal of `--command-config` needs Alter (add, remove) or Describe
(list) on the cluster.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

from insync.admin import ADMIN_TIMEOUT_S, admin_client, kafka_error_text
from insync.config import ConfigError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CLUSTER = "kafka-cluster"
OPERATIONS = ("All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "DescribeConfigs",
              "AlterConfigs", "IdempotentWrite", "CreateTokens", "DescribeTokens")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("acls", help="add, list and remove ACLs (kafka-acls.sh)")
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, help="host:port of any broker")
    action = parser.add_mutually_exclusive_group(required=True)
    for flag in ("--add", "--remove", "--list"):
        action.add_argument(flag, action="store_true")
    for flag in ("--topic", "--group", "--transactional-id"):
        parser.add_argument(flag, action="append", default=[], metavar="NAME")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--resource-pattern-type", default=None, type=str.upper,
                        choices=("ANY", "MATCH", "LITERAL", "PREFIXED"), help="literal (default) or prefixed")
    for flag in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host"):
        parser.add_argument(flag, action="append", default=[], metavar="VALUE")
    parser.add_argument("--principal", action="append", default=[], help="with --list: only these principals")
    parser.add_argument("--operation", action="append", default=[], choices=OPERATIONS, metavar="OP",
                        help=f"one of {', '.join(OPERATIONS)} (default All)")
    parser.add_argument("--producer", action="store_true", help="the ACLs a producer needs on the topics")
    parser.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs on topics and group")
    parser.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    parser.add_argument("--force", action="store_true", help="accepted for kafka-acls.sh's sake; never prompts")
    parser.set_defaults(func=_run)


def _resources(args: argparse.Namespace) -> list[tuple[str, str]]:
    return ([("TOPIC", t) for t in args.topic] + [("GROUP", g) for g in args.group]
            + [("TRANSACTIONAL_ID", i) for i in args.transactional_id] + ([("BROKER", CLUSTER)] if args.cluster else []))


def _operation_name(text: str) -> str:
    """kafka-acls.sh's `DescribeConfigs` -> confluent-kafka's `DESCRIBE_CONFIGS`."""
    return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(text)).upper()


def _entries(args: argparse.Namespace) -> list[tuple[str, str, str, str]]:
    """(principal, host, operation, permission) for each principal x host x operation the flags name."""
    entries: list[tuple[str, str, str, str]] = []
    for permission, principals, hosts in (("ALLOW", args.allow_principal, args.allow_host),
                                          ("DENY", args.deny_principal, args.deny_host)):
        for principal in principals:
            if ":" not in principal:
                raise ConfigError(f"principal {principal!r} is not Type:name (User:alice)")
            for host in hosts or ["*"]:
                entries.extend((principal, host, _operation_name(op), permission) for op in args.operation or ["All"])
    return entries


def _bindings(args: argparse.Namespace, pattern: str) -> list[tuple[str, str, str, tuple[str, str, str, str]]]:
    """(resource type, name, pattern type, entry) for every ACL --add or --remove names."""
    if args.producer or args.consumer:
        return _convenience(args, pattern)
    resources, entries = _resources(args), _entries(args)
    if not resources:
        raise ConfigError("name a resource: --topic, --group, --cluster or --transactional-id")
    if not entries:
        raise ConfigError("name a principal: --allow-principal or --deny-principal")
    return [(kind, name, pattern, entry) for kind, name in resources for entry in entries]


def _convenience(args: argparse.Namespace, pattern: str) -> list[tuple[str, str, str, tuple[str, str, str, str]]]:
    """kafka-acls.sh's --producer and --consumer: the operations each needs, for the allowed principals."""
    if not args.topic or (args.consumer and not args.group):
        raise ConfigError("--producer needs --topic; --consumer needs --topic and --group")
    wanted: list[tuple[str, str, str]] = []
    if args.producer:
        wanted += [("TOPIC", t, op) for t in args.topic for op in ("WRITE", "DESCRIBE", "CREATE")]
        wanted += [("TRANSACTIONAL_ID", i, op) for i in args.transactional_id for op in ("WRITE", "DESCRIBE")]
        wanted += [("BROKER", CLUSTER, "IDEMPOTENT_WRITE")] if args.idempotent else []
    if args.consumer:
        wanted += [("TOPIC", t, op) for t in args.topic for op in ("READ", "DESCRIBE")]
        wanted += [("GROUP", g, "READ") for g in args.group]
    hosts = args.allow_host or ["*"]
    return [(kind, name, pattern, (principal, host, op, "ALLOW"))
            for kind, name, op in wanted for principal in args.allow_principal for host in hosts]


def _binding(kind: str, name: str, pattern: str, entry: tuple[str, str, str, str]) -> Any:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in the stubs
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    principal, host, operation, permission = entry
    return AclBinding(ResourceType[kind], name, ResourcePatternType[pattern], principal, host,
                      AclOperation[operation], AclPermissionType[permission])


def _filter(kind: str, name: str | None, pattern: str, entry: tuple[str | None, str | None, str, str]) -> Any:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in the stubs
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    principal, host, operation, permission = entry
    # None matches any name, principal or host (the stubs say str; confluent-kafka takes None, as Kafka's filter)
    return AclBindingFilter(ResourceType[kind], name, ResourcePatternType[pattern], principal,  # type: ignore[arg-type]
                            host, AclOperation[operation], AclPermissionType[permission])  # type: ignore[arg-type]


def _run(args: argparse.Namespace) -> int:
    admin = admin_client(args.bootstrap_server)
    try:
        if args.add:
            _add(admin, args)
        elif args.remove:
            _remove(admin, args)
        _list(admin, args)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - a confluent-kafka KafkaException: the broker's refusal, named
        print(f"Error: {kafka_error_text(exc)}", file=sys.stderr)
        return 1
    return 0


def _add(admin: Any, args: argparse.Namespace) -> None:
    bindings = [_binding(*b) for b in _bindings(args, args.resource_pattern_type or "LITERAL")]
    for pattern, entries in _by_pattern(bindings):
        print(f"Adding ACLs for resource `{pattern}`: \n" + "".join(f" \t{e} \n" for e in entries))
    for future in admin.create_acls(bindings, request_timeout=ADMIN_TIMEOUT_S).values():
        future.result()


def _remove(admin: Any, args: argparse.Namespace) -> None:
    pattern = args.resource_pattern_type or "LITERAL"
    if args.allow_principal or args.deny_principal:
        filters = [_filter(*b) for b in _bindings(args, pattern)]
    else:  # every ACL of the named resources
        resources = _resources(args)
        if not resources:
            raise ConfigError("name a resource: --topic, --group, --cluster or --transactional-id")
        filters = [_filter(kind, name, pattern, (None, None, "ANY", "ANY")) for kind, name in resources]
    for future in admin.delete_acls(filters, request_timeout=ADMIN_TIMEOUT_S).values():
        for removed in future.result():
            print(f"Removed ACL {_entry_text(removed)} for resource `{_pattern_text(removed)}`")


def _list(admin: Any, args: argparse.Namespace) -> None:
    pattern = args.resource_pattern_type or ("LITERAL" if args.add or args.remove else "ANY")
    resources: list[tuple[str, str | None]] = list(_resources(args)) or [("ANY", None)]
    principals: list[str | None] = list(args.principal) or [None]
    found = []
    for (kind, name), principal in ((r, p) for r in resources for p in principals):
        acl_filter = _filter(kind, name, pattern, (principal, None, "ANY", "ANY"))
        found.extend(admin.describe_acls(acl_filter, request_timeout=ADMIN_TIMEOUT_S).result())
    for resource, entries in _by_pattern(found):
        print(f"Current ACLs for resource `{resource}`: \n" + "".join(f" \t{e} \n" for e in entries))


def _by_pattern(bindings: Iterable[Any]) -> list[tuple[str, list[str]]]:
    """kafka-acls.sh's layout: ACL entries under their resource pattern, in first-seen order."""
    grouped: dict[str, list[str]] = {}
    for binding in bindings:
        entries = grouped.setdefault(_pattern_text(binding), [])
        if _entry_text(binding) not in entries:
            entries.append(_entry_text(binding))
    return list(grouped.items())


def _pattern_text(binding: Any) -> str:
    kind = "CLUSTER" if binding.restype.name == "BROKER" else binding.restype.name
    return f"ResourcePattern(resourceType={kind}, name={binding.name}, patternType={binding.resource_pattern_type.name})"


def _entry_text(binding: Any) -> str:
    """Kafka's AccessControlEntry.toString."""
    return (f"(principal={binding.principal}, host={binding.host}, operation={binding.operation.name}, "
            f"permissionType={binding.permission_type.name})")
