"""The key table: every broker and topic config key insync accepts, with Kafka's names, types and defaults.

`BROKER_CONFIGS` defines each broker key (`ConfigDef`: type, default, documentation line, range or allowed values,
and how one value is parsed and checked); the security keys come from `security_config`. `TOPIC_CONFIGS` are the
topic-level keys, most of them named after the broker key that supplies their default (`TOPIC_TO_BROKER`).
`DYNAMIC_BROKER_CONFIGS` may change while brokers run; `INSYNC_KEYS` are the keys Kafka does not have. Validating
whole sets of values is `config_validation`'s job, building a broker's configuration from them `config`'s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from insync.properties import ConfigError
from insync.security_config import SECURITY_CONFIGS

ConfigType = Literal["int", "long", "bool", "string", "list", "double"]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One key: its type, default and documentation line, and what values it takes (a range, or a list of
    allowed values, and values Kafka takes that insync refuses)."""

    name: str
    type: ConfigType
    default: object
    doc: str
    min: float | None = None
    max: float | None = None
    allowed: tuple[str, ...] | None = None
    refused: tuple[tuple[str, str], ...] = ()  # (value, why): Kafka takes it, insync does not implement it

    def parse(self, raw: object) -> object:
        """Parse `raw` (a string from a file, or an already typed value) or raise ConfigError in the words of
        Kafka's ConfigException ("Invalid value V for configuration K: why")."""
        try:
            value = self._coerce(raw)
        except (TypeError, ValueError):
            why = ("Expected value to be either true or false" if self.type == "bool"
                   else f"Not a number of type {self.type.upper()}")
            raise self.invalid(raw, why) from None
        self._check_range(raw, value)
        return value

    def invalid(self, raw: object, why: str) -> ConfigError:
        """Kafka's ConfigException for this key."""
        return ConfigError(f"Invalid value {config_text(raw)} for configuration {self.name}: {why}")

    def _coerce(self, raw: object) -> object:
        if raw is None:
            return None
        text = raw.strip() if isinstance(raw, str) else raw
        if self.type == "bool":
            if isinstance(text, bool):
                return text
            if isinstance(text, str) and text.lower() in ("true", "false"):
                return text.lower() == "true"
            raise ValueError(text)
        if self.type in ("int", "long"):
            if isinstance(text, bool):
                raise ValueError(text)
            return int(text)  # type: ignore[call-overload]
        if self.type == "double":
            return float(text)  # type: ignore[arg-type]
        if self.type == "list":
            if isinstance(text, list | tuple):
                return tuple(str(item) for item in text)
            return tuple(item.strip() for item in str(text).split(",") if item.strip())
        return str(text)

    def _check_range(self, raw: object, value: object) -> None:
        if value is None:
            return
        items = value if isinstance(value, tuple) else (value,)
        for item, why in self.refused:  # Kafka's wording, with the reason insync does not apply the value
            if item in items:
                raise self.invalid(item, why)
        if self.allowed is not None:
            for item in items:
                if str(item) not in self.allowed:
                    raise self.invalid(item, f"String must be one of: {', '.join(self.allowed)}")
            return
        if not isinstance(value, int | float) or isinstance(value, bool):
            return
        if self.type == "int" and not -(2**31) <= value <= INT_MAX:
            raise self.invalid(raw, "Not a number of type INT")
        if self.min is not None and value < self.min:
            raise self.invalid(raw, f"Value must be at least {self.bound_text(self.min)}")
        if self.max is not None and value > self.max:
            raise self.invalid(raw, f"Value must be no more than {self.bound_text(self.max)}")

    def bound_text(self, bound: float) -> str:
        """A bound as Java prints the Number of Kafka's Range validator (`between(0, 1)` holds Integers)."""
        return str(bound) if self.type == "double" and isinstance(bound, float) else str(int(bound))


def config_text(value: object) -> str:
    """A config value as Kafka writes it: `true`/`false`, lists joined by commas, doubles as Java prints them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, tuple | list):
        return ",".join(str(item) for item in value)
    return str(value)


def java_double(value: float) -> str:
    """Java's `Double.toString`: plain between 10^-3 and 10^7 (`0.5`, `15000.0`), else `d.dddE<exponent>`
    (`1.7976931348623157E308`, Double.MAX_VALUE), with the shortest digits that read back as the value."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exponent, int), value
    text = "".join(map(str, digits))
    mantissa = f"{text[0]}.{text[1:] or '0'}"
    return f"{'-' if sign else ''}{mantissa}E{len(text) - 1 + exponent}"


