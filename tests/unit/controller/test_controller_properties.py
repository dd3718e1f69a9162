"""Random operation sequences against the controller, with its invariants checked after every step."""

from __future__ import annotations

from ctrl_harness import Harness
from hypothesis import given, settings
from hypothesis import strategies as st

from insync.controller.replication_control import AlterPartitionData
from insync.controller.store import MemoryStore
from insync.errors import KafkaException
from insync.metadata.image import MetadataImage

BROKERS = (1, 2, 3, 4)

operation = st.one_of(
    st.tuples(st.just("register"), st.sampled_from(BROKERS), st.booleans(), st.booleans()),
    st.tuples(st.just("heartbeat"), st.sampled_from(BROKERS), st.sampled_from(["", "fence", "shutdown"])),
    st.tuples(st.just("advance"), st.integers(1, 6_000), st.sets(st.sampled_from(BROKERS))),
    st.tuples(st.just("create"), st.integers(1, 3), st.integers(1, 3)),
    st.tuples(st.just("alter"), st.integers(0, 20), st.sets(st.sampled_from(BROKERS))),
)


class ElrHistory:
    """Replays the store record by record and checks KIP-966's promise at every state: ISR and ELR are disjoint,
    and each ELR member was in the ISR at some point since the ISR last stood at or above min ISR (so it holds
    every record the high watermark covered)."""

    def __init__(self, min_isr: int) -> None:
        self.min_isr = min_isr
        self.image = MetadataImage()
        self.replayed = 0
        self.in_sync_since: dict[tuple[str, int], set[int]] = {}

    def check(self, store: MemoryStore) -> None:
        records = store.load()
        for record in records[self.replayed:]:
            self.image = self.image.replay(record)
            for view in self.image.all_partitions():
                reg = view.registration
                assert not set(reg.isr) & set(reg.elr) and set(reg.elr) <= set(reg.replicas), view
                key = (view.topic_id, view.partition)
                if len(reg.isr) >= min(self.min_isr, len(reg.replicas)):
                    self.in_sync_since[key] = set(reg.isr)
                else:
                    self.in_sync_since.setdefault(key, set()).update(reg.isr)
                assert set(reg.elr) <= self.in_sync_since[key], (view, self.in_sync_since[key])
        self.replayed = len(records)


def check_invariants(h: Harness, store: MemoryStore, leader_epochs: dict[tuple[str, int], int],
                     unclean: bool, elr: bool) -> None:
    image = h.controller.image
    assert MetadataImage.from_records(store.load()) == image  # the store alone rebuilds the image
    assert h.controller.published_offset <= image.offset
    for view in image.all_partitions():
        reg = view.registration
        assert (reg.isr or elr) and set(reg.isr) <= set(reg.replicas)
        assert elr or not (reg.elr or reg.last_known_elr)
        if reg.leader != -1:
            assert reg.leader in reg.isr and image.is_eligible(reg.leader)
        else:  # offline only while nobody may lead: no ISR (or ELR) member, with unclean election no replica
            candidates = reg.replicas if unclean else reg.isr or reg.elr
            assert not any(image.is_eligible(b) for b in candidates), (view, image.brokers)
        key = (view.topic_id, view.partition)
        assert reg.leader_epoch >= leader_epochs.get(key, 0)
        leader_epochs[key] = reg.leader_epoch


def apply(h: Harness, op: tuple[object, ...], topics: list[str]) -> None:
    kind = op[0]
    if kind == "register":
        _, broker, new_incarnation, clean = op
        assert isinstance(broker, int) and isinstance(clean, bool)
        h.register(broker, incarnation=f"{broker}-{h.now}" if new_incarnation else None, clean=clean)
    elif kind == "heartbeat" and op[1] in h.epochs:
        _, broker, flag = op
        assert isinstance(broker, int)
        h.heartbeat(broker, want_fence=flag == "fence", want_shutdown=flag == "shutdown")
    elif kind == "advance":
        _, ms, alive = op
        assert isinstance(ms, int) and isinstance(alive, set)
        h.advance(ms)
        for broker in sorted(alive & set(h.epochs)):
            h.heartbeat(broker)
        h.controller.tick(h.now)
    elif kind == "create":
        _, partitions, rf = op
        assert isinstance(partitions, int) and isinstance(rf, int)
        name = f"t{len(topics)}"
        h.controller.create_topic(name, partitions, rf, {}, h.now)
        topics.append(name)
    elif kind == "alter" and topics:
        _, pick, isr = op
        assert isinstance(pick, int) and isinstance(isr, set)
        views = h.controller.image.all_partitions()
        view = views[pick % len(views)] if views else None
        if view is None or view.registration.leader == -1:
            return
        reg = view.registration
        item = AlterPartitionData(view.topic_id, view.partition, reg.leader_epoch, reg.partition_epoch,
                                  tuple(sorted(isr | {reg.leader})))
        h.controller.alter_partition(reg.leader, h.epochs[reg.leader], [item], h.now)


@settings(max_examples=80, deadline=None)
@given(ops=st.lists(operation, min_size=5, max_size=40), unclean=st.booleans(), elr=st.booleans(),
       min_isr=st.integers(1, 3))
def test_controller_invariants_hold_after_every_operation(ops: list[tuple[object, ...]], unclean: bool, elr: bool,
                                                          min_isr: int) -> None:
    store = MemoryStore()
    # Recovery off: unclean elections happen at once, which the invariants check (no log reports here).
    h = Harness({"unclean.leader.election.enable": unclean, "eligible.leader.replicas.enable": elr,
                 "min.insync.replicas": min_isr, "unclean.recovery.strategy": "None"}, store=store)
    h.start(*BROKERS)
    h.controller.create_topic("t", 4, 3, {}, h.now)
    topics = ["t"]
    leader_epochs: dict[tuple[str, int], int] = {}
    history = ElrHistory(min_isr)
    for op in ops:
        before = h.controller.image
        try:
            apply(h, op, topics)
        except KafkaException:  # a refused request (duplicate registration, too few brokers) changes nothing
            assert h.controller.image is before
        check_invariants(h, store, leader_epochs, unclean, elr)
        history.check(store)
