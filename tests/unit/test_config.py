from pathlib import Path

import pytest

from insync.config import (
    LONG_MAX,
    BrokerConfig,
    ConfigChange,
    ConfigError,
    ConfigOp,
    ConfigSource,
    NotDynamicError,
    altered_broker_configs,
)
from insync.properties import parse_properties


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig()
    assert config.get_int("replica.lag.time.max.ms") == 30000
    assert config.get_int("replica.fetch.wait.max.ms") == 500
    assert config.get_int("min.insync.replicas") == 1
    assert config.get_bool("unclean.leader.election.enable") is False
    assert config.get_int("socket.request.max.bytes") == 104857600
    assert config.get_int("message.max.bytes") == 1048588
    assert config.get_int("replica.lag.max.messages") == 0
    assert config.get_bool("follower.fetch.pending.reads.insync.enable") is False
    # The one departure in this group: a send buffer sized for a Python broker (server.listener).
    assert config.get_int("socket.send.buffer.bytes") == 4194304


def test_properties_file_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("# comment\nnode.id=3\nreplica.lag.time.max.ms: 4000\nprocess.roles=broker,\\\n  controller\n")
    config = BrokerConfig.from_sources(path, ["min.insync.replicas=2"])
    assert config.get_int("node.id") == 3
    assert config.get_int("replica.lag.time.max.ms") == 4000
    assert config.get_list("process.roles") == ("broker", "controller")
    assert config.get_int("min.insync.replicas") == 2
    assert config.is_explicit("node.id") and not config.is_explicit("num.partitions")


