"""Names for the integers that replication juggles, so that an offset is never passed where an epoch belongs.

`NewType`s cost nothing at run time; mypy keeps them apart. `TopicPartition` is the key of almost every map.
The sentinels and names every layer shares (`NO_LEADER`, `OFFSETS_TOPIC`) are defined here, once.
`Outgoing` is what every sans-IO node core (broker and controller) returns for its driver to send.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, NewType

Offset = NewType("Offset", int)
LeaderEpoch = NewType("LeaderEpoch", int)
PartitionEpoch = NewType("PartitionEpoch", int)
BrokerId = NewType("BrokerId", int)
BrokerEpoch = NewType("BrokerEpoch", int)

NO_LEADER = BrokerId(-1)  # a partition without a leader, in records, images and fetchers alike
UNKNOWN_OFFSET = Offset(-1)
UNDEFINED_EPOCH = LeaderEpoch(-1)
UNKNOWN_BROKER_EPOCH = BrokerEpoch(-1)  # KIP-903: a broker epoch not given (older requests) or not known

# Kafka's internal topic of committed offsets: the controller guards it, brokers mark it internal, groups use it.
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
EVENTS_TOPIC = "__insync_events"  # every node's replication-health events (server/event_topic.py)
ALERTS_TOPIC = "__insync_alerts"  # what `insync monitor` concludes from them (spark/monitor/)


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# A node's address: brokers by their integer id, the controller and clients by name.
Address = int | str


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A message a node core wants sent; the driver (server or simulator) delivers it."""

    destination: Address
    message: object
