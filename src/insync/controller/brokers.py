"""Broker liveness: heartbeat sessions and the broker state machine, after Kafka's `BrokerHeartbeatManager`.

- `BrokerSessions` is soft state, never written to the metadata log: when each broker last contacted the
  controller. A broker silent for more than `broker.session.timeout.ms` is fenced in `tick`. A controller that
  (re)starts gives every registered broker a fresh session, as Kafka's new active controller does, rather than
  fencing the whole cluster at once.
- `next_broker_state(...)` is Kafka's `calculateNextBrokerState`: from the registered state and the heartbeat
  flags to the state the broker should be in; turning a transition into records is the controller's job.
A broker is caught up (the condition to unfence) once its `current_metadata_offset` (the offset of the next
metadata record it will read) passes its own `RegisterBrokerRecord`, whose offset is its broker epoch, as in
KRaft: so a broker never leads with metadata older than its own registration.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from insync.limits import BROKERS_MAX
from insync.metadata.image import BrokerRegistration
from insync.types import BrokerId


class BrokerState(Enum):
    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    SHUTDOWN_NOW = "shutdown_now"  # leave: the broker is fenced and told to shut down


def current_state(broker: BrokerRegistration) -> BrokerState:
    if broker.fenced:
        return BrokerState.FENCED
    return BrokerState.CONTROLLED_SHUTDOWN if broker.in_controlled_shutdown else BrokerState.UNFENCED


def is_caught_up(broker: BrokerRegistration, current_metadata_offset: int) -> bool:
    return current_metadata_offset > broker.broker_epoch


def next_broker_state(broker: BrokerRegistration, current_metadata_offset: int, want_fence: bool,
                      want_shutdown: bool, has_leaderships: bool) -> BrokerState:
    """Kafka's transition table for one heartbeat."""
    state = current_state(broker)
    if state is BrokerState.FENCED:
        if want_shutdown:
            return BrokerState.SHUTDOWN_NOW
        if not want_fence and is_caught_up(broker, current_metadata_offset):
            return BrokerState.UNFENCED
        return BrokerState.FENCED
    if state is BrokerState.UNFENCED:
        if want_fence:
            return BrokerState.FENCED
        if want_shutdown:
            return BrokerState.CONTROLLED_SHUTDOWN if has_leaderships else BrokerState.SHUTDOWN_NOW
        return BrokerState.UNFENCED
    assert state is BrokerState.CONTROLLED_SHUTDOWN
    # Records commit synchronously here, so "its leaderships are gone" is the whole readiness test.
    return BrokerState.CONTROLLED_SHUTDOWN if has_leaderships else BrokerState.SHUTDOWN_NOW


class BrokerSessions:
    """Last contact per broker; a session is valid while `now - last_contact <= session_timeout`."""

    def __init__(self, session_timeout_ms: int) -> None:
        assert session_timeout_ms > 0
        self.session_timeout_ms = session_timeout_ms
        self._last_contact_ms: dict[BrokerId, int] = {}

    def touch(self, broker_id: BrokerId, now_ms: int) -> None:
        assert broker_id in self._last_contact_ms or len(self._last_contact_ms) < BROKERS_MAX
        assert now_ms >= self._last_contact_ms.get(broker_id, 0), (broker_id, now_ms)
        self._last_contact_ms[broker_id] = now_ms

    def last_contact_ms(self, broker_id: BrokerId) -> int | None:
        return self._last_contact_ms.get(broker_id)

    def has_valid_session(self, broker_id: BrokerId, now_ms: int) -> bool:
        last = self._last_contact_ms.get(broker_id)
        return last is not None and now_ms - last <= self.session_timeout_ms

    def expired(self, broker_ids: Iterable[BrokerId], now_ms: int) -> list[BrokerId]:
        """Those of `broker_ids` whose session has run out, in id order."""
        return sorted(b for b in broker_ids if not self.has_valid_session(b, now_ms))

    def next_expiry_ms(self, broker_ids: Iterable[BrokerId]) -> int | None:
        """The earliest time one of `broker_ids` loses its session (first instant it is invalid)."""
        times = [self._last_contact_ms[b] + self.session_timeout_ms + 1
                 for b in broker_ids if b in self._last_contact_ms]
        return min(times) if times else None
