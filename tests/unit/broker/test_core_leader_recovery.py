"""KIP-704 on the broker: a leader the controller records RECOVERING (elected uncleanly) asks at once to be
recorded RECOVERED, refuses consumers until the controller accepts, and serves them after."""

from __future__ import annotations

from broker_harness import registered

from insync import errors
from insync.broker.core import BrokerCore
from insync.broker.messages import ConsumerFetchRequest, ConsumerFetchResponse
from insync.config import BrokerConfig
from insync.controller.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    MetadataUpdate,
)
from insync.controller.results import AlterPartitionDataResult
from insync.metadata.records import (
    LEADER_RECOVERED,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from insync.storage.disk import MemoryDisk
from insync.storage.log_manager import LogManager
from insync.types import BrokerId, Offset, Outgoing, TopicPartition

TP = TopicPartition("t", 0)
TOPIC_ID = "00000000-0000-4000-8000-000000000001"
NOW = 1_700_000_000_000


class _Clock:
    def now_ms(self) -> int:
        return NOW

    def monotonic_ms(self) -> int:
        return NOW


def _leader_after_an_unclean_election() -> tuple[BrokerCore, list[object]]:
    """Broker 1, registered, replaying metadata that makes it the RECOVERING leader of t-0 (replicas 1, 2)."""
    config = BrokerConfig({"node.id": 1})
    core = registered(BrokerCore(BrokerId(1), config, LogManager.open("/b1", config, MemoryDisk(), _Clock()), 1, NOW),
                      NOW)
    records: list[Record] = [
        RegisterBrokerRecord(1, 0, "i1", "h", 1), RegisterBrokerRecord(2, 1, "i2", "h", 2),
        UnfenceBrokerRecord(1, 0), UnfenceBrokerRecord(2, 1), TopicRecord("t", TOPIC_ID),
        PartitionRecord(TOPIC_ID, 0, (1, 2), (1,), 1, 3, 5, leader_recovery_state=1),
    ]
    out = core.handle(NOW, "controller", MetadataUpdate(0, tuple(enumerate(records)), len(records)))
    return core, [o.message for o in out if isinstance(o, Outgoing)]


def _consumer_error(core: BrokerCore) -> errors.KafkaError:
    [out] = core.handle(NOW, "client", ConsumerFetchRequest(9, ((TP, Offset(0)),), 0, 1 << 20))
    assert isinstance(out.message, ConsumerFetchResponse)
    return out.message.partitions[0].error


def test_a_recovering_leader_asks_for_recovered_and_serves_consumers_only_after() -> None:
    core, sent = _leader_after_an_unclean_election()
    [request] = [m for m in sent if isinstance(m, AlterPartitionRequest)]
    [item] = request.items
    assert (item.new_isr, item.leader_epoch, item.partition_epoch) == ((1,), 3, 5)
    assert item.leader_recovery_state == LEADER_RECOVERED
    assert core.partitions[TP].is_leader and core.partitions[TP].recovering
    assert _consumer_error(core) is errors.NOT_LEADER_OR_FOLLOWER
    answer = AlterPartitionDataResult(TOPIC_ID, 0, errors.NONE, 1, (1,), 3, 6, LEADER_RECOVERED)
    core.handle(NOW, "controller", AlterPartitionResponse(request.correlation_id, errors.NONE, (answer,)))
    assert not core.partitions[TP].recovering and core.partitions[TP].partition_epoch == 6
    assert _consumer_error(core) is errors.NONE


def test_a_refused_request_is_asked_again_at_the_next_isr_check() -> None:
    core, sent = _leader_after_an_unclean_election()
    [request] = [m for m in sent if isinstance(m, AlterPartitionRequest)]
    refused = AlterPartitionDataResult(TOPIC_ID, 0, errors.UNKNOWN_SERVER_ERROR)
    core.handle(NOW, "controller", AlterPartitionResponse(request.correlation_id, errors.NONE, (refused,)))
    assert core.partitions[TP].recovering
    later = core.tick(core.next_deadline_ms() + 30_000)
    assert any(isinstance(o, Outgoing) and isinstance(o.message, AlterPartitionRequest) for o in later)
