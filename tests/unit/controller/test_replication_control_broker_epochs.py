"""KIP-903 in AlterPartition: each proposed ISR member comes with the broker epoch its leader knows from the
member's fetches, and the controller refuses (INELIGIBLE_REPLICA) a member whose epoch is not its broker's
registered one, as Kafka's ReplicationControlManager.ineligibleReplicasForIsr does; -1 skips the check."""

from __future__ import annotations

from ctrl_harness import Harness, expire, three_broker_topic

from insync import errors
from insync.controller.replication_control import AlterPartitionData
from insync.controller.results import AlterPartitionDataResult


def alter(h: Harness, new_isr: tuple[int, ...], epochs: tuple[int, ...]) -> AlterPartitionDataResult:
    reg = h.partition("t")
    item = AlterPartitionData(h.topic_id("t"), 0, reg.leader_epoch, reg.partition_epoch, new_isr,
                              new_isr_broker_epochs=epochs)
    return h.controller.alter_partition(reg.leader, h.epochs[reg.leader], [item], h.now).response[0]


def restart(h: Harness, broker: int) -> tuple[int, int]:
    """`broker` dies (its session expires, which takes it out of the ISR) and comes back, say with an empty disk:
    a new registration, a new broker epoch. Returns (old epoch, new epoch)."""
    old = h.epochs[broker]
    expire(h, {broker}, tuple(b for b in (1, 2, 3) if b != broker))
    h.register(broker, incarnation="after-restart", clean=False)
    assert not h.heartbeat(broker).is_fenced
    return old, h.epochs[broker]


def test_a_broker_back_from_a_restart_is_not_counted_in_the_isr_from_its_old_life() -> None:
    h = three_broker_topic()
    leader = h.partition("t").leader
    follower = next(b for b in (1, 2, 3) if b != leader)
    old, new = restart(h, follower)
    assert new != old and follower not in h.partition("t").isr
    isr = h.partition("t").isr
    epochs = tuple(h.epochs[b] for b in isr)
    # The leader still holds the follower's old-life state (say a fetch of its old log completed late): refused.
    assert alter(h, (*isr, follower), (*epochs, old)).error is errors.INELIGIBLE_REPLICA
    assert h.partition("t").isr == isr
    # Once the leader has a fetch from the new life, whose log is what it is now, the expansion goes through.
    assert alter(h, (*isr, follower), (*epochs, new)).error is errors.NONE
    assert follower in h.partition("t").isr


def test_a_stale_epoch_of_a_remaining_member_refuses_a_shrink_and_unknown_epochs_are_not_checked() -> None:
    h = three_broker_topic()
    reg = h.partition("t")
    first, second = (b for b in reg.isr if b != reg.leader)
    stale = h.epochs[first] - 1
    shrink = (reg.leader, first)
    assert alter(h, shrink, (h.epochs[reg.leader], stale)).error is errors.INELIGIBLE_REPLICA
    assert second in h.partition("t").isr
    assert alter(h, shrink, (-1, -1)).error is errors.NONE  # AlterPartition v2, or epochs the leader lacks
    assert h.partition("t").isr == shrink
