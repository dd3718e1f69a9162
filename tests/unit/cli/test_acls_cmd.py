"""`insync acls` argument handling: kafka-acls.sh's flags into bindings, and what it refuses."""

from __future__ import annotations

import argparse

import pytest

from insync.cli import acls_cmd
from insync.cli.main import build_parser
from insync.config import ConfigError


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["acls", *argv])


def test_operations_default_to_all_and_hosts_to_any() -> None:
    args = parse("--add", "--allow-principal", "User:a", "--deny-principal", "User:b", "--deny-host", "10.0.0.1",
                 "--operation", "DescribeConfigs", "--topic", "t")
    assert acls_cmd._bindings(args, "LITERAL") == [
        ("TOPIC", "t", "LITERAL", ("User:a", "*", "DESCRIBE_CONFIGS", "ALLOW")),
        ("TOPIC", "t", "LITERAL", ("User:b", "10.0.0.1", "DESCRIBE_CONFIGS", "DENY"))]
    assert acls_cmd._bindings(parse("--add", "--allow-principal", "User:a", "--cluster"), "PREFIXED") == [
        ("BROKER", "kafka-cluster", "PREFIXED", ("User:a", "*", "ALL", "ALLOW"))]


def test_producer_and_consumer_shortcuts() -> None:
    args = parse("--add", "--allow-principal", "User:a", "--producer", "--idempotent", "--topic", "t")
    assert [b[3][2] for b in acls_cmd._bindings(args, "LITERAL")] == ["WRITE", "DESCRIBE", "CREATE", "IDEMPOTENT_WRITE"]
    transactional = parse("--add", "--allow-principal", "User:a", "--producer", "--topic", "t", "--transactional-id",
                          "tx")  # kafka-acls.sh adds WRITE and DESCRIBE on the id
    assert [(b[0], b[3][2]) for b in acls_cmd._bindings(transactional, "LITERAL")][3:] == [
        ("TRANSACTIONAL_ID", "WRITE"), ("TRANSACTIONAL_ID", "DESCRIBE")]
    consumer = parse("--add", "--allow-principal", "User:a", "--consumer", "--topic", "t", "--group", "g")
    assert [(b[0], b[3][2]) for b in acls_cmd._bindings(consumer, "LITERAL")] == [
        ("TOPIC", "READ"), ("TOPIC", "DESCRIBE"), ("GROUP", "READ")]


@pytest.mark.parametrize(("argv", "message"), [
    (("--add", "--allow-principal", "alice", "--topic", "t"), "is not Type:name"),
    (("--add", "--allow-principal", "User:a"), "name a resource"),
    (("--add", "--topic", "t"), "name a principal"),
    (("--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"), "--consumer needs --topic and --group"),
])
def test_incomplete_or_malformed_flags_are_refused(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        acls_cmd._bindings(parse(*argv), "LITERAL")
