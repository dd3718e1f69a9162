"""The user-space netem: nfnetlink_queue's messages as bytes, the delay schedule, the daemon's loop against a fake
kernel (a datagram socket pair), and the iptables rules and daemon arguments the harness derives from shapes."""

from __future__ import annotations

import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from insync.chaos import netns, nfqueue, nfqueue_ctl, partitions
from insync.chaos import nfqueue_wire as wire
from insync.chaos.nfqueue_delay import Delay, Fate, Schedule
from insync.chaos.partitions import NetFaults, Shape
from insync.config import ConfigError

pytestmark = pytest.mark.timeout(30)


def attributes(message: bytes) -> list[tuple[int, bytes]]:
    found, offset = [], 20  # after nlmsghdr (16) and nfgenmsg (4)
    while offset < len(message):
        length, kind = struct.unpack_from("=HH", message, offset)
        found.append((kind, message[offset + 4:offset + length]))
        offset += (length + 3) & ~3
    return found


def kernel_packet(packet_id: int, head: bytes, seq: int = 0) -> bytes:
    """An NFQNL_MSG_PACKET as the kernel sends it (attribute types carrying NLA_F_NET_BYTEORDER's bit)."""
    def attr(kind: int, value: bytes) -> bytes:
        return struct.pack("=HH", 4 + len(value), kind) + value + b"\0" * (-len(value) % 4)
    body = (struct.pack("!BBH", 2, 0, 7) + attr(wire.NFQA_PACKET_HDR, struct.pack("!IHB", packet_id, 0x800, 3))
            + attr(wire.NFQA_PAYLOAD | 0x4000, head))
    return struct.pack("=IHHII", 16 + len(body), 3 << 8 | wire.NFQNL_MSG_PACKET, 0, seq, 0) + body


def kernel_error(seq: int, errno: int) -> bytes:
    return struct.pack("=IHHII", 36, wire.NLMSG_ERROR, 0, seq, 0) + struct.pack("=i", -errno) + bytes(16)


def ipv4_head(source: str, destination: str, ports: tuple[int, int], header_words: int = 5) -> bytes:
    header = bytearray(header_words * 4)
    header[0] = 0x40 | header_words
    header[9] = 6  # TCP
    header[12:16], header[16:20] = socket.inet_aton(source), socket.inet_aton(destination)
    return bytes(header) + struct.pack("!HH", *ports)


def test_bind_binds_and_configures_the_queue_in_one_acknowledged_message() -> None:
    message = wire.bind(queue=7, seq=3, queue_max=4096)
    length, kind, flags, seq, _port = struct.unpack_from("=IHHII", message)
    assert (length, kind, flags, seq) == (len(message), 3 << 8 | wire.NFQNL_MSG_CONFIG, 0x1 | 0x4, 3)
    assert struct.unpack_from("!BBH", message, 16) == (0, 0, 7)
    attrs = dict(attributes(message))
    assert attrs[wire.NFQA_CFG_CMD] == struct.pack("!BBH", 1, 0, socket.AF_INET)  # BIND, for IPv4
    assert attrs[wire.NFQA_CFG_PARAMS] == struct.pack("!IB", wire.COPY_BYTES, 2)  # the packet's first bytes
    assert attrs[wire.NFQA_CFG_QUEUE_MAXLEN] == struct.pack("!I", 4096)
    assert attrs[wire.NFQA_CFG_FLAGS] == attrs[wire.NFQA_CFG_MASK] == struct.pack("!I", 0x1 | 0x4)  # fail-open, GSO
    assert [kind for kind, _ in attributes(message)][0] == wire.NFQA_CFG_CMD  # the queue exists before the rest


def test_verdicts_accept_or_drop_one_packet_by_id() -> None:
    accept, drop = wire.verdict(7, 0xDEADBEEF, True, 9), wire.verdict(7, 1, False, 10)
    assert struct.unpack_from("=IHHII", accept)[:4] == (32, 3 << 8 | wire.NFQNL_MSG_VERDICT, 0x1, 9)
    assert attributes(accept) == [(wire.NFQA_VERDICT_HDR, struct.pack("!II", wire.NF_ACCEPT, 0xDEADBEEF))]
    assert attributes(drop) == [(wire.NFQA_VERDICT_HDR, struct.pack("!II", wire.NF_DROP, 1))]