def _d(name: str, type_: ConfigType, default: object, doc: str, **kw: object) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, **kw)  # type: ignore[arg-type]


# Topic-level settings: the name a topic uses, and the broker key that supplies its default.
TOPIC_TO_BROKER: dict[str, str] = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "message.timestamp.type": "log.message.timestamp.type",
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
}

BROKER_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        # Identity and roles
        _d("node.id", "int", 1, "This node's id (broker.id is an alias).", min=0),
        _d("broker.id", "int", None, "Alias of node.id, as in ZooKeeper-era Kafka.", min=0),
        _d("process.roles", "list", ("broker", "controller"), "broker, controller, or both.",
           allowed=("broker", "controller")),
        _d("listeners", "list", ("PLAINTEXT://127.0.0.1:9092",), "Where clients and followers connect."),
        _d("advertised.listeners", "list", None, "Addresses given to clients; defaults to listeners."),
        _d("controller.listener", "string", "CONTROLLER://127.0.0.1:9093", "Where the controller listens."),
        _d("controller.quorum.voters", "list", ("1@127.0.0.1:9093",), "id@host:port of the controller."),
        _d("log.dirs", "list", None, "Directories holding partition logs (log.dir is the fallback)."),
        _d("log.dir", "string", "/tmp/insync-logs", "Fallback when log.dirs is unset."),
        # Replication and the ISR (seeds 000-004)
        _d("leader.replication.throttled.rate", "long", LONG_MAX, "Bytes/s a leader sends, over all its "
           "partitions, to out-of-sync replicas its topics list in leader.replication.throttled.replicas.", min=0),
        _d("follower.replication.throttled.rate", "long", LONG_MAX, "Bytes/s a follower fetches, over all its "
           "partitions, for replicas its topics list in follower.replication.throttled.replicas while out of sync.",
           min=0),
        _d("replica.alter.log.dirs.io.max.bytes.per.second", "long", LONG_MAX, "Bytes/s of replicas moving "
           "between log directories of a broker (AlterReplicaLogDirs), over all of them.", min=0),
        _d("replication.quota.window.num", "int", 11, "Samples a replication throttle's rate is measured over.",
           min=1, max=1000),
        _d("replication.quota.window.size.seconds", "int", 1, "Length of each such sample.", min=1),
        _d("replica.lag.time.max.ms", "long", 30000, "Out of sync after this long without catching up.", min=1),
        _d("replica.lag.max.messages", "long", 0, "Legacy count rule (0.8.2); 0 turns it off.", min=0),
        _d("follower.fetch.pending.reads.insync.enable", "bool", False,
           "KIP-501: a follower whose fetch is still being read counts as in sync, but only while that read is "
           "younger than replica.lag.time.max.ms; a completed read counts as a catch-up at its completion time "
           "only if it took at most that long. A follower cut off while a read longer than that is pending thus "
           "leaves the ISR within 1.5 x replica.lag.time.max.ms of its last fetch (2.5 x at most otherwise)."),
        _d("replica.fetch.wait.max.ms", "int", 500, "Longest wait of a follower fetch.", min=0),
        _d("replica.fetch.min.bytes", "int", 1, "Bytes a follower fetch waits for.", min=1),
        _d("replica.fetch.max.bytes", "int", 1048576, "Bytes per partition per follower fetch.", min=0),
        _d("replica.fetch.response.max.bytes", "int", 10485760, "Bytes per follower fetch response.", min=0),
        _d("replica.fetch.backoff.ms", "int", 1000, "Back-off after a fetch error.", min=0),
        _d("replica.socket.timeout.ms", "int", 30000, "Follower fetch request timeout.", min=1),
        _d("num.replica.fetchers", "int", 1, "Fetcher sessions per source broker.", min=1, max=64),
        _d("replica.high.watermark.checkpoint.interval.ms", "long", 5000, "HW checkpoint interval.", min=1),
        _d("min.insync.replicas", "int", 1, "ISR size needed for acks=all.", min=1),
        _d("unclean.leader.election.enable", "bool", False, "Allow an out-of-sync replica to lead."),
        _d("unclean.recovery.strategy", "string", "Balanced",
           "KIP-966 unclean recovery of offline partitions, by the replicas' log ends and leader epochs: None "
           "(never by itself), Balanced (when ISR and ELR are empty and every last known ELR member is back) or "
           "Aggressive (as soon as no ISR or ELR member can lead; what unclean.leader.election.enable=true means).",
           allowed=("None", "Balanced", "Aggressive")),
        _d("eligible.leader.replicas.enable", "bool", True,
           "KIP-966: replicas removed from the ISR while it was below min.insync.replicas stay eligible to lead, "
           "a broker back from a crash leaves every ISR and ELR; false gives the Kafka 3.x election to compare."),
        _d("auto.leader.rebalance.enable", "bool", True,
           "Move leadership back to each partition's preferred replica by itself, checked "
           "leader.imbalance.check.interval.seconds after a write leaves a partition led by another replica."),
        _d("leader.imbalance.check.interval.seconds", "long", 300, "Delay of the automatic leader balance.", min=1),
        _d("leader.imbalance.per.broker.percentage", "int", 10,
           "Accepted for compatibility; as in Kafka's KRaft controller, not used (any imbalance is balanced).",
           min=0, max=100),
        _d("default.replication.factor", "int", 1, "Replication factor of auto-created topics.", min=1),
        _d("num.partitions", "int", 1, "Partitions of auto-created topics.", min=1),
        _d("auto.create.topics.enable", "bool", True, "Create a topic a Metadata request names (allowing it) when it "
           "does not exist, with num.partitions and default.replication.factor (Kafka's default: true)."),
        # ISR propagation (seed 003); Kafka hard-codes these three, insync lets tests shorten them.
        _d("isr.change.propagation.check.interval.ms", "long", 2500, "How often pending ISR changes are checked.",
           min=1),
        _d("isr.change.propagation.blackout.ms", "long", 5000, "Publish when the last change is this old.", min=0),
        _d("isr.change.propagation.max.interval.ms", "long", 60000, "Publish at least this often under churn.",
           min=0),
        # Controller and liveness
        _d("broker.session.timeout.ms", "int", 9000, "Fence a broker after this long without heartbeat.", min=1),
        _d("broker.heartbeat.interval.ms", "int", 2000, "Broker heartbeat interval.", min=1),
        _d("controlled.shutdown.enable", "bool", True,
           "On a clean stop, have the controller move this broker's leaderships away first."),
        _d("metadata.store", "string", "local", "Where the controller keeps metadata.",
           allowed=("local", "zookeeper")),
        _d("zookeeper.connect", "string", None, "host:port/chroot when metadata.store=zookeeper."),
        _d("zookeeper.session.timeout.ms", "int", 18000, "A controller's ZooKeeper session: a standby takes over "
           "this long after the active controller stops answering ZooKeeper.", min=1000),
        # Network and request limits
        _d("socket.request.max.bytes", "int", 104857600, "Largest request accepted.", min=1),
        # Kafka's default is 102400; insync's is 4 MiB (see server.listener): a Python broker pays for every
        # wake-up that refills a small buffer. -1 leaves the OS's own (autotuned) size, as in Kafka.
        _d("socket.send.buffer.bytes", "int", 4194304, "SO_SNDBUF of accepted connections; -1 for the OS default.",
           min=-1),
        _d("socket.listen.backlog.size", "int", 50, "The maximum number of pending connections on the socket "
           "(Linux also caps it at net.core.somaxconn).", min=1),
        _d("max.connections", "int", INT_MAX, "The maximum number of connections allowed in the broker at any time, "
           "in addition to the per-IP limits. New connections wait to be accepted while it is reached; connections "
           "on the inter-broker listener are permitted even then.", min=0),
        _d("max.connections.per.ip", "int", INT_MAX, "The maximum number of connections allowed from each IP "
           "address (0 if there are overrides). New connections from the IP address are dropped if the limit is "
           "reached.", min=0),
        _d("max.connections.per.ip.overrides", "string", "", "A comma-separated list of per-IP or hostname "
           "overrides to the default maximum number of connections, e.g. hostName:100,127.0.0.1:200."),
        _d("connections.max.idle.ms", "long", 600000, "Close a connection after this long without a request read "
           "in full or a response written (a frame that trickles in is no activity), unless a request is in flight.",
           min=1),
        _d("queued.max.requests", "int", 500, "The number of requests read and not yet being handled allowed "
           "before no more requests are read from any connection.", min=1),
        _d("queued.max.request.bytes", "long", -1, "The number of bytes of those requests allowed before no more "
           "requests are read; -1 for no bound.", min=-1),
        _d("message.max.bytes", "int", 1048588, "Largest record batch accepted.", min=0),
        _d("request.timeout.ms", "int", 30000, "Client-side request timeout used by insync's own tools.", min=1),
        # Log
        _d("log.segment.bytes", "int", 1073741824, "Roll a segment at this size.", min=14),
        # Kafka's keys in other units: the first one set wins (config_synonyms), ms, else minutes, else hours.
        _d("log.roll.ms", "long", None, "Roll a segment after this long.", min=1),
        _d("log.roll.hours", "int", 168, "log.roll.ms in hours.", min=1),
        _d("log.retention.ms", "long", None, "Delete segments older than this; -1 keeps forever.", min=-1),
        _d("log.retention.minutes", "int", None, "log.retention.ms in minutes.", min=-1),
        _d("log.retention.hours", "int", 168, "log.retention.minutes in hours.", min=-1),
        _d("log.retention.bytes", "long", -1, "Delete oldest segments beyond this size; -1 keeps all.", min=-1),
        _d("log.retention.check.interval.ms", "long", 300000, "How often retention runs.", min=1),
        _d("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries.", min=0),
        _d("log.index.size.max.bytes", "int", 10485760, "Largest offset index.", min=4),
        _d("log.flush.interval.messages", "long", LONG_MAX, "fsync after this many messages.", min=1),
        _d("log.flush.interval.ms", "long", None, "fsync after this long.", min=0),
        _d("log.flush.scheduler.interval.ms", "long", LONG_MAX, "log.flush.interval.ms when unset.", min=0),
        _d("log.message.timestamp.type", "string", "CreateTime", "Record timestamp type.",
           allowed=("CreateTime", "LogAppendTime")),
        _d("log.cleanup.policy", "list", ("delete",), "delete (retention by time and size), compact (keep the last "
           "record of each key), or both.", allowed=("compact", "delete")),
        # Accepted and described as Kafka's, for the clients and tools that set it; insync departs from Kafka:
        # batches are stored as the producer compressed them (Kafka's "producer").
        _d("compression.type", "string", "producer", "Accepted; batches stay as the producer compressed them.",
           allowed=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        # The log cleaner (Kafka's CleanerConfig): compaction of logs whose cleanup.policy includes compact.
        _d("log.cleaner.enable", "bool", True, "Run the log cleaner; without it compacted topics are not cleaned "
           "and grow."),
        _d("log.cleaner.threads", "int", 1, "Background threads cleaning logs.", min=0),
        _d("log.cleaner.dedupe.buffer.size", "long", 134217728, "Memory of the offset maps (key hash to last "
           "offset) over all cleaner threads; a log with more keys is cleaned in several passes."),
        _d("log.cleaner.io.buffer.load.factor", "double", 0.9, "How full an offset map may become."),
        _d("log.cleaner.io.buffer.size", "int", 524288, "Memory of the cleaner's read and write buffers.", min=0),
        _d("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308, "The cleaners' read plus write "
           "rate, averaged."),
        _d("log.cleaner.backoff.ms", "long", 15000, "How long a cleaner sleeps when no log needs cleaning.", min=0),
        _d("log.cleaner.min.cleanable.ratio", "double", 0.5, "Dirty bytes over all bytes (below the first "
           "uncleanable offset) above which a log is cleaned.", min=0, max=1),
        _d("log.cleaner.delete.retention.ms", "long", 86400000, "How long a tombstone, or a transaction marker "
           "with no record of its transaction left, stays after a clean first kept it.", min=0),
        _d("log.cleaner.min.compaction.lag.ms", "long", 0, "The least time a record stays uncompacted.", min=0),
        _d("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "The most time a record stays ineligible for "
           "compaction.", min=1),
        # Consumer groups (the group coordinator and `__consumer_offsets`)
        _d("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", min=1, max=1000),
        _d("offsets.topic.replication.factor", "int", 3, "Replication factor of __consumer_offsets; it is not "
           "created until this many brokers are registered.", min=1),
        _d("offsets.topic.segment.bytes", "int", 104857600, "Segment size of __consumer_offsets.", min=14),
        # Transactions (the transaction coordinator and `__transaction_state`)
        _d("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state.", min=1,
           max=1000),
        _d("transaction.state.log.replication.factor", "int", 3, "Replication factor of __transaction_state; "
           "it is not created until this many brokers are registered.", min=1),
        _d("transaction.state.log.min.isr", "int", 2, "min.insync.replicas of __transaction_state.", min=1),
        _d("transaction.state.log.segment.bytes", "int", 104857600, "Segment size of __transaction_state.",
           min=1024),
        _d("transaction.max.timeout.ms", "int", 900000, "The largest transaction.timeout.ms a producer may ask "
           "for (INVALID_TRANSACTION_TIMEOUT above it).", min=1),
        _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, "How often the "
           "coordinator aborts the transactions open longer than their timeout.", min=1),
        # `__insync_events` (server/event_topic.py): each node's events.jsonl lines, for `insync monitor`
        _d("insync.events.topic.enable", "bool", True, "Also append this node's events to __insync_events (acks=1, "
           "off the request path, bounded in memory; events past the bound are dropped and counted)."),
        _d("insync.events.topic.replication.factor", "int", 3, "Replication factor of __insync_events (at most "
           "the brokers registered when it is created).", min=1),
        _d("insync.events.topic.retention.ms", "long", 86400000, "How long __insync_events keeps events.", min=1),
        _d("offsets.retention.minutes", "int", 10080, "How long a group without members keeps a commit.", min=1),
        _d("offsets.retention.check.interval.ms", "long", 600000, "How often the group coordinator expires "
           "offsets past offsets.retention.minutes.", min=1),
        _d("offsets.commit.timeout.ms", "int", 5000, "How long a commit waits for its replicas.", min=1),
        _d("offset.metadata.max.bytes", "int", 4096, "Largest metadata string of a committed offset.", min=0),
        _d("group.initial.rebalance.delay.ms", "int", 3000, "How long a new group waits for more members.", min=0),
        _d("group.min.session.timeout.ms", "int", 6000, "Shortest session timeout a member may ask for.", min=1),
        _d("group.max.session.timeout.ms", "int", 1800000, "Longest session timeout a member may ask for.", min=1),
        _d("group.max.size", "int", 1000, "Members per group (Kafka: unbounded; insync bounds it).", min=1),
        # Operations
        _d("metrics.port", "int", 0, "Prometheus endpoint port; 0 turns it off.", min=0, max=65535),
        _d("fault.injection.enable", "bool", False, "Accept chaos commands (slow reads, failing partitions)."),
        _d("fault.injection.power.loss.enable", "bool", False,
           "Journal what each file has fsynced, so `insync chaos crash` can drop the rest (power loss)."),
        _d("events.enable", "bool", True, "Write events.jsonl in the first log dir."),
    )
}

