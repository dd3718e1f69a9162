"""`insync broker start --config server.properties [--config key=value ...]`: run one node in the foreground.

`--config` takes a properties file (at most one) or `key=value` overrides, in any order; overrides win. The
roles come from `process.roles` (broker, controller, or both). An unknown key or a bad value stops start-up with
one line naming the key, before anything is opened.
"""

from __future__ import annotations

import argparse
from typing import Any

from insync.config import BrokerConfig, ConfigError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("broker", help="run an insync node")
    commands = parser.add_subparsers(dest="broker_command", metavar="ACTION")
    commands.required = True
    start = commands.add_parser("start", help="start a node in the foreground until SIGTERM/SIGINT")
    start.add_argument("--config", action="append", default=[], metavar="FILE|KEY=VALUE")
    start.set_defaults(func=_start)


def load_config(items: list[str]) -> BrokerConfig:
    files = [item for item in items if "=" not in item]
    if len(files) > 1:
        raise ConfigError(f"at most one properties file, got {', '.join(files)}")
    return BrokerConfig.from_sources(files[0] if files else None, [item for item in items if "=" in item])


def _start(args: argparse.Namespace) -> int:
    from insync.server import node

    return node.run(load_config(args.config))
