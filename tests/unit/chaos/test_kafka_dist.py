"""Kafka assembled from Maven Central: versions, the log4j binding, the tarball's logging layout, the engine flag,
without Maven or a JVM (tests/kafka runs the real thing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from insync.chaos import cluster, kafka_cluster, kafka_dist
from insync.config import ConfigError


def test_versions_resolve_to_exact_releases_and_bad_ones_are_named() -> None:
    assert kafka_dist.resolve_version("") == kafka_dist.VERSION_ALIASES["4.1"]
    assert kafka_dist.resolve_version("3.9").startswith("3.9.")
    assert kafka_dist.resolve_version("4.0.1") == "4.0.1"
    with pytest.raises(ConfigError, match="unknown Kafka version '2.8'"):
        kafka_dist.resolve_version("2.8")
    assert kafka_cluster.parse_engine("insync") == "insync"
    assert kafka_cluster.parse_engine("kafka") == f"kafka:{kafka_dist.VERSION_ALIASES['']}"
    assert kafka_cluster.parse_engine("kafka:3.9.1") == "kafka:3.9.1"
    with pytest.raises(ConfigError, match="--engine must be insync or kafka"):
        kafka_cluster.parse_engine("redpanda")


def _libs(directory: Path, *names: str) -> Path:
    directory.mkdir()
    for name in names:
        (directory / name).touch()
    return directory


def test_the_binding_matches_the_slf4j_and_log4j_that_maven_brought(tmp_path: Path) -> None:
    slf4j1 = _libs(tmp_path / "a", "slf4j-api-1.7.36.jar", "log4j-core-2.24.3.jar")
    assert kafka_dist._log4j_binding(slf4j1) == "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3"
    slf4j2 = _libs(tmp_path / "b", "slf4j-api-2.0.17.jar", "log4j-core-2.25.5.jar")
    assert kafka_dist._log4j_binding(slf4j2) == "org.apache.logging.log4j:log4j-slf4j2-impl:2.25.5"
    reload4j = _libs(tmp_path / "c", "slf4j-api-1.7.36.jar", "slf4j-reload4j-1.7.36.jar")
    assert kafka_dist._log4j_binding(reload4j) is None
    with pytest.raises(ConfigError, match="no log4j-core"):
        kafka_dist._log4j_binding(_libs(tmp_path / "d", "slf4j-api-1.7.36.jar"))


def test_logging_configs_route_the_tarballs_files(tmp_path: Path) -> None:
    path4, flag4 = kafka_dist.log_config(kafka_dist.KafkaDist("4.1.2", tmp_path), tmp_path)
    text4 = path4.read_text()
    assert flag4 == f"-Dlog4j2.configurationFile={path4}"
    for file in ("server.log", "controller.log", "state-change.log"):
        assert f"${{sys:kafka.logs.dir}}/{file}" in text4
    assert "- name: state.change.logger" in text4 and "- name: org.apache.kafka.controller" in text4
    path3, flag3 = kafka_dist.log_config(kafka_dist.KafkaDist("3.9.1", tmp_path), tmp_path)
    text3 = path3.read_text()
    assert flag3 == f"-Dlog4j.configuration=file:{path3}"
    assert "log4j.logger.kafka.controller=TRACE, ControllerAppender" in text3
    assert "log4j.appender.StateChangeAppender.File=${kafka.logs.dir}/state-change.log" in text3


def test_an_unassembled_version_is_not_found_in_an_empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INSYNC_CACHE", str(tmp_path))
    assert kafka_dist.assembled("4.1") is None
    home = tmp_path / "kafka" / kafka_dist.resolve_version("4.1")
    (home / "libs").mkdir(parents=True)
    (home / kafka_dist.MARKER).write_text("an older recipe")  # an interrupted or outdated assembly is redone
    assert kafka_dist.assembled("4.1") is None
    (home / kafka_dist.MARKER).write_text(kafka_dist.RECIPE)
    assert kafka_dist.assembled("4.1") == kafka_dist.KafkaDist(kafka_dist.resolve_version("4.1"), home / "libs")


def _fake_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    monkeypatch.setenv("INSYNC_CACHE", str(tmp_path / "cache"))
    home = tmp_path / "cache" / "kafka" / version
    (home / "libs").mkdir(parents=True)
    (home / kafka_dist.MARKER).write_text(kafka_dist.RECIPE)


def test_a_kraft_layout_has_a_controller_quorum_and_brokers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dist(tmp_path, monkeypatch, "4.1.2")
    spec = cluster.layout(tmp_path / "c", 3, 0, ["num.partitions=2"], controllers=3, engine="kafka:4.1.2")
    assert [n.roles for n in spec.controllers] == ["controller"] * 3 and len(spec.brokers) == 3
    broker = dict(line.split("=", 1) for line in spec.node(1).config_path.read_text().splitlines())
    voters = ",".join(f"{c.node_id}@{c.address}" for c in spec.controllers)
    assert broker["controller.quorum.voters"] == voters and broker["process.roles"] == "broker"
    assert broker["num.partitions"] == "2" and broker["offsets.topic.replication.factor"] == "3"
    assert cluster.ClusterSpec.load(spec.directory).engine == "kafka:4.1.2"
    command = kafka_cluster.node_command(kafka_cluster.dist_for(spec.engine), "broker", Path(spec.node(1).directory),
                                         spec.node(1).metrics_port, "127.0.0.1")
    assert command[-2:] == ["kafka.Kafka", str(spec.node(1).config_path)] and "-Xmx768m" in command


def test_a_zookeeper_layout_has_a_zookeeper_node_and_refuses_what_it_cannot_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dist(tmp_path, monkeypatch, "3.9.1")
    spec = cluster.layout(tmp_path / "z", 2, 0, engine="kafka:3.9.1")
    assert spec.controller.roles == kafka_cluster.ZOOKEEPER_ROLE and spec.controllers == ()
    assert [b.node_id for b in spec.brokers] == [1, 2]
    broker = dict(line.split("=", 1) for line in spec.node(2).config_path.read_text().splitlines())
    assert broker["broker.id"] == "2" and broker["zookeeper.connect"] == spec.controller.address
    assert "process.roles" not in broker
    with pytest.raises(ConfigError, match="--controllers 3 with Kafka 3.9.1"):
        cluster.layout(tmp_path / "z3", 2, 0, controllers=3, engine="kafka:3.9.1")
    with pytest.raises(ConfigError, match="--config log.dirs: the launcher sets it"):
        cluster.layout(tmp_path / "z4", 2, 0, ["log.dirs=/x"], engine="kafka:3.9.1")


def test_streams_jars_follow_the_brokers_on_the_classpath_once_assembled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A finished Streams assembly is reused without Maven; its jars come after the release's own."""
    _fake_dist(tmp_path, monkeypatch, "4.1.2")
    home = tmp_path / "cache" / "kafka" / "4.1.2"
    (home / "libs" / "kafka-clients-4.1.2.jar").touch()
    _libs(home / "streams-libs", "kafka-streams-4.1.2.jar", "rocksdbjni-9.7.3.jar")
    (home / kafka_dist.STREAMS_MARKER).write_text(kafka_dist.STREAMS_RECIPE)
    monkeypatch.setattr(kafka_dist.maven, "run", lambda *args: pytest.fail(f"Maven ran: {args}"))
    dist = kafka_dist.with_streams("4.1")
    assert dist.extra_libs == (home / "streams-libs",)
    assert [Path(p).name for p in dist.classpath.split(":")] == [
        "kafka-clients-4.1.2.jar", "kafka-streams-4.1.2.jar", "rocksdbjni-9.7.3.jar"]
