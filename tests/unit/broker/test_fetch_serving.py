"""FetchServer's fetch purgatory on real leader partitions: parked follower fetches wake on min bytes appended,
consumer fetches on the high watermark, both on forced partitions and at their deadline, in the order parked;
forget, and a full purgatory answering at once."""

from __future__ import annotations

from fetch_helpers import T0, A, B, answered, append, consumer_request, follower_request, leaders

from insync import errors
from insync.broker.fetch_serving import FetchServer
from insync.broker.messages import ConsumerFetchRequest, ConsumerFetchResponse
from insync.replication.messages import FetchResponse
from insync.replication.purgatory import Purgatory
from insync.types import BrokerId, Offset, Outgoing


def test_follower_fetches_wake_on_min_bytes_appended_in_the_order_parked() -> None:
    partitions = leaders()
    server = FetchServer(partitions.get)
    first = append(partitions[A], 1, T0)
    assert answered(server.follower_fetch(T0, 2, follower_request(1, 2, {A: 0}, min_bytes=first))) == [(2, 1)]
    assert server.follower_fetch(T0, 3, follower_request(2, 3, {A: 1, B: 0}, min_bytes=1)).commands == []
    assert server.follower_fetch(T0, 2, follower_request(3, 2, {A: 1}, min_bytes=10_000)).commands == []
    assert answered(server.wake(T0 + 1, {B: 0})) == []  # nothing appended anywhere it matters yet
    size = append(partitions[A], 2, T0 + 2)
    woken = server.wake(T0 + 2, {A: size})
    assert answered(woken) == [(3, 2)]  # correlation 3 needs 10 000 bytes
    [out] = woken.commands
    assert isinstance(out, Outgoing) and isinstance(out.message, FetchResponse)
    assert [len(data.records) for data in out.message.partitions] == [size, 0]
    assert server.next_deadline_ms() == T0 + 500
    assert answered(server.wake(T0 + 499)) == []
    assert answered(server.wake(T0 + 500)) == [(2, 3)]  # its wait expired: answered with what there is
    assert server.next_deadline_ms() is None


def test_consumer_fetches_wake_on_the_high_watermark_not_on_appends() -> None:
    partitions = leaders()
    server = FetchServer(partitions.get)
    for correlation_id in (1, 2):
        assert server.consumer_fetch(T0, "c", consumer_request(correlation_id, (A, B))).commands == []
    assert server.consumer_fetch(T0, "c", consumer_request(3, (B,), max_wait_ms=100)).commands == []
    size = append(partitions[A], 1, T0 + 1)
    assert answered(server.wake(T0 + 1, {A: size})) == []  # not committed: nothing a consumer may read
    for replica in (2, 3):
        served = server.follower_fetch(T0 + 2, replica, follower_request(9, replica, {A: 1}))
        assert served.commands == [] and served.results[0][1].data.error is errors.NONE
    assert partitions[A].high_watermark == 1
    woken = server.wake(T0 + 2, hw_advanced=[A])
    assert answered(woken) == [("c", 1), ("c", 2)]
    assert server.next_deadline_ms() == T0 + 100  # the consumer fetch of B alone is left (the followers' too)


def test_forced_partitions_answer_now_and_forget_drops_a_peers_fetches() -> None:
    partitions = leaders()
    server = FetchServer(partitions.get)
    assert server.follower_fetch(T0, 2, follower_request(1, 2, {A: 0})).commands == []
    assert server.follower_fetch(T0, 3, follower_request(2, 3, {B: 0})).commands == []
    assert server.consumer_fetch(T0, "c", consumer_request(3, (B,))).commands == []
    server.forget(3)
    assert answered(server.wake(T0 + 1, forced=[B])) == []  # still leader with nothing: parked again
    del partitions[B]  # leadership moved away
    woken = server.wake(T0 + 2, forced=[B])
    assert answered(woken) == [("c", 3)]
    [out] = woken.commands
    assert isinstance(out, Outgoing) and isinstance(out.message, ConsumerFetchResponse)
    assert out.message.partitions[0].error is errors.NOT_LEADER_OR_FOLLOWER
    server.forget(2)
    assert server.next_deadline_ms() is None and answered(server.wake(T0 + 1_000)) == []


