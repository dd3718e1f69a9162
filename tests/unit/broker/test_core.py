"""BrokerCore driven by hand: a real controller, two brokers, messages delivered in order, time moved by hand."""

from __future__ import annotations

from broker_harness import TP, Harness, cluster_with_topic

from insync import errors
from insync.broker.core import BrokerCore
from insync.broker.messages import (
    ConsumerFetchRequest,
    ConsumerFetchResponse,
    ProduceRequest,
    ProduceResponse,
)
from insync.config import BrokerConfig, ConfigChange, ConfigOp
from insync.protocol.records import build_batch
from insync.server.metrics import snapshot as metrics_snapshot
from insync.storage.log_manager import LogManager
from insync.types import Offset


def test_topic_creation_makes_one_leader_and_one_follower() -> None:
    h = cluster_with_topic()
    leaders = [b for b, core in h.cores.items() if core.leader_states()]
    assert len(leaders) == 1
    follower = 3 - leaders[0]
    assert TP in h.cores[follower].partitions and not h.cores[follower].partitions[TP].is_leader


def test_acks_all_is_answered_once_the_follower_has_the_batch() -> None:
    h = cluster_with_topic()
    h.produce(-1, 7)
    h.run(600)  # the follower learns the new HW on its next fetch, at the latest after replica.fetch.wait.max.ms
    [response] = [m for m in h.client if isinstance(m, ProduceResponse)]
    assert response.correlation_id == 7 and response.results[0].error is errors.NONE
    assert all(core.high_watermark(TP) == 3 for core in h.cores.values())


def test_produce_answers_carry_the_log_start_offset_as_kafka() -> None:
    """Kafka's ReplicaManager: the log start offset after an append; -1 for a refusal made without the log
    (a corrupt batch), the current one for any other."""
    h = cluster_with_topic()
    h.produce(1, 1)
    corrupt = bytearray(build_batch([(b"k", b"v")]))
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    h.queue.append(("client", h.leader().broker_id, ProduceRequest(2, 1, 30_000, ((TP, bytes(corrupt)),))))
    h.run(50)
    answers = {m.correlation_id: m.results[0] for m in h.client if isinstance(m, ProduceResponse)}
    assert (answers[1].error, answers[1].base_offset, answers[1].log_start_offset) == (errors.NONE, 0, 0)
    assert (answers[2].error, answers[2].base_offset, answers[2].log_start_offset) == (errors.CORRUPT_MESSAGE, -1, -1)


def test_acks_zero_gets_no_answer_and_acks_one_gets_one_at_once() -> None:
    h = cluster_with_topic()
    h.produce(0, 1)
    h.produce(1, 2)
    h.run(50)
    answers = [m.correlation_id for m in h.client if isinstance(m, ProduceResponse)]
    assert answers == [2]


def test_follower_stuck_leaves_isr_then_acks_all_is_refused_below_min_isr() -> None:
    h = cluster_with_topic({"broker.session.timeout.ms": 60_000})
    follower = next(b for b, core in h.cores.items() if not core.leader_states())
    stuck = h.cores.pop(follower)  # it stops processing anything: a stuck follower
    h.produce(1, 1)
    h.run(17_000)
    h.cores[follower] = stuck
    assert h.controller.image.topic("t").partitions[0].isr == (h.leader().broker_id,)  # type: ignore[union-attr]
    events = [e for e in h.leader().drain_events() if e.type.value == "isr_shrink"]
    assert events and events[0].fields["removed"][0]["reason"] == "stuck"
    h.cores.pop(follower)
    h.produce(-1, 9)
    h.run(1_100)
    [refused] = [m for m in h.client if isinstance(m, ProduceResponse) and m.correlation_id == 9]
    assert refused.results[0].error is errors.NOT_ENOUGH_REPLICAS
    assert (refused.results[0].base_offset, refused.results[0].log_start_offset) == (-1, 0)


def test_slow_leader_reads_come_back_as_complete_after() -> None:
    h = cluster_with_topic()
    leader = h.leader()
    h.disks[leader.broker_id].set_slow_reads(f"/b{leader.broker_id}/t-0/", 2_000)
    h.produce(1, 1)
    h.run(100)
    assert h.reads, "the follower fetch waits for its slow read"
    h.run(2_500)
    assert h.reads == [] or all(r[0] > h.clock.now for r in h.reads)
    follower = next(core for core in h.cores.values() if core is not leader)
    assert follower.partitions[TP].log_end_offset == 3


def test_consumer_reads_only_below_the_high_watermark() -> None:
    h = cluster_with_topic()
    h.produce(-1, 1)
    h.run(100)
    leader = h.leader()
    h.queue.append(("client", leader.broker_id, ConsumerFetchRequest(5, ((TP, Offset(0)),), 0, 1 << 20)))
    h.run(10)
    [fetched] = [m for m in h.client if isinstance(m, ConsumerFetchResponse)]
    part = fetched.partitions[0]
    assert part.error is errors.NONE and part.high_watermark == 3 and len(part.records) > 0


