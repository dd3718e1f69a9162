"""The broker's side of its conversation with the controller: registration, heartbeats, AlterPartition, metadata.

A state machine free of I/O that returns the requests to send:
- Registration with a fresh incarnation id, retried every heartbeat interval until it gets a broker epoch, and
  again after STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED. It names the previous broker epoch (KIP-966): the
  clean-shutdown marker's at start, then this life's own, since a re-registration without restart lost nothing.
- Heartbeats every `broker.heartbeat.interval.ms` with the metadata offset applied and the failed log dirs; a
  broker behind the published offset fetches at once, which only repairs a lost or failed long poll.
- Controlled shutdown (`begin_shutdown`): heartbeats ask to shut down; the controller moves the leaderships, then
  fences the broker and answers `should_shut_down`, so it restarts without waiting out its old session.
- AlterPartition (KIP-497): one queued proposal per partition, at most one request in flight carrying them all;
  a lost request is retried after `REQUEST_TIMEOUT_MS`, a refused one after `ALTER_RETRY_BACKOFF_MS`.
Requests the controller never answers time out, so nothing waits forever.
"""

from __future__ import annotations

from dataclasses import dataclass

from insync import errors
from insync.controller.messages import (
    CONTROLLER,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    MetadataFetchRequest,
)
from insync.controller.replication_control import AlterPartitionData
from insync.controller.results import AlterPartitionDataResult
from insync.limits import ALTER_PARTITION_ITEMS_MAX, METADATA_RECORDS_PER_FETCH_MAX
from insync.types import BrokerEpoch, BrokerId, Outgoing, TopicPartition

# How long a request to the controller may go unanswered before it is considered lost and retried.
REQUEST_TIMEOUT_MS = 5_000
# A refused or lost AlterPartition is sent again after this back-off (Kafka's retry.backoff.ms), never in a loop.
ALTER_RETRY_BACKOFF_MS = 100
# Heartbeats during a controlled shutdown. Kafka keeps the normal interval; the controller moves leaderships in the
# first answer and grants the shutdown in the next, so a short interval makes a clean stop take a fraction of a
# second instead of a heartbeat interval.
SHUTDOWN_HEARTBEAT_INTERVAL_MS = 100
NO_EPOCH = BrokerEpoch(-1)
# The broker's long poll of the metadata log, kept out by its driver (`server.broker_node`, `sim.broker_node`):
# the controller answers it as soon as it publishes past the broker's offset, or with nothing after the wait.
METADATA_POLL_WAIT_MS = 500
METADATA_POLL_RETRY_MS = 200  # after a poll that failed or went unanswered
METADATA_POLL_FIRST_CORRELATION = 1_000_000_000  # polls never share a correlation id with the channel's requests


@dataclass(slots=True)
class _InFlight:
    correlation_id: int
    deadline_ms: int


