"""A local cluster of real insync processes: lay it out, start it, find it again, stop it.

`insync cluster up --brokers N --dir DIR` writes one `server.properties` per node under `DIR/node-<id>/`, starts
a controller (node 0) and N brokers (nodes 1..N) as separate `insync broker start` processes on 127.0.0.1, and
records them in `DIR/cluster.json` (ids, roles, ports, pids), so every later command finds a cluster by its
directory alone. `--controllers K` (K > 1 needs `metadata.store=zookeeper`) adds standby controllers 1001..;
`--security ssl` makes every listener TLS with client certificates (chaos/secure.py), the operator's settings in
`DIR/client.properties`; `--netns` (root, iproute2, nftables) runs every node in its own network namespace
(`chaos/netns.py`) so `insync chaos partition ...` can cut links, and `down` (or a failed `up`) deletes them.
Ports: brokers listen on `port + id - 1`, controllers on `port + N`, `port + N + 1`, ..., and each node's
Prometheus endpoint on `port + 100 + id`; `port=0` picks free ports (tests). Processes are started in their own
session so a test's Ctrl-C does not reach them, and stopped with SIGTERM, then SIGKILL after a deadline.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from insync import command_config
from insync.chaos import clock_step, kafka_cluster, kafka_dist, netns, secure
from insync.config import BrokerConfig, ConfigError
from insync.properties import parse_overrides
from insync.waiting import WaitTimeout, wait_until

CLUSTER_FILE = "cluster.json"
CONTROLLER_ID = 0
STANDBY_CONTROLLER_IDS_FROM = 1000  # controllers 2..N are nodes 1001, 1002, ... (brokers are 1..brokers)
STOP_DEADLINE_S = 10.0
START_DEADLINE_S = 30.0
# A Kafka broker listens once it has registered: after a kill it recovers its logs and waits for its old session
# to end first, on a JVM that starts slowly on two loaded cores.
KAFKA_START_DEADLINE_S = 120.0
REGISTRATION_DEADLINE_S = 60.0
PORT_TAKEN_RETRIES = 2  # new starts of a cluster whose picked port another process took first
PORT_TAKEN_TAIL_BYTES = 16 * 1024  # of a node's stdout.log, read for the bind error
METADATA_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class NodeSpec:
    node_id: int
    roles: str
    port: int
    metrics_port: int
    directory: str
    pid: int | None = None
    host: str = "127.0.0.1"  # its namespace's address with --netns

    @property
    def config_path(self) -> Path:
        return Path(self.directory) / "server.properties"

    @property
    def log_dir(self) -> Path:
        return Path(self.directory) / "data"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    directory: str
    nodes: tuple[NodeSpec, ...]
    overrides: Mapping[str, str] = field(default_factory=dict)
    network: netns.Network | None = None  # with --netns
    security: str = "plaintext"  # `--security` (chaos/secure.py)
    engine: str = kafka_cluster.ENGINE_INSYNC  # or `kafka:<version>` (chaos/kafka_cluster.py)
    clock_steps: bool = False  # every node's wall clock steppable (chaos/clock_step.py)

    @property
    def start_deadline_s(self) -> float:
        """How long a node of this cluster may take to listen once started."""
        return START_DEADLINE_S if self.engine == kafka_cluster.ENGINE_INSYNC else KAFKA_START_DEADLINE_S

    @property
    def controller(self) -> NodeSpec:
        return next(n for n in self.nodes if n.node_id == CONTROLLER_ID)

    @property
    def controllers(self) -> tuple[NodeSpec, ...]:
        """Every controller: node 0 first, then the others (with metadata.store=zookeeper)."""
        return tuple(n for n in self.nodes if n.roles == "controller")

    @property
    def brokers(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.roles not in ("controller", kafka_cluster.ZOOKEEPER_ROLE))

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def client_settings(self) -> dict[str, str]:
        """The operator's client settings (`DIR/client.properties`); none for a plaintext cluster."""
        if self.security == "plaintext":
            return {}
        return command_config.load(Path(self.directory) / secure.CLIENT_PROPERTIES)

    def node(self, node_id: int) -> NodeSpec:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise ConfigError(f"no node {node_id} in the cluster at {self.directory}")

    def with_pid(self, node_id: int, pid: int | None) -> ClusterSpec:
        nodes = tuple(dataclasses.replace(n, pid=pid) if n.node_id == node_id else n for n in self.nodes)
        return dataclasses.replace(self, nodes=nodes)

    def save(self) -> None:
        path = Path(self.directory) / CLUSTER_FILE
        tmp = path.with_suffix(".tmp")
        network = None if self.network is None else self.network.to_json()
        _write_private(tmp, json.dumps({"directory": self.directory, "overrides": dict(self.overrides),
                                   "nodes": [asdict(n) for n in self.nodes], "network": network,
                                   "security": self.security, "engine": self.engine,
                                   "clock_steps": self.clock_steps}, indent=2))
        tmp.replace(path)

    @classmethod
    def load(cls, directory: str | Path) -> ClusterSpec:
        path = Path(directory) / CLUSTER_FILE
        if not path.exists():
            raise ConfigError(f"no cluster at {directory}: {path} does not exist (run `insync cluster up`)")
        try:
            data = json.loads(path.read_text())
            nodes = tuple(NodeSpec(**n) for n in data["nodes"])
            network = None if data.get("network") is None else netns.Network.from_json(data["network"])
            return cls(str(data["directory"]), nodes, dict(data.get("overrides", {})), network,
                       str(data.get("security", "plaintext")), str(data.get("engine", kafka_cluster.ENGINE_INSYNC)),
                       bool(data.get("clock_steps", False)))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path} is not a cluster description: {exc}") from None


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner reads: a secured cluster's overrides and node configs hold the JAAS passwords."""
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(text)


EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
PICKED_PORTS_LOW = 10_000  # free ports are picked from here up to the kernel's ephemeral range
PICKED_PORTS_ROOM_MIN = 1_000  # less room than this below the ephemeral range: the kernel picks instead
PORT_PICKS_MAX = 1_000


def free_ports(count: int) -> list[int]:
    """`count` distinct ports nothing is bound to on 127.0.0.1, for nodes to listen on. Picked at random below the
    kernel's ephemeral range where there is room: a port the kernel hands out (bind to port 0) comes from that
    range, from which it also gives every outgoing connection its local port, so a client (any test's, in parallel)
    could take it before the node binds it, and the node exits with `address already in use`."""
    low = _ephemeral_low()
    if low is not None and low - PICKED_PORTS_LOW >= PICKED_PORTS_ROOM_MIN:
        pick = random.SystemRandom()
        picked: list[int] = []
        for _ in range(PORT_PICKS_MAX):  # bounded; nearly every pick is free
            port = pick.randrange(PICKED_PORTS_LOW, low)
            if port not in picked and _bindable(port):
                picked.append(port)
                if len(picked) == count:
                    return picked
    return _kernel_ports(count)


def _ephemeral_low(path: str = EPHEMERAL_RANGE_FILE) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kernel_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def layout(directory: str | Path, brokers: int, port: int, overrides: Sequence[str] = (), controllers: int = 1,
           network: netns.Network | None = None, security: str = "plaintext",
           engine: str = kafka_cluster.ENGINE_INSYNC) -> ClusterSpec:
    """Plan a cluster and write each node's server.properties; validates the overrides first. With `network`,
    each node listens on its namespace's address. With a Kafka `engine`, the nodes are Kafka's
    (chaos/kafka_cluster.py)."""
    if brokers < 1:
        raise ConfigError(f"--brokers must be at least 1, got {brokers}")
    extra = parse_overrides(overrides)
    if controllers < 1:
        raise ConfigError(f"--controllers must be at least 1, got {controllers}")
    dist = None if engine == kafka_cluster.ENGINE_INSYNC else kafka_cluster.dist_for(engine)
    if dist is not None:
        kafka_cluster.check_layout(dist, controllers, extra)
    elif controllers > 1 and extra.get("metadata.store") != "zookeeper":
        raise ConfigError(f"--controllers {controllers} needs metadata.store=zookeeper (and zookeeper.connect): "
                          "the local metadata store serves one controller")
    root = Path(directory).resolve()
    controller_ids = _controller_ids(controllers)
    ids = [*controller_ids, *range(1, brokers + 1)]
    if port == 0:
        ports = free_ports(2 * len(ids))
        node_ports = {node_id: ports[i] for i, node_id in enumerate(ids)}
        metric_ports = {node_id: ports[len(ids) + i] for i, node_id in enumerate(ids)}
    else:
        node_ports = {i: port + i - 1 for i in range(1, brokers + 1)}
        node_ports.update({node_id: port + brokers + i for i, node_id in enumerate(controller_ids)})
        metric_ports = {node_id: port + 100 + node_id for node_id in ids}
    hosts = dict(network.addresses) if network is not None else {}
    nodes = [NodeSpec(node_id, _roles(dist, node_id in controller_ids), node_ports[node_id],
                      metric_ports[node_id], str(root / f"node-{node_id}"), None, hosts.get(node_id, "127.0.0.1"))
             for node_id in sorted(ids)]
    root.mkdir(parents=True, exist_ok=True)
    secured = secure.prepare(security, root, sorted({"localhost", *(node.host for node in nodes)}))
    spec = ClusterSpec(str(root), tuple(nodes), {**secured, **extra}, network, security, engine)
    for node in spec.nodes:
        if dist is None:
            properties = _properties(spec, node)
            BrokerConfig(properties)  # an unknown key or bad value fails here, before anything starts
        else:
            properties = _kafka_properties(spec, node, dist)
        Path(node.directory).mkdir(parents=True, exist_ok=True)
        _write_private(node.config_path, "".join(f"{k}={v}\n" for k, v in properties.items()))
    spec.save()
    return spec