def test_a_full_purgatory_answers_at_once() -> None:
    partitions = leaders()
    server = FetchServer(partitions.get)
    server._purgatory = Purgatory("fetch", capacity=1)  # noqa: SLF001 - the bound is the point
    assert server.consumer_fetch(T0, "c", consumer_request(1, (A,))).commands == []
    assert answered(server.consumer_fetch(T0, "c", consumer_request(2, (A,)))) == [("c", 2)]
    assert answered(server.follower_fetch(T0, 2, follower_request(3, 2, {A: 0}))) == [(2, 3)]


def test_a_consumer_past_the_high_watermark_but_inside_the_log_gets_nothing_not_an_error() -> None:
    """A new leader's high watermark can trail what consumers read from the old one (Kafka's UnifiedLog.read)."""
    partitions = leaders()
    server = FetchServer(partitions.get)
    append(partitions[A], 3, T0)  # LEO 3, high watermark 0: the followers have not fetched

    def read_at(offset: int) -> tuple[errors.KafkaError, bytes]:
        request = ConsumerFetchRequest(9, ((A, Offset(offset)),), 0, 1 << 20)
        [command] = server.consumer_fetch(T0, "c", request).commands
        assert isinstance(command, Outgoing) and isinstance(command.message, ConsumerFetchResponse)
        [part] = command.message.partitions
        return part.error, part.records

    assert read_at(2) == (errors.NONE, b"")
    assert read_at(3) == (errors.NONE, b"")  # at the log end
    assert read_at(4)[0] is errors.OFFSET_OUT_OF_RANGE  # past the log end


def test_a_fetch_woken_from_the_purgatory_does_not_update_the_follower_state_again() -> None:
    partitions = leaders()
    server = FetchServer(partitions.get)
    append(partitions[A], 2, T0)
    assert answered(server.follower_fetch(T0, 2, follower_request(1, 2, {A: 0}))) == [(2, 1)]
    assert server.follower_fetch(T0 + 100, 2, follower_request(2, 2, {A: 2})).commands == []  # parked
    before = partitions[A].replica_state(BrokerId(2))
    assert before is not None and (before.log_end_offset, before.last_fetch_time_ms) == (2, T0 + 100)
    woken = server.wake(T0 + 400, {A: append(partitions[A], 3, T0 + 400)})
    [out] = woken.commands
    assert isinstance(out, Outgoing) and isinstance(out.message, FetchResponse) and out.message.partitions[0].records
    # Kafka's readFromPurgatory: the answer is read again, the follower's state stays that of its fetch's arrival.
    assert partitions[A].replica_state(BrokerId(2)) == before
    assert [result.alter_partition for _, result in woken.results] == [None]


def test_a_consumer_fetch_keeps_to_each_partitions_limit_and_the_responses_with_one_batch_past_them() -> None:
    """Kafka's Fetch limits: `partition_max_bytes` per partition, `max_bytes` over the response, and one whole
    batch past both only for the first partition with data (KIP-74), so a consumer never gets a response many
    times what it asked for."""
    partitions = leaders()
    server = FetchServer(partitions.get)
    batch = {tp: [append(partitions[tp], 10, T0 + i) for i in range(4)] for tp in (A, B)}
    for replica in (2, 3):  # both followers at the log end: the high watermark moves to 4 batches' worth
        server.follower_fetch(T0 + 10, replica, follower_request(replica, replica, {A: 40, B: 40}, max_wait_ms=0))
    assert all(p.high_watermark == 40 for p in partitions.values())
    one, two = batch[A][0], batch[A][0] + batch[A][1]

    def sizes(max_bytes: int, partition_max_bytes: tuple[int, ...]) -> list[int]:
        request = ConsumerFetchRequest(9, ((A, Offset(0)), (B, Offset(0))), 0, max_bytes, partition_max_bytes)
        [command] = server.consumer_fetch(T0 + 20, "c", request).commands
        assert isinstance(command, Outgoing) and isinstance(command.message, ConsumerFetchResponse)
        return [len(part.records) for part in command.message.partitions]

    assert sizes(1 << 20, ()) == [sum(batch[A]), sum(batch[B])]  # no partition limit: all committed data
    assert sizes(1 << 20, (two, two)) == [two, batch[B][0] + batch[B][1]]  # each partition up to its limit
    assert sizes(two + 1, (1 << 20, 1 << 20)) == [two, 0]  # the response's budget is spent on A
    assert sizes(1, (1, 1)) == [one, 0]  # one batch past both limits, for the first partition only