def test_parse_reads_packets_acknowledgements_and_refusals_from_one_datagram() -> None:
    head = ipv4_head("198.18.0.10", "198.18.0.11", (9092, 40000))
    received = wire.parse(kernel_packet(5, head) + kernel_error(3, 0) + kernel_error(4, 16) + kernel_packet(6, b"x"))
    assert received.packets == [wire.Packet(5, head), wire.Packet(6, b"x")]
    assert (received.acks, received.errors) == ([3], [(4, 16)])


@pytest.mark.parametrize("data", [kernel_packet(5, b"abc")[:-4], struct.pack("=IHHII", 8, 0, 0, 0, 0)],
                         ids=["truncated attribute", "length below the header"])
def test_parse_refuses_bytes_that_are_not_netlink(data: bytes) -> None:
    with pytest.raises(wire.NetlinkError, match="does not fit|netlink message of"):
        wire.parse(data)


def test_parse_refuses_a_packet_without_its_header() -> None:
    body = struct.pack("!BBH", 2, 0, 7) + struct.pack("=HH", 8, wire.NFQA_PAYLOAD) + b"abcd"
    with pytest.raises(wire.NetlinkError, match="NFQA_PACKET_HDR"):
        wire.parse(struct.pack("=IHHII", 16 + len(body), 3 << 8, 0, 0, 0) + body)


def test_a_flow_is_protocol_addresses_and_ports_past_any_ip_options() -> None:
    plain = wire.flow_of(ipv4_head("10.0.0.1", "10.0.0.2", (1, 2)))
    with_options = wire.flow_of(ipv4_head("10.0.0.1", "10.0.0.2", (1, 2), header_words=7))
    assert plain == with_options == b"\x06" + socket.inet_aton("10.0.0.1") + socket.inet_aton("10.0.0.2") + \
        struct.pack("!HH", 1, 2)
    assert plain != wire.flow_of(ipv4_head("10.0.0.1", "10.0.0.2", (1, 3)))
    assert wire.flow_of(b"\x60" + bytes(39)) == wire.flow_of(b"") == b""  # IPv6, nothing: one flow


def test_without_jitter_every_packet_waits_the_delay_in_arrival_order() -> None:
    schedule = Schedule(Delay(50), random.Random(1), held_max=10)
    assert [schedule.admit(i, b"f", now_ms=i) for i in range(3)] == [Fate.HOLD] * 3
    assert schedule.next_due_ms() == 50
    assert schedule.due(now_ms=49.9) == []
    assert schedule.due(now_ms=51) == [0, 1]
    assert schedule.due(now_ms=1000) == [2] and schedule.held == 0 and schedule.next_due_ms() is None


def test_jitter_spreads_due_times_but_one_flow_keeps_its_order() -> None:
    schedule = Schedule(Delay(50, 10), random.Random(7), held_max=1000)
    for i in range(400):
        schedule.admit(i, b"ab"[i % 2:i % 2 + 1], now_ms=i / 10)  # two flows, interleaved, 0.1 ms apart
    first_due = schedule.next_due_ms()
    assert first_due is not None and 40 <= first_due < 50
    assert schedule.due(now_ms=39.9 + 40) != [] and schedule.due(now_ms=40 + 60) != []
    assert schedule.held == 0  # all due within delay + jitter of their arrival (the last came at 39.9 ms)
    schedule = Schedule(Delay(50, 10), random.Random(7), held_max=1000)
    for i in range(400):
        schedule.admit(i, b"ab"[i % 2:i % 2 + 1], now_ms=i / 10)
    released = schedule.due(now_ms=10_000)
    for flow in (0, 1):
        mine = [r for r in released if r % 2 == flow]
        assert mine == sorted(mine)  # never overtaken within its flow
    assert released != sorted(released)  # but the flows overtake each other: the jitter is there


