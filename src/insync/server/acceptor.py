"""Accepting connections on a thread of its own, as Kafka's Acceptor does, within Kafka's connection quotas.

The listening socket's backlog is `socket.listen.backlog.size`. An asyncio server accepts only when its loop gets
round to the listening socket: while the loop is busy the backlog fills and the kernel drops the SYNs of further
clients, who then wait out a one-second retransmission. The acceptor thread waits in select() (the GIL released),
then takes every pending connection in one hold of the GIL: libc's accept4 through `ctypes.PyDLL` keeps it
(`socket.accept` would retake it after each call, each time waiting out the switch interval while the loop runs
Python), and the non-blocking socket never waits. The batch goes to the loop in one `call_soon_threadsafe`.

`ConnectionQuotas` are Kafka's `ConnectionQuotas`, one per node and shared by its listeners: a connection from an IP
address that already has its maximum (`max.connections.per.ip`, or its entry in `max.connections.per.ip.overrides`)
is closed at once; while the node holds `max.connections`, the acceptor stops accepting until one closes, except on
the inter-broker listener (Kafka's protected listener), so replication never waits for clients.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import logging
import os
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping

from insync.config import SocketConfig
from insync.properties import ConfigError

log = logging.getLogger("insync.server")

POLL_S = 0.25  # how often a waiting acceptor looks whether its listener is stopping
SLOT_WAIT_S = 0.25  # the same while it waits for a connection slot
JOIN_TIMEOUT_S = 5.0
# accept() failing for want of file descriptors or memory: wait before trying again, rather than spin (a client
# still in the backlog is accepted once a connection closes)
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
RESOURCE_WAIT_S = 0.1
MAX_INT = 2**31 - 1
SOCKADDR_BYTES = 128  # sizeof(struct sockaddr_storage)

_LIBC = ctypes.PyDLL(None, use_errno=True)  # PyDLL: a call keeps the GIL
_ACCEPT4 = _LIBC.accept4
_ACCEPT4.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32), ctypes.c_int]
_ACCEPT4.restype = ctypes.c_int


class TooManyConnections(Exception):
    """Kafka's TooManyConnectionsException: `ip` already has `count`, its maximum."""

    def __init__(self, ip: str, count: int) -> None:
        super().__init__(f"Too many connections from {ip} (maximum = {count})")
        self.ip = ip
        self.count = count


class ConnectionQuotas:
    """Open connections of a node, in all and by IP address, against `max_connections` and the per-IP maxima. The
    acceptor threads admit connections and the event loop releases them, hence the lock."""

    def __init__(self, max_connections: int = MAX_INT, max_per_ip: int = MAX_INT,
                 overrides: Mapping[str, int] | None = None) -> None:
        assert max_connections >= 0 and max_per_ip >= 0
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = dict(overrides or {})  # by IP address
        self._counts: dict[str, int] = {}
        self._total = 0
        self._changed = threading.Condition()

    @classmethod
    def from_config(cls, sockets: SocketConfig) -> ConnectionQuotas:
        """The quotas of `sockets`, each override's host resolved to its address once, as Kafka does at startup."""
        overrides = {}
        for host, count in sockets.max_connections_per_ip_overrides:
            try:
                overrides[socket.gethostbyname(host)] = count
            except OSError as exc:
                raise ConfigError(f"Error parsing configuration property 'max.connections.per.ip.overrides': "
                                  f"unknown host {host} ({exc})") from None
        return cls(sockets.max_connections, sockets.max_connections_per_ip, overrides)

    @property
    def total(self) -> int:
        return self._total

    def count(self, ip: str) -> int:
        return self._counts.get(ip, 0)

    def slot_available(self, protected: bool) -> bool:
        """Whether `admit` would count a connection at once (not waiting for one to close)."""
        return protected or self._total < self.max_connections

    def admit(self, ip: str, protected: bool, stopping: threading.Event) -> bool:
        """Count a new connection from `ip`: wait while the node is at `max_connections` (not on a `protected`
        listener); TooManyConnections when `ip` is at its own maximum; False when `stopping` is set meanwhile."""
        with self._changed:
            while not protected and self._total >= self.max_connections:  # bounded: `stopping` ends the wait
                if stopping.is_set():
                    return False
                self._changed.wait(SLOT_WAIT_S)
            count = self._counts.get(ip, 0)
            maximum = self.overrides.get(ip, self.max_per_ip)
            if count >= maximum:
                raise TooManyConnections(ip, maximum)
            self._counts[ip] = count + 1
            self._total += 1
            return True

    def release(self, ip: str) -> None:
        with self._changed:
            count = self._counts.get(ip, 0)
            assert count > 0 and self._total > 0, f"a connection from {ip} released that was never admitted"
            if count == 1:
                del self._counts[ip]
            else:
                self._counts[ip] = count - 1
            self._total -= 1
            self._changed.notify_all()


def listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    """A non-blocking socket bound to `host:port` (every address when `host` is empty) listening with `backlog`."""
    assert backlog >= 1
    family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def accept_fd(listening_fd: int) -> tuple[int, str] | None:
    """One pending connection of non-blocking `listening_fd` as (its own non-blocking descriptor, the peer's IP
    address), None when none is pending; OSError as `socket.accept` raises it. The GIL is held throughout."""
    address = ctypes.create_string_buffer(SOCKADDR_BYTES)
    length = ctypes.c_uint32(SOCKADDR_BYTES)
    fd = _ACCEPT4(listening_fd, address, ctypes.byref(length), socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)
    if fd < 0:
        code = ctypes.get_errno()
        if code in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR):
            return None
        raise OSError(code, os.strerror(code))
    return fd, peer_ip(address.raw[:length.value])


def peer_ip(sockaddr: bytes) -> str:
    """The IP address of a `struct sockaddr_in` or `sockaddr_in6`, as Python's socket module writes it."""
    family = int.from_bytes(sockaddr[:2], sys.byteorder)  # sa_family_t, in the host's byte order
    if family == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, sockaddr[4:8])
    assert family == socket.AF_INET6, f"a TCP listener's peer is IPv4 or IPv6, not family {family}"
    return socket.inet_ntop(socket.AF_INET6, sockaddr[8:24])


HandOff = Callable[[list[tuple[int, str]]], None]


class Acceptor:
    """A thread accepting on `sock` and handing the admitted connections, each a descriptor with its IP address,
    to `hand_off` on `loop` a batch at a time. `stop` ends the thread and closes the socket."""

    def __init__(self, sock: socket.socket, backlog: int, quotas: ConnectionQuotas, protected: bool,
                 loop: asyncio.AbstractEventLoop, hand_off: HandOff) -> None:
        assert backlog >= 1
        self.sock = sock
        self.backlog = backlog
        self.quotas = quotas
        self.protected = protected
        self._loop = loop
        self._hand_off = hand_off
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"acceptor-{sock.getsockname()[1]}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting and close the listening socket (blocks up to `JOIN_TIMEOUT_S`: run it off the loop)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(JOIN_TIMEOUT_S)
        self.sock.close()

    def _run(self) -> None:
        while not self._stopping.is_set():  # bounded by stop(), which sets it
            try:
                ready, _, _ = select.select([self.sock], [], [], POLL_S)
            except (OSError, ValueError):
                return  # the socket was closed under it
            if ready:
                self._accept_pending()

    def _accept_pending(self) -> None:
        """Accept what the kernel holds: at most a full backlog, so a flood cannot keep the thread from its stop."""
        batch: list[tuple[int, str]] = []
        try:
            for _ in range(self.backlog + 1):
                try:
                    accepted = accept_fd(self.sock.fileno())
                except OSError as exc:
                    if exc.errno in RESOURCE_ERRNOS:
                        log.error("Error accepting a connection on port %d: %s", self.sock.getsockname()[1], exc)
                        time.sleep(RESOURCE_WAIT_S)
                    return
                if accepted is None:
                    return
                if not self.quotas.slot_available(self.protected):
                    self._hand_over(batch)  # what was admitted is served while the acceptor waits for a slot
                    batch = []
                if not self._admit(*accepted, batch):
                    return
        finally:
            self._hand_over(batch)

    def _admit(self, fd: int, ip: str, batch: list[tuple[int, str]]) -> bool:
        """`fd` into `batch` within the quotas; False once stopping (the connection is closed then)."""
        try:
            admitted = self.quotas.admit(ip, self.protected, self._stopping)
        except TooManyConnections as exc:
            log.info("Rejected connection from %s, address already has the configured maximum of %d connections.",
                     exc.ip, exc.count)
            os.close(fd)
            return True
        if not admitted:
            os.close(fd)
            return False
        batch.append((fd, ip))
        return True

    def _hand_over(self, batch: list[tuple[int, str]]) -> None:
        if not batch:
            return
        try:
            self._loop.call_soon_threadsafe(self._hand_off, batch)
        except RuntimeError:  # the loop is closed: the listener is gone
            for fd, ip in batch:
                self.quotas.release(ip)
                os.close(fd)
