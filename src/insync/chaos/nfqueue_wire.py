"""nfnetlink_queue's messages, encoded and decoded as bytes: what `chaos/nfqueue.py` says to the kernel.

A netlink message is a header (`struct nlmsghdr`, host byte order), then for nfnetlink a `struct nfgenmsg`
(family, version 0, the queue number big-endian) and attributes (`struct nlattr`, values padded to 4 bytes).
The daemon needs three messages of NFNL_SUBSYS_QUEUE (linux/netfilter/nfnetlink_queue.h):
- NFQNL_MSG_CONFIG, sent once: bind to a queue and, in the same message, copy only a packet's first bytes
  (enough for the addresses and ports of its flow), a queue length, and fail-open (a full queue lets packets
  through instead of dropping them) with GSO (a 64 kB TCP segment comes as one packet);
- NFQNL_MSG_PACKET, from the kernel: a queued packet's id (NFQA_PACKET_HDR) and first bytes (NFQA_PAYLOAD);
- NFQNL_MSG_VERDICT, to the kernel: accept or drop the packet with that id (NFQA_VERDICT_HDR).
Errors and acknowledgements come back as NLMSG_ERROR (a negative errno, 0 for an acknowledgement). Nothing here
touches a socket.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

NETLINK_NETFILTER = 12
SOL_NETLINK = 270
NETLINK_NO_ENOBUFS = 5  # an overrun socket buffer is not reported: fail-open already let those packets through

NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLMSG_ERROR = 2
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2

NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_PACKET = 2
NFQA_CFG_F_FAIL_OPEN = 0x1
NFQA_CFG_F_GSO = 0x4

NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_PAYLOAD = 10
NF_DROP = 0
NF_ACCEPT = 1

AF_INET = 2
COPY_BYTES = 64  # an IPv4 header with options (60 bytes at most) and the 4 bytes of ports after it

_NLMSGHDR = struct.Struct("=IHHII")
_NFGENMSG = struct.Struct("!BBH")
_NLATTR = struct.Struct("=HH")
_ATTR_TYPE_MASK = 0x3FFF  # NLA_F_NESTED and NLA_F_NET_BYTEORDER cleared


class NetlinkError(Exception):
    """Bytes from the kernel that are not netlink messages."""


@dataclass(frozen=True, slots=True)
class Packet:
    """A packet the kernel queued: its id (what a verdict names) and its first bytes."""

    packet_id: int
    head: bytes


def _align(length: int) -> int:
    return (length + 3) & ~3


def _attr(kind: int, value: bytes) -> bytes:
    header = _NLATTR.pack(_NLATTR.size + len(value), kind)
    return header + value + b"\0" * (_align(len(value)) - len(value))


def _message(kind: int, flags: int, seq: int, queue: int, attrs: bytes) -> bytes:
    assert 0 <= queue < 1 << 16 and 0 <= seq < 1 << 32
    body = _NFGENMSG.pack(0, 0, queue) + attrs  # AF_UNSPEC, NFNETLINK_V0
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), NFNL_SUBSYS_QUEUE << 8 | kind, flags, seq, 0) + body


def bind(queue: int, seq: int, queue_max: int) -> bytes:
    """Bind this socket to `queue` (refused with EBUSY if another socket holds it) and configure it in the same
    message (the kernel applies the command first): copy `COPY_BYTES` of each packet, hold at most `queue_max`
    packets, fail open, and take GSO packets whole. Acknowledged, as every configuration is."""
    assert 0 < queue_max < 1 << 32
    flags = NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO
    attrs = (_attr(NFQA_CFG_CMD, struct.pack("!BBH", NFQNL_CFG_CMD_BIND, 0, AF_INET))
             + _attr(NFQA_CFG_PARAMS, struct.pack("!IB", COPY_BYTES, NFQNL_COPY_PACKET))
             + _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", queue_max))
             + _attr(NFQA_CFG_FLAGS, struct.pack("!I", flags)) + _attr(NFQA_CFG_MASK, struct.pack("!I", flags)))
    return _message(NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, seq, queue, attrs)


def verdict(queue: int, packet_id: int, accept: bool, seq: int) -> bytes:
    """Accept or drop one packet; several of these concatenated go to the kernel in one send."""
    assert 0 <= packet_id < 1 << 32
    header = struct.pack("!II", NF_ACCEPT if accept else NF_DROP, packet_id)
    return _message(NFQNL_MSG_VERDICT, NLM_F_REQUEST, seq, queue, _attr(NFQA_VERDICT_HDR, header))


def _attributes(data: bytes, offset: int, end: int) -> Iterator[tuple[int, bytes]]:
    while offset + _NLATTR.size <= end:
        length, kind = _NLATTR.unpack_from(data, offset)
        if length < _NLATTR.size or offset + length > end:
            raise NetlinkError(f"an attribute of {length} bytes at {offset} does not fit its message")
        yield kind & _ATTR_TYPE_MASK, data[offset + _NLATTR.size:offset + length]
        offset += _align(length)


def _packet(data: bytes, start: int, end: int) -> Packet:
    packet_id, head = None, b""
    for kind, value in _attributes(data, start + _NLMSGHDR.size + _NFGENMSG.size, end):
        if kind == NFQA_PACKET_HDR:
            (packet_id,) = struct.unpack_from("!I", value)
        elif kind == NFQA_PAYLOAD:
            head = value
    if packet_id is None:
        raise NetlinkError("a queued packet without its NFQA_PACKET_HDR")
    return Packet(packet_id, head)


@dataclass(frozen=True, slots=True)
class Received:
    packets: list[Packet]
    acks: list[int]  # sequence numbers the kernel acknowledged
    errors: list[tuple[int, int]]  # (sequence number, errno) of the messages it refused


def parse(data: bytes) -> Received:
    """The packets, acknowledgements and refusals in one datagram from the kernel."""
    received = Received([], [], [])
    offset = 0
    while offset + _NLMSGHDR.size <= len(data):
        length, kind, _flags, seq, _port = _NLMSGHDR.unpack_from(data, offset)
        if length < _NLMSGHDR.size or offset + length > len(data):
            raise NetlinkError(f"a netlink message of {length} bytes at {offset} in a datagram of {len(data)}")
        if kind == NLMSG_ERROR:
            (errno,) = struct.unpack_from("=i", data, offset + _NLMSGHDR.size)
            if errno:
                received.errors.append((seq, -errno))
            else:
                received.acks.append(seq)
        elif kind == NFNL_SUBSYS_QUEUE << 8 | NFQNL_MSG_PACKET:
            received.packets.append(_packet(data, offset, offset + length))
        offset += _align(length)
    return received


def flow_of(head: bytes) -> bytes:
    """What names a packet's flow: its protocol, addresses and (TCP, UDP) ports; empty when `head` is not IPv4,
    so every such packet is one flow and keeps its order."""
    if len(head) < 20 or head[0] >> 4 != 4:
        return b""
    header_bytes = (head[0] & 0x0F) * 4
    return head[9:10] + head[12:20] + head[header_bytes:header_bytes + 4]