def _roles(dist: kafka_dist.KafkaDist | None, is_controller: bool) -> str:
    if dist is not None:
        return kafka_cluster.roles_for(dist, is_controller)
    return "controller" if is_controller else "broker"


def _kafka_properties(spec: ClusterSpec, node: NodeSpec, dist: kafka_dist.KafkaDist) -> dict[str, str]:
    voters = ",".join(f"{c.node_id}@{c.address}" for c in spec.controllers)
    properties = kafka_cluster.node_properties(dist, node.node_id, node.roles, node.address, node.log_dir, voters,
                                               spec.controller.address, len(spec.brokers), spec.security)
    if node.roles != kafka_cluster.ZOOKEEPER_ROLE:
        properties.update(spec.overrides)
    return properties


def _controller_ids(controllers: int) -> list[int]:
    return [CONTROLLER_ID, *range(STANDBY_CONTROLLER_IDS_FROM + 1, STANDBY_CONTROLLER_IDS_FROM + controllers)]


def _properties(spec: ClusterSpec, node: NodeSpec) -> dict[str, str]:
    is_controller = node.roles == "controller"
    listener_key = "controller.listener" if is_controller else "listeners"
    listener_name = secure.listener_name(spec.security, is_controller)
    properties = {
        "node.id": str(node.node_id),
        "process.roles": node.roles,
        listener_key: f"{listener_name}://{node.address}",
        "controller.quorum.voters": ",".join(f"{c.node_id}@{c.address}" for c in spec.controllers),
        "log.dirs": str(node.log_dir),
        "metrics.port": str(node.metrics_port),
        # Kafka's default of 3 leaves a smaller cluster without a group coordinator (its quickstart sets 1).
        "offsets.topic.replication.factor": str(min(3, len(spec.brokers))),
        # The same for __transaction_state, as Kafka's quickstart configuration sets both.
        "transaction.state.log.replication.factor": str(min(3, len(spec.brokers))),
        "transaction.state.log.min.isr": str(min(2, len(spec.brokers))),
        # Auto-created topics get the same: replicated where the cluster can, creatable in a 1-broker one.
        "default.replication.factor": str(min(3, len(spec.brokers))),
    }
    properties.update(spec.overrides)
    return properties


def start_node(spec: ClusterSpec, node_id: int) -> ClusterSpec:
    node = spec.node(node_id)
    if node.pid is not None and pid_alive(node.pid):
        raise ConfigError(f"node {node_id} is already running (pid {node.pid})")
    stdout = open(Path(node.directory) / "stdout.log", "ab")  # noqa: SIM115 - handed to the child
    try:
        in_namespace = netns.exec_prefix(spec.network, node_id) if spec.network is not None else []
        env = clock_step.environment(node.directory) if spec.clock_steps else None
        process = subprocess.Popen(  # `ip netns exec` execs the command: the pid is the node's
            [*in_namespace, *_node_command(spec, node)],
            stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            cwd=node.directory, env=env)
    finally:
        stdout.close()
    updated = spec.with_pid(node_id, process.pid)
    updated.save()
    return updated


def _node_command(spec: ClusterSpec, node: NodeSpec) -> list[str]:
    if spec.engine == kafka_cluster.ENGINE_INSYNC:
        return [sys.executable, "-m", "insync.cli.main", "broker", "start", "--config", str(node.config_path)]
    return kafka_cluster.node_command(kafka_cluster.dist_for(spec.engine), node.roles, Path(node.directory),
                                      node.metrics_port, node.host)


