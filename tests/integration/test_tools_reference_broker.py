"""`insync topics` and the console tools speak only the Kafka protocol: checked here against Tansu."""

from __future__ import annotations

import argparse
import io

import pytest

from insync.cli import console_cmd, topics_cmd
from insync.config import ConfigError

pytestmark = pytest.mark.timeout(60)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser()
    subparsers = root.add_subparsers()
    topics_cmd.register(subparsers)
    console_cmd.register(subparsers)
    return root


def run(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args))


def test_create_describe_produce_consume_delete(tansu_bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    bs = ["--bootstrap-server", tansu_bootstrap]
    assert run(["topics", "create", "tools-t", "--partitions", "2", *bs]) == 0
    assert run(["topics", "create", "tools-t", *bs]) == 1
    assert "TOPIC_ALREADY_EXISTS" in capsys.readouterr().err
    assert run(["topics", "describe", "tools-t", *bs]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Topic: tools-t\t") and "PartitionCount: 2" in lines[0]
    assert [line.split("\t")[3] for line in lines[1:]] == ["Partition: 0", "Partition: 1"]
    assert run(["topics", "describe", "--under-replicated-partitions", *bs]) == 0
    assert capsys.readouterr().out == ""

    args = parser().parse_args(["produce", "--topic", "tools-t", "--key-separator", ":", *bs])
    assert console_cmd._produce(args, io.StringIO("".join(f"k{i}:v{i}\n" for i in range(20)))) == 0
    assert run(["consume", "--topic", "tools-t", "--print-key", "--max-messages", "20", *bs]) == 0
    printed = sorted(capsys.readouterr().out.splitlines())
    assert printed == sorted(f"k{i}\tv{i}" for i in range(20))
    assert run(["topics", "delete", "tools-t", *bs]) == 0


def test_bad_arguments_are_named(tansu_bootstrap: str) -> None:
    bs = ["--bootstrap-server", tansu_bootstrap]
    with pytest.raises(ConfigError, match="--offset"):
        run(["consume", "--topic", "x", "--offset", "soon", *bs])
    with pytest.raises(ConfigError, match="--partitions"):
        run(["topics", "create", "x", "--partitions", "0", *bs])
    with pytest.raises(ConfigError, match="Unknown topic config name: retention.msec"):
        run(["topics", "create", "x", "--config", "retention.msec=1", *bs])
    with pytest.raises(ConfigError, match="unknown topic: nope"):
        run(["topics", "describe", "nope", *bs])
    with pytest.raises(SystemExit):
        run(["topics", "create"])


def test_bench_clients_against_reference(tansu_bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from insync.cli.main import main

    assert main(["topics", "create", "bench-t", "--partitions", "2", "--bootstrap-server", tansu_bootstrap]) == 0
    assert main(["bench", "produce", "--topic", "bench-t", "--messages", "2000", "--bootstrap-server",
                 tansu_bootstrap]) == 0
    produced = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert produced["messages"] == 2000 and produced["errors"] == 0 and produced["p99_ms"] >= produced["p50_ms"]
    assert main(["bench", "consume", "--topic", "bench-t", "--messages", "2000", "--bootstrap-server",
                 tansu_bootstrap]) == 0
    consumed = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert consumed["messages"] == 2000 and consumed["mb_per_s"] > 0
    # Fewer than the topic holds: exactly that many are timed, none over (the errors were once negative).
    assert main(["bench", "consume", "--topic", "bench-t", "--messages", "1500", "--bootstrap-server",
                 tansu_bootstrap]) == 0
    consumed = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (consumed["messages"], consumed["errors"]) == (1500, 0)
    assert main(["bench", "produce", "--messages", "0"]) == 1
