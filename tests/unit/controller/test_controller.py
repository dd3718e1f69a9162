from __future__ import annotations

import random
from collections import Counter

import pytest
from ctrl_harness import RECOVERY_OFF, Harness, expire, set_isr, three_broker_topic

from insync import errors
from insync.config import ConfigChange, ConfigOp
from insync.controller.replication_control import AlterPartitionData, place_replicas
from insync.controller.results import AlterPartitionDataResult
from insync.errors import KafkaException
from insync.events import EventType
from insync.metadata.records import (
    ClusterIdRecord,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    TopicRecord,
)

# ---- election on fencing


def test_fenced_leader_is_replaced_from_the_isr_and_leaves_it() -> None:
    h = three_broker_topic()
    leader = h.partition("t").leader
    others = tuple(b for b in (1, 2, 3) if b != leader)
    h.drain()
    expire(h, {leader}, others)
    reg = h.partition("t")
    assert reg.leader in others and leader not in reg.isr and len(reg.isr) == 2
    assert reg.leader_epoch == 1
    change = [e for e in h.drain() if e.type is EventType.LEADER_CHANGE]
    assert len(change) == 1
    assert change[0].fields["leader_before"] == leader and change[0].fields["reason"] == "fenced"
    assert change[0].fields["leader_after"] == reg.leader and change[0].fields["isr"] == list(reg.isr)


TXN_VERSION, ELR_NAME = "transaction.version", "eligible.leader.replicas.version"


@pytest.mark.parametrize("elr", [False, True])
def test_last_isr_member_fenced_goes_offline_then_comes_back_online(elr: bool) -> None:
    h = three_broker_topic({"eligible.leader.replicas.enable": elr})
    leader = h.partition("t").leader
    set_isr(h, "t", (leader,))
    others = tuple(b for b in (1, 2, 3) if b != leader)
    h.drain()
    expire(h, {leader}, others)
    reg = h.partition("t")
    # The last ISR member holds the committed data: ELR off keeps it in the ISR, ELR on moves it to the ELR.
    assert reg.leader == -1 and (reg.isr, reg.elr) == (((), (leader,)) if elr else ((leader,), ()))
    assert [v.topic for v in h.controller.image.offline_partitions()] == ["t"]
    events = h.drain()
    assert [e.type for e in events if e.partition == 0] == [EventType.LEADER_CHANGE, EventType.PARTITION_OFFLINE]
    # the broker restarts cleanly: registers, catches up, is unfenced and elected
    h.register(leader, incarnation="restarted")
    assert h.partition("t").leader == -1  # fenced until caught up
    h.heartbeat(leader)
    reg = h.partition("t")
    assert reg.leader == leader and reg.leader_epoch == 2 and (reg.isr, reg.elr) == ((leader,), ())
    events = h.drain()
    assert [e.type for e in events if e.partition == 0] == [EventType.LEADER_CHANGE, EventType.PARTITION_ONLINE]


def test_with_elr_a_broker_back_from_a_crash_is_not_elected_and_an_elr_member_is() -> None:
    h = three_broker_topic({"min.insync.replicas": 2})
    leader = h.partition("t").leader
    follower, out_of_sync = (b for b in h.partition("t").replicas if b != leader)
    set_isr(h, "t", (leader, follower))
    set_isr(h, "t", (leader,))  # below min ISR: the follower stays eligible
    assert h.partition("t").elr == (follower,)
    expire(h, {leader, follower}, (out_of_sync,))
    reg = h.partition("t")
    assert reg.leader == -1 and reg.isr == () and set(reg.elr) == {leader, follower}
    h.register(leader, incarnation="after-crash", clean=False)  # lost its unflushed tail
    h.heartbeat(leader)
    reg = h.partition("t")
    assert reg.leader == -1 and reg.elr == (follower,) and reg.last_known_elr == (leader,)
    h.register(follower, incarnation="back", clean=True)
    h.heartbeat(follower)
    reg = h.partition("t")
    assert reg.leader == follower and reg.isr == (follower,) and reg.elr == () and not reg.is_recovering
    change = [e for e in h.drain() if e.type is EventType.LEADER_CHANGE][-1]
    assert change.fields["leader_after"] == follower and change.fields["elr"] == []


