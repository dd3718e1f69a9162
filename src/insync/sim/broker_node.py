"""The simulated broker process: a real `BrokerCore` over a `MemoryDisk`, driven by the scheduler.

`Outgoing` messages go on the network, a `CompleteAfter` (a slow follower read, KIP-501) schedules
`complete_read` after its latency, and the core's next deadline becomes one timer. Process faults:
- `pause(ms)`: a stop-the-world GC pause; messages and finished reads wait in an inbox until it ends.
- `kill(torn_tail)`: in-flight messages and pending reads are lost, the disk keeps only what was fsynced
  (`MemoryDisk.crash`), and no clean-shutdown marker is left.
- `stop(then)`: controlled shutdown, as on SIGTERM: it keeps serving until the controller has moved its
  leaderships or its session passes, then checkpoints, flushes and closes every log, leaves the clean-shutdown
  marker (KIP-966) and closes its connections, so clients hear of it at once.
- `restart()`: a new process recovers the logs from that disk (`LogManager.open`) and registers again.
Metadata comes by a long poll of the controller's log; after every step `on_step` runs the checker's invariants.
With `transactions` a process also runs a `sim.txn_coordinator`, given coordinator requests and ProduceResponses.
"""

from __future__ import annotations

import functools
import itertools
from collections import deque
from collections.abc import Callable

from insync.broker.controller_channel import (
    METADATA_POLL_FIRST_CORRELATION,
    METADATA_POLL_RETRY_MS,
    METADATA_POLL_WAIT_MS,
    REQUEST_TIMEOUT_MS,
)
from insync.broker.core import BrokerCore
from insync.broker.messages import CompleteAfter, ProduceResponse
from insync.config import BrokerConfig
from insync.controller.messages import CONTROLLER, MetadataFetchRequest, MetadataUpdate
from insync.events import Event
from insync.limits import METADATA_RECORDS_PER_FETCH_MAX
from insync.sim.network import Disconnected, Network, NodeId
from insync.sim.scheduler import Scheduler, SchedulerClock, Timer
from insync.sim.txn_coordinator import SimTxnCoordinator
from insync.sim.txn_messages import AddTxnPartitions, EndTxn, FindTxnCoordinator, InitTxnProducer
from insync.storage.disk import MemoryDisk
from insync.storage.log_manager import LogManager
from insync.types import BrokerId, Outgoing

# Messages a paused broker buffers; a pause long enough to exceed this means the workload is misconfigured.
INBOX_MAX = 1_000_000
CONTROLLED_SHUTDOWN_POLL_MS = 100  # how often a stopping broker looks whether the controller has let it go
_TXN_REQUESTS = (FindTxnCoordinator, InitTxnProducer, AddTxnPartitions, EndTxn)


