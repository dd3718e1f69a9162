"""The controller's node core, sans-IO: what the server and the simulator both drive in front of `Controller`.

`handle(now_ms, source, message)` takes one message from a broker (`controller.messages`), makes the
`Controller` call it stands for, and returns the `Outgoing` answers (none for replica log reports, which the next
heartbeat's replaces). Request-level refusals (`KafkaException`) become the response's error; a
`ControllerFencedError` from the store propagates, and the driver resigns. Metadata reaches brokers by long poll,
Kafka's fetch of the metadata log: a fetch from the published offset is parked and answered as soon as the
controller publishes past it (leadership at once, ISR-only changes batched per seed 003) or when its wait ends.
`handle` and `tick` answer the parked fetches a publication satisfies, and a driver that calls the `Controller`
directly (the admin APIs) calls `wake` after. `next_deadline_ms` covers the controller's timers and the parked
fetches' waits; events stay in the `Controller` for the driver to drain.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from insync import errors
from insync.controller.controller import Controller
from insync.controller.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
    Heartbeat,
    MetadataFetchRequest,
    MetadataUpdate,
    Registration,
    ReplicaLogReportRequest,
)
from insync.errors import KafkaException
from insync.limits import BROKERS_MAX
from insync.types import Address, BrokerEpoch, Outgoing

METADATA_WAIT_MAX_MS = 1000  # a long poll waits at most this long, whatever the broker asks
# A broker keeps one long poll out (a second one while its connection is replaced): more means a runaway client.
PARKED_FETCHES_MAX = 4 * BROKERS_MAX


@dataclass(frozen=True, slots=True)
class _ParkedFetch:
    source: Address
    request: MetadataFetchRequest
    deadline_ms: int


class ControllerCore:
    """The broker-facing half of the active controller; see the module docstring."""

    def __init__(self, controller: Controller, now_ms: int) -> None:
        assert now_ms >= 0
        self.controller = controller
        self._now_ms = now_ms
        self._parked: list[_ParkedFetch] = []

    @property
    def parked_fetches(self) -> int:
        return len(self._parked)

    def handle(self, now_ms: int, source: Address, message: object) -> list[Outgoing]:
        """One message from a broker; returns the answers to send (its own, and parked fetches it satisfied)."""
        self._advance(now_ms)
        if isinstance(message, MetadataFetchRequest):
            return self._fetch(now_ms, source, message)
        reply: object | None = None
        if isinstance(message, Registration):
            reply = self._register(now_ms, message)
        elif isinstance(message, Heartbeat):
            reply = self._heartbeat(now_ms, message)
        elif isinstance(message, AlterPartitionRequest):
            reply = self._alter_partition(now_ms, message)
        else:
            assert isinstance(message, ReplicaLogReportRequest), f"unexpected {type(message).__name__}"
            with contextlib.suppress(KafkaException):  # from a broker's previous life: its heartbeat re-registers
                self.controller.report_replica_logs(message.broker_id, message.broker_epoch, message.reports, now_ms)
        out = [] if reply is None else [Outgoing(source, reply)]
        out.extend(self.wake(now_ms))
        return out

    def tick(self, now_ms: int) -> list[Outgoing]:
        """The controller's timers (session expiry, the propagation check), then the parked fetches."""
        self._advance(now_ms)
        self.controller.tick(now_ms)
        return self.wake(now_ms)

    def wake(self, now_ms: int) -> list[Outgoing]:
        """Answer the parked fetches that a publication satisfied or whose wait has ended."""
        self._advance(now_ms)
        published = self.controller.published_offset
        due = [p for p in self._parked if published > p.request.from_offset or now_ms >= p.deadline_ms]
        if not due:
            return []
        self._parked = [p for p in self._parked if p not in due]
        return [self._update(p.source, p.request) for p in due]

    def next_deadline_ms(self) -> int:
        return min([self.controller.next_deadline_ms()] + [p.deadline_ms for p in self._parked])

    # Requests -------------------------------------------------------------------------------------------

    def _fetch(self, now_ms: int, source: Address, request: MetadataFetchRequest) -> list[Outgoing]:
        wait_ms = min(request.max_wait_ms, METADATA_WAIT_MAX_MS)
        if (wait_ms > 0 and self.controller.published_offset <= request.from_offset
                and len(self._parked) < PARKED_FETCHES_MAX):
            self._parked.append(_ParkedFetch(source, request, now_ms + wait_ms))
            return []
        return [self._update(source, request)]

    def _update(self, source: Address, request: MetadataFetchRequest) -> Outgoing:
        records, published = self.controller.records_since(request.from_offset, request.max_records)
        return Outgoing(source, MetadataUpdate(request.correlation_id, tuple(records), published))

    def _register(self, now_ms: int, registration: Registration) -> BrokerRegistrationResponse:
        request = registration.request
        if registration.error is not errors.NONE:
            return BrokerRegistrationResponse(request.correlation_id, registration.error, BrokerEpoch(-1))
        try:
            result = self.controller.register_broker(request.broker_id, registration.incarnation_id,
                                                     registration.host, registration.port, now_ms,
                                                     registration.rack, request.previous_broker_epoch,
                                                     registration.listeners)
        except KafkaException as exc:
            return BrokerRegistrationResponse(request.correlation_id, exc.error, BrokerEpoch(-1))
        return BrokerRegistrationResponse(request.correlation_id, errors.NONE, BrokerEpoch(result.response))

    def _heartbeat(self, now_ms: int, heartbeat: Heartbeat) -> BrokerHeartbeatResponse:
        request = heartbeat.request
        try:
            result = self.controller.heartbeat(request.broker_id, request.broker_epoch, now_ms,
                                               request.metadata_offset, want_fence=heartbeat.want_fence,
                                               want_shutdown=request.want_shutdown,
                                               offline_log_dirs=request.offline_log_dirs)
        except KafkaException as exc:
            return BrokerHeartbeatResponse(request.correlation_id, exc.error, True, self.controller.published_offset)
        response = result.response
        return BrokerHeartbeatResponse(request.correlation_id, errors.NONE, response.is_fenced,
                                       self.controller.published_offset, response.should_shut_down,
                                       response.is_caught_up)

    def _alter_partition(self, now_ms: int, request: AlterPartitionRequest) -> AlterPartitionResponse:
        try:
            result = self.controller.alter_partition(request.broker_id, request.broker_epoch, request.items, now_ms)
        except KafkaException as exc:
            return AlterPartitionResponse(request.correlation_id, exc.error, ())
        return AlterPartitionResponse(request.correlation_id, errors.NONE, result.response)

    def _advance(self, now_ms: int) -> None:
        assert now_ms >= self._now_ms, f"time went backwards: {now_ms} < {self._now_ms}"
        self._now_ms = now_ms
