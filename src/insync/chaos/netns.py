"""Network namespaces for a local cluster: one per node on a bridge, and the faults `partitions.py` describes.

`create(node_ids)` draws a run id and makes a bridge `isy<run>br` in the root namespace with `198.18.<k>.1/24`
(RFC 2544's benchmarking range: never routed; `k` is the first /24 no interface of this machine has, chosen under
a file lock), and per node a namespace `isy<run>n<id>` holding `eth0` (a veth pair to the bridge). Clients stay in
the root namespace and reach every node through the bridge. Every name starts with `isy<run>` so
`destroy(network)` removes exactly what `create` made. `install(network, faults)` puts a `NetFaults` in place (an
nft table dropping what arrives from cut-off nodes, netem and tbf qdiscs on `eth0`, and on the veth's root end a
tbf for the ingress limit and netem for an incoming delay), replacing whatever was there, so `install(network,
NetFaults())` heals everything. Without netem in the kernel, latency, jitter and loss are made in user space
(`chaos/nfqueue_ctl.py`), and refused by name before anything changes when iptables-legacy is missing too.

Needs root, iproute2 (`ip`, `tc`) and nftables (`nft`); `unavailable()` says what is missing.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import ipaddress
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from insync.chaos import nfqueue_ctl
from insync.chaos.partitions import NetFaults, Shape, nft_script, tc_commands
from insync.config import ConfigError

PREFIX = "isy"
FAULTS_FILE = "network-faults.json"  # in the cluster directory: the NetFaults in place (chaos/network.py)
LOCK_FILE = "/run/lock/insync-netns.lock" if os.path.isdir("/run/lock") else "/tmp/insync-netns.lock"
SUPERNET = ipaddress.IPv4Network("198.18.0.0/16")
FIRST_HOST = 10  # node addresses are .10, .11, ... in id order; .1 is the bridge (the root namespace's side)
COMMAND_TIMEOUT_S = 10.0
NODES_MAX = 200


@dataclass(frozen=True, slots=True)
class Network:
    run: str
    subnet: str  # "198.18.k.0/24"
    addresses: Mapping[int, str]  # node id -> its address

    @property
    def bridge(self) -> str:
        return f"{PREFIX}{self.run}br"

    def namespace(self, node_id: int) -> str:
        return f"{PREFIX}{self.run}n{node_id}"

    @property
    def bridge_address(self) -> str:
        """The root namespace's address on the bridge: where clients' packets to the nodes come from."""
        return str(next(ipaddress.IPv4Network(self.subnet).hosts()))

    def host_end(self, node_id: int) -> str:
        """The root namespace's end of the node's veth pair (on the bridge): what it sends, the node receives."""
        return f"{PREFIX}{self.run}h{node_id}"

    def to_json(self) -> dict[str, object]:
        return {"run": self.run, "subnet": self.subnet, "addresses": {str(k): v for k, v in self.addresses.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Network:
        addresses = data["addresses"]
        assert isinstance(addresses, dict)
        return cls(str(data["run"]), str(data["subnet"]), {int(k): str(v) for k, v in addresses.items()})


def _run(*argv: str, stdin: str | None = None) -> str:
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except FileNotFoundError:
        raise ConfigError(f"{argv[0]} is not installed (network namespaces need iproute2 and nftables)") from None
    if done.returncode != 0:
        raise ConfigError(f"`{' '.join(argv)}` failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def unavailable() -> str | None:
    """Why this machine cannot make the namespaced network, or None when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    missing = [tool for tool in ("ip", "tc", "nft") if shutil.which(tool) is None]
    if missing:
        return f"network namespaces need iproute2 and nftables: {', '.join(missing)} not found"
    probe = f"{PREFIX}probe{uuid.uuid4().hex[:6]}"
    try:
        _run("ip", "netns", "add", probe)
    except ConfigError as exc:
        return f"cannot create a network namespace: {exc}"
    with contextlib.suppress(ConfigError):
        _run("ip", "netns", "delete", probe)
    return None


