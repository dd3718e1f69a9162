"""`insync` entry point: parse arguments, dispatch to a command module, turn operating errors into exit codes.

Each command module exposes `register(subparsers)`, which adds its parser and sets `func` (a callable taking the
parsed namespace and returning an exit code). Every command that talks to a cluster (it takes
`--bootstrap-server` or a cluster `--dir`) also takes `--command-config FILE`, as Kafka's tools do: client settings in
librdkafka's names (`command_config.py`), loaded before the command runs; a command given a cluster's `--dir`
uses that cluster's own settings unless told otherwise. Wrong arguments exit 2 with argparse's message; an operating error
(bad config, unreadable file) exits 1 with one line naming what was wrong, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from insync import command_config
from insync.config import ConfigError

COMMAND_MODULES = (
    "insync.cli.log_cmd",
    "insync.cli.bench_cmd",
    "insync.cli.topics_cmd",
    "insync.cli.configs_cmd",
    "insync.cli.users_cmd",
    "insync.cli.acls_cmd",
    "insync.cli.groups_cmd",
    "insync.cli.console_cmd",
    "insync.cli.cluster_cmd",
    "insync.cli.certs_cmd",
    "insync.cli.chaos_cmd",
    "insync.cli.broker_cmd",
    "insync.cli.demo_cmd",
    "insync.cli.sim_cmd",
    "insync.cli.analyze_cmd",
    "insync.cli.monitor_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="insync", description="A Kafka-compatible replicated commit log.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    for command in _commands(parser):
        options = {option for action in command._actions for option in action.option_strings}
        if options & {"--bootstrap-server", "--dir"} and "--command-config" not in options:
            command.add_argument("--command-config", metavar="FILE",
                                 help="client settings (security.protocol, ssl.*, sasl.*) in librdkafka's names")
    return parser


def _commands(parser: argparse.ArgumentParser, depth: int = 0) -> list[argparse.ArgumentParser]:
    """`parser` and the parsers of every command and subcommand below it (depth bounded): a command with
    subcommands may take options of its own too (`insync configs`)."""
    assert depth < 8, "commands nest a few levels at most"
    children = [choice for action in parser._actions if isinstance(action, argparse._SubParsersAction)
                for choice in action.choices.values()]
    below = [command for child in dict.fromkeys(children) for command in _commands(child, depth + 1)]
    return [parser, *below]


def _without_kio_test_hooks() -> None:
    """kio registers Hypothesis strategies for its types whenever Hypothesis is importable, which costs seconds of
    CPU at a server's first requests (it builds Hypothesis' Unicode tables). A real `insync` process never needs
    them, so it hides Hypothesis from kio; test processes, which call `main(argv)`, keep it."""
    if "hypothesis" not in sys.modules:
        sys.modules["hypothesis"] = None  # type: ignore[assignment]


def _use_client_settings(args: argparse.Namespace) -> None:
    """--command-config FILE; else, for a command given a cluster's directory (`--dir`, `insync chaos`), that
    cluster's own client settings (`cluster up --security` writes them), so its tools work on a secured cluster."""
    if getattr(args, "command_config", None):
        command_config.use(command_config.load(args.command_config))
        return
    directory = getattr(args, "dir", None)
    if isinstance(directory, str) and (Path(directory) / "cluster.json").exists():
        from insync.chaos.cluster import ClusterSpec

        command_config.use(ClusterSpec.load(directory).client_settings())


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        _without_kio_test_hooks()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _use_client_settings(args)
        code = args.func(args)
    except (ConfigError, OSError) as exc:
        print(f"insync: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        command_config.use({})  # one command's settings end with it (tests call main() in one process)
    assert isinstance(code, int)
    return code


if __name__ == "__main__":
    sys.exit(main())
