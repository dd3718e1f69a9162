"""A real Apache Kafka cluster laid out like an insync one: `insync cluster up --engine kafka[:VERSION]`.

The directory layout, ports, `cluster.json` and node ids are an insync cluster's (chaos/cluster.py), so every
command that finds a cluster by its directory (faults, workloads, benchmarks, `analyze` on its logs) works on it.
What differs is what each node runs:
- Kafka 4.x: KRaft. Controllers (node 0, and 1001.. with `--controllers`) form a static quorum
  (`controller.quorum.voters`); brokers 1..N. Every node's log dir is formatted with one cluster id first
  (`kafka-storage format`).
- Kafka 3.x: ZooKeeper, as the seeds' Kafka ran. Node 0 is a ZooKeeper server started from the same jars
  (`zookeeper-server-start`'s main class); brokers 1..N elect their controller in it.
Each node is `java ... kafka.Kafka server.properties` with a small heap, the release tarball's logging layout
(`server.log`, `controller.log`, `state-change.log` in the node's directory) and JMX on its metrics port.
`--config KEY=VALUE` goes to every Kafka node's server.properties as is: Kafka validates it at start-up.
"""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path

from insync.admin_requests import PartitionDescription
from insync.chaos import kafka_cds, kafka_dist, secure
from insync.config import ConfigError
from insync.waiting import wait_until

ENGINE_INSYNC = "insync"
ZOOKEEPER_ROLE = "zookeeper"
FORMAT_TIMEOUT_S = 120.0
# Heaps for two cores shared with insync: enough for the tests' and benchmarks' traffic.
HEAP = {"broker": "-Xms256m -Xmx768m", "controller": "-Xms64m -Xmx256m", ZOOKEEPER_ROLE: "-Xms32m -Xmx128m"}
# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS.
JVM_OPTS = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true")
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
CONFIG_FILE_NAME = "server.properties"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
# A killed ZooKeeper-mode broker stays registered until ZooKeeper expires its session (zookeeper.session.timeout.ms,
# 18 s by default; ZooKeeper may round it up to 20 ticks).
SESSION_EXPIRY_WAIT_S = 90.0
ZOOKEEPER_CONNECT_S = 10.0


def parse_engine(engine: str) -> str:
    """`insync`, `kafka`, `kafka:4.1`, `kafka:3.9.1` -> `insync` or `kafka:<exact version>`."""
    name, _, version = engine.partition(":")
    if name == ENGINE_INSYNC and not version:
        return ENGINE_INSYNC
    if name != "kafka":
        raise ConfigError(f"--engine must be insync or kafka[:VERSION], got {engine!r}")
    return f"kafka:{kafka_dist.resolve_version(version)}"


def engine_version(engine: str) -> str:
    assert engine.startswith("kafka:"), engine
    return engine.split(":", 1)[1]


def dist_for(engine: str) -> kafka_dist.KafkaDist:
    """The assembled release an engine runs (assembled now if it is not in the cache yet)."""
    return kafka_dist.assemble(engine_version(engine))


def roles_for(dist: kafka_dist.KafkaDist, is_controller: bool) -> str:
    if not is_controller:
        return "broker"
    return "controller" if dist.kraft_only else ZOOKEEPER_ROLE


def check_layout(dist: kafka_dist.KafkaDist, controllers: int, overrides: Mapping[str, str]) -> None:
    if not dist.kraft_only and controllers != 1:
        raise ConfigError(f"--controllers {controllers} with Kafka {dist.version}: a ZooKeeper-mode cluster here "
                          "has one ZooKeeper server and elects its controller among the brokers")
    for key in ("node.id", "broker.id", "process.roles", "listeners", "log.dirs", "controller.quorum.voters"):
        if key in overrides:
            raise ConfigError(f"--config {key}: the launcher sets it for each node")


