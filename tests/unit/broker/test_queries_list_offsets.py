"""ListOffsets answered through a leader's `BrokerCore.handle` (`queries.list_offsets`: Kafka 4.x's
`Partition.fetchOffsetForTimestamp` without tiered storage): by time, the record found with its own timestamp
and batch epoch; MAX_TIMESTAMP (KIP-734) the first record with the largest timestamp; EARLIEST_LOCAL the log
start; LATEST_TIERED offset and epoch -1; consumers see up to the high watermark, replicas to the log end; a new leader whose high watermark lags
answers OFFSET_NOT_AVAILABLE (KIP-207)."""

from __future__ import annotations

from typing import Any, cast

import pytest
import repl_helpers
from broker_harness import TP, Harness, cluster_with_topic

from insync import errors
from insync.broker import queries
from insync.broker.messages import (
    CONSUMER_REPLICA_ID,
    DEBUGGING_REPLICA_ID,
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    READ_UNCOMMITTED,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ProduceRequest,
)
from insync.protocol.records import RecordSpec, build_batch
from insync.types import BrokerId, LeaderEpoch, Outgoing, PartitionEpoch

T0 = 1_700_000_000_000


def produce(h: Harness, acks: int, *timestamps: int) -> None:
    batch = build_batch([RecordSpec(b"k", b"v", timestamp=T0 + ts) for ts in timestamps])
    h.queue.append(("client", h.leader().broker_id, ProduceRequest(len(h.client), acks, 30_000, ((TP, batch),))))
    h.run(600)


def ask(h: Harness, timestamp: int, replica_id: int = CONSUMER_REPLICA_ID) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) the leader answers for `timestamp`."""
    request = ListOffsetsRequest(1, BrokerId(replica_id), READ_UNCOMMITTED, (ListOffsetsPartition(TP, timestamp),))
    [answer] = h.leader().handle(h.clock.now, "client", request)
    assert isinstance(answer, Outgoing) and answer.destination == "client"
    assert isinstance(answer.message, ListOffsetsResponse) and answer.message.correlation_id == 1
    [result] = answer.message.results
    assert result.error is errors.NONE
    return result.timestamp, result.offset, result.leader_epoch


@pytest.fixture
def h() -> Harness:
    """Offsets 0-4 with timestamps T0 + 100, 300, 200 | 300, 150 (two batches), all below the high watermark."""
    cluster = cluster_with_topic()
    produce(cluster, -1, 100, 300, 200)
    produce(cluster, -1, 300, 150)
    assert cluster.leader().high_watermark(TP) == 5
    return cluster


def test_a_timestamp_finds_the_first_record_at_or_after_it_and_answers_that_records_timestamp(h: Harness) -> None:
    epoch = h.leader().partitions[TP].leader_epoch
    assert ask(h, T0 + 150) == (T0 + 300, 1, epoch)  # offset 1 is the first at or after 150: its time is 300
    assert ask(h, T0 + 100) == (T0 + 100, 0, epoch)
    assert ask(h, T0 + 301) == (-1, -1, -1)  # nothing that late


def test_max_timestamp_is_the_first_record_with_the_largest_timestamp(h: Harness) -> None:
    epoch = h.leader().partitions[TP].leader_epoch
    assert ask(h, MAX_TIMESTAMP) == (T0 + 300, 1, epoch)  # offset 3 has 300 too; the first one counts


def test_max_timestamp_of_an_empty_log_finds_nothing() -> None:
    assert ask(cluster_with_topic(), MAX_TIMESTAMP) == (-1, -1, -1)


def test_tiered_storage_positions_of_a_broker_without_it(h: Harness) -> None:
    epoch = h.leader().partitions[TP].leader_epoch
    assert ask(h, EARLIEST_LOCAL_TIMESTAMP) == (-1, 0, epoch)  # every segment is local: the log start
    assert ask(h, LATEST_TIERED_TIMESTAMP) == (-1, -1, -1)  # nothing tiered
    assert ask(h, EARLIEST_PENDING_UPLOAD_TIMESTAMP) == (-1, -1, -1)


def test_consumers_find_nothing_past_the_high_watermark_replicas_do(h: Harness) -> None:
    follower = next(b for b in h.cores if b != h.leader().broker_id)
    stuck = h.cores.pop(follower)  # it stops fetching: the high watermark stays at 5
    produce(h, 1, 500)
    h.cores[follower] = stuck
    assert h.leader().high_watermark(TP) == 5
    assert ask(h, MAX_TIMESTAMP) == (-1, -1, -1)  # Kafka does not fall back to a committed record
    assert ask(h, T0 + 400) == (-1, -1, -1)
    assert ask(h, MAX_TIMESTAMP, DEBUGGING_REPLICA_ID)[:2] == (T0 + 500, 5)


def test_earliest_answers_the_epoch_of_the_first_record_latest_the_current_one(h: Harness) -> None:
    first_epoch = h.leader().partitions[TP].leader_epoch
    h.cores.pop(h.leader().broker_id)  # the leader stops: fenced when its session runs out, the follower leads
    h.run(15_000)
    current = h.leader().partitions[TP].leader_epoch
    assert current > first_epoch
    assert ask(h, EARLIEST_TIMESTAMP) == (-1, 0, first_epoch)
    assert ask(h, LATEST_TIMESTAMP) == (-1, 5, current)


def test_a_new_leader_whose_high_watermark_lags_its_epoch_start_answers_offset_not_available() -> None:
    """KIP-207, as Kafka's fetchOffsetForTimestamp: until the followers fetch what the epoch started with, a consumer's
    latest offset (and a timestamp found only past the high watermark) could go back, so it gets
    OFFSET_NOT_AVAILABLE; the earliest offset and replicas' requests are answered as before."""
    partition = repl_helpers.leader(1, epoch=1, partition_epoch=1)
    partition.append_records_as_leader(repl_helpers.batch(3), 1, repl_helpers.T0)  # the followers fetched none
    assert partition.make_leader(LeaderEpoch(2), PartitionEpoch(2), repl_helpers.ids((1, 2, 3)),
                                 repl_helpers.ids((1, 2, 3)), repl_helpers.T0)
    assert partition.high_watermark == 0 and partition.high_watermark_lagging

    def asked(timestamp: int, replica_id: int = CONSUMER_REPLICA_ID) -> tuple[str, int]:
        request = ListOffsetsRequest(1, BrokerId(replica_id), READ_UNCOMMITTED,
                                     (ListOffsetsPartition(repl_helpers.TP, timestamp),))
        [result] = queries.list_offsets(cast(Any, {repl_helpers.TP: partition}), cast(Any, None), request).results
        return result.error.name, result.offset

    assert asked(LATEST_TIMESTAMP) == ("OFFSET_NOT_AVAILABLE", -1)
    assert asked(repl_helpers.T0) == ("OFFSET_NOT_AVAILABLE", -1)  # found at 0, past the high watermark
    assert asked(T0 + 10**9) == ("NONE", -1)  # found nowhere: no error
    assert asked(EARLIEST_TIMESTAMP) == ("NONE", 0)
    assert asked(LATEST_TIMESTAMP, DEBUGGING_REPLICA_ID) == ("NONE", 3)
    for follower in (2, 3):
        repl_helpers.fetch(partition, follower, 3, repl_helpers.T0 + 1)
    assert partition.high_watermark == 3 and not partition.high_watermark_lagging
    assert asked(LATEST_TIMESTAMP) == ("NONE", 3)