def test_a_follower_answers_a_consumer_fetch_that_allows_it_below_its_own_high_watermark() -> None:
    """KIP-392: a consumer's Fetch v11+ (`leader_only` False) may read a follower; an older one may not. A
    fetch parked there is answered when the follower's high watermark advances, not at its deadline."""
    h = cluster_with_topic()
    h.produce(-1, 1)
    h.run(600)
    follower = next(core for core in h.cores.values() if core is not h.leader())
    assert follower.high_watermark(TP) == 3
    for correlation, leader_only in ((5, True), (6, False)):
        request = ConsumerFetchRequest(correlation, ((TP, Offset(0)),), 0, 1 << 20, leader_only=leader_only)
        h.queue.append(("client", follower.broker_id, request))
    h.queue.append(("client", follower.broker_id, ConsumerFetchRequest(7, ((TP, Offset(3)),), 5_000, 1 << 20,
                                                                       leader_only=False)))
    h.run(10)
    fetched = {m.correlation_id: m.partitions[0] for m in h.client if isinstance(m, ConsumerFetchResponse)}
    assert fetched[5].error is errors.NOT_LEADER_OR_FOLLOWER and fetched[5].records == b""
    assert (fetched[6].error, fetched[6].high_watermark, fetched[6].log_start_offset) == (errors.NONE, 3, 0)
    assert fetched[6].records == h.leader().partitions[TP].log.read(Offset(0), 1 << 20).records
    assert 7 not in fetched  # parked: nothing above the follower's high watermark yet
    h.produce(-1, 2)
    h.run(1_000)
    fetched = {m.correlation_id: m.partitions[0] for m in h.client if isinstance(m, ConsumerFetchResponse)}
    assert fetched[7].error is errors.NONE and fetched[7].high_watermark == 6 and fetched[7].records


def test_a_restarted_broker_takes_no_role_before_it_catches_up_with_its_own_registration() -> None:
    """A crash without fsync empties the leader's log; the image it replays on restart still names it leader at
    the old epoch. Acting on that would make followers truncate committed data, so it waits until the
    controller fenced the old incarnation and registered the new one, and then follows."""
    h = cluster_with_topic()
    h.produce(-1, 1)
    h.run(600)
    old = h.leader()
    other = next(core for core in h.cores.values() if core is not old)
    h.disks[old.broker_id].crash()
    config = BrokerConfig({"replica.lag.time.max.ms": 10_000, "min.insync.replicas": 2, "node.id": old.broker_id})
    manager = LogManager.open(f"/b{old.broker_id}", config, h.disks[old.broker_id], h.clock)
    restarted = BrokerCore(old.broker_id, config, manager, 2, h.clock.now)
    h.cores[old.broker_id] = restarted
    h._send(old.broker_id, restarted.start(h.clock.now))
    h.controller.create_topic("other", 1, 1, {}, h.clock.now)  # a publication: the restarted broker replays
    h.run(2_000)
    assert restarted.metadata.applied_offset > 0 and not restarted.caught_up
    assert restarted.leader_states() == []
    h.run(15_000)  # the old session expires: fenced, leadership moves, the new incarnation registers
    assert restarted.caught_up
    assert h.leader() is other and other.high_watermark(TP) == 3
    assert TP in restarted.partitions and not restarted.partitions[TP].is_leader


def test_acks_all_times_out_while_a_stuck_follower_is_still_in_the_isr() -> None:
    h = cluster_with_topic({"broker.session.timeout.ms": 60_000})
    follower = next(b for b, core in h.cores.items() if not core.leader_states())
    h.cores.pop(follower)
    batch = build_batch([(b"k", b"v")])
    h.queue.append(("client", h.leader().broker_id, ProduceRequest(3, -1, 1_000, ((TP, batch),))))
    h.run(900)
    assert not [m for m in h.client if isinstance(m, ProduceResponse)]
    h.run(200)
    [timed_out] = [m for m in h.client if isinstance(m, ProduceResponse)]
    assert timed_out.results[0].error is errors.REQUEST_TIMED_OUT
    assert (timed_out.results[0].base_offset, timed_out.results[0].log_start_offset) == (0, 0)  # the append's


def test_an_acks_all_produce_waiting_on_a_deleted_topic_is_answered_at_once() -> None:
    """Kafka's DelayedProduce finds the partition gone: UNKNOWN_TOPIC_OR_PARTITION when the deletion reaches the
    leader, not a wait to the produce's own timeout."""
    h = cluster_with_topic({"broker.session.timeout.ms": 60_000})
    h.cores.pop(next(b for b, core in h.cores.items() if not core.leader_states()))
    batch = build_batch([(b"k", b"v")])
    h.queue.append(("client", h.leader().broker_id, ProduceRequest(3, -1, 3_600_000, ((TP, batch),))))
    h.run(500)
    assert not [m for m in h.client if isinstance(m, ProduceResponse)]
    h.controller.delete_topic(TP.topic, h.clock.now)
    h.run(100)
    [answered] = [m for m in h.client if isinstance(m, ProduceResponse)]
    assert answered.results[0].error is errors.UNKNOWN_TOPIC_OR_PARTITION