def test_without_elr_a_broker_back_from_a_crash_leads_again_as_in_kafka_3() -> None:
    h = three_broker_topic({"min.insync.replicas": 2, "eligible.leader.replicas.enable": False})
    leader = h.partition("t").leader
    set_isr(h, "t", (leader,))
    expire(h, {leader}, tuple(b for b in (1, 2, 3) if b != leader))
    h.register(leader, incarnation="after-crash", clean=False)
    h.heartbeat(leader)
    reg = h.partition("t")
    assert reg.leader == leader and reg.isr == (leader,) and reg.elr == ()


def test_an_unclean_restart_takes_a_fenced_member_out_of_the_elr() -> None:
    h = three_broker_topic({"min.insync.replicas": 3})
    leader = h.partition("t").leader
    a, b = (r for r in h.partition("t").replicas if r != leader)
    set_isr(h, "t", (leader, a))
    assert h.partition("t").elr == (b,)
    expire(h, {a, b}, (leader,))
    assert set(h.partition("t").elr) == {a, b}  # fenced, yet eligible: their logs are whole
    h.register(b, incarnation="crashed", clean=False)
    h.register(a, incarnation="stopped", clean=True)
    reg = h.partition("t")
    assert (reg.leader, reg.isr, reg.elr, reg.last_known_elr) == (leader, (leader,), (a,), (b,))


def test_a_retried_registration_of_the_same_incarnation_is_not_an_unclean_shutdown() -> None:
    h = three_broker_topic({"min.insync.replicas": 3})
    leader = h.partition("t").leader
    a, b = (r for r in h.partition("t").replicas if r != leader)
    set_isr(h, "t", (leader, a))
    expire(h, {b}, (leader, a))
    h.register(b, incarnation="inc-x", clean=True)
    h.register(b, incarnation="inc-x", clean=False)  # the answer was lost: the same life, nothing lost
    assert h.partition("t").elr == (b,)


def test_with_elr_an_isr_back_at_min_isr_clears_the_elr() -> None:
    h = three_broker_topic({"min.insync.replicas": 2})
    leader = h.partition("t").leader
    a, b = (r for r in h.partition("t").replicas if r != leader)
    set_isr(h, "t", (leader,))
    assert set(h.partition("t").elr) == {a, b}
    set_isr(h, "t", (leader, a))
    reg = h.partition("t")
    assert reg.isr == (leader, a) and reg.elr == () and reg.last_known_elr == ()


def test_no_unclean_election_by_default_even_with_live_out_of_sync_replicas() -> None:
    h = three_broker_topic()
    leader = h.partition("t").leader
    set_isr(h, "t", (leader,))
    others = tuple(b for b in (1, 2, 3) if b != leader)
    expire(h, {leader}, others)
    assert h.partition("t").leader == -1


def test_unclean_election_when_the_broker_default_allows_it() -> None:
    h = three_broker_topic({"unclean.leader.election.enable": True, **RECOVERY_OFF})
    leader = h.partition("t").leader
    replicas = h.partition("t").replicas
    set_isr(h, "t", (leader,))
    others = tuple(b for b in (1, 2, 3) if b != leader)
    h.drain()
    expire(h, {leader}, others)
    reg = h.partition("t")
    expected = next(b for b in replicas if b != leader)  # first live replica in assignment order
    assert reg.leader == expected and reg.isr == (expected,)
    change = [e for e in h.drain() if e.type is EventType.LEADER_CHANGE]
    assert change[0].fields["reason"] == "unclean"


@pytest.mark.parametrize(("broker_default", "topic_value", "elects"), [
    (False, "true", True), (True, "false", False), (False, None, False), (True, None, True),
])
def test_topic_config_overrides_the_broker_default_for_unclean_election(
        broker_default: bool, topic_value: str | None, elects: bool) -> None:
    configs = {} if topic_value is None else {"unclean.leader.election.enable": topic_value}
    h = three_broker_topic({"unclean.leader.election.enable": broker_default, **RECOVERY_OFF}, configs)
    leader = h.partition("t").leader
    set_isr(h, "t", (leader,))
    expire(h, {leader}, tuple(b for b in (1, 2, 3) if b != leader))
    assert (h.partition("t").leader != -1) is elects