BROKER_CONFIGS.update({key.name: _d(key.name, key.type, key.default, key.doc,  # type: ignore[arg-type]
                                    allowed=key.allowed, min=key.min) for key in SECURITY_CONFIGS})

# Keys Kafka does not have, or no longer has; every other key is Kafka's, with Kafka's meaning.
INSYNC_KEYS: frozenset[str] = frozenset({
    "controller.listener", "replica.lag.max.messages", "follower.fetch.pending.reads.insync.enable",
    "isr.change.propagation.check.interval.ms", "isr.change.propagation.blackout.ms",
    "isr.change.propagation.max.interval.ms", "metadata.store", "request.timeout.ms", "insync.events.topic.enable",
    "insync.events.topic.replication.factor", "insync.events.topic.retention.ms", "metrics.port",
    "fault.injection.enable", "fault.injection.power.loss.enable", "events.enable", "ssl.handshake.timeout.ms"})
assert BROKER_CONFIGS.keys() >= INSYNC_KEYS, sorted(INSYNC_KEYS - BROKER_CONFIGS.keys())


# Broker configs IncrementalAlterConfigs may change while brokers run: Kafka's list (DynamicBrokerConfig) as far
# as insync has the key, i.e. every log default a topic inherits (DynamicLogConfig), plus replica.lag.time.max.ms,
# which Kafka reads only at startup; insync applies it at once, since its leaders read it on every ISR check.
DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(
    {*TOPIC_TO_BROKER.values(), "log.index.size.max.bytes", "replica.lag.time.max.ms",
     "leader.replication.throttled.rate", "follower.replication.throttled.rate",
     "replica.alter.log.dirs.io.max.bytes.per.second"})

TOPIC_CONFIGS: dict[str, ConfigDef] = {
    topic_key: dataclasses.replace(BROKER_CONFIGS[broker_key], name=topic_key, default=None)
    for topic_key, broker_key in TOPIC_TO_BROKER.items()
}
# Topic configs without a broker default (Kafka's QuotaConfigs): the replicas the replication throttles act on,
# "partition:broker,..." or "*" for all of them.
THROTTLED_REPLICAS_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
TOPIC_CONFIGS.update({
    key: ConfigDef(key, "list", (), f"The replicas {key.split('.')[0]}.replication.throttled.rate acts on: "
                   "partition:broker pairs, or * for all.")
    for key in THROTTLED_REPLICAS_KEYS})
