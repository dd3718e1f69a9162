"""Dynamic broker configs on a live cluster: DescribeConfigs of BROKER resources with their sources and synonyms,
IncrementalAlterConfigs and AlterConfigs per broker (confluent-kafka's and kafka-python's admin clients) and
cluster-wide (`insync configs --entity-default`: neither client can name the empty resource), validate_only
honoured, Kafka's refusals naming the key, a changed log.* default reaching a topic without its own value (its
configs and its log), and a new replica.lag.time.max.ms acting on the ISR without a restart."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import events, produce_raw, start, wait_until
from insync import admin_requests, errors
from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster
from insync.chaos.cluster import ClusterSpec
from insync.protocol.records import build_batch

pytestmark = pytest.mark.timeout(150)

# Kafka's ConfigSource
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT, TOPIC = 2, 3, 4, 5, 1


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSpec]:
    """A cluster of its own: the cluster-wide changes made here must not reach other tests' topics."""
    spec = start(tmp_path_factory.mktemp("dynamic"))
    try:
        yield spec
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


def admin_client(spec: ClusterSpec) -> Any:
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    return AdminClient({"bootstrap.servers": spec.bootstrap})


def described(admin: Any, resource_type: str, name: str) -> dict[str, tuple[str | None, int, bool]]:
    """(value, source, read-only) of each config of a resource, as DescribeConfigs gives it."""
    from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]

    entries = list(admin.describe_configs([ConfigResource(resource_type, name)]).values())[0].result(timeout=10)
    return {key: (entry.value, int(entry.source), entry.is_read_only) for key, entry in entries.items()}


def shows(admin: Any, resource_type: str, name: str, expected: dict[str, tuple[str | None, int]]) -> None:
    """Wait until the resource shows `expected` (value, source) per key: the controller answers once the change is
    committed, and a broker sees it when the records reach it, milliseconds later, as in KRaft."""
    seen: dict[str, tuple[str | None, int]] = {}

    def matches() -> bool:
        seen.update({k: (v, s) for k, (v, s, _) in described(admin, resource_type, name).items()})
        return all(seen.get(key) == value for key, value in expected.items())

    wait_until(matches, 15, f"{resource_type} {name!r} configs {expected} (last seen {seen})")