def test_offline_partition_with_unclean_enabled_elects_a_returning_out_of_sync_replica() -> None:
    h = Harness({"unclean.leader.election.enable": True, **RECOVERY_OFF})
    h.start(1, 2)
    h.controller.create_topic("t", 1, 2, {}, h.now)
    leader = h.partition("t").leader
    follower = 3 - leader
    set_isr(h, "t", (leader,))
    expire(h, {leader, follower}, ())
    assert h.partition("t").leader == -1
    h.register(follower, incarnation="back")
    h.heartbeat(follower)
    assert h.partition("t").leader == follower and h.partition("t").isr == (follower,)


# ---- topics


def test_create_topic_records_and_response() -> None:
    h = Harness()
    h.start(1, 2, 3)
    h.drain()
    result = h.controller.create_topic("orders", 3, 2, {"min.insync.replicas": 2}, h.now)
    topic_id = result.response.topic_id
    assert isinstance(result.records[0], TopicRecord) and result.records[0].topic_id == topic_id
    partitions = [r for r in result.records if isinstance(r, PartitionRecord)]
    assert [p.replicas for p in partitions] == list(result.response.assignments)
    assert all(p.isr == p.replicas and p.leader == p.replicas[0] and p.leader_epoch == 0 for p in partitions)
    assert h.controller.image.configs("orders") == {"min.insync.replicas": "2"}
    created = [e for e in h.drain() if e.type is EventType.LEADER_CHANGE]
    assert [e.fields["reason"] for e in created] == ["created"] * 3


def test_topic_ids_are_uuids_and_deterministic_for_a_seed() -> None:
    ids = []
    for _ in range(2):
        h = Harness(seed=42)
        h.start(1)
        ids.append(h.controller.create_topic("t", 1, 1, {}, h.now).response.topic_id)
    assert ids[0] == ids[1] and len(ids[0]) == 36 and ids[0][14] == "4"


def test_a_new_metadata_store_gets_a_cluster_id_once_and_keeps_it_across_restarts() -> None:
    first = Harness(seed=1)
    cluster_id = first.controller.image.cluster_id
    assert cluster_id is not None and len(cluster_id) == 22
    assert sum(isinstance(r, ClusterIdRecord) for r in first.store.load()) == 1
    again = Harness(store=first.store, seed=2)  # the controller restarted on the same store
    assert again.controller.image.cluster_id == cluster_id
    assert sum(isinstance(r, ClusterIdRecord) for r in again.store.load()) == 1
    assert Harness(seed=2).controller.image.cluster_id != cluster_id  # another cluster


def test_the_elr_feature_is_finalized_at_1_while_elr_is_on_and_written_only_when_it_changes() -> None:
    on = Harness(seed=1)
    assert on.controller.image.finalized_features == {"eligible.leader.replicas.version": 1, TXN_VERSION: 2}
    again = Harness(store=on.store)  # restarted with ELR still on: nothing to write
    assert sum(isinstance(r, FeatureLevelRecord) for r in again.store.load()) == 2
    off = Harness({"eligible.leader.replicas.enable": "false"}, store=on.store)
    assert off.controller.image.finalized_features == {TXN_VERSION: 2}
    assert [(r.name, r.feature_level) for r in off.store.load() if isinstance(r, FeatureLevelRecord)] == [
        (TXN_VERSION, 2), (ELR_NAME, 1), (ELR_NAME, 0)]
    assert Harness({"eligible.leader.replicas.enable": "false"}).controller.image.finalized_features == {
        TXN_VERSION: 2}


def test_a_new_cluster_finalizes_transaction_version_2_once() -> None:
    """Kafka 4's TransactionVersion.LATEST_PRODUCTION, finalized when the cluster is made: a restart keeps the
    level the metadata holds (an operator's choice included) instead of writing it again."""
    first = Harness(seed=3)
    assert first.controller.image.finalized_features.get(TXN_VERSION) == 2
    again = Harness(store=first.store)
    assert [r.name for r in again.store.load() if isinstance(r, FeatureLevelRecord)].count(TXN_VERSION) == 1


