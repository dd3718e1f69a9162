"""A broker's configuration: loaded from `server.properties` and `--config` overrides, validated, immutable.

A `server.properties` file (Java properties syntax) plus `--config key=value` overrides become one validated
`BrokerConfig`, checked against the key table (`config_keys`) by `config_validation`: an unknown key or a bad value
raises `ConfigError` naming the key, and nothing is half-applied. Topic-level overrides resolve against the broker's
defaults into a `LogConfig`, the one object the storage engine reads. Dynamic broker configs are two more layers
over the static ones, as in Kafka: a cluster-wide default and a per-broker value, most specific first.
`BrokerConfig.with_dynamic` gives the effective config and `BrokerConfig.synonyms` where each value comes from
(Kafka's `ConfigSource`). Each `BrokerConfig` types its settings once into frozen objects (`replication`,
`node`, `lifecycle`, `controller`, `storage`, `groups`, `listeners`, `sockets`, `authorizer`, `auto_create`,
`events`, `cleaner`), which
the cores take instead of reading keys by name. The names the rest of
insync imports about configuration are importable from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from insync.config_keys import (
    BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    LONG_MAX,
    THROTTLED_REPLICAS_KEYS,
    TOPIC_CONFIGS,
    TOPIC_TO_BROKER,
    config_text,
)
from insync.config_synonyms import ConfigSource, config_synonyms, resolved
from insync.config_validation import (
    ConfigChange,
    ConfigOp,
    NotDynamicError,
    altered_broker_configs,
    altered_topic_configs,
    check_relations,
    definition_of,
    validate,
    validate_dynamic,
    validate_topic_configs,
)
from insync.properties import ConfigError, parse_overrides, parse_properties
from insync.security_config import (
    SASL_MECHANISMS,
    SaslClientMechanisms,
    SaslListenerSettings,
    TlsSettings,
    jaas_key,
    sasl_listener_settings,
    tls_settings,
)

# The names the rest of insync imports from here; each is defined in the module it comes from.
__all__ = [
    "DYNAMIC_BROKER_CONFIGS", "LONG_MAX", "THROTTLED_REPLICAS_KEYS", "TOPIC_CONFIGS", "TOPIC_TO_BROKER", "BrokerConfig",
    "AuthorizerConfig", "AutoCreateConfig", "CleanerConfig", "ConfigChange", "ConfigError", "ConfigOp", "ConfigSource", "ControllerConfig",
    "EventsTopicConfig",
    "FetcherConfig", "GroupCoordinatorConfig", "LifecycleConfig", "ListenerConfig", "LogConfig", "NodeConfig",
    "NotDynamicError",
    "ReplicationConfig", "SocketConfig", "StorageConfig", "TlsSettings", "altered_broker_configs", "altered_topic_configs", "config_text", "definition_of",
    "validate_topic_configs",
]

_DEFAULTS = {name: d.default for name, d in BROKER_CONFIGS.items() if d.default is not None}


class BrokerConfig:
    """A validated, immutable broker configuration. Look values up by Kafka's name: `get_int`, `get_bool`...

    `values` are the static settings (server.properties, `--config`); `cluster` and `broker` the dynamic layers
    (see `with_dynamic`), which only `DYNAMIC_BROKER_CONFIGS` keys may be in."""

    __slots__ = ("_values", "_explicit", "_layers", "replication", "lifecycle", "controller", "storage", "groups", "transactions",
                 "listeners", "sockets", "authorizer", "auto_create", "events", "node", "cleaner", "sasl_mechanisms")

    def __init__(self, values: Mapping[str, object] | None = None, cluster: Mapping[str, object] | None = None,
                 broker: Mapping[str, object] | None = None) -> None:
        explicit = validate(values or {}, BROKER_CONFIGS, "broker")
        if explicit.get("broker.id") is not None and "node.id" not in explicit:
            explicit["node.id"] = explicit["broker.id"]
        merged = {name: d.default for name, d in BROKER_CONFIGS.items()}
        merged.update(explicit)
        check_relations(merged)
        layers = ((ConfigSource.DYNAMIC_BROKER_CONFIG, validate_dynamic(broker or {})),
                  (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, validate_dynamic(cluster or {})),
                  (ConfigSource.STATIC_BROKER_CONFIG, explicit))
        if cluster or broker:
            merged = {**merged, **layers[1][1], **layers[0][1]}
            check_relations(merged)
        self._values: dict[str, object] = merged
        self._explicit: dict[str, object] = explicit
        self._layers: tuple[tuple[ConfigSource, dict[str, object]], ...] = layers
        self.replication: ReplicationConfig = _replication_config(self)
        self.node = NodeConfig(self.get_int("node.id"), self.get_list("process.roles"), self.get_int("metrics.port"),
                               self.get_list("controller.quorum.voters"), self.get_bool("fault.injection.enable"))
        self.lifecycle = LifecycleConfig(self.get_int("broker.heartbeat.interval.ms"),
                                         self.get_int("broker.session.timeout.ms"),
                                         self.get_bool("controlled.shutdown.enable"))
        self.controller: ControllerConfig = _controller_config(self)
        self.storage = StorageConfig(self.get_int("log.retention.check.interval.ms"),
                                     self.get_bool("fault.injection.power.loss.enable"),
                                     self.get_int("replica.alter.log.dirs.io.max.bytes.per.second"))
        self.groups: GroupCoordinatorConfig = _group_coordinator_config(self)
        self.transactions: TransactionCoordinatorConfig = _transaction_coordinator_config(self)
        self.cleaner: CleanerConfig = _cleaner_config(self)
        self.listeners: ListenerConfig = _listener_config(self)
        self.sockets = _socket_config(self)
        self.authorizer = AuthorizerConfig(
            bool(self.get_str("authorizer.class.name")),
            frozenset(p.strip() for p in (self.get_str("super.users") or "").split(";") if p.strip()),
            self.get_bool("allow.everyone.if.no.acl.found"))
        self.auto_create = AutoCreateConfig(self.get_bool("auto.create.topics.enable"), self.get_int("num.partitions"),
                                            self.get_int("default.replication.factor"))
        self.sasl_mechanisms = SaslClientMechanisms(self.get_str("sasl.mechanism.inter.broker.protocol") or "PLAIN",
                                                    self.get_str("sasl.mechanism.controller.protocol") or "PLAIN")
        self.events = EventsTopicConfig(self.get_bool("insync.events.topic.enable"),
                                        self.get_int("insync.events.topic.replication.factor"),
                                        self.get_int("insync.events.topic.retention.ms"))

    @classmethod
    def from_sources(cls, path: str | Path | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
        raw: dict[str, object] = dict(parse_properties(Path(path).read_text())) if path else {}
        raw.update(parse_overrides(overrides))
        return cls(raw)

    def with_dynamic(self, cluster: Mapping[str, object], broker: Mapping[str, object]) -> BrokerConfig:
        """These static settings under new dynamic layers: the cluster-wide defaults and this broker's own values
        (the previous layers are dropped). Raises ConfigError as the constructor does, relations between keys
        included (replica.fetch.wait.max.ms <= replica.lag.time.max.ms)."""
        return BrokerConfig(self._explicit, cluster, broker)

    def synonyms(self, name: str) -> tuple[tuple[str, object, ConfigSource], ...]:
        """(key, value, source) of each value that sets `name`, most specific first, as Kafka lists them."""
        return config_synonyms(name, (*self._layers, (ConfigSource.DEFAULT_CONFIG, _DEFAULTS)))

    def effective(self, name: str) -> object:
        """`name`'s value as it acts: log.retention.ms from log.retention.hours when only that is set."""
        return resolved(self._values, name)

    def dynamic_layer(self, source: ConfigSource) -> Mapping[str, object]:
        """The keys a dynamic layer (DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG) sets."""
        return next(layer for layer_source, layer in self._layers if layer_source is source)

    def get(self, name: str) -> object:
        if name not in self._values:
            raise ConfigError(f"unknown broker config key: {name}")
        return self._values[name]

    def get_int(self, name: str) -> int:
        value = self.get(name)
        assert isinstance(value, int) and not isinstance(value, bool), f"{name} is not an integer"
        return value

    def get_float(self, name: str) -> float:
        value = self.get(name)
        assert isinstance(value, float | int) and not isinstance(value, bool), f"{name} is not a number"
        return float(value)

    def get_bool(self, name: str) -> bool:
        value = self.get(name)
        assert isinstance(value, bool), f"{name} is not a boolean"
        return value

    def get_str(self, name: str) -> str | None:
        value = self.get(name)
        assert value is None or isinstance(value, str), f"{name} is not a string"
        return value

    def get_list(self, name: str) -> tuple[str, ...]:
        value = self.get(name)
        assert value is None or isinstance(value, tuple), f"{name} is not a list"
        return value or ()

    def is_explicit(self, name: str) -> bool:
        """Set in server.properties or by `--config` (a dynamic layer does not count)."""
        return name in self._explicit

    def listener_setting(self, listener: str | None, key: str) -> object:
        """`listener.name.<listener>.<key>` when set, else `key` (Kafka's per-listener override)."""
        prefixed = f"listener.name.{listener.lower()}.{key}" if listener else None
        if prefixed is not None and self.is_explicit(prefixed):
            return self.get(prefixed)
        return self.get(key)

    def sasl(self, listener: str) -> SaslListenerSettings:
        """The SASL settings of `listener`: its mechanisms, re-authentication period and JAAS configurations."""
        jaas = {m: str(self.get(key)) for m in SASL_MECHANISMS if self.is_explicit(key := jaas_key(listener, m))}
        return sasl_listener_settings(listener, lambda key: self.listener_setting(listener, key), jaas)

    def tls(self, listener: str | None) -> TlsSettings:
        """The TLS settings of `listener` (None: the general `ssl.*` ones)."""
        own_client_auth = listener is not None and self.is_explicit(f"listener.name.{listener.lower()}.ssl.client.auth")
        return tls_settings(lambda key: self.listener_setting(listener, key), own_client_auth)

    def with_overrides(self, values: Mapping[str, object]) -> BrokerConfig:
        """More static settings; the dynamic layers are kept."""
        return BrokerConfig({**self._explicit, **values}, self._layers[1][1], self._layers[0][1])

    def items(self) -> list[tuple[str, object]]:
        return sorted(self._values.items())

    def log_dirs(self) -> tuple[str, ...]:
        return self.get_list("log.dirs") or (self.get_str("log.dir") or "/tmp/insync-logs",)

    def log_config(self, topic_overrides: Mapping[str, object] | None = None) -> LogConfig:
        topic = validate_topic_configs(topic_overrides or {})

        def pick(topic_key: str) -> object:
            value = topic.get(topic_key)
            return self.effective(TOPIC_TO_BROKER[topic_key]) if value is None else value

        flush_ms = pick("flush.ms")
        return LogConfig(
            segment_bytes=int(pick("segment.bytes")),  # type: ignore[call-overload]
            segment_ms=int(pick("segment.ms")),  # type: ignore[call-overload]
            retention_ms=int(pick("retention.ms")),  # type: ignore[call-overload]
            retention_bytes=int(pick("retention.bytes")),  # type: ignore[call-overload]
            index_interval_bytes=int(pick("index.interval.bytes")),  # type: ignore[call-overload]
            max_message_bytes=int(pick("max.message.bytes")),  # type: ignore[call-overload]
            flush_interval_messages=int(pick("flush.messages")),  # type: ignore[call-overload]
            flush_interval_ms=None if flush_ms is None else int(flush_ms),  # type: ignore[call-overload]
            index_size_max_bytes=self.get_int("log.index.size.max.bytes"),
            min_insync_replicas=int(pick("min.insync.replicas")),  # type: ignore[call-overload]
            unclean_leader_election=bool(pick("unclean.leader.election.enable")),
            cleanup_policy=tuple(pick("cleanup.policy")),  # type: ignore[arg-type]
            delete_retention_ms=int(pick("delete.retention.ms")),  # type: ignore[call-overload]
            min_cleanable_dirty_ratio=float(pick("min.cleanable.dirty.ratio")),  # type: ignore[arg-type]
            min_compaction_lag_ms=int(pick("min.compaction.lag.ms")),  # type: ignore[call-overload]
            max_compaction_lag_ms=int(pick("max.compaction.lag.ms")),  # type: ignore[call-overload]
        )