def wait_listening(node: NodeSpec, deadline_s: float = START_DEADLINE_S) -> None:
    wait_port(node.port, deadline_s, node.pid, f"node {node.node_id} (see {Path(node.directory) / 'stdout.log'})",
              node.host)


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on `host`:`port` now (of several controllers, only the active one
    listens)."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def wait_port(port: int, deadline_s: float, pid: int | None = None, what: str = "the process",
              host: str = "127.0.0.1") -> None:
    """Until something accepts connections on `host`:`port`; fails early if `pid` exits."""
    def accepting() -> bool:
        if pid is not None and not pid_alive(pid):
            raise RuntimeError(f"{what} exited before listening on port {port}")
        with socket.create_connection((host, port), timeout=0.5):
            return True

    wait_until(accepting, deadline_s, f"{what} listening on {host}:{port}", interval_s=0.1, retry_on=(OSError,))


def stop_node(spec: ClusterSpec, node_id: int, deadline_s: float = STOP_DEADLINE_S,
              sig: int = signal.SIGTERM) -> ClusterSpec:
    """Graceful stop (SIGTERM), then SIGKILL once the deadline passes. SIGKILL straight away for `kill`."""
    node = spec.node(node_id)
    if node.pid is not None and pid_alive(node.pid):
        _signal(node.pid, sig)
        _reap(node.pid, deadline_s)
        if pid_alive(node.pid):
            _signal(node.pid, signal.SIGKILL)
            _reap(node.pid, 5.0)
    updated = spec.with_pid(node_id, None)
    updated.save()
    return updated


def signal_node(spec: ClusterSpec, node_id: int, sig: int) -> None:
    node = spec.node(node_id)
    if node.pid is None or not pid_alive(node.pid):
        raise ConfigError(f"node {node_id} is not running")
    _signal(node.pid, sig)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _reap(pid: int, timeout_s: float) -> None:
    """Until `pid` has exited (and is reaped, if it is our child), at most `timeout_s`."""
    with contextlib.suppress(WaitTimeout):
        wait_until(lambda: not pid_alive(pid), timeout_s, f"process {pid} exited", interval_s=0.05)


def pid_alive(pid: int) -> bool:
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
        if finished == pid:
            return False
    except ChildProcessError:
        pass  # not our child: fall through to the signal probe
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def up(directory: str, brokers: int, port: int, overrides: list[str], controllers: int = 1,
       namespaces: bool = False, security: str = "plaintext", engine: str = kafka_cluster.ENGINE_INSYNC,
       clock_steps: bool = False) -> ClusterSpec:
    """Start a cluster and wait until every broker is registered and visible in metadata. Controller 0 starts
    first and is the active one; any others start after it listens, as standbys. With `namespaces`, each node
    in its own network namespace. With a Kafka `engine`, Kafka's nodes (KRaft log dirs formatted first). With
    `clock_steps`, every node's wall clock can be stepped (chaos/clock_step.py). Whatever fails, nothing started
    is left behind. With picked ports (`port` 0), a node that found its port taken is started again, the whole
    cluster on new ports: between the pick and the bind, another process (a parallel test's cluster) may take it."""
    fresh = not any(Path(directory).glob("node-*"))  # a cluster's own data is never removed to start again
    for _ in range(PORT_TAKEN_RETRIES):  # bounded
        try:
            return _up(directory, brokers, port, overrides, controllers, namespaces, security, engine, clock_steps)
        except Exception:
            if not (fresh and port == 0 and _port_was_taken(Path(directory))):
                raise
        _forget_nodes(Path(directory))
    return _up(directory, brokers, port, overrides, controllers, namespaces, security, engine, clock_steps)


def _port_was_taken(directory: Path) -> bool:
    """Whether a node of the cluster in `directory` exited because its port was taken (its log says so)."""
    for log in directory.glob("node-*/stdout.log"):
        with contextlib.suppress(OSError), log.open("rb") as f:
            f.seek(max(0, log.stat().st_size - PORT_TAKEN_TAIL_BYTES))
            if b"Address already in use" in f.read():
                return True
    return False


def _forget_nodes(directory: Path) -> None:
    """Remove what a failed start of a new cluster left in `directory` (its stopped nodes' directories)."""
    for node_dir in directory.glob("node-*"):
        shutil.rmtree(node_dir, ignore_errors=True)
    (directory / CLUSTER_FILE).unlink(missing_ok=True)


