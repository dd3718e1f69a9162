"""The simulated controller process: the production `ControllerCore` behind the simulated network.

A thin driver, as `server.controller_node` is over asyncio: messages from brokers go to `ControllerCore.handle`
(registrations and heartbeats first wrapped as the controller listener would: the simulator's brokers have no
listener or incarnation UUID to announce), its answers go on the network, events go to the sink, and one timer
calls `tick` at the core's next deadline (session expiry, seed 003's propagation check, the end of a parked
metadata fetch's wait). Metadata reaches brokers as in production: by their long polls, which the core parks
and answers at publication (`sim.broker_node`). `kill()` ends the process (messages in flight to it are lost,
brokers' requests time out); `restart()` starts a new one over the same store, which kept every committed batch.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from insync import errors
from insync.config import BrokerConfig
from insync.controller.controller import Controller
from insync.controller.messages import (
    CONTROLLER,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    Heartbeat,
    Registration,
)
from insync.controller.node import ControllerCore
from insync.controller.store import MemoryStore
from insync.events import Event
from insync.sim.network import Network, NodeId
from insync.sim.scheduler import Scheduler, Timer
from insync.types import Outgoing

CONTROLLER_NODE_ID = 0
SIM_HOST, SIM_PORT = "sim", 9092  # what every simulated broker announces: nothing connects to it


class SimController:
    def __init__(self, config: BrokerConfig, scheduler: Scheduler, network: Network,
                 sink: Callable[[list[Event]], None], on_step: Callable[[], None] = lambda: None) -> None:
        self._config = config
        self._scheduler = scheduler
        self._network = network
        self._sink = sink
        self._on_step: Callable[[], None] = lambda: None
        self._store = MemoryStore()
        self.core = self._start()
        self.alive = True
        self._timer: Timer | None = None
        network.register(CONTROLLER, self._on_message)
        self._after([])
        self._on_step = on_step  # from now on: the owner is fully built

    @property
    def controller(self) -> Controller:
        """The running controller, or while the process is down the last one (its image is what was stored)."""
        return self.core.controller

    def _start(self) -> ControllerCore:
        now = self._scheduler.now_ms
        controller = Controller(CONTROLLER_NODE_ID, self._config, self._store, now,
                                random.Random(self._scheduler.rng.getrandbits(64)))
        return ControllerCore(controller, now)

    def kill(self) -> None:
        if not self.alive:
            return
        self.alive = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._network.kill(CONTROLLER)

    def restart(self) -> None:
        if self.alive:
            return
        self.core = self._start()
        self.alive = True
        self._after([])

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
        assert self.alive, "the controller process is down"
        now = self._scheduler.now_ms
        self.controller.create_topic(name, partitions, replication_factor, configs, now)
        self._after(self.core.wake(now))

    def _on_message(self, src: NodeId, message: object) -> None:
        if not self.alive:
            return
        if isinstance(message, BrokerRegistrationRequest):
            message = Registration(message, f"incarnation-{message.incarnation_id}", SIM_HOST, SIM_PORT, None,
                                   errors.NONE)
        elif isinstance(message, BrokerHeartbeatRequest):
            message = Heartbeat(message, want_fence=False)
        self._after(self.core.handle(self._scheduler.now_ms, src, message))

    def _tick(self) -> None:
        self._timer = None
        if self.alive:
            self._after(self.core.tick(self._scheduler.now_ms))

    def _after(self, outgoing: list[Outgoing]) -> None:
        """Send the core's answers, hand events to the sink, re-arm the timer."""
        for command in outgoing:
            self._network.send(CONTROLLER, command.destination, command.message)
        events = self.controller.drain_events()
        if events:
            self._sink(events)
        self._on_step()
        deadline = max(self.core.next_deadline_ms(), self._scheduler.now_ms)
        if self._timer is None or self._timer.time_ms != deadline:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self._scheduler.at(deadline, self._tick)
