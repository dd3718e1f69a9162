"""What one controller operation writes: records staged on a scratch image, in metadata batches of bounded size.

An operation stages its records on a copy of the image (`Batch.add`), so its later decisions see its earlier ones;
`Controller` then commits them, in batches of at most `METADATA_RECORDS_PER_BATCH_MAX` records. Two kinds, as in
Kafka's `QuorumController` (`ControllerResult.atomicOf` and `of`):
- a user's request (CreateTopics, CreatePartitions, ElectLeaders, a reassignment, configs, ACLs) is one batch:
  the record that would pass the limit stops it with POLICY_VIOLATION in Kafka's words (its `BoundedList`, which
  `EventHandlerExceptionInfo` turns into `PolicyViolationException`), before anything is written;
- the controller's own work (fencing, unfencing, a controlled shutdown, a returning broker, reported replica logs,
  its activation) is never refused: `chunks` splits it into consecutive batches (Kafka's `appendRecords`). The
  broker's own record comes last, so a controller that stops between two batches sees the same trigger again (a
  heartbeat, a registration, an expired session) and does the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

from insync import errors
from insync.controller.replication_control import TopicPartitionChange, change_events
from insync.errors import KafkaException
from insync.events import Event, EventType
from insync.limits import METADATA_RECORDS_PER_BATCH_MAX
from insync.metadata.image import MetadataImage
from insync.metadata.records import Record

# Kafka's words for a user operation above the limit (EventHandlerExceptionInfo.fromInternal).
EXCESSIVE_BATCH_MESSAGE = "Unable to perform excessively large batch operation."


def excessive_batch() -> KafkaException:
    return KafkaException(errors.BY_NAME["POLICY_VIOLATION"], EXCESSIVE_BATCH_MESSAGE)


def check_request_records(count: int) -> None:
    """Refuse a user's request of `count` records before making them (a count that comes from the request)."""
    if count > METADATA_RECORDS_PER_BATCH_MAX:
        raise excessive_batch()


class Batch:
    """Records staged on a scratch image, with the events they cause; `internal` for the controller's own work."""

    def __init__(self, image: MetadataImage, node_id: int, now_ms: int, *, internal: bool) -> None:
        self.image = image
        self.records: list[Record] = []
        self.events: list[Event] = []
        self.internal = internal
        self._node_id = node_id
        self._now_ms = now_ms

    def add(self, record: Record) -> None:
        self.add_all((record,))

    def add_all(self, records: Sequence[Record]) -> None:
        """Stage records decided on the current scratch image, replayed together."""
        self._reserve(len(records))
        self.records.extend(records)
        self.image = self.image.replay_all(records)

    def add_changes(self, changes: Sequence[TopicPartitionChange]) -> None:
        self.add_all([change.change.record for change in changes])
        for change in changes:
            self.events.extend(change_events(self._now_ms, self._node_id, change))

    def event(self, event_type: EventType, **fields: int) -> None:
        self.events.append(Event(self._now_ms, self._node_id, event_type, fields=fields))

    def chunks(self) -> list[tuple[Record, ...]]:
        """The metadata batches to commit, in order: one for a user's request, as many as it takes otherwise."""
        size = METADATA_RECORDS_PER_BATCH_MAX
        out = [tuple(self.records[start:start + size]) for start in range(0, len(self.records), size)]
        assert self.internal or len(out) <= 1, len(self.records)  # `_reserve` stopped a larger request
        assert sum(len(chunk) for chunk in out) == len(self.records)
        return out

    def _reserve(self, count: int) -> None:
        assert count >= 0
        if not self.internal and len(self.records) + count > METADATA_RECORDS_PER_BATCH_MAX:
            raise excessive_batch()
