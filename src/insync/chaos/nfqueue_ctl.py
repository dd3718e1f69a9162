"""Latency, jitter and loss where the kernel has no netem: iptables rules and the daemons of `chaos/nfqueue.py`.

A node's shape (`partitions.Shape`: delay, jitter, loss) is made where its packets arrive, as the drops are: in
each peer's namespace an `iptables-legacy` rule sends what comes from the shaped node's address to NFQUEUE number
`<shaped node id>`, and a daemon there holds each packet for its delay; with `clients`, the node's own namespace
also holds what the root namespace's clients send it, and with `incoming` what its peers send it (one daemon per
peer, its delay added to the peer's own). At the destination, not the source, because a packet held in the
sender's OUTPUT hook still counts against its socket's TCP Small Queues budget (a queue verdict cannot orphan it,
as netem does), so TCP would stall on it; crossing the veth orphans the packet. One daemon per (shaped node, peer)
pair keeps a node's packets to each peer in order. iptables-legacy, since nft's `queue` (CONFIG_NFT_QUEUE) is not
built in every kernel where xtables' NFQUEUE is. Each namespace's filter table is the harness's own, written whole
with `iptables-legacy-restore` and emptied on heal. A daemon's command line is its parameters, so `running` tells
which daemons already do what is wanted; only the others are restarted.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from insync.chaos.partitions import Shape
from insync.config import ConfigError
from insync.waiting import WaitTimeout, wait_until

IPTABLES_RESTORE = "iptables-legacy-restore"
DAEMON_MODULE = "insync.chaos.nfqueue"
CLIENTS_QUEUE = 65535  # in a shaped node's own namespace: what the root namespace's clients send it
READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
STOP_POLL_S = 0.05

Args = tuple[str, ...]  # a daemon's arguments after `-m insync.chaos.nfqueue`


def unavailable() -> str | None:
    """Why delays cannot be made without netem here, or None when they can."""
    if shutil.which(IPTABLES_RESTORE) is None:
        return f"{IPTABLES_RESTORE} not found (apt install iptables)"
    return None


def daemon_args(source: int, shape: Shape) -> Args:
    assert shape.needs_netem and source >= 0
    return ("--queue", str(source), "--delay-ms", str(shape.delay_ms), "--jitter-ms", str(shape.jitter_ms),
            "--loss-percent", f"{shape.loss_percent:g}")


def plan(nodes: Iterable[int], shapes: Mapping[int, Shape]) -> dict[int, dict[int, Args]]:
    """Per destination node, the daemons it needs: queue (the source node, or `CLIENTS_QUEUE` for a node whose
    clients are delayed too) -> the daemon's arguments. A packet waits for its sender's shape, and also for its
    receiver's when that one is `incoming` (both ways of the receiver's link slow)."""
    planned: dict[int, dict[int, Args]] = {}
    for dest in sorted(nodes):
        inbound = shapes[dest] if dest in shapes and shapes[dest].incoming else None
        planned[dest] = {}
        for source in sorted({*nodes, *shapes} - {dest}):
            shape = _in_series(shapes.get(source), inbound)
            if shape is not None:
                planned[dest][source] = daemon_args(source, shape)
        if dest in shapes and shapes[dest].clients:
            planned[dest][CLIENTS_QUEUE] = daemon_args(CLIENTS_QUEUE, shapes[dest])
    return planned


def _in_series(sent: Shape | None, received: Shape | None) -> Shape | None:
    """The one delay a packet gets through its sender's shape and then its receiver's: delays and jitters add,
    and it is lost if either loses it; None when neither delays or loses anything."""
    parts = [shape for shape in (sent, received) if shape is not None and shape.needs_netem]
    if len(parts) < 2:
        return parts[0] if parts else None
    kept = (1 - parts[0].loss_percent / 100) * (1 - parts[1].loss_percent / 100)
    return Shape(parts[0].delay_ms + parts[1].delay_ms, parts[0].jitter_ms + parts[1].jitter_ms,
                 round(100 * (1 - kept), 6))


def iptables_input(sources: Mapping[int, str]) -> str:
    """`iptables-legacy-restore` input: the filter table with each source address's packets to its queue (the
    source's node id, or `CLIENTS_QUEUE` for the bridge's address, whence clients come); `--queue-bypass` lets
    them through whenever no daemon serves the queue."""
    rules = [f"-A INPUT -s {address}/32 -j NFQUEUE --queue-num {source} --queue-bypass"
             for source, address in sorted(sources.items())]
    return "\n".join(["*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]", *rules,
                      "COMMIT", ""])


def running(pids: Iterable[int]) -> dict[int, Args]:
    """Which of `pids` (a namespace's) are daemons, with their arguments."""
    found = {}
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone since it was listed
        words = [w.decode(errors="replace") for w in argv if w]
        if DAEMON_MODULE in words:
            found[pid] = tuple(words[words.index(DAEMON_MODULE) + 1:])
    return found


def start(exec_prefix: Sequence[str], args: Args, log_path: Path) -> int:
    """Start a daemon (detached: it outlives this command) and wait for it to say it is bound to its queue."""
    with open(log_path, "ab") as log:
        process = subprocess.Popen([*exec_prefix, sys.executable, "-m", DAEMON_MODULE, *args],
                                   stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    assert process.stdout is not None
    with process.stdout:  # its one line read, the pipe is closed: the daemon writes nothing more there
        if select.select([process.stdout], [], [], READY_TIMEOUT_S)[0] and process.stdout.readline() == b"ready\n":
            return process.pid
    stop([process.pid], lambda: [process.pid] if process.poll() is None else [])
    raise ConfigError(f"the latency daemon ({' '.join(args)}) did not bind its queue in {READY_TIMEOUT_S:g} s; "
                      f"see {log_path}")


def stop(pids: Sequence[int], alive: Callable[[], Iterable[int]]) -> None:
    """SIGTERM `pids` (each accepts the packets it holds and exits), and SIGCONT, as a stopped daemon would not
    see the SIGTERM; SIGKILL what is left after `STOP_TIMEOUT_S` (its socket closed, the kernel drops what it
    held). `alive()` lists those still running."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
        _signal(pid, signal.SIGCONT)
    with contextlib.suppress(WaitTimeout):
        wait_until(lambda: not set(pids) & set(alive()), STOP_TIMEOUT_S, "the daemons exited",
                   interval_s=STOP_POLL_S)
    for pid in set(pids) & set(alive()):
        _signal(pid, signal.SIGKILL)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.kill(pid, signum)
