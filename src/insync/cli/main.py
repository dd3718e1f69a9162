"""`insync` entry point: parse arguments, dispatch to a command module, turn operating errors into exit codes.

Each command module exposes `register(subparsers)`, which adds its parser and sets `func` (a callable taking the
parsed namespace and returning an exit code). Wrong arguments exit 2 with argparse's message; an operating error
(bad config, unreadable file) exits 1 with one line naming what was wrong, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from insync.config import ConfigError

COMMAND_MODULES = (
    "insync.cli.log_cmd",
    "insync.cli.bench_cmd",
    "insync.cli.topics_cmd",
    "insync.cli.configs_cmd",
    "insync.cli.groups_cmd",
    "insync.cli.console_cmd",
    "insync.cli.cluster_cmd",
    "insync.cli.chaos_cmd",
    "insync.cli.broker_cmd",
    "insync.cli.demo_cmd",
    "insync.cli.sim_cmd",
    "insync.cli.analyze_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="insync", description="A Kafka-compatible replicated commit log.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def _without_kio_test_hooks() -> None:
    """kio registers Hypothesis strategies for its types whenever Hypothesis is importable, which costs seconds of
    CPU at a server's first requests (it builds Hypothesis' Unicode tables). A real `insync` process never needs
    them, so it hides Hypothesis from kio; test processes, which call `main(argv)`, keep it."""
    if "hypothesis" not in sys.modules:
        sys.modules["hypothesis"] = None  # type: ignore[assignment]


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        _without_kio_test_hooks()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except (ConfigError, OSError) as exc:
        print(f"insync: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    assert isinstance(code, int)
    return code


if __name__ == "__main__":
    sys.exit(main())