class ControllerChannel:
    def __init__(self, broker_id: BrokerId, incarnation_id: int, heartbeat_interval_ms: int,
                 previous_broker_epoch: int = -1) -> None:
        assert heartbeat_interval_ms > 0
        self.broker_id = broker_id
        self.incarnation_id = incarnation_id
        self.previous_broker_epoch = previous_broker_epoch
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.broker_epoch = NO_EPOCH
        self.is_fenced = True
        self._correlation = 0
        self._registration: _InFlight | None = None
        self._next_heartbeat_ms = 0
        self._alter_in_flight: _InFlight | None = None
        self._alter_sent: dict[TopicPartition, AlterPartitionData] = {}
        self._alter_queue: dict[TopicPartition, AlterPartitionData] = {}
        self._alter_not_before_ms = 0
        self._metadata_fetch: _InFlight | None = None
        self.published_offset = 0
        self.shutting_down = False
        self.shutdown_granted = False
        self.offline_log_dirs: tuple[str, ...] = ()  # ids of failed log directories, in every heartbeat

    def _next_correlation(self) -> int:
        self._correlation += 1
        return self._correlation

    @property
    def registered(self) -> bool:
        return self.broker_epoch != NO_EPOCH

    @property
    def epoch_to_remember(self) -> int:
        """What a clean-shutdown marker should hold: this life's epoch, or the one it has not yet replaced."""
        return self.broker_epoch if self.registered else self.previous_broker_epoch

    def report_offline_log_dirs(self, now_ms: int, directory_ids: tuple[str, ...]) -> None:
        """Tell the controller at once, in a heartbeat sent now, that these log directories failed (Kafka's
        BrokerLifecycleManager.propagateDirectoryFailure)."""
        assert len(directory_ids) >= len(self.offline_log_dirs), "a failed log directory stays failed"
        self.offline_log_dirs = directory_ids
        self._next_heartbeat_ms = now_ms

    def begin_shutdown(self, now_ms: int) -> None:
        """Ask the controller to let us go, from the next heartbeat on (sent at once). An unregistered broker
        leads nothing and holds no session: it may go now."""
        self.shutting_down = True
        if not self.registered:
            self.shutdown_granted = True
        self._next_heartbeat_ms = now_ms

    # Timers -------------------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int:
        deadlines = [self._next_heartbeat_ms]
        for in_flight in (self._registration, self._alter_in_flight, self._metadata_fetch):
            if in_flight is not None:
                deadlines.append(in_flight.deadline_ms)
        if self._alter_queue and self._alter_in_flight is None and self.registered:
            deadlines.append(self._alter_not_before_ms)
        return min(deadlines)

    def tick(self, now_ms: int, applied_offset: int) -> list[Outgoing]:
        out: list[Outgoing] = []
        for name in ("_registration", "_alter_in_flight", "_metadata_fetch"):
            in_flight: _InFlight | None = getattr(self, name)
            if in_flight is not None and now_ms >= in_flight.deadline_ms:
                setattr(self, name, None)
                if name == "_alter_in_flight":
                    self._requeue_sent(now_ms)
        if now_ms >= self._next_heartbeat_ms:
            interval_ms = self.heartbeat_interval_ms
            if self.shutting_down:  # the controller answers within a beat or two: no need to wait a whole interval
                interval_ms = min(interval_ms, SHUTDOWN_HEARTBEAT_INTERVAL_MS)
            self._next_heartbeat_ms = now_ms + interval_ms
            if not (self.shutting_down and not self.registered):  # a broker going away does not register again
                out.append(self._heartbeat_or_register(now_ms, applied_offset))
        out.extend(self._maybe_send_alter(now_ms))
        if applied_offset < self.published_offset:
            out.extend(self.fetch_metadata(now_ms, applied_offset))
        return out

    def _heartbeat_or_register(self, now_ms: int, applied_offset: int) -> Outgoing:
        correlation = self._next_correlation()
        if not self.registered:
            self._registration = _InFlight(correlation, now_ms + REQUEST_TIMEOUT_MS)
            return Outgoing(CONTROLLER, BrokerRegistrationRequest(correlation, self.broker_id, self.incarnation_id,
                                                                  self.previous_broker_epoch))
        return Outgoing(CONTROLLER, BrokerHeartbeatRequest(correlation, self.broker_id, self.broker_epoch,
                                                           applied_offset, self.shutting_down, self.offline_log_dirs))

    # Responses ----------------------------------------------------------------------------------------

    def on_registration(self, now_ms: int, response: BrokerRegistrationResponse) -> bool:
        """True when this response made us registered (the caller then heartbeats at once)."""
        if self._registration is None or response.correlation_id != self._registration.correlation_id:
            return False
        self._registration = None
        if response.error is not errors.NONE:
            return False
        self.broker_epoch = response.broker_epoch
        self._next_heartbeat_ms = now_ms
        return True

    def on_heartbeat(self, response: BrokerHeartbeatResponse) -> None:
        if response.error in (errors.STALE_BROKER_EPOCH, errors.BROKER_ID_NOT_REGISTERED):
            self.previous_broker_epoch = self.broker_epoch
            self.broker_epoch = NO_EPOCH
            self.is_fenced = True
            self.shutdown_granted |= self.shutting_down  # the controller no longer counts us: nothing to hand over
            return
        if response.error is errors.NONE:
            self.is_fenced = response.is_fenced
            self.published_offset = max(self.published_offset, response.published_offset)
            self.shutdown_granted |= self.shutting_down and response.should_shut_down

    def on_metadata_update(self, correlation_id: int, published_offset: int) -> None:
        self.published_offset = max(self.published_offset, published_offset)
        if self._metadata_fetch is not None and correlation_id == self._metadata_fetch.correlation_id:
            self._metadata_fetch = None

    def fetch_metadata(self, now_ms: int, applied_offset: int) -> list[Outgoing]:
        """Ask for records from `applied_offset` unless a fetch is already out."""
        if self._metadata_fetch is not None:
            return []
        correlation = self._next_correlation()
        self._metadata_fetch = _InFlight(correlation, now_ms + REQUEST_TIMEOUT_MS)
        return [Outgoing(CONTROLLER, MetadataFetchRequest(correlation, self.broker_id, applied_offset,
                                                          METADATA_RECORDS_PER_FETCH_MAX, 0))]

    # AlterPartition -----------------------------------------------------------------------------------

    def propose(self, now_ms: int, tp: TopicPartition, item: AlterPartitionData, retry: bool = False
                ) -> list[Outgoing]:
        """Queue a leader's ISR proposal (replacing an unsent one for the same partition) and send if idle;
        a `retry` waits for the back-off first."""
        assert tp in self._alter_queue or len(self._alter_queue) < ALTER_PARTITION_ITEMS_MAX
        self._alter_queue[tp] = item
        if retry:
            self._alter_not_before_ms = max(self._alter_not_before_ms, now_ms + ALTER_RETRY_BACKOFF_MS)
        return self._maybe_send_alter(now_ms)

    def withdraw(self, tp: TopicPartition) -> None:
        """The partition's leadership ended: forget its unsent proposal."""
        self._alter_queue.pop(tp, None)

    def _maybe_send_alter(self, now_ms: int) -> list[Outgoing]:
        if self._alter_in_flight is not None or not self._alter_queue or not self.registered:
            return []
        if now_ms < self._alter_not_before_ms:
            return []
        correlation = self._next_correlation()
        self._alter_sent = self._alter_queue
        self._alter_queue = {}
        self._alter_in_flight = _InFlight(correlation, now_ms + REQUEST_TIMEOUT_MS)
        request = AlterPartitionRequest(correlation, self.broker_id, self.broker_epoch,
                                        tuple(self._alter_sent.values()))
        return [Outgoing(CONTROLLER, request)]

    def _requeue_sent(self, now_ms: int) -> None:
        for tp, item in self._alter_sent.items():
            self._alter_queue.setdefault(tp, item)
        self._alter_sent = {}
        self._alter_not_before_ms = now_ms + ALTER_RETRY_BACKOFF_MS

    def on_alter_partition(self, now_ms: int, response: AlterPartitionResponse
                           ) -> tuple[list[tuple[TopicPartition, AlterPartitionData, AlterPartitionDataResult]],
                                      list[Outgoing]]:
        """Match results to the proposals sent; returns (tp, item, result) triples and the next request."""
        if self._alter_in_flight is None or response.correlation_id != self._alter_in_flight.correlation_id:
            return [], []
        self._alter_in_flight = None
        sent = self._alter_sent
        self._alter_sent = {}
        if response.error is not errors.NONE:
            self._alter_sent = sent
            self._requeue_sent(now_ms)  # the whole request failed: retry every item after the back-off
            return [], []
        assert len(response.results) == len(sent), (response, sent)
        matched = [(tp, item, result) for (tp, item), result in zip(sent.items(), response.results, strict=True)]
        return matched, self._maybe_send_alter(now_ms)