def node_properties(dist: kafka_dist.KafkaDist, node_id: int, roles: str, address: str, log_dir: Path,
                    voters: str, zookeeper: str, brokers: int, security: str) -> dict[str, str]:
    """One node's server.properties before `--config` overrides: ids, listeners, quorum, and the replication
    factors of the internal topics a cluster of `brokers` can hold (Kafka's quickstart does the same)."""
    if roles == ZOOKEEPER_ROLE:
        host, port = address.rsplit(":", 1)
        return {"dataDir": str(log_dir), "clientPort": port, "clientPortAddress": host, "maxClientCnxns": "0",
                "admin.enableServer": "false", "4lw.commands.whitelist": "ruok,srvr,stat"}
    name = secure.listener_name(security, roles == "controller")
    protocol = "PLAINTEXT" if security == "plaintext" else security.upper()
    properties = {"log.dirs": str(log_dir), "listeners": f"{name}://{address}",
                  "listener.security.protocol.map": f"CONTROLLER:{protocol},{name}:{protocol}"}
    if roles == "broker":
        replicas = str(min(3, brokers))
        properties.update({"advertised.listeners": f"{name}://{address}", "inter.broker.listener.name": name,
                           "offsets.topic.replication.factor": replicas,
                           "transaction.state.log.replication.factor": replicas,
                           "transaction.state.log.min.isr": str(min(2, brokers)),
                           "default.replication.factor": replicas, "group.initial.rebalance.delay.ms": "0"})
    if dist.kraft_only:
        properties.update({"node.id": str(node_id), "process.roles": roles, "controller.quorum.voters": voters,
                           "controller.listener.names": "CONTROLLER"})
    else:
        properties.update({"broker.id": str(node_id), "zookeeper.connect": zookeeper,
                           "listener.security.protocol.map": f"{name}:{protocol}"})
    if security != "plaintext":
        properties.update(_security_properties(security, roles))
    return properties


