"""A simulated network between named nodes: latency, jitter, loss, reordering, partitions and clogging.

`send(src, dst, message)` delivers after the link's latency plus a random jitter; a link is FIFO like a TCP
connection unless `reorder=True`. A message is lost when the link is cut (`cut`, `partition`), the random drop rate
says so, or the destination died since it was sent (`kill` bumps its incarnation). A dead process is silent, like a
machine that lost power; one that stops cleanly (`close`) gives nodes registered with `hears_disconnects` a
`Disconnected(node)` one latency later, and again for each message sent to it until it is back (`open`), as a reset
or refused connection. Clogging (FoundationDB's term) holds a link's messages until `unclog`, so the receiver sees
a burst later; `swizzle_clog` clogs links one after another and unclogs them in another order, which shakes out
ordering assumptions. Optional bandwidth (per link, `throttle` for one) charges record bytes: `n` bytes occupy the
link for `n / bandwidth` ms, queued like bytes on a TCP connection, so a burst of large batches takes time to reach
followers. `set_latency` gives one link its own latency and jitter until `clear_latency`. Handlers are callbacks
`deliver(src, message)`; pausing is the node's business.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from insync.sim.scheduler import Scheduler

NodeId = int | str
Deliver = Callable[[NodeId, object], None]

# Links between a handful of nodes and clients; bounded so a bug cannot grow it without end.
LINKS_MAX = 10_000
# A link slower than this is a partition, which `cut` says more plainly.
LINK_LATENCY_MS_MAX = 60_000


@dataclass(frozen=True, slots=True)
class Disconnected:
    """To a client: its connection to `node` was closed, or refused (the process stopped cleanly)."""

    node: NodeId


@dataclass(frozen=True, slots=True)
class LinkConfig:
    latency_ms: int = 1
    jitter_ms: int = 1
    drop_rate: float = 0.0
    reorder: bool = False
    bandwidth_bytes_per_ms: int = 0  # 0: unlimited; else record bytes take size / bandwidth to send

    def __post_init__(self) -> None:
        assert self.latency_ms >= 0 and self.jitter_ms >= 0 and self.bandwidth_bytes_per_ms >= 0, self
        assert 0.0 <= self.drop_rate <= 1.0, self


@dataclass(slots=True)
class NetworkStats:
    sent: int = 0
    delivered: int = 0
    dropped_cut: int = 0
    dropped_random: int = 0
    dropped_dead: int = 0


class Network:
    """Point-to-point links between registered nodes, with faults applied per directed link."""

    def __init__(self, scheduler: Scheduler, config: LinkConfig | None = None) -> None:
        self._scheduler = scheduler
        self.config = config or LinkConfig()
        self._handlers: dict[NodeId, Deliver] = {}
        self._incarnation: dict[NodeId, int] = {}
        self._cut: set[tuple[NodeId, NodeId]] = set()
        self._clogged_until_ms: dict[tuple[NodeId, NodeId], int] = {}
        self._last_delivery_ms: dict[tuple[NodeId, NodeId], int] = {}
        self._bandwidth: dict[tuple[NodeId, NodeId], int] = {}
        self._latency: dict[tuple[NodeId, NodeId], tuple[int, int]] = {}  # link -> (latency_ms, jitter_ms)
        self._link_free_ms: dict[tuple[NodeId, NodeId], int] = {}
        self._closed: set[NodeId] = set()
        self._hears_disconnects: set[NodeId] = set()
        self.stats = NetworkStats()

    def register(self, node: NodeId, deliver: Deliver, *, hears_disconnects: bool = False) -> None:
        assert node not in self._handlers, f"node {node!r} registered twice"
        self._handlers[node] = deliver
        self._incarnation[node] = 0
        if hears_disconnects:
            self._hears_disconnects.add(node)

    def nodes(self) -> list[NodeId]:
        return list(self._handlers)

    def kill(self, node: NodeId) -> None:
        """The process died: everything in flight to it is lost, and links to it start afresh."""
        assert node in self._handlers, node
        self._incarnation[node] += 1
        for link in [link for link in self._last_delivery_ms if node in link]:
            del self._last_delivery_ms[link]

    def close(self, node: NodeId) -> None:
        """The process stopped cleanly: as `kill`, and the clients hear that their connections closed."""
        self.kill(node)
        self._closed.add(node)
        for client in sorted(self._hears_disconnects, key=str):
            self._refuse(node, client)

    def open(self, node: NodeId) -> None:
        """The process is back: connections to it are accepted again."""
        self._closed.discard(node)

    def _refuse(self, node: NodeId, client: NodeId) -> None:
        if (node, client) not in self._cut:
            latency_ms, _ = self._link_latency((node, client))
            self._scheduler.after(latency_ms, lambda: self._handlers[client](node, Disconnected(node)))

    def send(self, src: NodeId, dst: NodeId, message: object) -> None:
        assert dst in self._handlers, f"unknown destination {dst!r}"
        self.stats.sent += 1
        if dst in self._closed:
            self.stats.dropped_dead += 1
            if src in self._hears_disconnects:
                self._refuse(dst, src)
            return
        link = (src, dst)
        if link in self._cut:
            self.stats.dropped_cut += 1
            return
        config = self.config
        scheduler = self._scheduler
        if config.drop_rate and scheduler.chance(config.drop_rate):
            self.stats.dropped_random += 1
            return
        latency_ms, jitter_ms = self._link_latency(link)
        delay = latency_ms + (scheduler.uniform_ms(0, jitter_ms) if jitter_ms else 0)
        due_ms = scheduler.now_ms + delay
        bandwidth = self._bandwidth.get(link, config.bandwidth_bytes_per_ms)
        if bandwidth:
            size = record_bytes(message)
            if size:
                start_ms = max(scheduler.now_ms, self._link_free_ms.get(link, 0))
                free_ms = start_ms + -(-size // bandwidth)
                self._link_free_ms[link] = free_ms
                due_ms = free_ms + delay
        clogged_until = self._clogged_until_ms.get(link)
        if clogged_until is not None:
            if clogged_until > scheduler.now_ms:
                due_ms = max(due_ms, clogged_until)
            else:
                del self._clogged_until_ms[link]
        if not config.reorder:
            due_ms = max(due_ms, self._last_delivery_ms.get(link, 0))
            assert len(self._last_delivery_ms) < LINKS_MAX
            self._last_delivery_ms[link] = due_ms
        incarnation = self._incarnation[dst]
        scheduler.at(due_ms, lambda: self._deliver(src, dst, incarnation, message))

    def _link_latency(self, link: tuple[NodeId, NodeId]) -> tuple[int, int]:
        """The link's latency and jitter now: its own (`set_latency`), else the network's."""
        return self._latency.get(link, (self.config.latency_ms, self.config.jitter_ms))

    def _deliver(self, src: NodeId, dst: NodeId, incarnation: int, message: object) -> None:
        if self._incarnation[dst] != incarnation:
            self.stats.dropped_dead += 1
            return
        if (src, dst) in self._cut:
            # The connection broke while the message was on the wire.
            self.stats.dropped_cut += 1
            return
        self.stats.delivered += 1
        self._handlers[dst](src, message)

    # Faults -----------------------------------------------------------------------------------------------

    def cut(self, src: NodeId, dst: NodeId) -> None:
        """One-way partition: messages from src to dst are lost until `heal`."""
        self._cut.add((src, dst))

    def partition(self, side_a: Iterable[NodeId], side_b: Iterable[NodeId]) -> None:
        """Symmetric partition between two groups of nodes."""
        side_b = list(side_b)
        for a in side_a:
            for b in side_b:
                if a != b:
                    self._cut.add((a, b))
                    self._cut.add((b, a))

    def heal(self) -> None:
        self._cut.clear()

    def is_cut(self, src: NodeId, dst: NodeId) -> bool:
        return (src, dst) in self._cut

    def throttle(self, src: NodeId, dst: NodeId, bytes_per_ms: int) -> None:
        """Limit the bandwidth of one link (0 restores the default)."""
        assert bytes_per_ms >= 0
        if bytes_per_ms:
            self._bandwidth[(src, dst)] = bytes_per_ms
        else:
            self._bandwidth.pop((src, dst), None)

    def set_latency(self, src: NodeId, dst: NodeId, latency_ms: int, jitter_ms: int = 0) -> None:
        """Messages on src->dst take `latency_ms` plus up to `jitter_ms` instead of the network's latency, until
        `clear_latency`; the link stays FIFO unless the network reorders."""
        assert latency_ms >= 0 and jitter_ms >= 0, (latency_ms, jitter_ms)
        assert latency_ms + jitter_ms <= LINK_LATENCY_MS_MAX, (latency_ms, jitter_ms)
        assert src in self._handlers and dst in self._handlers and src != dst, (src, dst)
        assert len(self._latency) < LINKS_MAX or (src, dst) in self._latency
        self._latency[(src, dst)] = (latency_ms, jitter_ms)

    def clear_latency(self, src: NodeId, dst: NodeId) -> None:
        """src->dst back to the network's latency; a message already on its way keeps the delay it was sent with."""
        self._latency.pop((src, dst), None)

    def clog(self, src: NodeId, dst: NodeId, until_ms: int) -> None:
        """Hold every message sent on src->dst until `until_ms`, then deliver them in order."""
        assert until_ms >= self._scheduler.now_ms
        link = (src, dst)
        self._clogged_until_ms[link] = max(until_ms, self._clogged_until_ms.get(link, 0))

    def swizzle_clog(self, nodes: list[NodeId], duration_ms: int) -> None:
        """Clog a random subset of the links among `nodes`, staggered, and unclog them in another random order."""
        assert duration_ms > 0
        rng = self._scheduler.rng
        links = [(a, b) for a in nodes for b in nodes if a != b]
        chosen = [link for link in links if rng.random() < 0.5] or links[:1]
        rng.shuffle(chosen)
        now = self._scheduler.now_ms
        step_ms = max(1, duration_ms // (2 * len(chosen)))
        unclog_order = list(range(len(chosen)))
        rng.shuffle(unclog_order)
        for index, (src, dst) in enumerate(chosen):
            start_ms = now + index * step_ms
            end_ms = now + duration_ms // 2 + unclog_order[index] * step_ms
            self._scheduler.at(start_ms, functools.partial(self.clog, src, dst, end_ms))


def record_bytes(message: object) -> int:
    """Bytes of record data a message carries (the part that costs bandwidth); 0 for control messages."""
    records = getattr(message, "records", None)
    if isinstance(records, bytes):
        return len(records)
    total = 0
    for part in getattr(message, "partitions", ()):
        if isinstance(part, tuple) and len(part) == 2 and isinstance(part[1], bytes):
            total += len(part[1])
        else:
            data = getattr(part, "records", None)
            if isinstance(data, bytes):
                total += len(data)
    return total