def test_loss_drops_about_its_share_and_a_full_schedule_lets_packets_through() -> None:
    schedule = Schedule(Delay(10, 0, 20.0), random.Random(3), held_max=10_000)
    fates = [schedule.admit(i, b"", 0) for i in range(2000)]
    assert 300 < fates.count(Fate.DROP) < 500 and schedule.held == fates.count(Fate.HOLD)
    full = Schedule(Delay(10), random.Random(3), held_max=2)
    assert [full.admit(i, b"", 0) for i in range(3)] == [Fate.HOLD, Fate.HOLD, Fate.ACCEPT]


def test_release_all_lets_every_held_packet_go_in_due_order() -> None:
    schedule = Schedule(Delay(100), random.Random(1), held_max=10)
    for i, flow in enumerate([b"a", b"b", b"a"]):
        schedule.admit(i, flow, now_ms=i)
    assert schedule.release_all() == [0, 1, 2] and schedule.held == 0
    schedule.admit(9, b"a", now_ms=0)  # the flows' bookkeeping went with them
    assert schedule.due(100) == [9]


@pytest.mark.parametrize("figures", [(-1, 0, 0.0), (10, 11, 0.0), (10, 0, 101.0)])
def test_a_delay_needs_sane_figures(figures: tuple[int, int, float]) -> None:
    with pytest.raises(ConfigError, match="0 <= jitter <= delay"):
        Delay(*figures)


@pytest.fixture()
def fake_kernel() -> Iterator[tuple[socket.socket, socket.socket]]:
    daemon_end, kernel_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with daemon_end, kernel_end:
        kernel_end.settimeout(5)
        yield daemon_end, kernel_end


def verdicts(datagram: bytes) -> list[tuple[int, int]]:
    found, offset = [], 0
    while offset < len(datagram):
        length = struct.unpack_from("=I", datagram, offset)[0]
        found += [struct.unpack("!II", value)[::-1] for _, value in attributes(datagram[offset:offset + length])]
        offset += length
    return found  # (packet id, verdict)


def test_the_daemon_accepts_each_packet_when_due_drops_the_lost_and_frees_the_rest_when_stopped(
        fake_kernel: tuple[socket.socket, socket.socket]) -> None:
    daemon_end, kernel = fake_kernel
    daemon = nfqueue.Daemon(daemon_end, 7, Schedule(Delay(20), random.Random(1), held_max=100))
    wake_read, wake_write = os.pipe()
    server = threading.Thread(target=nfqueue.serve, args=(daemon, wake_read, 60.0))
    server.start()
    try:
        kernel.send(kernel_packet(1, b"") + kernel_packet(2, b""))
        assert verdicts(kernel.recv(65536)) == [(1, wire.NF_ACCEPT), (2, wire.NF_ACCEPT)]
        daemon.schedule = Schedule(Delay(60_000, 0, 100.0), random.Random(1), held_max=100)  # lose everything
        kernel.send(kernel_packet(3, b""))
        assert verdicts(kernel.recv(65536)) == [(3, wire.NF_DROP)]
        daemon.schedule = Schedule(Delay(60_000), random.Random(1), held_max=100)  # held for a minute
        kernel.send(kernel_packet(4, b""))
        time.sleep(0.3)  # let the daemon admit it
        os.write(wake_write, b"\0")  # what SIGTERM's wakeup fd does
        server.join(timeout=5)
        assert not server.is_alive()
        assert verdicts(kernel.recv(65536)) == [(4, wire.NF_ACCEPT)]
        assert daemon.counts == {Fate.HOLD: 3, Fate.DROP: 1, Fate.ACCEPT: 0}
    finally:
        os.write(wake_write, b"\0")
        server.join(timeout=5)
        os.close(wake_read)
        os.close(wake_write)


def test_packets_waiting_when_the_daemon_stops_are_let_go(fake_kernel: tuple[socket.socket, socket.socket]) -> None:
    daemon_end, kernel = fake_kernel
    daemon = nfqueue.Daemon(daemon_end, 7, Schedule(Delay(60_000), random.Random(1), held_max=100))
    wake_read, wake_write = os.pipe()
    try:
        kernel.send(kernel_packet(8, b""))
        os.write(wake_write, b"\0")  # the stop and the packet ready together: the stop wins the turn
        nfqueue.serve(daemon, wake_read, 60.0)
        assert verdicts(kernel.recv(65536)) == [(8, wire.NF_ACCEPT)]
    finally:
        os.close(wake_read)
        os.close(wake_write)


