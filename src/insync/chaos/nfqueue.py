"""The latency daemon: netem's delay, jitter and loss in user space, for kernels built without sch_netem.

Started in a node's network namespace (`ip netns exec NS python -m insync.chaos.nfqueue --queue N --delay-ms D
...`; netlink sockets belong to the namespace they are opened in) by `chaos/nfqueue_ctl.py`, whose iptables
rule sends the node's packets to its peers to NFQUEUE `N`. The daemon binds to the queue over a raw
AF_NETLINK/NETLINK_NETFILTER socket (`nfqueue_wire`), admits each queued packet to a `nfqueue_delay.Schedule`
and gives it its ACCEPT verdict when it is due (or DROP at once, for loss). It prints `ready` once bound, so
the rule goes in only when something serves the queue.

Nothing it does can cut the node off for good: the queue fails open (a full queue, `HELD_MAX` packets, lets
packets through unqueued), the rule has `--queue-bypass` (no daemon bound: packets pass), and on SIGTERM or
SIGINT, or after `LIFETIME_S_MAX`, it accepts every packet it holds before it exits. Its last line on stderr
counts the packets it held, dropped and let through unheld, and the CPU time it took a packet.
"""

from __future__ import annotations

import argparse
import errno as errnos
import os
import random
import select
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import Sequence

from insync.chaos import nfqueue_wire as wire
from insync.chaos.nfqueue_delay import Delay, Fate, Schedule

HELD_MAX = 4096  # the kernel's queue length (NFQA_CFG_QUEUE_MAXLEN): at 1 Gbit/s of full frames, 50 ms of them
LIFETIME_S_MAX = 24 * 3600  # a daemon nobody stopped (its cluster killed) gives up after a day
RECEIVE_BUFFER_BYTES = 8 * 1024 * 1024
DATAGRAM_BYTES = 65536
READS_PER_TURN = 256  # datagrams read before the due verdicts go out again
VERDICTS_PER_SEND = 1024  # 32 kB of verdict messages in one datagram
TICK_MS = 200  # the longest wait between turns: the stop signal and the lifetime are looked at each turn
BIND_TIMEOUT_S = 5.0


def errno_name(errno: int) -> str:
    return errnos.errorcode.get(errno, str(errno))