class SimBroker:
    def __init__(self, broker_id: BrokerId, config: BrokerConfig, scheduler: Scheduler, network: Network,
                 sink: Callable[[list[Event]], None], on_step: Callable[[int], None], transactions: bool = False
                 ) -> None:
        self.broker_id = broker_id
        self._transactions = transactions
        self.coordinator: SimTxnCoordinator | None = None
        self.config = config
        self.disk = MemoryDisk()
        self.log_dir = f"/broker-{broker_id}"
        self._scheduler = scheduler
        self._network = network
        self._sink = sink
        self._on_step = on_step
        self._clock = SchedulerClock(scheduler)
        self.core: BrokerCore | None = None
        self._log_manager: LogManager | None = None
        self._stopping = False
        self.incarnation = 0
        self._timer: Timer | None = None
        self._paused_until_ms = 0
        self._inbox: deque[tuple[NodeId, object] | int | Callable[[], None]] = deque()
        self._poll: int | None = None  # the correlation id of the metadata long poll out
        self._poll_timer: Timer | None = None
        self._poll_correlations = itertools.count(METADATA_POLL_FIRST_CORRELATION)
        # A broker hears its connections close, as the server's `KafkaConnection` does: a follower fetch to a
        # leader that stopped cleanly fails at once (`_handle`), not after replica.socket.timeout.ms.
        network.register(broker_id, self._on_message, hears_disconnects=True)

    @property
    def alive(self) -> bool:
        return self.core is not None

    @property
    def paused(self) -> bool:
        return self._scheduler.now_ms < self._paused_until_ms

    def start(self) -> None:
        assert self.core is None
        self.incarnation += 1
        self._stopping = False
        self._network.open(self.broker_id)
        log_manager = LogManager.open(self.log_dir, self.config, self.disk, self._clock)
        self._log_manager = log_manager
        self.core = BrokerCore(self.broker_id, self.config, log_manager, self.incarnation,
                               self._scheduler.now_ms)
        if self._transactions:
            self.coordinator = SimTxnCoordinator(
                self.broker_id, self.config.transactions, self.core, lambda: self._scheduler.now_ms,
                functools.partial(self._coordinator_after, self.incarnation),
                functools.partial(self._network.send, self.broker_id), self._local)
        self._apply([*self.core.start(self._scheduler.now_ms), *self._poll_metadata()])

    # Driving the core ---------------------------------------------------------------------------------

    def _on_message(self, src: NodeId, message: object) -> None:
        if self.core is None:
            return
        if self.paused:
            assert len(self._inbox) < INBOX_MAX
            self._inbox.append((src, message))
            return
        self._apply(self._handle(src, message))

    def _handle(self, src: NodeId, message: object) -> list[Outgoing | CompleteAfter]:
        core = self.core
        assert core is not None
        if isinstance(message, MetadataUpdate) and message.correlation_id == self._poll:
            return self._on_poll_answer(message)
        if self.coordinator is not None and isinstance(message, _TXN_REQUESTS):
            self.coordinator.on_request(src, message)
            return []
        if self.coordinator is not None and isinstance(message, ProduceResponse):
            self.coordinator.on_produce_response(message)
            return []
        if not isinstance(message, Disconnected):
            return core.handle(self._scheduler.now_ms, src, message)
        # As `server.broker_node._to_broker`: the fetch in flight on the closed connection fails and backs off.
        # The controller channel has no such path there either: it times out and retries.
        node = message.node
        if not isinstance(node, int):
            return []  # the controller (or a client): nothing of ours in flight fails on it
        if self.coordinator is not None:
            self.coordinator.on_disconnect(node)
        session = core.fetchers.sessions.get(BrokerId(node))
        request = session.in_flight if session is not None else None
        if request is None:
            return []
        return core.fetch_failed(self._scheduler.now_ms, BrokerId(node), request.correlation_id)

    # The transaction coordinator's calls -----------------------------------------------------------------

    def _local(self, message: object) -> None:
        """The coordinator's request to its own core, in-process (as the server's `call`)."""
        assert self.core is not None and not self.paused
        self._apply(self.core.handle(self._scheduler.now_ms, self.broker_id, message))

    def _local_answer(self, incarnation: int, message: object) -> None:
        if self.core is None or incarnation != self.incarnation:
            return
        if self.paused:
            self._inbox.append((self.broker_id, message))
            return
        self._apply(self._handle(self.broker_id, message))

    def _coordinator_after(self, incarnation: int, delay_ms: int, action: Callable[[], None]) -> None:
        self._scheduler.after(delay_ms, functools.partial(self._coordinator_timer, incarnation, action))

    def _coordinator_timer(self, incarnation: int, action: Callable[[], None]) -> None:
        if self.core is None or incarnation != self.incarnation:
            return
        if self.paused:
            self._inbox.append(action)
            return
        action()

    # The metadata long poll ----------------------------------------------------------------------------

    def _poll_metadata(self) -> list[Outgoing | CompleteAfter]:
        core = self.core
        assert core is not None and self._poll is None
        correlation = next(self._poll_correlations)
        self._poll = correlation
        self._poll_timer = self._scheduler.after(METADATA_POLL_WAIT_MS + REQUEST_TIMEOUT_MS,
                                                 functools.partial(self._poll_lost, self.incarnation, correlation))
        return [Outgoing(CONTROLLER, MetadataFetchRequest(correlation, self.broker_id, core.metadata.applied_offset,
                                                          METADATA_RECORDS_PER_FETCH_MAX, METADATA_POLL_WAIT_MS))]

    def _on_poll_answer(self, update: MetadataUpdate) -> list[Outgoing | CompleteAfter]:
        core = self.core
        assert core is not None
        self._poll = None
        if self._poll_timer is not None:
            self._poll_timer.cancel()
        commands = core.handle(self._scheduler.now_ms, CONTROLLER, update) if update.records else []
        return [*commands, *self._poll_metadata()]

    def _poll_lost(self, incarnation: int, correlation: int) -> None:
        if incarnation != self.incarnation or correlation != self._poll:
            return
        self._poll = None
        self._scheduler.after(METADATA_POLL_RETRY_MS, functools.partial(self._poll_again, incarnation))

    def _poll_again(self, incarnation: int) -> None:
        """After a lost poll; a paused node polls when it resumes instead."""
        if self.core is not None and incarnation == self.incarnation and self._poll is None and not self.paused:
            self._apply(self._poll_metadata())

    def _complete(self, incarnation: int, token: int) -> None:
        if self.core is None or incarnation != self.incarnation:
            return
        if self.paused:
            self._inbox.append(token)
            return
        self._apply(self.core.complete_read(self._scheduler.now_ms, token))

    def _tick(self) -> None:
        self._timer = None
        if self.core is None or self.paused:
            return
        self._apply(self.core.tick(self._scheduler.now_ms))

    def _apply(self, commands: list[Outgoing | CompleteAfter]) -> None:
        core = self.core
        assert core is not None
        network = self._network
        for command in commands:
            if isinstance(command, Outgoing) and command.destination == self.broker_id:
                self._scheduler.after(0, functools.partial(self._local_answer, self.incarnation, command.message))
            elif isinstance(command, Outgoing):
                network.send(self.broker_id, command.destination, command.message)
            else:
                self._scheduler.after(command.delay_ms,
                                      functools.partial(self._complete, self.incarnation, command.token))
        events = core.drain_events()
        if events:
            self._sink(events)
        if core.halt_message is not None:  # every log dir failed: the process halts, its page cache survives
            self.kill(torn_tail=False, lose_unsynced=False)
            return
        self._arm_timer()
        self._on_step(self.broker_id)

    def _arm_timer(self) -> None:
        assert self.core is not None
        deadline = max(self.core.next_deadline_ms(), self._scheduler.now_ms)
        timer = self._timer
        if timer is not None:
            if timer.time_ms == deadline and not timer.cancelled:
                return
            timer.cancel()
        self._timer = self._scheduler.at(deadline, self._tick)

    # Process faults -----------------------------------------------------------------------------------

    def pause(self, duration_ms: int) -> None:
        if self.core is None:
            return
        assert duration_ms > 0
        self._paused_until_ms = max(self._paused_until_ms, self._scheduler.now_ms + duration_ms)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._scheduler.at(self._paused_until_ms, self._resume)

    def _resume(self) -> None:
        if self.core is None or self.paused:
            return
        # Bounded by INBOX_MAX; a message handled here may not pause us again (pauses come from faults only).
        while self._inbox and self.core is not None:
            item = self._inbox.popleft()
            if isinstance(item, int):
                self._apply(self.core.complete_read(self._scheduler.now_ms, item))
            elif callable(item):
                item()
            else:
                self._apply(self._handle(item[0], item[1]))
        if self.core is not None:
            self._apply(self.core.tick(self._scheduler.now_ms))
        if self.core is not None and self._poll is None:
            self._apply(self._poll_metadata())

    def kill(self, torn_tail: bool, *, clean: bool = False, lose_unsynced: bool = True) -> None:
        """The process ends: with `clean`, after a clean stop (its clients see their connections close),
        otherwise silently, like a power loss (unless not `lose_unsynced`: a process that halts)."""
        if self.core is None:
            return
        self.core = None
        self.coordinator = None
        self.incarnation += 1
        self._inbox.clear()
        self._paused_until_ms = 0
        self._poll = None
        if self._poll_timer is not None:
            self._poll_timer.cancel()
            self._poll_timer = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if clean:
            self._network.close(self.broker_id)
        else:
            self._network.kill(self.broker_id)
        if lose_unsynced:
            self.disk.crash(torn_tail=torn_tail, rng=self._scheduler.rng)

    def stop(self, then: Callable[[], None]) -> None:
        """Controlled shutdown, then a clean stop (module docstring); `then` runs once the process has ended."""
        if self.core is None or self._stopping:
            return
        self._stopping = True
        now = self._scheduler.now_ms
        if not self.paused:
            self._apply(self.core.begin_controlled_shutdown(now))
        deadline_ms = now + self.config.lifecycle.session_timeout_ms
        self._scheduler.after(CONTROLLED_SHUTDOWN_POLL_MS,
                              functools.partial(self._stop_when_let_go, self.incarnation, deadline_ms, then))

    def _stop_when_let_go(self, incarnation: int, deadline_ms: int, then: Callable[[], None]) -> None:
        core = self.core
        if core is None or incarnation != self.incarnation:
            return  # killed meanwhile: that was the end of this process
        now = self._scheduler.now_ms
        if self.paused or (not core.shutdown_granted and now < deadline_ms):
            if not self.paused and not core.channel.shutting_down:  # paused when the stop began
                self._apply(core.begin_controlled_shutdown(now))
            # Bounded by the deadline (a pause only delays it).
            self._scheduler.after(CONTROLLED_SHUTDOWN_POLL_MS,
                                  functools.partial(self._stop_when_let_go, incarnation, deadline_ms, then))
            return
        core.checkpoint()
        assert self._log_manager is not None
        self._log_manager.close()
        core.mark_clean_shutdown()
        self.kill(torn_tail=False, clean=True)  # everything is flushed: the disk keeps it all
        then()

    def restart(self) -> None:
        if self.core is None:
            self.start()