@dataclass(frozen=True, slots=True)
class LogConfig:
    """What one partition's log needs to know, resolved from topic overrides over broker defaults."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_ms: int = 604800000
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    flush_interval_messages: int = LONG_MAX
    flush_interval_ms: int | None = None
    index_size_max_bytes: int = 10485760
    min_insync_replicas: int = 1
    unclean_leader_election: bool = False
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 86400000  # how long a tombstone outlives the clean that first saw it
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX

    @property
    def compact(self) -> bool:
        """The log cleaner keeps only the last record of each key (cleanup.policy has compact)."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Retention by time and size deletes old segments (cleanup.policy has delete)."""
        return "delete" in self.cleanup_policy


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """A follower's fetch requests: `replica.fetch.*` and `replica.socket.timeout.ms`."""

    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10_485_760
    partition_max_bytes: int = 1_048_576
    backoff_ms: int = 1_000
    request_timeout_ms: int = 30_000

    def __post_init__(self) -> None:
        assert self.max_wait_ms >= 0 and self.min_bytes >= 1 and self.backoff_ms >= 0, self
        assert self.max_wait_ms <= self.request_timeout_ms, self  # check_relations refuses it in a config


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    """A broker's replica settings, typed: what its replication cores read, built once per `BrokerConfig` (so a
    new dynamic layer gives a new one). Names are Kafka's keys, without the `replica.` prefix where it repeats."""

    lag_time_max_ms: int  # replica.lag.time.max.ms
    lag_max_messages: int  # replica.lag.max.messages: 0 turns the count rule off
    pending_reads_insync_enable: bool  # follower.fetch.pending.reads.insync.enable (KIP-501)
    high_watermark_checkpoint_interval_ms: int  # replica.high.watermark.checkpoint.interval.ms
    fetch: FetcherConfig
    leader_throttled_rate_bytes_per_s: int  # leader.replication.throttled.rate; LONG_MAX: none
    follower_throttled_rate_bytes_per_s: int  # follower.replication.throttled.rate; LONG_MAX: none
    quota_window_num: int  # replication.quota.window.num
    quota_window_size_ms: int  # replication.quota.window.size.seconds, in ms

    def __post_init__(self) -> None:
        assert self.lag_time_max_ms > 0 and self.lag_max_messages >= 0, self
        assert self.fetch.max_wait_ms <= self.lag_time_max_ms, self  # check_relations refuses the rest

    @property
    def isr_check_interval_ms(self) -> int:
        """How often a leader checks its followers against the lag: every half lag, as Kafka's ReplicaManager,
        so that a follower that stops is out between 1 and 1.5 lags after its last catch-up."""
        return max(1, self.lag_time_max_ms // 2)


def _replication_config(config: BrokerConfig) -> ReplicationConfig:
    fetch = FetcherConfig(config.get_int("replica.fetch.wait.max.ms"), config.get_int("replica.fetch.min.bytes"),
                          config.get_int("replica.fetch.response.max.bytes"), config.get_int("replica.fetch.max.bytes"),
                          config.get_int("replica.fetch.backoff.ms"), config.get_int("replica.socket.timeout.ms"))
    return ReplicationConfig(
        lag_time_max_ms=config.get_int("replica.lag.time.max.ms"),
        lag_max_messages=config.get_int("replica.lag.max.messages"),
        pending_reads_insync_enable=config.get_bool("follower.fetch.pending.reads.insync.enable"),
        high_watermark_checkpoint_interval_ms=config.get_int("replica.high.watermark.checkpoint.interval.ms"),
        fetch=fetch,
        leader_throttled_rate_bytes_per_s=config.get_int("leader.replication.throttled.rate"),
        follower_throttled_rate_bytes_per_s=config.get_int("follower.replication.throttled.rate"),
        quota_window_num=config.get_int("replication.quota.window.num"),
        quota_window_size_ms=config.get_int("replication.quota.window.size.seconds") * 1000,
    )


@dataclass(frozen=True, slots=True)
class LifecycleConfig:
    """A broker's life with the controller: how often it heartbeats, how long its session lasts without one (which
    also bounds its wait for a controlled shutdown), and whether it asks for one before stopping."""

    heartbeat_interval_ms: int  # broker.heartbeat.interval.ms
    session_timeout_ms: int  # broker.session.timeout.ms
    controlled_shutdown_enable: bool  # controlled.shutdown.enable

    def __post_init__(self) -> None:
        assert 0 < self.heartbeat_interval_ms < self.session_timeout_ms, self  # check_relations keeps it so


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """The controller's own settings: where it keeps the metadata, how it elects (KIP-966) and balances leaders. The
    election defaults a topic inherits (min ISR, unclean election) are in `log_config()`, since the cluster-wide
    dynamic configs in the metadata override them."""

    metadata_store: str  # metadata.store: local or zookeeper
    zookeeper_connect: str | None  # zookeeper.connect
    zookeeper_session_timeout_ms: int  # zookeeper.session.timeout.ms
    eligible_leader_replicas_enable: bool  # eligible.leader.replicas.enable
    unclean_recovery_strategy: str  # unclean.recovery.strategy
    auto_leader_rebalance_enable: bool  # auto.leader.rebalance.enable
    leader_imbalance_check_interval_ms: int  # leader.imbalance.check.interval.seconds, in ms
    # isr.change.propagation.{check.interval,blackout,max.interval}.ms: Kafka hard-codes them, tests shorten them
    isr_propagation_ms: tuple[int, int, int]

    def __post_init__(self) -> None:
        assert self.metadata_store in ("local", "zookeeper"), self
        assert self.zookeeper_session_timeout_ms > 0 and self.leader_imbalance_check_interval_ms > 0, self
        assert self.isr_propagation_ms[0] > 0 and min(self.isr_propagation_ms) >= 0, self


def _controller_config(config: BrokerConfig) -> ControllerConfig:
    return ControllerConfig(
        metadata_store=config.get_str("metadata.store") or "local",
        zookeeper_connect=config.get_str("zookeeper.connect"),
        zookeeper_session_timeout_ms=config.get_int("zookeeper.session.timeout.ms"),
        eligible_leader_replicas_enable=config.get_bool("eligible.leader.replicas.enable"),
        unclean_recovery_strategy=config.get_str("unclean.recovery.strategy") or "Balanced",
        auto_leader_rebalance_enable=config.get_bool("auto.leader.rebalance.enable"),
        leader_imbalance_check_interval_ms=config.get_int("leader.imbalance.check.interval.seconds") * 1000,
        isr_propagation_ms=(config.get_int("isr.change.propagation.check.interval.ms"),
                            config.get_int("isr.change.propagation.blackout.ms"),
                            config.get_int("isr.change.propagation.max.interval.ms")),
    )


@dataclass(frozen=True, slots=True)
class StorageConfig:
    """How a broker keeps its log dirs: how often retention runs over its logs, how fast a replica moving between
    its dirs is copied, and whether its disk journals what it fsynced so that a simulated power loss can cut it
    back (insync's fault injection)."""

    retention_check_interval_ms: int  # log.retention.check.interval.ms
    power_loss_journal: bool  # fault.injection.power.loss.enable
    alter_log_dirs_bytes_per_s: int  # replica.alter.log.dirs.io.max.bytes.per.second

    def __post_init__(self) -> None:
        assert self.retention_check_interval_ms > 0 and self.alter_log_dirs_bytes_per_s >= 0, self


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The log cleaner's settings, as Kafka's CleanerConfig gathers them (`log.cleaner.*`)."""

    enable: bool  # log.cleaner.enable
    threads: int  # log.cleaner.threads
    dedupe_buffer_bytes: int  # log.cleaner.dedupe.buffer.size, over all threads
    dedupe_buffer_load_factor: float  # log.cleaner.io.buffer.load.factor
    io_buffer_bytes: int  # log.cleaner.io.buffer.size, over all threads
    io_max_bytes_per_second: float  # log.cleaner.io.max.bytes.per.second
    backoff_ms: int  # log.cleaner.backoff.ms

    def __post_init__(self) -> None:
        assert self.threads >= 0 and self.backoff_ms >= 0, self
        assert self.io_max_bytes_per_second > 0, self


def _cleaner_config(config: BrokerConfig) -> CleanerConfig:
    return CleanerConfig(
        enable=config.get_bool("log.cleaner.enable"),
        threads=config.get_int("log.cleaner.threads"),
        dedupe_buffer_bytes=config.get_int("log.cleaner.dedupe.buffer.size"),
        dedupe_buffer_load_factor=config.get_float("log.cleaner.io.buffer.load.factor"),
        io_buffer_bytes=config.get_int("log.cleaner.io.buffer.size"),
        io_max_bytes_per_second=config.get_float("log.cleaner.io.max.bytes.per.second"),
        backoff_ms=config.get_int("log.cleaner.backoff.ms"),
    )


@dataclass(frozen=True, slots=True)
class GroupCoordinatorConfig:
    """The group coordinator's settings, as Kafka's GroupCoordinatorConfig gathers them: the `group.*` bounds on
    members and sessions, and `__consumer_offsets` (its layout when created, what a commit may carry, how long a
    commit's write may take)."""

    min_session_timeout_ms: int  # group.min.session.timeout.ms
    max_session_timeout_ms: int  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int  # group.initial.rebalance.delay.ms
    max_size: int  # group.max.size
    offset_metadata_max_bytes: int  # offset.metadata.max.bytes
    offsets_commit_timeout_ms: int  # offsets.commit.timeout.ms
    offsets_retention_ms: int  # offsets.retention.minutes, in ms
    offsets_retention_check_interval_ms: int  # offsets.retention.check.interval.ms
    offsets_topic_num_partitions: int  # offsets.topic.num.partitions
    offsets_topic_replication_factor: int  # offsets.topic.replication.factor
    offsets_topic_segment_bytes: int  # offsets.topic.segment.bytes

    def __post_init__(self) -> None:
        # the key table's bounds; min <= max is GroupMembership's to assert, when a coordinator starts
        assert self.min_session_timeout_ms > 0 and self.max_session_timeout_ms > 0, self
        assert self.offsets_topic_num_partitions > 0 and self.offsets_retention_ms > 0, self


def _group_coordinator_config(config: BrokerConfig) -> GroupCoordinatorConfig:
    return GroupCoordinatorConfig(
        min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
        initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
        max_size=config.get_int("group.max.size"),
        offset_metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
        offsets_commit_timeout_ms=config.get_int("offsets.commit.timeout.ms"),
        offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
        offsets_retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
        offsets_topic_num_partitions=config.get_int("offsets.topic.num.partitions"),
        offsets_topic_replication_factor=config.get_int("offsets.topic.replication.factor"),
        offsets_topic_segment_bytes=config.get_int("offsets.topic.segment.bytes"),
    )


@dataclass(frozen=True, slots=True)
class TransactionCoordinatorConfig:
    """The transaction coordinator's settings, as Kafka's TransactionStateManagerConfig and TransactionLogConfig
    gather them."""

    max_timeout_ms: int  # transaction.max.timeout.ms
    abort_interval_ms: int  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    log_num_partitions: int  # transaction.state.log.num.partitions
    log_replication_factor: int  # transaction.state.log.replication.factor
    log_min_isr: int  # transaction.state.log.min.isr
    log_segment_bytes: int  # transaction.state.log.segment.bytes
    write_timeout_ms: int  # offsets.commit.timeout.ms, which Kafka's transaction log appends use too

    def __post_init__(self) -> None:
        assert self.max_timeout_ms > 0 and self.abort_interval_ms > 0 and self.log_num_partitions > 0, self


def _transaction_coordinator_config(config: BrokerConfig) -> TransactionCoordinatorConfig:
    return TransactionCoordinatorConfig(
        max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
        abort_interval_ms=config.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        log_num_partitions=config.get_int("transaction.state.log.num.partitions"),
        log_replication_factor=config.get_int("transaction.state.log.replication.factor"),
        log_min_isr=config.get_int("transaction.state.log.min.isr"),
        log_segment_bytes=config.get_int("transaction.state.log.segment.bytes"),
        write_timeout_ms=config.get_int("offsets.commit.timeout.ms"),
    )


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    """A node's listener settings as given: security/listeners.py parses them into endpoints, refusing what is
    malformed in Kafka's words when a role needs them (a controller-only node has no broker listener)."""

    listeners: tuple[str, ...]  # listeners
    advertised_listeners: tuple[str, ...]  # advertised.listeners
    security_protocol_map: tuple[str, ...]  # listener.security.protocol.map: NAME:PROTOCOL entries
    controller_listener_names: tuple[str, ...] | None  # controller.listener.names; None when not set
    controller_listener: str | None  # insync's controller.listener
    inter_broker_listener_name: str | None  # inter.broker.listener.name
    security_inter_broker_protocol: str | None  # security.inter.broker.protocol; None when not set


def _listener_config(config: BrokerConfig) -> ListenerConfig:
    names = "controller.listener.names"
    protocol = "security.inter.broker.protocol"
    return ListenerConfig(
        listeners=config.get_list("listeners"),
        advertised_listeners=config.get_list("advertised.listeners"),
        security_protocol_map=config.get_list("listener.security.protocol.map"),
        controller_listener_names=config.get_list(names) if config.is_explicit(names) else None,
        controller_listener=config.get_str("controller.listener"),
        inter_broker_listener_name=config.get_str("inter.broker.listener.name"),
        security_inter_broker_protocol=config.get_str(protocol) if config.is_explicit(protocol) else None,
    )


@dataclass(frozen=True, slots=True)
class SocketConfig:
    """What a listener allows each connection (the largest request, its send buffer, -1 the OS default, how long
    it may idle), how many connections may wait to be accepted, and how many may be open in all and from one IP
    address."""

    request_max_bytes: int  # socket.request.max.bytes
    send_buffer_bytes: int  # socket.send.buffer.bytes
    listen_backlog_size: int  # socket.listen.backlog.size
    max_connections: int  # max.connections
    max_connections_per_ip: int  # max.connections.per.ip
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...]  # (host or IP, its maximum)
    connections_max_idle_ms: int  # connections.max.idle.ms
    queued_max_requests: int  # queued.max.requests
    queued_max_request_bytes: int  # queued.max.request.bytes


def _socket_config(config: BrokerConfig) -> SocketConfig:
    overrides_key = "max.connections.per.ip.overrides"
    return SocketConfig(config.get_int("socket.request.max.bytes"), config.get_int("socket.send.buffer.bytes"),
                        config.get_int("socket.listen.backlog.size"), config.get_int("max.connections"),
                        config.get_int("max.connections.per.ip"),
                        connection_overrides(overrides_key, config.get_str(overrides_key) or ""),
                        config.get_int("connections.max.idle.ms"), config.get_int("queued.max.requests"),
                        config.get_int("queued.max.request.bytes"))


def connection_overrides(key: str, text: str) -> tuple[tuple[str, int], ...]:
    """`host:count,...` as Kafka's `Csv.parseCsvMap` reads it (the last colon splits, so an IPv6 address keeps
    its own), each count an int; ConfigError in KafkaConfig's words otherwise."""
    pairs = []
    for entry in (item.strip() for item in text.split(",")):
        if not entry:
            continue
        host, colon, count = entry.rpartition(":")
        try:
            if not colon:
                raise ValueError(f"no ':' in {entry!r}")
            pairs.append((host.strip(), int(count.strip())))
        except ValueError as exc:
            raise ConfigError(f"Error parsing configuration property '{key}': {exc}") from None
    return tuple(pairs)


@dataclass(frozen=True, slots=True)
class AuthorizerConfig:
    """Whether requests are authorized against the ACLs, who is allowed everything, and what a resource without ACLs
    allows."""

    enabled: bool  # authorizer.class.name is set
    super_users: frozenset[str]  # super.users, principals separated by semicolons
    allow_everyone_if_no_acl_found: bool  # allow.everyone.if.no.acl.found


@dataclass(frozen=True, slots=True)
class AutoCreateConfig:
    """Topics a Metadata request names and no one created: whether they are created, and their layout."""

    enable: bool  # auto.create.topics.enable
    num_partitions: int  # num.partitions
    replication_factor: int  # default.replication.factor

    def __post_init__(self) -> None:
        assert self.num_partitions > 0 and self.replication_factor > 0, self


@dataclass(frozen=True, slots=True)
class EventsTopicConfig:
    """insync's own `__insync_events`: whether a node appends its events there, and the topic's layout."""

    enable: bool  # insync.events.topic.enable
    replication_factor: int  # insync.events.topic.replication.factor
    retention_ms: int  # insync.events.topic.retention.ms


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """Who a node is and what it runs: its id and roles, where it serves metrics, how it finds the controller, and
    whether it takes insync's injected faults (its fault file)."""

    node_id: int  # node.id (broker.id)
    process_roles: tuple[str, ...]  # process.roles
    metrics_port: int  # metrics.port; 0: none
    controller_quorum_voters: tuple[str, ...]  # controller.quorum.voters: id@host:port entries
    fault_injection_enable: bool  # fault.injection.enable

    def __post_init__(self) -> None:
        assert self.node_id >= 0 and 0 <= self.metrics_port <= 65535, self