def test_purgatory_size_metric_counts_the_parked_acks_all_produce_until_it_expires() -> None:
    h = cluster_with_topic({"broker.session.timeout.ms": 60_000})
    h.cores.pop(next(b for b, core in h.cores.items() if not core.leader_states()))
    batch = build_batch([(b"k", b"v")])
    h.queue.append(("client", h.leader().broker_id, ProduceRequest(3, -1, 1_000, ((TP, batch),))))
    h.run(900)
    assert metrics_snapshot(h.leader(), {}).produce_purgatory_size == 1
    h.run(200)
    assert metrics_snapshot(h.leader(), {}).produce_purgatory_size == 0


def test_an_altered_min_insync_replicas_governs_the_next_produce_at_once() -> None:
    h = cluster_with_topic({"broker.session.timeout.ms": 60_000})
    follower = next(b for b, core in h.cores.items() if not core.leader_states())
    stuck = h.cores.pop(follower)
    h.produce(1, 1)  # the follower falls behind
    h.run(17_000)
    h.cores[follower] = stuck
    leader = h.leader()
    assert h.controller.image.topic("t").partitions[0].isr == (leader.broker_id,)  # type: ignore[union-attr]
    assert leader.partitions[TP].is_under_min_isr
    leader.drain_events()
    h.cores.pop(follower)
    h.controller.alter_topic_configs("t", (ConfigChange("min.insync.replicas", ConfigOp.SET, "1"),
                                           ConfigChange("retention.ms", ConfigOp.SET, "60000")), h.clock.now)
    h.run(10)  # the records reach the broker
    h.produce(-1, 9)
    h.run(1_100)
    [accepted] = [m for m in h.client if isinstance(m, ProduceResponse) and m.correlation_id == 9]
    assert accepted.results[0].error is errors.NONE
    assert not leader.partitions[TP].is_under_min_isr
    assert [e.type.value for e in leader.drain_events() if "min_isr" in e.type.value] == ["under_min_isr_end"]
    assert leader.log_manager.get(TP).config.retention_ms == 60_000  # type: ignore[union-attr]


def _set(h: Harness, broker: str, **values: str) -> None:
    changes = [ConfigChange(key.replace("_", "."), ConfigOp.SET, value) for key, value in values.items()]
    h.controller.alter_broker_configs(broker, changes, h.clock.now)


def test_dynamic_broker_configs_reach_the_partitions_without_a_restart() -> None:
    h = cluster_with_topic({"broker.session.timeout.ms": 60_000})
    leader = h.leader()
    follower = next(b for b in h.cores if b != leader.broker_id)
    stuck = h.cores.pop(follower)
    h.produce(1, 1)  # the follower falls behind
    h.run(3_000)
    assert len(h.controller.image.topic("t").partitions[0].isr) == 2  # type: ignore[union-attr]  # lag 10 s
    _set(h, "", replica_lag_time_max_ms="2000", log_retention_ms="60000")
    _set(h, str(leader.broker_id), log_retention_ms="30000")
    h.run(3_000)
    assert h.controller.image.topic("t").partitions[0].isr == (leader.broker_id,)  # type: ignore[union-attr]
    assert leader.log_manager.get(TP).config.retention_ms == 30_000  # type: ignore[union-attr]
    h.cores[follower] = stuck
    h.run(10)
    assert stuck.log_manager.get(TP).config.retention_ms == 60_000  # type: ignore[union-attr]
    assert stuck.config.get_int("replica.lag.time.max.ms") == 2_000


def test_dynamic_configs_this_brokers_static_settings_refuse_leave_the_previous_ones() -> None:
    """The controller checks rules between keys against its own static settings; a broker whose own refuse the
    result (a fetch wait above the new lag) keeps what it had, as Kafka's broker does."""
    h = cluster_with_topic(broker_config={"replica.fetch.wait.max.ms": 3_000})
    _set(h, "", log_retention_ms="60000")
    h.run(10)
    _set(h, "", replica_lag_time_max_ms="2000", log_retention_ms="70000")
    h.run(10)
    for core in h.cores.values():
        assert core.config.get_int("replica.lag.time.max.ms") == 10_000
        assert core.config.get_int("log.retention.ms") == 60_000


def test_a_restarted_broker_applies_the_dynamic_configs_it_finds_in_the_metadata() -> None:
    h = cluster_with_topic()
    _set(h, "", log_retention_ms="60000")
    h.run(10)
    old = h.leader()
    config = BrokerConfig({"replica.lag.time.max.ms": 10_000, "min.insync.replicas": 2, "node.id": old.broker_id})
    manager = LogManager.open(f"/b{old.broker_id}", config, h.disks[old.broker_id], h.clock)
    restarted = BrokerCore(old.broker_id, config, manager, 2, h.clock.now)
    h.cores[old.broker_id] = restarted
    h._send(old.broker_id, restarted.start(h.clock.now))
    h.run(15_000)
    assert restarted.caught_up and restarted.config.get_int("log.retention.ms") == 60_000
    assert restarted.log_manager.get(TP).config.retention_ms == 60_000  # type: ignore[union-attr]