def _security_properties(security: str, roles: str) -> dict[str, str]:
    """What Kafka needs beyond insync's secured settings (chaos/secure.py): PEM stores are typed, and SASL names
    its mechanisms: insync's (PLAIN for the nodes, SCRAM for users added later) rather than Kafka's GSSAPI."""
    extra = {"ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM"} if security.endswith("ssl") else {}
    if security.startswith("sasl"):
        extra.update({"sasl.enabled.mechanisms": ",".join(("PLAIN", *SCRAM_MECHANISMS)),
                      "sasl.mechanism.controller.protocol": "PLAIN"})
        for listener in {secure.listener_name(security, False), secure.listener_name(security, True)}:
            for mechanism in SCRAM_MECHANISMS:  # Kafka wants a login module for every mechanism it enables
                extra[f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"] = SCRAM_MODULE
        if roles == "broker":
            extra["sasl.mechanism.inter.broker.protocol"] = "PLAIN"
    return extra


def format_storage(dist: kafka_dist.KafkaDist, config_paths: list[Path]) -> str:
    """Format every KRaft node's log dir with one new cluster id (`kafka-storage format`), in parallel; returns
    the id."""
    cluster_id = "-"
    while cluster_id.startswith("-"):  # kafka-storage's parser takes an id starting with '-' for an option
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
    jvm = ("-Xmx128m", *kafka_cds.flags(dist, "format"))
    processes = [subprocess.Popen(["java", *jvm, "-cp", dist.classpath, "kafka.tools.StorageTool", "format",
                                   "-t", cluster_id, "-c", str(path)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                 for path in config_paths]
    failures = []
    for path, process in zip(config_paths, processes, strict=True):
        try:
            output, _ = process.communicate(timeout=FORMAT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
        if process.returncode != 0:
            failures.append(f"{path}: {output.decode(errors='replace').strip()[-400:]}")
    if failures:
        raise ConfigError("kafka-storage format failed:\n" + "\n".join(failures))
    return cluster_id


def node_command(dist: kafka_dist.KafkaDist, roles: str, directory: Path, jmx_port: int, host: str) -> list[str]:
    """The java command line of one node, started in its directory (logs go there)."""
    _, log_flag = kafka_dist.log_config(dist, directory)
    jmx = ["-Dcom.sun.management.jmxremote", "-Dcom.sun.management.jmxremote.authenticate=false",
           "-Dcom.sun.management.jmxremote.ssl=false", f"-Dcom.sun.management.jmxremote.port={jmx_port}",
           f"-Dcom.sun.management.jmxremote.rmi.port={jmx_port}", f"-Dcom.sun.management.jmxremote.host={host}",
           f"-Djava.rmi.server.hostname={host}"]
    main = ZOOKEEPER_MAIN if roles == ZOOKEEPER_ROLE else "kafka.Kafka"
    shared = kafka_cds.flags(dist, "server") if roles != ZOOKEEPER_ROLE else ()
    return ["java", *HEAP[roles].split(), *JVM_OPTS, *shared, f"-Dkafka.logs.dir={directory}", log_flag, *jmx,
            "-cp", dist.classpath, main, str(directory / CONFIG_FILE_NAME)]


def settings_lines(dist: kafka_dist.KafkaDist) -> list[str]:
    """What `cluster up` prints about a Kafka cluster's nodes."""
    mode = "KRaft" if dist.kraft_only else "ZooKeeper"
    heaps = ", ".join(f"{role} {opts}" for role, opts in HEAP.items()
                      if (role == ZOOKEEPER_ROLE) != dist.kraft_only or role == "broker")
    return [f"Apache Kafka {dist.version} ({mode}) from {dist.libs}",
            f"heaps: {heaps}; JVM: {' '.join(JVM_OPTS)}",
            "each node: server.properties, server.log, controller.log, state-change.log, stdout.log in DIR/node-<id>,"
            " data in DIR/node-<id>/data, JMX on its metrics port"]


class ZooKeeperState:
    """What a ZooKeeper-mode Kafka cluster's controller wrote to ZooKeeper of a topic's partitions (each one's
    leader, leader epoch and ISR in `/brokers/topics/T/partitions/P/state`, a leader without a registration in
    `/brokers/ids` being none): the controller's own view, which stays readable when the brokers cannot be
    reached."""

    def __init__(self, zookeeper: str) -> None:
        from kazoo.client import KazooClient

        self.client = KazooClient(hosts=zookeeper, timeout=ZOOKEEPER_CONNECT_S)
        self.client.start(timeout=ZOOKEEPER_CONNECT_S)

    def partitions(self, topic: str) -> list[PartitionDescription]:
        """The topic's partitions, [] before the controller has written them; a ZooKeeper error is an OSError."""
        from kazoo.exceptions import KazooException

        try:
            assigned = self.client.get(f"/brokers/topics/{topic}")[0] if self.client.exists(
                f"/brokers/topics/{topic}") else None
            if assigned is None:
                return []
            replicas = {int(p): tuple(r) for p, r in json.loads(assigned)["partitions"].items()}
            live = {int(b) for b in self.client.get_children("/brokers/ids")}
            rows = []
            for partition in sorted(replicas):
                path = f"/brokers/topics/{topic}/partitions/{partition}/state"
                if self.client.exists(path):
                    state = json.loads(self.client.get(path)[0])
                    # The controller leaves a dead leader in place when no replica of the ISR is alive: offline.
                    leader = int(state["leader"]) if int(state["leader"]) in live else -1
                    rows.append(PartitionDescription(topic, "", partition, leader,
                                                     int(state["leader_epoch"]), replicas[partition],
                                                     tuple(state["isr"]), (), (), ()))
            return rows
        except KazooException as e:
            raise OSError(f"ZooKeeper: {e!r}") from e

    def wait_registration_gone(self, broker_id: int, timeout_s: float = SESSION_EXPIRY_WAIT_S) -> None:
        """Wait for a broker's old registration (the ephemeral `/brokers/ids/N` of a session that was never
        closed, after a kill) to expire: a broker started before that dies of NodeExists at start-up, so a restart
        waits as an operator's supervisor would retry."""
        wait_until(lambda: self.client.exists(f"/brokers/ids/{broker_id}") is None, timeout_s,
                   f"broker {broker_id}'s old ZooKeeper session to expire", interval_s=0.2)

    def close(self) -> None:
        self.client.stop()
        self.client.close()