def alter(admin: Any, name: str, *entries: tuple[str, str | None, str], validate_only: bool = False) -> None:
    """IncrementalAlterConfigs of one BROKER resource; `entries` are (key, value, SET|DELETE)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource  # type: ignore[attr-defined]

    configs = [ConfigEntry(k, v, incremental_operation=getattr(AlterConfigOpType, op)) for k, v, op in entries]
    futures = admin.incremental_alter_configs([ConfigResource("broker", name, incremental_configs=configs)],
                                              validate_only=validate_only)
    list(futures.values())[0].result(timeout=15)


def configs_command(spec: ClusterSpec, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "insync.cli.main", "configs", "--bootstrap-server", spec.bootstrap,
                           "--entity-type", "brokers", *args], capture_output=True, text=True, timeout=60)


def set_default(spec: ClusterSpec, *args: str) -> None:
    done = configs_command(spec, "--entity-default", "--alter", *args)
    assert done.returncode == 0 and done.stdout == "Completed updating default config for brokers in the cluster.\n", (
        done.stdout, done.stderr)


def test_cluster_wide_and_per_broker_configs(spec: ClusterSpec) -> None:
    from confluent_kafka import KafkaException, Producer

    admin = admin_client(spec)
    ensure_topic(spec.bootstrap, "inherits", 1, 3, {})
    ensure_topic(spec.bootstrap, "own", 1, 3, {"retention.ms": "3600000"})
    broker = described(admin, "broker", "1")
    assert broker["log.retention.ms"] == (None, DEFAULT, False)  # as Kafka: log.retention.hours sets it
    assert broker["replica.lag.time.max.ms"] == ("4000", STATIC, False)  # the test cluster's server settings
    assert broker["listeners"][1:] == (STATIC, True) and broker["num.partitions"][1:] == (DEFAULT, True)

    alter(admin, "1", ("log.retention.ms", "7200000", "SET"), validate_only=True)
    assert described(admin, "broker", "1")["log.retention.ms"][:2] == (None, DEFAULT)  # nothing written
    set_default(spec, "--add-config", "log.retention.ms=7200000,log.segment.bytes=4096")
    shows(admin, "topic", "inherits", {"retention.ms": ("7200000", DYNAMIC_DEFAULT),
                                       "segment.bytes": ("4096", DYNAMIC_DEFAULT)})
    shows(admin, "topic", "own", {"retention.ms": ("3600000", TOPIC), "segment.bytes": ("4096", DYNAMIC_DEFAULT)})
    listed = configs_command(spec, "--entity-default", "--describe")
    assert listed.returncode == 0 and listed.stdout.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}",
        "  log.segment.bytes=4096 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=4096}",
        # Written by the controller with ELR on, as Kafka 4.x's is.
        "  min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}",
    ], listed.stdout
    alter(admin, "2", ("log.retention.ms", "60000", "SET"))
    shows(admin, "broker", "2", {"log.retention.ms": ("60000", DYNAMIC_BROKER)})
    shows(admin, "broker", "1", {"log.retention.ms": ("7200000", DYNAMIC_DEFAULT)})
    mine = configs_command(spec, "--entity-name", "2", "--describe")
    assert mine.returncode == 0 and mine.stdout.splitlines()[:2] == [
        "Dynamic configs for broker 2 are:",
        "  log.retention.ms=60000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=60000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000, DEFAULT_CONFIG:log.retention.hours=168}"]

    # The new segment size reaches the log of the topic without its own: writes roll it, no restart.
    producer = Producer({"bootstrap.servers": spec.bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(8):
        producer.produce("inherits", value=b"x" * 1500, key=str(i).encode())
        assert producer.flush(15) == 0  # one batch each: a segment of 4096 bytes holds two
    [row] = describe_rows(spec.bootstrap, ["inherits"])
    segments = sorted((spec.node(row.leader).log_dir / "inherits-0").glob("*.log"))
    assert len(segments) >= 3, segments

    for entry, error, words in [
        (("listeners", "PLAINTEXT://127.0.0.1:1", "SET"), "INVALID_REQUEST",
         "Cannot update these configs dynamically: listeners"),
        (("bogus.key", "1", "SET"), "INVALID_REQUEST", "Unknown broker configs: bogus.key"),
        (("min.insync.replicas", "x", "SET"), "INVALID_CONFIG", "min.insync.replicas"),
    ]:
        with pytest.raises(KafkaException) as refused:
            alter(admin, "1", ("log.roll.ms", "60000", "SET"), entry)  # not applied either: all or nothing
        assert refused.value.args[0].name() == error and words in refused.value.args[0].str(), refused.value
    for args, words in [(["--add-config", "replica.lag.time.max.ms=100"], "INVALID_CONFIG: replica.fetch.wait.max.ms"),
                        (["--add-config", "num.partitions=3"], "INVALID_REQUEST: Cannot update these configs "
                                                               "dynamically: num.partitions")]:
        refused_cli = configs_command(spec, "--entity-default", "--alter", *args)
        assert refused_cli.returncode == 1 and words in refused_cli.stderr, refused_cli.stderr
    assert described(admin, "broker", "1")["log.roll.ms"][:2] == (None, DEFAULT)
    # A broker refuses a resource naming another broker before forwarding anything, as Kafka's does.
    assert admin_requests.alter_broker_configs(spec.node(1).address, "2", {"log.roll.ms": "60000"}, [], 15) == (
        errors.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2")
    nobody = configs_command(spec, "--entity-name", "9", "--describe")
    assert nobody.returncode == 1 and "no broker 9 in the cluster (brokers: 1, 2, 3)" in nobody.stderr

    set_default(spec, "--delete-config", "log.retention.ms,log.segment.bytes")
    alter(admin, "2", ("log.retention.ms", None, "DELETE"))
    shows(admin, "topic", "inherits", {"retention.ms": ("604800000", DEFAULT), "segment.bytes": ("1073741824", DEFAULT)})
    shows(admin, "broker", "2", {"log.retention.ms": (None, DEFAULT)})


def test_per_broker_configs_with_kafka_python(spec: ClusterSpec) -> None:
    """kafka-python sends a BROKER resource to the broker it names, checks the keys against the read-only flags
    of a DescribeConfigs first, and with `incremental=False` sends AlterConfigs with the broker's other dynamic
    values filled in."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=spec.bootstrap.split(","), request_timeout_ms=15_000)
    admin = admin_client(spec)
    try:
        done = client.alter_configs([ConfigResource(ConfigResourceType.BROKER, "3", configs={
            "log.retention.ms": "90000", "unclean.leader.election.enable": "true"})])
        assert done == {"broker": {"3": "OK"}}
        shows(admin, "broker", "3", {"log.retention.ms": ("90000", DYNAMIC_BROKER),
                                     "unclean.leader.election.enable": ("true", DYNAMIC_BROKER)})
        found = client.describe_configs([ConfigResource(ConfigResourceType.BROKER, "3")], include_synonyms=True)
        retention = found["broker"]["3"]["log.retention.ms"]
        assert retention["config_source"] == "DYNAMIC_BROKER_CONFIG" and not retention["read_only"]
        assert [(s["value"], s["source"]) for s in retention["synonyms"]] == [
            ("90000", "DYNAMIC_BROKER_CONFIG"), ("168", "DEFAULT_CONFIG")]

        legacy = client.alter_configs([ConfigResource(ConfigResourceType.BROKER, "3", configs={
            "log.retention.ms": "80000"})], incremental=False)
        assert legacy == {"broker": {"3": "OK"}}
        shows(admin, "broker", "3", {"log.retention.ms": ("80000", DYNAMIC_BROKER),
                                     "unclean.leader.election.enable": ("true", DYNAMIC_BROKER)})  # the client resent it

        with pytest.raises(ValueError, match="listeners"):  # read-only in DescribeConfigs: refused by the client
            client.alter_configs([ConfigResource(ConfigResourceType.BROKER, "3", configs={"listeners": "x"})])
        refused = client.alter_configs([ConfigResource(ConfigResourceType.BROKER, "3", configs={
            "num.partitions": "4"})], raise_on_unknown=False)
        assert "InvalidRequest" in refused["broker"]["3"] and "num.partitions" in refused["broker"]["3"]

        cleared = client.alter_configs([ConfigResource(ConfigResourceType.BROKER, "3", configs={
            "log.retention.ms": ("DELETE", None), "unclean.leader.election.enable": ("DELETE", None)})])
        assert cleared == {"broker": {"3": "OK"}}
        shows(admin, "broker", "3", {"log.retention.ms": (None, DEFAULT),
                                     "unclean.leader.election.enable": ("false", DEFAULT)})
    finally:
        client.close()