def _up(directory: str, brokers: int, port: int, overrides: list[str], controllers: int, namespaces: bool,
        security: str, engine: str, clock_steps: bool) -> ClusterSpec:
    engine = kafka_cluster.parse_engine(engine)
    network = _make_network(overrides, [*_controller_ids(controllers), *range(1, brokers + 1)]) if namespaces else None
    try:
        spec = dataclasses.replace(layout(directory, brokers, port, overrides, controllers, network, security, engine),
                                   clock_steps=clock_steps)
        spec.save()
        if engine != kafka_cluster.ENGINE_INSYNC and kafka_cluster.dist_for(engine).kraft_only:
            kafka_cluster.format_storage(kafka_cluster.dist_for(engine),
                                         [n.config_path for n in spec.nodes])
    except BaseException:
        if network is not None:
            netns.destroy(network)
        raise
    try:
        spec = start_node(spec, CONTROLLER_ID)
        wait_listening(spec.controller, spec.start_deadline_s)
        for standby in spec.controllers[1:]:
            spec = start_node(spec, standby.node_id)
        for broker in spec.brokers:
            spec = start_node(spec, broker.node_id)
        for broker in spec.brokers:
            wait_listening(broker, spec.start_deadline_s)
        wait_registered(spec, REGISTRATION_DEADLINE_S)
    except BaseException:
        down(ClusterSpec.load(spec.directory), STOP_DEADLINE_S)
        raise
    return spec


def _make_network(overrides: Sequence[str], node_ids: list[int]) -> netns.Network:
    reason = netns.unavailable()
    if reason is not None:
        raise ConfigError(f"--netns: {reason}")
    if parse_overrides(overrides).get("metadata.store") == "zookeeper":
        raise ConfigError("--netns does not work with metadata.store=zookeeper: the ZooKeeper server listens on "
                          "the root namespace's 127.0.0.1, which no node's namespace reaches")
    return netns.create(node_ids)


def wait_registered(spec: ClusterSpec, deadline_s: float) -> None:
    from confluent_kafka.admin import AdminClient

    # Each broker is asked on its own: a broker cut off a moment ago may still list itself and its peers from a stale
    # image while the controller has it fenced, and a create would then find too few brokers.
    admins = [AdminClient({**spec.client_settings(), "bootstrap.servers": b.address}) for b in spec.brokers]
    wanted = {b.node_id for b in spec.brokers}
    seen: set[int] = set()

    def registered() -> bool:
        nonlocal seen
        # A broker that exited (its port taken by something else after it was picked, say) never registers: fail
        # now, naming its log, rather than at the deadline.
        for node in spec.nodes:
            if node.pid is not None and not pid_alive(node.pid):
                raise RuntimeError(f"node {node.node_id} exited before the brokers registered "
                                   f"(see {Path(node.directory) / 'stdout.log'})")
        try:
            views = [set(admin.list_topics(timeout=METADATA_TIMEOUT_S).brokers) for admin in admins]
        except Exception:
            views = [set()]
        seen = set.intersection(*views)
        return seen >= wanted

    wait_until(registered, deadline_s,
               lambda: f"brokers {sorted(wanted - seen)} registered; last lines: {_last_lines(spec)}")


def _last_lines(spec: ClusterSpec, lines: int = 3, tail_bytes: int = 2048) -> str:
    """Each node's last few log lines, to say why a cluster did not come up where nothing but the error is kept."""
    parts = []
    for node in spec.nodes:
        try:
            with open(Path(node.directory) / "stdout.log", "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - tail_bytes))
                text = f.read().decode("utf-8", "replace")
        except OSError as exc:
            text = f"(no log: {exc})"
        parts.append(f"node {node.node_id}: " + " | ".join(text.strip().splitlines()[-lines:]))
    return "; ".join(parts)


def down(spec: ClusterSpec, deadline_s: float) -> ClusterSpec:
    """Brokers first (all at once: each checkpoints and closes its logs), then the controller; then the
    namespaces, if any, whatever happened before."""
    try:
        for broker in spec.brokers:
            if broker.pid is not None and pid_alive(broker.pid):
                signal_node(spec, broker.node_id, signal.SIGTERM)
        for broker in spec.brokers:
            spec = stop_node(spec, broker.node_id, deadline_s)
        for controller in spec.controllers[1:]:  # standbys first: stopping the active one would promote one
            spec = stop_node(spec, controller.node_id, deadline_s)
        return stop_node(spec, CONTROLLER_ID, deadline_s)
    finally:
        if spec.network is not None:
            netns.destroy(spec.network)
            (Path(spec.directory) / netns.FAULTS_FILE).unlink(missing_ok=True)