def test_unknown_key_is_named() -> None:
    with pytest.raises(ConfigError, match="replica.lag.time.max.msx"):
        BrokerConfig({"replica.lag.time.max.msx": "1"})


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("replica.lag.time.max.ms", "ten", "Not a number of type LONG"),
        ("replica.lag.time.max.ms", "0", "Value must be at least 1"),
        ("unclean.leader.election.enable", "yes", "Expected value to be either true or false"),
        ("metadata.store", "etcd", "String must be one of: local, zookeeper"),
        ("process.roles", "broker,observer", "Invalid value observer .* String must be one of: broker, controller"),
        ("socket.send.buffer.bytes", "-2", "Value must be at least -1"),
    ],
)
def test_bad_value_names_key_and_allowed(key: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as info:
        BrokerConfig({key: value})
    assert f" for configuration {key}: " in str(info.value)  # Kafka's ConfigException wording


def test_cross_key_rules() -> None:
    with pytest.raises(ConfigError, match="zookeeper.connect"):
        BrokerConfig({"metadata.store": "zookeeper"})
    with pytest.raises(ConfigError, match="broker.heartbeat.interval.ms"):
        BrokerConfig({"broker.heartbeat.interval.ms": "9000"})


def test_replica_fetch_wait_must_not_exceed_the_socket_timeout_nor_the_lag() -> None:
    # Kafka's KafkaConfig checks, with its words; each error names both keys.
    with pytest.raises(ConfigError, match="replica.socket.timeout.ms should always be at least "
                                          "replica.fetch.wait.max.ms") as info:
        BrokerConfig({"replica.fetch.wait.max.ms": "20000", "replica.socket.timeout.ms": "10000"})
    assert "replica.fetch.wait.max.ms=20000" in str(info.value)
    with pytest.raises(ConfigError, match="replica.fetch.wait.max.ms should always be less than or equal to "
                                          "replica.lag.time.max.ms") as info:
        BrokerConfig({"replica.fetch.wait.max.ms": "2000", "replica.lag.time.max.ms": "1500"})
    assert "replica.lag.time.max.ms=1500" in str(info.value)
    with pytest.raises(ConfigError, match="replica.lag.time.max.ms"):
        BrokerConfig({"replica.fetch.wait.max.ms": "2000"}).with_overrides({"replica.lag.time.max.ms": 1000})
    equal = BrokerConfig({"replica.fetch.wait.max.ms": "1500", "replica.lag.time.max.ms": "1500",
                          "replica.socket.timeout.ms": "1500"})
    assert equal.get_int("replica.fetch.wait.max.ms") == 1500


def test_topic_overrides_resolve_over_broker_defaults() -> None:
    config = BrokerConfig({"log.segment.bytes": "1000", "min.insync.replicas": "2"})
    log_config = config.log_config({"retention.ms": "60000"})
    assert log_config.segment_bytes == 1000
    assert log_config.retention_ms == 60000
    assert log_config.min_insync_replicas == 2
    with pytest.raises(ConfigError, match="Unknown topic config name: retention.msec"):
        config.log_config({"retention.msec": "1"})


def test_bad_properties_line() -> None:
    with pytest.raises(ConfigError, match="continuation"):
        parse_properties("a=1\\")


def test_broker_id_alias() -> None:
    assert BrokerConfig({"broker.id": "7"}).get_int("node.id") == 7


def test_altered_topic_configs_set_delete_append_subtract() -> None:
    from insync.config import ConfigChange, ConfigOp, altered_topic_configs

    current = {"retention.ms": "1000", "min.insync.replicas": "2"}
    assert altered_topic_configs(current, [ConfigChange("min.insync.replicas", ConfigOp.SET, "3"),
                                           ConfigChange("retention.ms", ConfigOp.DELETE)]) == {"min.insync.replicas": 3}
    # APPEND starts from the broker default (delete) and adds nothing already there; SUBTRACT removes.
    appended = altered_topic_configs({}, [ConfigChange("cleanup.policy", ConfigOp.APPEND, "delete")])
    assert appended == {"cleanup.policy": ("delete",)}
    assert altered_topic_configs({"cleanup.policy": "delete"}, [
        ConfigChange("cleanup.policy", ConfigOp.SUBTRACT, "delete")]) == {"cleanup.policy": ()}
    # The legacy AlterConfigs: the SET entries become the whole set.
    assert altered_topic_configs(current, [ConfigChange("segment.ms", ConfigOp.SET, "60000")], replace=True) == {
        "segment.ms": 60000}
    assert current == {"retention.ms": "1000", "min.insync.replicas": "2"}  # not modified


@pytest.mark.parametrize(("change", "message"), [
    (("nope", 0, "1"), "Unknown topic config name: nope"),
    (("min.insync.replicas", 0, "x"), "Invalid value x for configuration min.insync.replicas: Not a number of type "
                                      "INT"),
    (("min.insync.replicas", 0, "0"), "Invalid value 0 for configuration min.insync.replicas: Value must be at "
                                      "least 1"),
    (("compression.type", 0, "brotli"), "Invalid value brotli for configuration compression.type: String must be "
                                        "one of: "),
    (("unclean.leader.election.enable", 0, "yes"), "Invalid value yes for configuration "
                                                    "unclean.leader.election.enable: Expected value to be either "
                                                    "true or false"),
    (("min.insync.replicas", 0, None), "null value for min.insync.replicas"),
    (("retention.ms", 2, "5"), "APPEND applies to list configs only; retention.ms is long"),
    (("cleanup.policy", 2, "shrink"), "Invalid value shrink for configuration cleanup.policy: String must be one "
                                         "of: compact, delete"),
    (("min.cleanable.dirty.ratio", 0, "1.5"), "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value "
                                              "must be no more than 1"),
    (("max.compaction.lag.ms", 0, "0"), "Invalid value 0 for configuration max.compaction.lag.ms: Value must be at "
                                        "least 1"),
])
def test_altered_topic_configs_errors_name_the_key(change: tuple[str, int, str | None], message: str) -> None:
    from insync.config import ConfigChange, ConfigOp, altered_topic_configs

    key, op, value = change
    with pytest.raises(ConfigError, match=message):
        altered_topic_configs({}, [ConfigChange("retention.ms", ConfigOp.SET, "5"), ConfigChange(key, ConfigOp(op), value)])


def test_compaction_lags_conflict_in_kafkas_words() -> None:
    from insync.config import validate_topic_configs

    with pytest.raises(ConfigError, match=r"^conflict topic config setting min.compaction.lag.ms \(10\) > "
                                          r"max.compaction.lag.ms \(5\)$"):
        validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert validate_topic_configs({"min.compaction.lag.ms": "10"}) == {"min.compaction.lag.ms": 10}


def test_cleaner_settings_have_kafkas_names_and_defaults() -> None:
    config = BrokerConfig()
    cleaner = config.cleaner
    assert (cleaner.enable, cleaner.threads, cleaner.dedupe_buffer_bytes, cleaner.backoff_ms) == (
        True, 1, 134217728, 15000)
    assert cleaner.io_max_bytes_per_second == 1.7976931348623157e308 and cleaner.dedupe_buffer_load_factor == 0.9
    log = config.log_config()
    assert (log.cleanup_policy, log.min_cleanable_dirty_ratio, log.min_compaction_lag_ms, log.max_compaction_lag_ms,
            log.delete_retention_ms) == (("delete",), 0.5, 0, 2**63 - 1, 86400000)
    assert (log.delete, log.compact) == (True, False)
    topic = BrokerConfig({"log.cleaner.min.cleanable.ratio": "0.1"}).log_config(
        {"cleanup.policy": "compact,delete", "min.compaction.lag.ms": "100"})
    assert (topic.compact, topic.delete, topic.min_cleanable_dirty_ratio, topic.min_compaction_lag_ms) == (
        True, True, 0.1, 100)


def test_dynamic_layers_over_static_settings_with_their_sources() -> None:
    static = BrokerConfig({"log.retention.ms": "3600000"})
    config = static.with_dynamic({"log.retention.ms": "7200000", "min.insync.replicas": "2"},
                                 {"log.retention.ms": "60000"})
    assert config.get_int("log.retention.ms") == 60000 and config.get_int("min.insync.replicas") == 2
    assert config.synonyms("log.retention.ms") == (
        ("log.retention.ms", 60000, ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", 7200000, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", 3600000, ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", 168, ConfigSource.DEFAULT_CONFIG))
    assert config.log_config().retention_ms == 60000 and config.log_config().min_insync_replicas == 2
    assert config.is_explicit("log.retention.ms") and not config.is_explicit("min.insync.replicas")
    assert config.dynamic_layer(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG) == {
        "log.retention.ms": 7200000, "min.insync.replicas": 2}
    # New layers replace the old ones; static overrides keep them.
    assert config.with_dynamic({}, {}).get_int("log.retention.ms") == 3600000
    assert config.with_overrides({"num.partitions": 3}).get_int("log.retention.ms") == 60000


@pytest.mark.parametrize(("cluster", "broker", "error", "words"), [
    ({"listeners": "PLAINTEXT://x:1"}, {}, NotDynamicError, "Cannot update these configs dynamically: listeners"),
    ({}, {"bogus": "1"}, NotDynamicError, "Unknown broker configs: bogus"),
    ({}, {"log.retention.ms": "soon"}, ConfigError, "log.retention.ms"),
    ({"replica.lag.time.max.ms": "100"}, {}, ConfigError, "replica.fetch.wait.max.ms"),
])
def test_dynamic_layers_refused(cluster: dict[str, str], broker: dict[str, str], error: type[Exception],
                                words: str) -> None:
    with pytest.raises(error, match=words):
        BrokerConfig().with_dynamic(cluster, broker)


def test_altered_broker_configs() -> None:
    current = {"log.retention.ms": "60000"}
    changes = [ConfigChange("log.retention.ms", ConfigOp.DELETE), ConfigChange("log.roll.ms", ConfigOp.SET, "1000"),
               ConfigChange("log.cleanup.policy", ConfigOp.APPEND, "delete")]
    assert altered_broker_configs(current, changes) == {"log.roll.ms": 1000, "log.cleanup.policy": ("delete",)}
    assert altered_broker_configs(current, changes[1:2], replace=True) == {"log.roll.ms": 1000}
    with pytest.raises(NotDynamicError, match="num.partitions"):
        altered_broker_configs({}, [ConfigChange("num.partitions", ConfigOp.DELETE)])
    with pytest.raises(ConfigError, match="SET needs a value"):
        altered_broker_configs({}, [ConfigChange("log.roll.ms", ConfigOp.SET, None)])


def test_the_log_dir_move_throttle_is_a_dynamic_long_as_in_kafka() -> None:
    key = "replica.alter.log.dirs.io.max.bytes.per.second"
    assert BrokerConfig().get_int(key) == 2**63 - 1
    assert altered_broker_configs({}, [ConfigChange(key, ConfigOp.SET, "50000000")]) == {key: 50_000_000}
    assert altered_broker_configs({key: "50000000"}, [ConfigChange(key, ConfigOp.DELETE)]) == {}
    assert altered_broker_configs({}, [ConfigChange(key, ConfigOp.DELETE)]) == {}  # unset: nothing to clear
    with pytest.raises(ConfigError, match=f"Invalid value -1 for configuration {key}: Value must be at least 0"):
        altered_broker_configs({}, [ConfigChange(key, ConfigOp.SET, "-1")])


def test_kafka_keys_in_hours_and_minutes_set_the_millisecond_configs() -> None:
    hours = BrokerConfig({"log.retention.hours": "48", "log.roll.hours": "2"})
    assert hours.log_config().retention_ms == 48 * 3_600_000 and hours.log_config().segment_ms == 7_200_000
    assert hours.get("log.retention.ms") is None  # as Kafka: the key itself stays unset
    minutes = BrokerConfig({"log.retention.hours": "48", "log.retention.minutes": "30"})
    assert minutes.log_config().retention_ms == 1_800_000
    assert BrokerConfig({"log.retention.ms": "5", "log.retention.hours": "1"}).log_config().retention_ms == 5
    assert BrokerConfig().log_config().retention_ms == 604_800_000
    # Kafka's synonyms: layer by layer, each key of the group, from the first entry of the key asked about.
    assert hours.synonyms("log.retention.hours") == (
        ("log.retention.hours", 48, ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", 168, ConfigSource.DEFAULT_CONFIG))
    assert hours.synonyms("log.retention.ms") == ()


def test_several_log_dirs_are_kept_and_a_repeated_one_is_refused_by_name() -> None:
    assert BrokerConfig({"log.dirs": "/a,/b"}).log_dirs() == ("/a", "/b")
    assert BrokerConfig({"log.dirs": "/a"}).log_dirs() == ("/a",)
    with pytest.raises(ConfigError, match=r"log.dirs lists the same directory twice: /a"):
        BrokerConfig({"log.dirs": "/a,/b,/a/"})


def test_a_negative_retention_in_any_unit_is_kafkas_forever() -> None:
    assert BrokerConfig({"log.retention.hours": -1}).effective("log.retention.ms") == -1
    assert BrokerConfig({"log.retention.minutes": -1}).effective("log.retention.ms") == -1
    assert BrokerConfig({"log.retention.minutes": 2}).effective("log.retention.ms") == 120_000


def test_the_replication_settings_are_typed_once_per_config_dynamic_layers_included() -> None:
    config = BrokerConfig({"replica.lag.time.max.ms": 5000, "replica.fetch.backoff.ms": 250,
                           "replication.quota.window.size.seconds": 2})
    replication = config.replication
    assert (replication.lag_time_max_ms, replication.isr_check_interval_ms) == (5000, 2500)
    assert replication.fetch.backoff_ms == 250 and replication.fetch.max_wait_ms == 500
    assert replication.quota_window_size_ms == 2000 and replication.leader_throttled_rate_bytes_per_s == LONG_MAX
    dynamic = config.with_dynamic({"replica.lag.time.max.ms": "8000"}, {"leader.replication.throttled.rate": "100"})
    assert dynamic.replication.lag_time_max_ms == 8000 and dynamic.replication.leader_throttled_rate_bytes_per_s == 100
    assert config.replication.lag_time_max_ms == 5000  # the config it came from is unchanged


def test_the_lifecycle_storage_and_group_settings_are_typed_once_per_config() -> None:
    config = BrokerConfig({"broker.heartbeat.interval.ms": 500, "broker.session.timeout.ms": 3000,
                           "controlled.shutdown.enable": "false", "log.retention.check.interval.ms": 1000,
                           "fault.injection.power.loss.enable": "true", "offsets.retention.minutes": 2,
                           "offsets.topic.num.partitions": 1, "group.max.size": 7})
    assert (config.lifecycle.heartbeat_interval_ms, config.lifecycle.session_timeout_ms) == (500, 3000)
    assert not config.lifecycle.controlled_shutdown_enable
    assert config.storage.retention_check_interval_ms == 1000 and config.storage.power_loss_journal
    assert config.groups.offsets_retention_ms == 120_000 and config.groups.offsets_topic_num_partitions == 1
    assert config.groups.max_size == 7 and config.groups.offsets_topic_replication_factor == 3


def test_the_listener_settings_are_typed_as_given_with_what_was_set() -> None:
    assert BrokerConfig({}).listeners.controller_listener_names is None
    assert BrokerConfig({}).listeners.security_inter_broker_protocol is None  # its default is not a choice
    config = BrokerConfig({"listeners": "A://h:1,B://h:2", "controller.listener.names": "B",
                           "security.inter.broker.protocol": "SSL"})
    assert config.listeners.listeners == ("A://h:1", "B://h:2") and config.listeners.controller_listener_names == ("B",)
    assert config.listeners.security_inter_broker_protocol == "SSL"


def test_the_socket_authorizer_auto_create_and_events_settings_are_typed_once_per_config() -> None:
    config = BrokerConfig({"socket.request.max.bytes": 1000, "super.users": "User:admin; User:alice ;",
                           "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                           "num.partitions": 3, "insync.events.topic.enable": "false"})
    assert config.sockets.request_max_bytes == 1000
    assert config.authorizer.enabled and config.authorizer.super_users == {"User:admin", "User:alice"}
    assert not BrokerConfig({}).authorizer.enabled
    assert (config.auto_create.enable, config.auto_create.num_partitions, config.auto_create.replication_factor) == (
        True, 3, 1)
    assert not config.events.enable and config.events.retention_ms == 86_400_000


def test_the_node_settings_are_typed_once_per_config() -> None:
    config = BrokerConfig({"broker.id": 4, "process.roles": "broker", "metrics.port": 9400,
                           "controller.quorum.voters": "1@h:9093", "fault.injection.enable": "true"})
    assert (config.node.node_id, config.node.process_roles, config.node.metrics_port) == (4, ("broker",), 9400)
    assert config.node.controller_quorum_voters == ("1@h:9093",) and config.node.fault_injection_enable


def test_doubles_read_as_java_prints_them() -> None:
    from insync.config_keys import config_text

    assert [config_text(v) for v in (0.5, 15000.0, 1.7976931348623157e308, 1e-05, 12345678.0)] == [
        "0.5", "15000.0", "1.7976931348623157E308", "1.0E-5", "1.2345678E7"]
