"""`insync configs`, like `kafka-configs.sh --entity-type brokers`: describe and alter dynamic broker configs;
and the reference of every key.

    insync configs --entity-type brokers (--entity-name ID | --entity-default) --describe [--all]
    insync configs --entity-type brokers (--entity-name ID | --entity-default) --alter
                   [--add-config k=v,k2=[a,b]] [--delete-config k,k2]
    insync configs reference [--out FILE]

`--entity-name` is one broker (the request goes to that broker, as Kafka's tool sends it), `--entity-default`
the cluster-wide defaults every broker inherits. `--describe` prints the dynamic configs of the entity, or with
`--all` every config of the broker, each with its synonyms, in kafka-configs' format. `--alter` sends one
IncrementalAlterConfigs: all the keys change, or none; the controller refuses keys that cannot change while
brokers run. Topic configs are altered with `insync topics alter`. `reference` prints docs/configuration.md.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from pathlib import Path
from typing import Any

from insync import admin_requests, config_reference, errors
from insync.admin import ADMIN_TIMEOUT_S, admin_client
from insync.config import ConfigError, ConfigSource

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
# k=v pairs separated by commas; a value holding commas is written in brackets, as kafka-configs takes lists.
_PAIR = re.compile(r"\s*([^=,\s]+)\s*=\s*(\[[^\]]*\]|[^,]*)\s*(?:,|$)")


_USAGE = """insync configs --entity-type brokers (--entity-name ID | --entity-default) (--describe | --alter)
                      [--all] [--add-config K=V,...] [--delete-config K,...] [--bootstrap-server HOST:PORT]
                      [--command-config FILE]
       insync configs reference [--out FILE]"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("configs", help="describe and alter dynamic broker configs; every key's reference",
                                   usage=_USAGE)
    # kafka-configs' flags on the command itself; they are required unless a subcommand is given (checked in
    # `_run`, since argparse cannot make an option required only without a subcommand).
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, help="host:port of any broker")
    parser.add_argument("--entity-type", choices=("brokers",), help="what to configure (topics: `insync topics alter`)")
    entity = parser.add_mutually_exclusive_group()
    entity.add_argument("--entity-name", metavar="ID", help="one broker")
    entity.add_argument("--entity-default", action="store_true", help="the cluster-wide defaults")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--describe", action="store_true")
    action.add_argument("--alter", action="store_true")
    parser.add_argument("--all", action="store_true", help="with --describe: every config, not only dynamic ones")
    parser.add_argument("--add-config", action="append", default=[], metavar="K=V,...", help="set configs")
    parser.add_argument("--delete-config", action="append", default=[], metavar="K,...", help="delete configs")
    parser.set_defaults(func=functools.partial(_run, parser))
    commands = parser.add_subparsers(dest="configs_command", metavar="{reference}", prog="insync configs")
    reference = commands.add_parser("reference", help="every broker and topic key as Markdown (docs/configuration.md)")
    reference.add_argument("--out", metavar="FILE", help="write the Markdown to FILE instead of printing it")
    reference.set_defaults(func=_reference)


def _reference(args: argparse.Namespace) -> int:
    text = config_reference.render()
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def parse_add_config(items: list[str]) -> dict[str, str]:
    """`--add-config` values: `k=v` pairs separated by commas, a list value in brackets (`k=[a,b]`)."""
    pairs: dict[str, str] = {}
    for item in items:
        position = 0
        while position < len(item):  # bounded: each match consumes at least `k=`
            match = _PAIR.match(item, position)
            if match is None or match.end() == position:
                raise ConfigError(f"--add-config expects k=v pairs separated by commas, got {item!r}")
            pairs[match.group(1)] = match.group(2).removeprefix("[").removesuffix("]")
            position = match.end()
    return pairs


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.entity_type is None or not (args.entity_default or args.entity_name) or not (args.describe or args.alter):
        parser.error("--entity-type, one of --entity-name and --entity-default, and one of --describe and --alter "
                     "are required")
    broker = "" if args.entity_default else args.entity_name
    if broker and not broker.isdigit():
        raise ConfigError(f"--entity-name must be a broker id, got {broker!r}")
    if args.all and not args.describe:
        raise ConfigError("--all goes with --describe")
    sets = parse_add_config(args.add_config)
    deletes = [key.strip() for item in args.delete_config for key in item.split(",") if key.strip()]
    if args.alter and not sets and not deletes:
        raise ConfigError("--alter needs --add-config or --delete-config")
    if args.describe and (sets or deletes):
        raise ConfigError("--add-config and --delete-config go with --alter")
    address = _address(args.bootstrap_server, broker)
    what = f"broker {broker}" if broker else "brokers in the cluster"
    if args.alter:
        error, message = admin_requests.alter_broker_configs(address, broker, sets, deletes, ADMIN_TIMEOUT_S)
        if error is not errors.NONE:
            print(f"Error: {error.name}: {message}", file=sys.stderr)
            return 1
        print(f"Completed updating {'config for' if broker else 'default config for'} {what}.")
        return 0
    error, message, entries = admin_requests.describe_broker_configs(address, broker, ADMIN_TIMEOUT_S)
    if error is not errors.NONE:
        print(f"Error: {error.name}: {message}", file=sys.stderr)
        return 1
    shown = ConfigSource.DYNAMIC_BROKER_CONFIG if broker else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    title = "All" if args.all else "Dynamic" if broker else "Default"
    print(f"{title} configs for {what} are:")
    for entry in entries:
        if args.all or entry.source == shown:
            synonyms = ", ".join(f"{ConfigSource(source).name}:{name}={value}" for name, value, source in entry.synonyms)
            print(f"  {entry.name}={entry.value} sensitive=false synonyms={{{synonyms}}}")
    return 0


def _address(bootstrap: str, broker: str) -> str:
    """Where to send the request: broker `broker` itself (found in the cluster metadata), or any for ""."""
    if not broker:
        return bootstrap.split(",")[0]
    brokers = admin_client(bootstrap).list_topics(timeout=ADMIN_TIMEOUT_S).brokers
    found = brokers.get(int(broker))
    if found is None:
        raise ConfigError(f"no broker {broker} in the cluster (brokers: {', '.join(map(str, sorted(brokers)))})")
    return f"{found.host}:{found.port}"
