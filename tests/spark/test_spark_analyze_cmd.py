"""`insync analyze` argument handling (Spark is not started for these)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from insync.cli import analyze_cmd
from insync.config import ConfigError


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="insync")
    analyze_cmd.register(parser.add_subparsers())
    return parser.parse_args(["analyze", *argv])


def test_defaults() -> None:
    args = parse("logs/", "--out", "out")
    assert (args.paths, args.out, args.master, args.flap_window_s, args.log_timezone, args.bench) == (
        ["logs/"], "out", "local[*]", 60.0, "UTC", False)
    assert args.func is analyze_cmd.run


def test_a_missing_path_fails_before_spark_starts(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere"):
        analyze_cmd.run(parse(str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")))


@pytest.mark.parametrize(("argv", "message"), [
    ((), "give at least one PATH"),
    (("x", "--bench"), "--bench generates its own logs"),
    (("x", "--flap-window-s", "0"), "--flap-window-s must be positive"),
    (("x", "--log-timezone", "Mars/Olympus"), "unknown time zone"),
    (("x", "--conf", "novalue"), "--conf expects KEY=VALUE"),
    (("--bench", "--bench-events", "10,-1"), "positive counts"),
])
def test_bad_arguments_name_the_option(tmp_path: Path, argv: tuple[str, ...], message: str) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "events.jsonl").write_text("{}\n")
    argv = tuple(str(tmp_path / a) if a == "x" else a for a in argv)
    with pytest.raises(ConfigError, match=message):
        analyze_cmd.run(parse(*argv, "--out", str(tmp_path / "out")))