def test_server_properties_keys_are_static_broker_configs_with_kafkas_synonyms(tmp_path: Path) -> None:
    """Keys a Kafka server.properties sets (log.retention.hours among them) start the broker, act on the logs,
    and are described as STATIC_BROKER_CONFIG with Kafka's synonyms, for the broker and for a topic (kafka-python
    keeps the synonyms as a list, where confluent-kafka keys them by name)."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    spec = start(tmp_path, brokers=1, extra=["log.retention.hours=48", "log.roll.ms=3600000", "num.partitions=2"])
    client = KafkaAdminClient(bootstrap_servers=spec.bootstrap, request_timeout_ms=15_000)
    try:
        ensure_topic(spec.bootstrap, "static", 1, 1, {"retention.bytes": "1000"})

        def shown(resource_type: ConfigResourceType, name: str) -> dict[str, tuple[object, ...]]:
            found = client.describe_configs([ConfigResource(resource_type, name)], include_synonyms=True,
                                            config_filter="all")
            return {key: (entry["value"], entry["config_source"],
                          [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]])
                    for key, entry in found[resource_type.name.lower()][name].items()}

        broker, topic = shown(ConfigResourceType.BROKER, "1"), shown(ConfigResourceType.TOPIC, "static")
        assert broker["log.retention.hours"] == ("48", "STATIC_BROKER_CONFIG", [
            ("log.retention.hours", "48", "STATIC_BROKER_CONFIG"), ("log.retention.hours", "168", "DEFAULT_CONFIG")])
        assert broker["log.roll.ms"] == ("3600000", "STATIC_BROKER_CONFIG", [
            ("log.roll.ms", "3600000", "STATIC_BROKER_CONFIG"), ("log.roll.hours", "168", "DEFAULT_CONFIG")])
        assert broker["num.partitions"] == ("2", "STATIC_BROKER_CONFIG", [
            ("num.partitions", "2", "STATIC_BROKER_CONFIG"), ("num.partitions", "1", "DEFAULT_CONFIG")])
        assert topic["segment.ms"] == ("3600000", "STATIC_BROKER_CONFIG", [
            ("log.roll.ms", "3600000", "STATIC_BROKER_CONFIG"), ("log.roll.hours", "168", "DEFAULT_CONFIG")])
        assert topic["retention.bytes"] == ("1000", "DYNAMIC_TOPIC_CONFIG", [
            ("retention.bytes", "1000", "DYNAMIC_TOPIC_CONFIG"), ("log.retention.bytes", "-1", "DEFAULT_CONFIG")])
        # Kafka lists a topic's broker synonyms from the first log.retention.ms entry on: none when only the hours
        # are set, and the value is what the hours give.
        assert topic["retention.ms"] == (str(48 * 3_600_000), "DEFAULT_CONFIG", [])
    finally:
        client.close()
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)


def test_a_new_replica_lag_time_max_ms_shrinks_the_isr_without_a_restart(tmp_path: Path) -> None:
    """With replica.lag.time.max.ms at 10 minutes in server.properties a dead follower stays in the ISR that
    long (its session outlasts the test, so the controller never fences it); set to 2 s, the
    leader's next ISR check removes it. (Set for the leader alone, the broker whose ISR checks it governs.)"""
    spec = start(tmp_path, extra=["replica.lag.time.max.ms=600000", "broker.session.timeout.ms=120000"])
    try:
        ensure_topic(spec.bootstrap, "lagging", 1, 3, {})
        wait_until(lambda: len(describe_rows(spec.bootstrap, ["lagging"])[0].isr) == 3, 30, "a full ISR")
        [row] = describe_rows(spec.bootstrap, ["lagging"])
        leader, killed = row.leader, next(r for r in row.replicas if r != row.leader)
        cluster.signal_node(spec, killed, signal.SIGKILL)
        assert produce_raw(spec.node(leader).address, "lagging", build_batch([(b"k", b"v")]), acks=1) == 0
        admin = admin_client(spec)
        assert described(admin, "broker", str(leader))["replica.lag.time.max.ms"][:2] == ("600000", STATIC)
        alter(admin, str(leader), ("replica.lag.time.max.ms", "2000", "SET"))
        shows(admin, "broker", str(leader), {"replica.lag.time.max.ms": ("2000", DYNAMIC_BROKER)})
        wait_until(lambda: killed not in describe_rows(spec.bootstrap, ["lagging"])[0].isr, 30,
                   f"broker {killed} out of the ISR")
        removed = [r for e in events(spec, leader, "isr_shrink") for r in e["removed"]]  # type: ignore[attr-defined]
        assert [r["broker"] for r in removed] == [killed]
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