def _free_subnet() -> ipaddress.IPv4Network:
    used = set()
    for line in _run("ip", "-o", "-4", "addr", "show").splitlines():
        for token in line.split():
            with contextlib.suppress(ValueError):
                used.add(ipaddress.ip_interface(token).network)
    for subnet in SUPERNET.subnets(new_prefix=24):
        if not any(subnet.overlaps(u) for u in used):
            return subnet
    raise ConfigError(f"no free /24 left in {SUPERNET} for another namespaced cluster")


def create(node_ids: Iterable[int]) -> Network:
    """The bridge and one namespace per node (see the module docstring); undone in full if any step fails."""
    ids = sorted(node_ids)
    assert 0 < len(ids) <= NODES_MAX
    run = uuid.uuid4().hex[:6]
    bridge = f"{PREFIX}{run}br"
    try:
        # Two clusters made at once must not both take the first free /24: the choice and the bridge address
        # that marks it taken happen under one lock.
        with open(LOCK_FILE, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            subnet = _free_subnet()
            hosts = list(subnet.hosts())
            _run("ip", "link", "add", bridge, "type", "bridge")
            _run("ip", "addr", "add", f"{hosts[0]}/{subnet.prefixlen}", "dev", bridge)
    except BaseException:
        with contextlib.suppress(ConfigError):
            _run("ip", "link", "delete", bridge)
        raise
    network = Network(run, str(subnet), {node_id: str(hosts[FIRST_HOST - 1 + i]) for i, node_id in enumerate(ids)})
    assert network.bridge == bridge
    try:
        _run("ip", "link", "set", network.bridge, "up")
        for node_id in ids:
            _add_node(network, node_id, subnet.prefixlen)
    except BaseException:
        destroy(network)
        raise
    return network


def _add_node(network: Network, node_id: int, prefixlen: int) -> None:
    namespace, host_end, node_end = (network.namespace(node_id), network.host_end(node_id),
                                     f"{PREFIX}{network.run}c{node_id}")
    _run("ip", "netns", "add", namespace)
    _run("ip", "link", "add", host_end, "type", "veth", "peer", "name", node_end)
    _run("ip", "link", "set", node_end, "netns", namespace)
    _run("ip", "-n", namespace, "link", "set", node_end, "name", "eth0")
    _run("ip", "-n", namespace, "addr", "add", f"{network.addresses[node_id]}/{prefixlen}", "dev", "eth0")
    _run("ip", "-n", namespace, "link", "set", "eth0", "up")
    _run("ip", "-n", namespace, "link", "set", "lo", "up")
    _run("ip", "link", "set", host_end, "master", network.bridge)
    _run("ip", "link", "set", host_end, "up")


def destroy(network: Network) -> None:
    """Delete the run's namespaces (their veth pairs go with them), its veth ends and its bridge; what is already
    gone is skipped, so it is safe to call twice or after a half-made `create`."""
    mine = f"{PREFIX}{network.run}"
    for line in _run("ip", "netns", "list").splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(mine):
            with contextlib.suppress(ConfigError):  # a daemon left in it would keep the namespace alive
                _stop_daemons(name)
            with contextlib.suppress(ConfigError):
                _run("ip", "netns", "delete", name)
    for link in json.loads(_run("ip", "-j", "link", "show") or "[]"):
        name = str(link.get("ifname", ""))
        if name.startswith(mine):
            with contextlib.suppress(ConfigError):
                _run("ip", "link", "delete", name)


def exec_prefix(network: Network, node_id: int) -> list[str]:
    """What runs a command in node `node_id`'s namespace."""
    return ["ip", "netns", "exec", network.namespace(node_id)]


def install(network: Network, faults: NetFaults, log_dir: str | None = None) -> None:
    """Make the namespaces drop and shape traffic as `faults` says, replacing what they did before. The latency
    daemons (no netem) write to `log_dir` (default: the temporary directory)."""
    netem = check_supported(network, faults)
    _install_delays(network, {} if netem else faults.shapes, Path(log_dir or tempfile.gettempdir()))
    for node_id in network.addresses:
        namespace = network.namespace(node_id)
        _run("ip", "netns", "exec", namespace, "nft", "-f", "-",
             stdin=nft_script(node_id, faults.drops, network.addresses))
        _run_tc(["ip", "netns", "exec", namespace], tc_commands(faults.shapes.get(node_id, Shape()), netem=netem))
        _run_tc([], tc_commands(faults.received(node_id), device=network.host_end(node_id), netem=netem))


def _pids(namespace: str) -> list[int]:
    return [int(pid) for pid in _run("ip", "netns", "pids", namespace).split()]


def _install_delays(network: Network, shapes: Mapping[int, Shape], log_dir: Path) -> None:
    """The latency daemons and their iptables rules in each namespace (nfqueue_ctl): daemons no longer wanted
    stopped (each lets its held packets go), missing ones started, then the rules written whole."""
    rules = nfqueue_ctl.unavailable() is None
    for node_id, wanted in nfqueue_ctl.plan(network.addresses, shapes).items():
        namespace = network.namespace(node_id)
        kept = _stop_daemons(namespace, keep=list(wanted.values()))
        for source, args in wanted.items():
            if args not in kept:
                nfqueue_ctl.start(exec_prefix(network, node_id), args, log_dir / f"nfqueue-{source}-to-{node_id}.log")
        if rules:
            # Emptying tables a kernel without legacy iptables (CONFIG_IP_NF_IPTABLES_LEGACY) cannot have is
            # no error: every other fault must still install and heal there.
            with contextlib.suppress(*(() if wanted else (ConfigError,))):
                _run("ip", "netns", "exec", namespace, nfqueue_ctl.IPTABLES_RESTORE,
                     stdin=nfqueue_ctl.iptables_input({q: network.addresses.get(q, network.bridge_address)
                                                       for q in wanted}))


def _stop_daemons(namespace: str, keep: Collection[nfqueue_ctl.Args] = ()) -> list[nfqueue_ctl.Args]:
    """Stop the namespace's latency daemons but those doing one of `keep`; what those do."""
    running = nfqueue_ctl.running(_pids(namespace))
    nfqueue_ctl.stop([pid for pid, args in running.items() if args not in keep], lambda: _pids(namespace))
    return [args for args in running.values() if args in keep]


def _run_tc(prefix: list[str], commands: list[list[str]]) -> None:
    """`tc_commands`' removal of the root qdisc (none of ours may be there), then the rest."""
    with contextlib.suppress(ConfigError):
        _run(*prefix, *commands[0])
    for command in commands[1:]:
        _run(*prefix, *command)


def check_supported(network: Network, faults: NetFaults) -> bool:
    """Whether netem makes the shapes' delays and losses (False: none needs it, or this kernel has no netem,
    often left out of small kernels (CONFIG_NET_SCH_NETEM), and the nfqueue daemons make them). Refuses, before
    anything changes, what neither can make here."""
    if not any(shape.needs_netem for shape in faults.shapes.values()):
        return False
    if _has_netem(network.namespace(next(iter(network.addresses)))):
        return True
    reason = nfqueue_ctl.unavailable()
    if reason is not None:
        raise ConfigError("this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM) and latency, jitter and loss "
                          f"cannot be made in user space either: {reason}; random loss can, through nft "
                          "(`loss`, `one-way --percent`)")
    return False


@functools.cache
def _has_netem(namespace: str) -> bool:
    """Tried on the namespace's loopback (the kernel does not change while this process runs)."""
    try:
        _run("ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "0ms")
    except ConfigError:
        return False
    _run("ip", "netns", "exec", namespace, "tc", "qdisc", "del", "dev", "lo", "root")
    return True
