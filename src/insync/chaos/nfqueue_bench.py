"""`python -m insync.chaos.nfqueue_bench`: what the latency daemon (chaos/nfqueue.py) costs, between two namespaces.

- packets: `--senders` processes in node 2's namespace send small UDP datagrams to node 1 as fast as they can for
  `--seconds`, through a 1 ms delay: the packets the daemon handled a second, and its CPU time a packet (one
  core's worth of it is the rate it could sustain; the senders, not the daemon, bound the first figure when
  the daemon's CPU share stays below a core), and the datagrams the receiver (a Python loop, which drops what
  it cannot read in time) read;
- TCP: one connection's bulk throughput from node 2 to node 1 for `--seconds`, without a delay and through
  50 +/- 10 ms (the window, not the daemon, bounds it there).

Needs root and iptables-legacy. Prints the figures and the load average; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from insync.chaos import netns, nfqueue_ctl
from insync.chaos.partitions import NetFaults, Shape
from insync.config import ConfigError

PORT = 7792

RECEIVE = f"""
import socket, sys, time
kind, seconds = sys.argv[1], float(sys.argv[2])
server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM)
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", {PORT}))
server.settimeout(seconds + 10)
if kind == "tcp":
    server.listen()
print("listening", flush=True)
connection = server if kind == "udp" else server.accept()[0]
connection.settimeout(2)
received = 0
try:
    while data := connection.recv(1 << 20):
        received += 1 if kind == "udp" else len(data)
except TimeoutError:
    pass
print(received)
"""

SEND = f"""
import socket, sys, time
kind, address, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
if kind == "udp":
    sender, payload = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), b"x" * 100
    sender.connect((address, {PORT}))
else:
    sender, payload = socket.create_connection((address, {PORT}), timeout=30), b"x" * 65536
deadline = time.monotonic() + seconds
while time.monotonic() < deadline:
    try:
        sender.send(payload)
    except OSError:
        pass  # a full socket buffer: the flood goes on
sender.close()
"""


def _transfer(network: netns.Network, kind: str, seconds: float, senders: int) -> int:
    """Datagrams (udp) or bytes (tcp) node 1 received from node 2's senders in `seconds`."""
    receiver = subprocess.Popen([*netns.exec_prefix(network, 1), sys.executable, "-c", RECEIVE, kind, str(seconds)],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None and receiver.stdout.readline() == "listening\n"
        sending = [subprocess.Popen([*netns.exec_prefix(network, 2), sys.executable, "-c", SEND, kind,
                                     network.addresses[1], str(seconds)]) for _ in range(senders)]
        for sender in sending:
            sender.wait(timeout=seconds + 30)
        out, _ = receiver.communicate(timeout=seconds + 30)
        return int(out.split()[-1])
    finally:
        receiver.kill()
        receiver.wait(timeout=10)


def _daemon_line(log: Path) -> str:
    lines = log.read_text().splitlines() if log.exists() else []
    return lines[-1] if lines else f"(no daemon log at {log}: netem made the delay)"


def _held(daemon_line: str) -> int:
    words = daemon_line.split(" packets held")[0].split()
    return int(words[-1]) if words and words[-1].isdigit() else 0


def bench(seconds: float, senders: int) -> list[str]:
    network = netns.create([1, 2])
    log_dir = Path(tempfile.mkdtemp(prefix="insync-nfqueue-bench-"))
    report = []
    try:
        for shape, kind in ((Shape(1), "udp"), (Shape(), "tcp"), (Shape(50, 10), "tcp")):
            netns.install(network, NetFaults(shapes={2: shape}), str(log_dir))
            moved = _transfer(network, kind, seconds, senders if kind == "udp" else 1)
            netns.install(network, NetFaults(), str(log_dir))  # stops the daemon: its last line has the counts
            figure = f"{moved / seconds:,.0f} datagrams/s read by the receiver" if kind == "udp" else \
                f"{moved / seconds / 1e6:,.1f} MB/s"
            daemon = _daemon_line(log_dir / "nfqueue-2-to-1.log") if shape.needs_netem else "no daemon"
            handled = f"{_held(daemon) / seconds:,.0f} packets/s held and let go by the daemon; " if \
                shape.needs_netem else ""
            report.append(f"{kind} through {shape.delay_ms} +/- {shape.jitter_ms} ms: {figure}; {handled}{daemon}")
            (log_dir / "nfqueue-2-to-1.log").unlink(missing_ok=True)
    finally:
        netns.destroy(network)
    report.append(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m insync.chaos.nfqueue_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--senders", type=int, default=2)
    args = parser.parse_args(argv)
    if not 0 < args.seconds <= 60 or not 1 <= args.senders <= 8:
        parser.error("--seconds must be within (0, 60] and --senders within 1..8")
    reason = netns.unavailable() or nfqueue_ctl.unavailable()
    if reason is not None:
        raise ConfigError(f"the benchmark needs network namespaces and iptables-legacy: {reason}")
    for line in bench(args.seconds, args.senders):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
