"""The metadata batch limit (METADATA_RECORDS_PER_BATCH_MAX): a user's request above it is refused whole with Kafka's
POLICY_VIOLATION and its words, nothing written; the controller's own work is split into batches within it and
always commits. Most tests lower the limit (`controller.batch` reads it at each call) to stay small; one runs at
the real limit with 10,000 partitions."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence

import pytest
from ctrl_harness import Harness

from insync import errors
from insync.controller import batch
from insync.controller.controller import Controller
from insync.controller.reassignment import ReassignmentTarget
from insync.controller.replication_control import AlterPartitionData, check_partitions_per_request
from insync.controller.store import MemoryStore
from insync.errors import KafkaException
from insync.limits import METADATA_RECORDS_PER_BATCH_MAX
from insync.metadata.image import MetadataImage
from insync.metadata.records import (
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    Record,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)
from insync.types import NO_LEADER

POLICY_VIOLATION = errors.BY_NAME["POLICY_VIOLATION"]
LIMIT = 40  # the lowered limit
PARTITIONS = 150  # RF 3 on 3 brokers: each broker is in every ISR and leads 50


class SpyStore(MemoryStore):
    """A MemoryStore that remembers each append's size and can fail the n-th one (a controller that stops)."""

    def __init__(self) -> None:
        super().__init__()
        self.appends: list[int] = []
        self.fail_at: int | None = None

    def append(self, records: Sequence[Record]) -> None:
        if self.fail_at is not None and len(self.appends) + 1 >= self.fail_at:
            raise OSError("the controller stopped")
        super().append(records)
        self.appends.append(len(records))


def lowered(monkeypatch: pytest.MonkeyPatch, overrides: dict[str, object] | None = None,
            partitions: int = PARTITIONS) -> tuple[Harness, SpyStore]:
    store = SpyStore()
    h = Harness(overrides, store=store)
    h.start(1, 2, 3)
    h.controller.create_topic("t", partitions, 3, {}, h.now)
    monkeypatch.setattr(batch, "METADATA_RECORDS_PER_BATCH_MAX", LIMIT)
    store.appends.clear()
    h.drain()
    return h, store


def refused_whole(h: Harness, store: SpyStore, call: Callable[[], object]) -> KafkaException:
    """The refusal `call` raises, having written nothing: the same image, store and published offset, no events."""
    image, stored, published = h.controller.image, len(store.load()), h.controller.published_offset
    with pytest.raises(KafkaException) as refused:
        call()
    assert h.controller.image is image and store.appends == [] and len(store.load()) == stored
    assert h.controller.published_offset == published and h.drain() == []
    return refused.value


def all_led(image: MetadataImage, *, not_by: int | None = None) -> bool:
    return all(v.registration.leader not in (NO_LEADER, not_by) for v in image.all_partitions())


# ---- a user's request above the limit

def test_create_topic_above_the_limit_is_refused_in_kafkas_words_validate_only_too() -> None:
    store = SpyStore()
    h = Harness(store=store)
    h.start(1, 2, 3)
    store.appends.clear()
    h.drain()
    # A topic is one batch: its TopicRecord, a ConfigRecord per config and a PartitionRecord per partition.
    for partitions, configs, validate_only in [(METADATA_RECORDS_PER_BATCH_MAX, {}, False),
                                               (METADATA_RECORDS_PER_BATCH_MAX - 1, {"retention.ms": "1"}, False),
                                               (10**9, {}, True)]:
        refusal = refused_whole(h, store, functools.partial(h.controller.create_topic, "big", partitions, 3, configs,
                                                            h.now, validate_only=validate_only))
        assert (refusal.error, refusal.detail) == (POLICY_VIOLATION, batch.EXCESSIVE_BATCH_MESSAGE)
    assert POLICY_VIOLATION.code == 44
    h.controller.create_topic("big", METADATA_RECORDS_PER_BATCH_MAX - 1, 3, {}, h.now)  # exactly the limit
    assert store.appends == [METADATA_RECORDS_PER_BATCH_MAX]


def test_a_create_topics_request_is_refused_whole_above_the_limit_in_partitions() -> None:
    with pytest.raises(KafkaException) as refused:
        check_partitions_per_request([5_000, 5_000, 1])
    assert (refused.value.error, refused.value.detail) == (POLICY_VIOLATION,
                                                           "Excessively large number of partitions per request.")
    check_partitions_per_request([5_000, 5_000, 0, -1])  # Kafka counts only positive counts


def test_create_partitions_above_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    h, store = lowered(monkeypatch, partitions=1)
    refusal = refused_whole(h, store, lambda: h.controller.create_partitions("t", 2 + LIMIT, h.now))
    assert (refusal.error, refusal.detail) == (POLICY_VIOLATION, batch.EXCESSIVE_BATCH_MESSAGE)
    h.controller.create_partitions("t", 1 + LIMIT, h.now)  # a topic may grow past the limit, a batch at a time
    h.controller.create_partitions("t", 1 + 2 * LIMIT, h.now)
    assert store.appends == [LIMIT, LIMIT]