@pytest.mark.parametrize(("name", "partitions", "rf", "configs", "error", "detail"), [
    ("t", 1, 1, {}, "TOPIC_ALREADY_EXISTS", "Topic 't' already exists."),
    ("", 1, 1, {}, "INVALID_TOPIC_EXCEPTION", "Topic name is invalid: the empty string is not allowed"),
    (".", 1, 1, {}, "INVALID_TOPIC_EXCEPTION", "Topic name is invalid: '.' is not allowed"),
    ("..", 1, 1, {}, "INVALID_TOPIC_EXCEPTION", "Topic name is invalid: '..' is not allowed"),
    ("a" * 250, 1, 1, {}, "INVALID_TOPIC_EXCEPTION", "is longer than the max allowed length 249"),
    ("bad name", 1, 1, {}, "INVALID_TOPIC_EXCEPTION", "Topic name is invalid: 'bad name' contains one or more "
     "characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ("tøpic", 1, 1, {}, "INVALID_TOPIC_EXCEPTION", "characters other than ASCII alphanumerics"),
    ("my_topic", 1, 1, {}, "INVALID_TOPIC_EXCEPTION", "Topic 'my_topic' collides with existing topic: my.topic"),
    ("u", 0, 1, {}, "INVALID_PARTITIONS", "Number of partitions was set to an invalid non-positive value."),
    ("u", 1, 4, {}, "INVALID_REPLICATION_FACTOR", "Unable to replicate the partition 4 time(s): The target "
     "replication factor of 4 cannot be reached because only 3 broker(s) are registered."),
    ("u", 1, 0, {}, "INVALID_REPLICATION_FACTOR",
     "Replication factor must be larger than 0, or -1 to use the default value."),
    ("u", 1, 1, {"min.insync.replicas": "zero"}, "INVALID_CONFIG",
     "Invalid value zero for configuration min.insync.replicas: Not a number of type INT"),
    ("u", 1, 1, {"min.insync.replicas": "0"}, "INVALID_CONFIG",
     "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
    ("u", 1, 1, {"no.such.key": "1"}, "INVALID_CONFIG", "Unknown topic config name: no.such.key"),
])
def test_create_topic_errors(name: str, partitions: int, rf: int, configs: dict[str, object], error: str,
                             detail: str) -> None:
    h = Harness()
    h.start(1, 2, 3)
    h.controller.create_topic("t", 1, 1, {}, h.now)
    h.controller.create_topic("my.topic", 1, 1, {}, h.now)
    offset = h.controller.image.offset
    with pytest.raises(KafkaException) as exc:
        h.controller.create_topic(name, partitions, rf, configs, h.now)
    assert exc.value.error.name == error and detail in exc.value.detail
    assert h.controller.image.offset == offset  # nothing written


def test_replication_factor_counts_only_unfenced_brokers() -> None:
    h = Harness()
    h.start(1, 2)
    h.register(3)  # fenced until its first heartbeat
    with pytest.raises(KafkaException) as exc:
        h.controller.create_topic("t", 1, 3, {}, h.now)
    assert exc.value.error is errors.INVALID_REPLICATION_FACTOR


def test_delete_topic() -> None:
    h = Harness()
    h.start(1)
    topic_id = h.controller.create_topic("t", 2, 1, {"retention.ms": 1000}, h.now).response.topic_id
    assert h.controller.delete_topic("t", h.now).response == topic_id
    image = h.controller.image
    assert image.topic("t") is None and topic_id not in image.topics_by_id and image.configs("t") == {}
    with pytest.raises(KafkaException) as exc:
        h.controller.delete_topic("t", h.now)
    assert exc.value.error is errors.UNKNOWN_TOPIC_OR_PARTITION
    h.controller.create_topic("t", 1, 1, {}, h.now)  # the name is free again, with a new id
    assert h.topic_id("t") != topic_id


def test_placement_spreads_leaders_and_replicas_evenly() -> None:
    h = Harness()
    h.start(1, 2, 3)
    assignments = h.controller.create_topic("t", 6, 3, {}, h.now).response.assignments
    assert Counter(r[0] for r in assignments) == {1: 2, 2: 2, 3: 2}
    assert all(sorted(r) == [1, 2, 3] for r in assignments)
    assert Counter(r[1] for r in assignments) == {1: 2, 2: 2, 3: 2}


def test_placement_follows_kafka_round_robin() -> None:
    for seed in range(20):
        rng = random.Random(seed)
        out = place_replicas([10, 20, 30, 40, 50], 10, 3, rng)
        leaders = [r[0] for r in out]
        assert Counter(leaders) == {b: 2 for b in (10, 20, 30, 40, 50)}
        # consecutive partitions have consecutive leaders (a rotating start)
        order = [10, 20, 30, 40, 50]
        assert all(order.index(leaders[i + 1]) == (order.index(leaders[i]) + 1) % 5 for i in range(9))
        # each broker leads partitions whose followers differ between the two rounds (the shift moves)
        assert out[0][1:] != out[5][1:]


# ---- AlterPartition (KIP-497)


def alter(h: Harness, broker: int, **changes: object) -> AlterPartitionDataResult:
    reg = h.partition("t")
    fields: dict[str, object] = {"topic_id": h.topic_id("t"), "partition": 0, "leader_epoch": reg.leader_epoch,
                                 "partition_epoch": reg.partition_epoch, "new_isr": reg.isr}
    fields.update(changes)
    item = AlterPartitionData(**fields)  # type: ignore[arg-type]
    return h.controller.alter_partition(broker, h.epochs[broker], [item], h.now).response[0]


def test_alter_partition_commits_and_answers_the_new_state() -> None:
    h = three_broker_topic()
    reg = h.partition("t")
    follower = reg.isr[-1]
    new_isr = tuple(b for b in reg.isr if b != follower)
    result = alter(h, reg.leader, new_isr=new_isr)
    assert result.error is errors.NONE
    assert (result.leader, result.isr, result.leader_epoch, result.partition_epoch) == (
        reg.leader, new_isr, reg.leader_epoch, reg.partition_epoch + 1)
    assert h.partition("t").isr == new_isr
    expanded = alter(h, reg.leader, new_isr=(*new_isr, follower))
    assert expanded.error is errors.NONE and expanded.partition_epoch == reg.partition_epoch + 2


def test_alter_partition_fencing_errors() -> None:
    h = three_broker_topic()
    reg = h.partition("t")
    follower = next(b for b in reg.replicas if b != reg.leader)
    assert alter(h, reg.leader, leader_epoch=reg.leader_epoch - 1).error is errors.FENCED_LEADER_EPOCH
    assert alter(h, reg.leader, leader_epoch=reg.leader_epoch + 1).error is errors.FENCED_LEADER_EPOCH
    assert alter(h, follower).error is errors.NOT_LEADER_OR_FOLLOWER
    assert alter(h, reg.leader, partition_epoch=reg.partition_epoch + 3).error is errors.INVALID_UPDATE_VERSION
    assert alter(h, reg.leader, new_isr=(follower,)).error is errors.INVALID_REQUEST  # leader must stay
    assert alter(h, reg.leader, new_isr=(reg.leader, reg.leader)).error is errors.INVALID_REQUEST
    assert alter(h, reg.leader, topic_id="00000000-0000-4000-8000-000000000000").error is errors.UNKNOWN_TOPIC_ID
    assert alter(h, reg.leader, partition=7).error is errors.UNKNOWN_TOPIC_OR_PARTITION
    assert h.partition("t") == reg  # nothing changed
    with pytest.raises(KafkaException) as stale:
        h.controller.alter_partition(reg.leader, h.epochs[reg.leader] - 1, [], h.now)
    assert stale.value.error is errors.STALE_BROKER_EPOCH


def test_alter_partition_after_a_commit_with_the_old_partition_epoch_is_refused() -> None:
    h = three_broker_topic()
    reg = h.partition("t")
    set_isr(h, "t", reg.isr[:2])
    assert alter(h, reg.leader, partition_epoch=reg.partition_epoch, new_isr=reg.isr[:1]).error \
        is errors.INVALID_UPDATE_VERSION


def test_alter_partition_rejects_ineligible_replicas() -> None:
    h = Harness()
    h.start(1, 2, 3, 4)
    h.controller.create_topic("t", 1, 3, {}, h.now)
    reg = h.partition("t")
    outsider = next(b for b in (1, 2, 3, 4) if b not in reg.replicas)
    follower = reg.isr[-1]
    set_isr(h, "t", tuple(b for b in reg.isr if b != follower))
    isr = h.partition("t").isr
    assert alter(h, reg.leader, new_isr=(*isr, outsider)).error is errors.INELIGIBLE_REPLICA
    expire(h, {follower}, tuple(b for b in (1, 2, 3, 4) if b != follower))
    assert alter(h, reg.leader, new_isr=(*isr, follower)).error is errors.INELIGIBLE_REPLICA  # fenced
    h.register(follower, incarnation="back")
    h.heartbeat(follower)
    assert alter(h, reg.leader, new_isr=(*isr, follower)).error is errors.NONE


def test_preferred_leader_election_moves_leadership_back() -> None:
    h = three_broker_topic()
    preferred = h.partition("t").replicas[0]
    others = tuple(b for b in (1, 2, 3) if b != preferred)
    expire(h, {preferred}, others)
    assert h.partition("t").leader != preferred
    h.register(preferred, incarnation="back")
    h.heartbeat(preferred)
    set_isr(h, "t", (*h.partition("t").isr, preferred))
    h.drain()
    assert h.controller.elect_preferred_leaders(h.now).response == {("t", 0): errors.NONE}
    assert h.partition("t").leader == preferred
    assert [e.fields["reason"] for e in h.drain() if e.type is EventType.LEADER_CHANGE] == ["preferred"]
    assert h.controller.elect_preferred_leaders(h.now).response == {}


def test_preferred_election_of_named_partitions_answers_each() -> None:
    h = three_broker_topic()
    assert h.controller.elect_preferred_leaders(h.now, [("t", 0)]).response == {("t", 0): errors.ELECTION_NOT_NEEDED}
    preferred = h.partition("t").replicas[0]
    others = tuple(b for b in (1, 2, 3) if b != preferred)
    expire(h, {preferred}, others)  # the preferred leader is fenced, out of the ISR
    h.register(preferred, incarnation="back")
    h.heartbeat(preferred)
    result = h.controller.elect_preferred_leaders(h.now, [("t", 0), ("t", 7), ("nope", 0)])
    assert result.response == {("t", 0): errors.PREFERRED_LEADER_NOT_AVAILABLE,
                               ("t", 7): errors.UNKNOWN_TOPIC_OR_PARTITION,
                               ("nope", 0): errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert result.records == ()
    set_isr(h, "t", (*h.partition("t").isr, preferred))
    assert h.controller.elect_preferred_leaders(h.now, [("t", 0)]).response == {("t", 0): errors.NONE}
    assert h.partition("t").leader == preferred


def test_alter_topic_configs_writes_only_the_changed_keys_all_or_nothing() -> None:
    h = three_broker_topic(topic_configs={"min.insync.replicas": 2, "retention.ms": 1000})
    changes = (ConfigChange("min.insync.replicas", ConfigOp.SET, "3"), ConfigChange("retention.ms", ConfigOp.DELETE),
               ConfigChange("segment.ms", ConfigOp.SET, "60000"))
    assert h.controller.alter_topic_configs("t", changes[:1], h.now, validate_only=True).records == ()
    records = h.controller.alter_topic_configs("t", changes, h.now).records
    assert sorted(records, key=lambda r: r.key) == [  # type: ignore[attr-defined]
        ConfigRecord("t", "min.insync.replicas", "3"), ConfigRecord("t", "retention.ms", None),
        ConfigRecord("t", "segment.ms", "60000")]
    assert h.controller.image.configs("t") == {"min.insync.replicas": "3", "segment.ms": "60000"}
    assert h.controller.alter_topic_configs("t", changes[:1], h.now).records == ()  # nothing changed
    # An unknown key fails the whole alteration: the valid change beside it is not applied either.
    with pytest.raises(KafkaException) as failed:
        h.controller.alter_topic_configs("t", (ConfigChange("min.insync.replicas", ConfigOp.SET, "1"),
                                               ConfigChange("bogus", ConfigOp.SET, "1")), h.now)
    assert (failed.value.error, failed.value.detail) == (errors.INVALID_CONFIG, "Unknown topic config name: bogus")
    with pytest.raises(KafkaException) as unknown:
        h.controller.alter_topic_configs("nope", changes, h.now)
    assert (unknown.value.error, unknown.value.detail) == (errors.UNKNOWN_TOPIC_OR_PARTITION,
                                                           "The topic 'nope' does not exist.")
    # The legacy AlterConfigs replaces the whole set.
    h.controller.alter_topic_configs("t", (ConfigChange("retention.ms", ConfigOp.SET, "5000"),), h.now, replace=True)
    assert h.controller.image.configs("t") == {"retention.ms": "5000"}


def test_an_altered_unclean_election_setting_governs_the_next_election() -> None:
    h = three_broker_topic(RECOVERY_OFF)
    h.controller.alter_topic_configs("t", (ConfigChange("unclean.leader.election.enable", ConfigOp.SET, "true"),),
                                     h.now)
    leader = h.partition("t").leader
    set_isr(h, "t", (leader,))
    expire(h, {leader}, tuple(b for b in (1, 2, 3) if b != leader))
    assert h.partition("t").leader != -1


def test_create_partitions_adds_led_partitions_at_the_topics_replication_factor() -> None:
    h = three_broker_topic()
    h.drain()
    assert h.controller.create_partitions("t", 3, h.now, validate_only=True).records == ()
    result = h.controller.create_partitions("t", 3, h.now)
    added = [r for r in result.records if isinstance(r, PartitionRecord)]
    assert [r.partition for r in added] == [1, 2] and [r.replicas for r in added] == list(result.response)
    assert all(len(set(r.replicas)) == 3 and r.isr == r.replicas and r.leader == r.replicas[0] for r in added)
    assert sorted(h.controller.image.topic("t").partitions) == [0, 1, 2]  # type: ignore[union-attr]
    created = [e for e in h.drain() if e.type is EventType.LEADER_CHANGE]
    assert [(e.partition, e.fields["reason"]) for e in created] == [(1, "created"), (2, "created")]


@pytest.mark.parametrize(("topic", "count", "error", "words"), [
    ("t", 1, "INVALID_PARTITIONS", "Topic already has 1 partition(s)."),
    ("t", 0, "INVALID_PARTITIONS", "The topic t currently has 1 partition(s); 0 would not be an increase."),
    ("t", 10**6, "POLICY_VIOLATION", "Unable to perform excessively large batch operation."),
    ("nope", 2, "UNKNOWN_TOPIC_OR_PARTITION", ""),  # Kafka's answer has no message (null)
    ("__consumer_offsets", 60, "INVALID_REQUEST", "cannot change"),
])
def test_create_partitions_refusals(topic: str, count: int, error: str, words: str) -> None:
    h = three_broker_topic()
    h.controller.create_topic("__consumer_offsets", 2, 3, {}, h.now)
    with pytest.raises(KafkaException) as refused:
        h.controller.create_partitions(topic, count, h.now)
    assert refused.value.error.name == error and words in refused.value.detail and bool(words) == bool(
        refused.value.detail)


def test_create_partitions_needs_enough_brokers_for_the_replication_factor() -> None:
    h = three_broker_topic()
    expire(h, {3}, (1, 2))
    with pytest.raises(KafkaException) as refused:
        h.controller.create_partitions("t", 2, h.now)
    assert refused.value.error is errors.INVALID_REPLICATION_FACTOR
    assert refused.value.detail == ("Unable to replicate the partition 3 time(s): The target replication factor "
                                    "of 3 cannot be reached because only 2 broker(s) are registered.")


def test_turning_unclean_election_on_elects_the_topics_offline_partitions_at_once() -> None:
    h = three_broker_topic(RECOVERY_OFF)
    leader = h.partition("t").leader
    others = tuple(b for b in (1, 2, 3) if b != leader)
    set_isr(h, "t", (leader,))
    expire(h, {leader}, others)  # the only in-sync replica is fenced: offline, others live but out of sync
    assert h.partition("t").leader == -1
    h.drain()
    h.controller.alter_topic_configs("t", (ConfigChange("retention.ms", ConfigOp.SET, "1000"),), h.now)
    assert h.partition("t").leader == -1  # another key: still offline, no unclean election
    h.controller.alter_topic_configs("t", (ConfigChange("unclean.leader.election.enable", ConfigOp.SET, "true"),),
                                     h.now)
    assert h.partition("t").leader in others and h.partition("t").isr == (h.partition("t").leader,)
    changes = [e for e in h.drain() if e.type is EventType.LEADER_CHANGE]
    assert [e.fields["reason"] for e in changes] == ["unclean"]
