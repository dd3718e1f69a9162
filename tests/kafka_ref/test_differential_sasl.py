"""The differential check on SASL listeners (`--security sasl_plaintext` on both): what Kafka 4.1 and insync answer
before and during authentication, compared field by field as in test_differential.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from differential import CLOSED, Connection, differences, masked, plain, request

from insync import command_config
from insync.chaos import cluster

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, dict[str, str]]]]:
    """engine -> (a broker's address, the operator's client settings)."""
    specs: dict[str, cluster.ClusterSpec] = {}
    try:
        for engine in ("kafka:4.1", "insync"):
            directory = tmp_path_factory.mktemp(engine.replace(":", ""))
            specs[engine] = cluster.up(str(directory), 1, 0, [], security="sasl_plaintext", engine=engine)
        yield {engine: (spec.brokers[0].address, command_config.load(Path(spec.directory) / "client.properties"))
               for engine, spec in specs.items()}
    finally:
        for spec in specs.values():
            cluster.down(cluster.ClusterSpec.load(spec.directory), 20.0)


def _exchange(address: str, bodies: list[Any]) -> list[Any]:
    """The bodies in order on one new connection; after a close, the rest are not sent."""
    connection = Connection(address)
    answers: list[Any] = []
    try:
        for body in bodies:
            answer = plain(connection.send(body))
            answers.append(answer if answer == CLOSED else masked(answer))
            if answer == CLOSED:
                break
    finally:
        connection.close()
    return answers


def _plain_auth(user: str, password: str) -> bytes:
    return b"\0" + user.encode() + b"\0" + password.encode()


@pytest.mark.parametrize("name", ["metadata before the handshake", "an unknown mechanism",
                                  "a wrong password, then metadata", "the right password, then metadata"])
def test_the_same_answers_around_authentication(pair: dict[str, tuple[str, dict[str, str]]], name: str) -> None:
    answers = {}
    for engine, (address, settings) in pair.items():
        handshake = request(17, 1, mechanism="PLAIN")
        password = settings["sasl.password"] if name.startswith("the right") else "wrong"
        sequences = {
            "metadata before the handshake": [request(3, 12, topics=None), request(18, 3)],
            "an unknown mechanism": [request(17, 1, mechanism="GSSAPI")],
            "a wrong password, then metadata": [handshake, request(36, 2, auth_bytes=_plain_auth(
                settings["sasl.username"], password)), request(3, 12, topics=None)],
            "the right password, then metadata": [handshake, request(36, 2, auth_bytes=_plain_auth(
                settings["sasl.username"], password)), request(3, 12, topics=[])],
        }
        answers[engine] = _exchange(address, sequences[name])
    found = list(differences(answers["kafka:4.1"], answers["insync"]))
    assert not found, f"{name}: {found}"