def test_elect_leaders_above_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    h, store = lowered(monkeypatch, {"auto.leader.rebalance.enable": False})
    h.heartbeat(1, want_fence=True)
    h.heartbeat(1)  # back, and in sync again: the partitions it prefers to lead are led by others
    for leader in (2, 3):
        items = [AlterPartitionData(v.topic_id, v.partition, v.registration.leader_epoch,
                                    v.registration.partition_epoch, (*v.registration.isr, 1))
                 for v in h.controller.image.partitions_led_by(leader)]
        h.controller.alter_partition(leader, h.epochs[leader], items, h.now)
    store.appends.clear()
    h.drain()
    refusal = refused_whole(h, store, lambda: h.controller.elect_preferred_leaders(h.now))
    assert (refusal.error, refusal.detail) == (POLICY_VIOLATION, batch.EXCESSIVE_BATCH_MESSAGE)
    asked = [("t", p) for p in range(LIMIT)]
    outcomes = h.controller.elect_preferred_leaders(h.now, asked).response  # within the limit: done
    assert len(outcomes) == LIMIT and store.appends and store.appends[0] <= LIMIT


def test_a_reassignment_above_the_limit_is_refused_whole_but_refused_targets_write_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    h, store = lowered(monkeypatch)
    moves = [ReassignmentTarget("t", p, tuple(reversed(h.partition("t", p).replicas))) for p in range(LIMIT + 1)]
    refusal = refused_whole(h, store, lambda: h.controller.alter_partition_reassignments(moves, h.now))
    assert (refusal.error, refusal.detail) == (POLICY_VIOLATION, batch.EXCESSIVE_BATCH_MESSAGE)
    unknown = [ReassignmentTarget("nope", 0, (1, 2, 3))]
    outcomes = h.controller.alter_partition_reassignments([*moves[:LIMIT], *unknown], h.now).response
    assert outcomes[:LIMIT] == (None,) * LIMIT and outcomes[LIMIT] is not None
    assert outcomes[LIMIT].error is errors.UNKNOWN_TOPIC_OR_PARTITION


# ---- the controller's own work: split, and always committed

def broker_ops(h: Harness) -> dict[str, Callable[[], object]]:
    def expire() -> object:
        h.advance(20_000)
        h.heartbeat(2)
        return h.controller.tick(h.now)

    return {"fence": lambda: h.heartbeat(1, want_fence=True), "expire": expire,
            "controlled_shutdown": lambda: h.heartbeat(1, want_shutdown=True),
            "restart": lambda: h.register(1)}  # a restart whose session had not yet expired


@pytest.mark.parametrize("op", ["fence", "expire", "controlled_shutdown", "restart"])
def test_the_controllers_own_work_is_split_within_the_limit_with_the_brokers_record_last(
        monkeypatch: pytest.MonkeyPatch, op: str) -> None:
    h, store = lowered(monkeypatch)
    broker_ops(h)[op]()
    assert len(store.appends) > 1 and max(store.appends) <= LIMIT, store.appends
    assert store.load()[-1].__class__ in (FenceBrokerRecord, BrokerRegistrationChangeRecord, RegisterBrokerRecord)
    assert all_led(h.controller.image, not_by=1)  # every partition broker 1 led has another leader
    assert not any(1 in v.registration.isr for v in h.controller.image.all_partitions())
    assert h.controller.published_offset == h.controller.image.offset  # brokers may read all of it


def test_unfencing_elects_for_offline_partitions_in_several_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    h, store = lowered(monkeypatch)
    for broker in (1, 2, 3):
        h.heartbeat(broker, want_fence=True)  # the last one leaves every partition offline, in its ISR
    assert not any(v.registration.leader != NO_LEADER for v in h.controller.image.all_partitions())
    store.appends.clear()
    h.heartbeat(3)
    assert len(store.appends) > 1 and max(store.appends) <= LIMIT
    assert isinstance(store.load()[-1], UnfenceBrokerRecord)
    assert all(v.registration.leader == 3 for v in h.controller.image.all_partitions())


def test_a_controller_stopped_between_two_batches_does_the_rest_at_the_next_heartbeat(
        monkeypatch: pytest.MonkeyPatch) -> None:
    h, store = lowered(monkeypatch)
    for broker in (1, 2, 3):
        h.heartbeat(broker, want_fence=True)
    store.appends.clear()
    store.fail_at = 2
    with pytest.raises(OSError):
        h.heartbeat(3)  # the first batch of elections is stored, the rest and the unfencing are not
    store.fail_at = None
    h.controller = Controller(h.controller.node_id, h.config, store, h.now, random.Random(1))
    image = h.controller.image
    assert image.brokers[3].fenced
    assert sum(v.registration.leader == 3 for v in image.all_partitions()) == LIMIT
    assert not h.heartbeat(3).is_fenced
    assert all(v.registration.leader == 3 for v in h.controller.image.all_partitions())


def test_ten_thousand_partitions_fence_and_restart_at_the_real_limit() -> None:
    store = SpyStore()
    h = Harness(store=store)
    h.start(1, 2, 3)
    h.controller.create_topic("big", 9_000, 3, {}, h.now)
    h.controller.create_topic("small", 1_000, 3, {}, h.now)
    store.appends.clear()
    h.heartbeat(1, want_fence=True)  # 10,000 ISR changes (a third of them elections) and the fencing
    assert store.appends == [METADATA_RECORDS_PER_BATCH_MAX, 1]
    h.controller = Controller(h.controller.node_id, h.config, store, h.now, random.Random(1))
    h.heartbeat(1)
    h.heartbeat(2, want_fence=True)
    assert all_led(h.controller.image, not_by=2)
    assert max(store.appends) == METADATA_RECORDS_PER_BATCH_MAX