class Daemon:
    """One bound queue: the socket, the schedule and the counts."""

    def __init__(self, sock: socket.socket, queue: int, schedule: Schedule) -> None:
        self.sock = sock
        self.queue = queue
        self.schedule = schedule
        self.seq = 0
        self.counts = {fate: 0 for fate in Fate}
        self.refused: Counter[str] = Counter()  # errno name -> verdicts the kernel refused

    def bind(self) -> None:
        self.seq += 1
        bind_seq = self.seq  # verdicts sent meanwhile take the next numbers
        self.sock.send(wire.bind(self.queue, bind_seq, HELD_MAX))
        deadline = time.monotonic() + BIND_TIMEOUT_S
        while time.monotonic() < deadline:
            if select.select([self.sock], [], [], max(0.0, deadline - time.monotonic()))[0]:
                received = wire.parse(self.sock.recv(DATAGRAM_BYTES))
                if received.errors:
                    errno = received.errors[0][1]
                    raise OSError(errno, f"binding NFQUEUE {self.queue} refused: {os.strerror(errno)}")
                # A rule already in place (a daemon restarted) can queue packets before the acknowledgement
                # comes: let them go undelayed, or they would wait in the kernel until this daemon exits.
                self.send([(packet.packet_id, True) for packet in received.packets])
                if bind_seq in received.acks:
                    return
        raise TimeoutError(f"no answer from the kernel to binding NFQUEUE {self.queue} in {BIND_TIMEOUT_S:g} s")

    def receive(self, now_ms: float) -> list[tuple[int, bool]]:
        """Read what the kernel queued (a bounded number of datagrams); the verdicts due at once."""
        verdicts = []
        for _ in range(READS_PER_TURN):
            try:
                data = self.sock.recv(DATAGRAM_BYTES, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            received = wire.parse(data)
            self.refused.update(errno_name(errno) for _, errno in received.errors)
            for packet in received.packets:
                fate = self.schedule.admit(packet.packet_id, wire.flow_of(packet.head), now_ms)
                self.counts[fate] += 1
                if fate is not Fate.HOLD:
                    verdicts.append((packet.packet_id, fate is Fate.ACCEPT))
        return verdicts

    def send(self, verdicts: Sequence[tuple[int, bool]]) -> None:
        for start in range(0, len(verdicts), VERDICTS_PER_SEND):
            messages = []
            for packet_id, accept in verdicts[start:start + VERDICTS_PER_SEND]:
                self.seq = (self.seq + 1) % (1 << 32)
                messages.append(wire.verdict(self.queue, packet_id, accept, self.seq))
            self.sock.send(b"".join(messages))


def serve(daemon: Daemon, wakeup: int, lifetime_s: float) -> None:
    """Turns of: wait for a packet, the next due time or a signal; admit; send what is due. Until a signal or
    the lifetime ends; then every held packet is accepted."""
    poller = select.poll()
    poller.register(daemon.sock, select.POLLIN)
    poller.register(wakeup, select.POLLIN)
    deadline = time.monotonic() + lifetime_s
    try:
        while time.monotonic() < deadline:
            due_ms = daemon.schedule.next_due_ms()
            wait_ms = TICK_MS if due_ms is None else min(TICK_MS, max(0.0, due_ms - time.monotonic() * 1000))
            if any(fd == wakeup for fd, _ in poller.poll(wait_ms)):
                return
            now_ms = time.monotonic() * 1000
            daemon.send([*daemon.receive(now_ms), *((i, True) for i in daemon.schedule.due(now_ms))])
    finally:  # what came with the stop signal too: the kernel would drop it when the socket closes
        verdicts = daemon.receive(time.monotonic() * 1000)
        daemon.send([*verdicts, *((i, True) for i in daemon.schedule.release_all())])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m insync.chaos.nfqueue", description=__doc__.split("\n")[0])
    parser.add_argument("--queue", type=int, required=True, help="the NFQUEUE number the iptables rule uses")
    parser.add_argument("--delay-ms", type=int, required=True)
    parser.add_argument("--jitter-ms", type=int, default=0)
    parser.add_argument("--loss-percent", type=float, default=0.0)
    parser.add_argument("--seed", type=int, help="for the jitter and the loss (default: drawn)")
    parser.add_argument("--lifetime-s", type=float, default=LIFETIME_S_MAX)
    args = parser.parse_args(argv)
    if not 0 <= args.queue < 1 << 16 or not 0 < args.lifetime_s <= LIFETIME_S_MAX:
        parser.error(f"--queue must be within 0..65535 and --lifetime-s within (0, {LIFETIME_S_MAX}]")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    schedule = Schedule(Delay(args.delay_ms, args.jitter_ms, args.loss_percent), random.Random(args.seed),
                        HELD_MAX)
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)  # the wakeup fd ends `serve`'s wait; nothing else to do here
    started = time.monotonic()
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, wire.NETLINK_NETFILTER) as sock:
        sock.setsockopt(socket.SOL_SOCKET, 33, RECEIVE_BUFFER_BYTES)  # SO_RCVBUFFORCE: above rmem_max, as root
        sock.setsockopt(wire.SOL_NETLINK, wire.NETLINK_NO_ENOBUFS, 1)
        sock.bind((0, 0))
        daemon = Daemon(sock, args.queue, schedule)
        daemon.bind()
        print("ready", flush=True)
        cpu_start_s = time.process_time()  # the interpreter's start is not the packets' cost
        serve(daemon, read_end, args.lifetime_s)
    handled = sum(daemon.counts.values())
    cpu_s = time.process_time() - cpu_start_s
    print(f"nfqueue {args.queue}: {daemon.counts[Fate.HOLD]} packets held, {daemon.counts[Fate.DROP]} dropped, "
          f"{daemon.counts[Fate.ACCEPT]} let through unheld (schedule full), verdicts refused {dict(daemon.refused)}; "
          f"{handled} in {time.monotonic() - started:.1f} s, {cpu_s:.2f} s of CPU "
          f"({cpu_s * 1e6 / max(1, handled):.0f} us a packet)", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