def test_binding_lets_early_packets_go_and_names_a_refusal_or_silence(
        fake_kernel: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch) -> None:
    daemon_end, kernel = fake_kernel
    daemon = nfqueue.Daemon(daemon_end, 7, Schedule(Delay(50), random.Random(1), held_max=100))

    def answer(*datagrams: bytes) -> threading.Thread:
        def run() -> None:
            request = kernel.recv(65536)
            seq = struct.unpack_from("=IHHII", request)[3]
            for datagram in datagrams:
                kernel.send(datagram.replace(b"SEQ!", struct.pack("=I", seq)))
        thread = threading.Thread(target=run)
        thread.start()
        return thread

    ack = struct.pack("=IHHI", 36, wire.NLMSG_ERROR, 0, 0)[:8] + b"SEQ!" + bytes(4) + bytes(20)
    answering = answer(kernel_packet(3, b""), ack)
    daemon.bind()  # a rule already in place queued packet 3 before the acknowledgement
    answering.join(timeout=5)
    assert verdicts(kernel.recv(65536)) == [(3, wire.NF_ACCEPT)]
    refusal = ack[:16] + struct.pack("=i", -16) + ack[20:]
    answering = answer(refusal)
    with pytest.raises(OSError, match="binding NFQUEUE 7 refused: Device or resource busy"):
        daemon.bind()
    answering.join(timeout=5)
    monkeypatch.setattr(nfqueue, "BIND_TIMEOUT_S", 0.2)
    answering = answer()
    with pytest.raises(TimeoutError, match="no answer from the kernel to binding NFQUEUE 7"):
        daemon.bind()
    answering.join(timeout=5)


def test_the_daemon_refuses_a_queue_or_lifetime_out_of_range() -> None:
    for argv in (["--queue", "70000", "--delay-ms", "5"], ["--queue", "1", "--delay-ms", "5", "--lifetime-s", "0"]):
        with pytest.raises(SystemExit):
            nfqueue.parse_args(argv)


def test_each_shaped_node_gets_a_daemon_in_every_peer_namespace() -> None:
    shapes = {2: Shape(delay_ms=50, jitter_ms=10), 3: Shape(rate_kbit=800), 1: Shape(delay_ms=5, loss_percent=1)}
    planned = nfqueue_ctl.plan([0, 1, 2, 3], shapes)
    assert {dest: sorted(daemons) for dest, daemons in planned.items()} == {0: [1, 2], 1: [2], 2: [1], 3: [1, 2]}
    assert planned[0][2] == ("--queue", "2", "--delay-ms", "50", "--jitter-ms", "10", "--loss-percent", "0")
    assert planned[3][1][-1] == "1"


def test_a_node_whose_clients_are_delayed_gets_a_daemon_of_its_own() -> None:
    planned = nfqueue_ctl.plan([1, 2], {2: Shape(delay_ms=50, clients=True)})
    assert {dest: sorted(daemons) for dest, daemons in planned.items()} == {1: [2], 2: [nfqueue_ctl.CLIENTS_QUEUE]}
    with pytest.raises(ConfigError, match="--clients needs a delay"):
        Shape(rate_kbit=800, clients=True)


def test_a_node_slow_both_ways_holds_what_every_peer_sends_it_adding_their_own_delays() -> None:
    shapes = {2: Shape(delay_ms=10, jitter_ms=3, incoming=True), 3: Shape(delay_ms=50, jitter_ms=10, loss_percent=10)}
    planned = nfqueue_ctl.plan([0, 1, 2, 3], shapes)
    assert {dest: sorted(daemons) for dest, daemons in planned.items()} == {0: [2, 3], 1: [2, 3], 2: [0, 1, 3],
                                                                             3: [2]}
    assert planned[1][2][2:] == planned[2][1][2:]  # the same delay each way
    assert planned[2][0] == ("--queue", "0", "--delay-ms", "10", "--jitter-ms", "3", "--loss-percent", "0")
    assert planned[2][3] == ("--queue", "3", "--delay-ms", "60", "--jitter-ms", "13", "--loss-percent", "10")
    assert planned[0][3] == ("--queue", "3", "--delay-ms", "50", "--jitter-ms", "10", "--loss-percent", "10")


def test_the_iptables_rules_queue_each_shaped_source_and_bypass_when_no_daemon_serves() -> None:
    text = nfqueue_ctl.iptables_input({2: "198.18.0.12", 1: "198.18.0.11"})
    lines = text.splitlines()
    assert lines[0] == "*filter" and lines[-1] == "COMMIT"
    assert lines[4:6] == ["-A INPUT -s 198.18.0.11/32 -j NFQUEUE --queue-num 1 --queue-bypass",
                          "-A INPUT -s 198.18.0.12/32 -j NFQUEUE --queue-num 2 --queue-bypass"]
    assert "-A" not in nfqueue_ctl.iptables_input({})  # heal: the table emptied


def test_running_daemons_are_found_by_their_command_line_and_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nfqueue_ctl, "STOP_TIMEOUT_S", 0.3)
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); " \
               "time.sleep(30)"
    processes = [subprocess.Popen([sys.executable, "-c", code, "-m", nfqueue_ctl.DAEMON_MODULE, "--queue", str(q)],
                                  stdout=subprocess.PIPE) for q, code in ((1, "import time; time.sleep(30)"),
                                                                          (2, stubborn))]
    assert processes[1].stdout is not None and processes[1].stdout.readline()  # its SIGTERM handler is in place
    pids = [p.pid for p in processes]
    assert nfqueue_ctl.running([*pids, os.getpid()]) == {pids[0]: ("--queue", "1"), pids[1]: ("--queue", "2")}
    nfqueue_ctl.stop(pids, lambda: [p.pid for p in processes if p.poll() is None])
    assert [p.wait(timeout=5) for p in processes] == [-signal.SIGTERM, -signal.SIGKILL]


def test_a_daemon_that_never_binds_is_stopped_and_named(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    with pytest.raises(ConfigError, match="did not bind its queue"):
        nfqueue_ctl.start([], ("--queue", "1", "--delay-ms", "-5"), log)  # refused by its argument parser
    assert "a delay needs" in log.read_text()


def test_installing_goes_on_where_iptables_legacy_cannot_write_unless_a_delay_needs_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    commands: list[tuple[str, ...]] = []

    def run(*argv: str, stdin: str | None = None) -> str:
        commands.append(argv)
        if nfqueue_ctl.IPTABLES_RESTORE in argv:
            raise ConfigError("iptables-legacy-restore: can't initialize iptables table `filter'")
        return ""

    monkeypatch.setattr(netns, "_run", run)
    monkeypatch.setattr(netns, "_has_netem", lambda _namespace: False)
    monkeypatch.setattr(nfqueue_ctl, "unavailable", lambda: None)
    monkeypatch.setattr(nfqueue_ctl, "start", lambda *_args: 4242)
    network = netns.Network("abc123", "198.18.9.0/24", {1: "198.18.9.10", 2: "198.18.9.11"})
    netns.install(network, NetFaults())  # heal: nothing of ours can be in tables that cannot be written
    assert sum(nfqueue_ctl.IPTABLES_RESTORE in c for c in commands) == 2
    with pytest.raises(ConfigError, match="can't initialize iptables table"):
        netns.install(network, NetFaults(shapes={2: Shape(50)}))


def test_new_drops_replace_the_rules_but_never_the_base_chain_whose_hook_holds_the_queues() -> None:
    text = partitions.nft_script(2, {(1, 2): 100}, {1: "198.18.0.11", 2: "198.18.0.12"})
    assert "delete" not in text  # a deleted base chain's hook going drops every queued packet in the namespace
    assert text.index("flush chain inet insync_chaos input") < text.index("add rule inet insync_chaos input ip")
