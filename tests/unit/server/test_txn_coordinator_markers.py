"""WriteTxnMarkers on a partition leader: the markers of one request wait for their replicas together, as in Kafka,
so the answer comes within one write timeout; they are appended in the request's order."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from insync import errors
from insync.broker.messages import PartitionProduceResult, ProduceRequest, ProduceResponse
from insync.config import BrokerConfig
from insync.protocol.codec import DecodedRequest
from insync.server.txn_coordinator import TransactionCoordinator
from insync.types import Offset, TopicPartition
from insync.wire import transactions as api
from insync.wire.versions import WRITE_TXN_MARKERS

HOSTED = (TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0))


class SlowReplicas:
    """Appends that wait for replicas until all of them are waiting: a leader whose markers waited one after the
    other would never answer (the test's timeout)."""

    def __init__(self, expected: int) -> None:
        self.expected, self.appended, self.waiting = expected, list[TopicPartition](), 0
        self.all_waiting = asyncio.Event()

    async def __call__(self, request: ProduceRequest) -> ProduceResponse:
        self.appended.extend(tp for tp, _ in request.partitions)
        self.waiting += 1
        if self.waiting == self.expected:
            self.all_waiting.set()
        await asyncio.wait_for(self.all_waiting.wait(), 5.0)
        return ProduceResponse(0, tuple(PartitionProduceResult(tp, errors.NONE, Offset(0))
                                        for tp, _ in request.partitions))


def _coordinator(replicas: SlowReplicas, hosted: tuple[TopicPartition, ...]) -> TransactionCoordinator:
    none: Any = None
    core: Any = SimpleNamespace(partitions={tp: object() for tp in hosted})
    return TransactionCoordinator(BrokerConfig().transactions, core, none, none, replicas, lambda: 0, none, none)


def _request(*markers: api.Marker) -> DecodedRequest:
    bodies = [api.markers_request(marker) for marker in markers]
    body = bodies[0].__class__(markers=tuple(m for b in bodies for m in b.markers))
    return DecodedRequest(WRITE_TXN_MARKERS, 1, 7, "coordinator", body)


def test_the_markers_of_one_request_wait_for_their_replicas_together() -> None:
    replicas = SlowReplicas(expected=2)
    coordinator = _coordinator(replicas, HOSTED)
    unhosted = TopicPartition("gone", 0)
    request = _request(api.Marker(5, 0, True, 1, (HOSTED[0], unhosted, HOSTED[1])),
                       api.Marker(6, 2, False, 1, (HOSTED[2],)))

    response = asyncio.run(asyncio.wait_for(coordinator.write_markers(request), 10.0))

    assert replicas.appended == list(HOSTED)  # in the request's order
    answered = {(int(m.producer_id), str(t.name), int(p.partition_index)): errors.by_code(int(p.error_code)).name
                for m in response.markers for t in m.topics for p in t.partitions}
    assert answered == {(5, "t", 0): "NONE", (5, "t", 1): "NONE", (5, "gone", 0): "UNKNOWN_TOPIC_OR_PARTITION",
                        (6, "u", 0): "NONE"}


def test_a_request_hosting_none_of_its_partitions_appends_nothing() -> None:
    replicas = SlowReplicas(expected=1)
    coordinator = _coordinator(replicas, ())
    response = asyncio.run(coordinator.write_markers(_request(api.Marker(5, 0, True, 1, (HOSTED[0],)))))
    assert replicas.appended == []
    (marker,) = response.markers
    assert [(t.name, [errors.by_code(int(p.error_code)).name for p in t.partitions]) for t in marker.topics] == [
        ("t", ["UNKNOWN_TOPIC_OR_PARTITION"])]


def test_a_producers_marker_in_a_negative_epoch_is_refused_and_one_of_no_producer_is_appended() -> None:
    """As Kafka 4.1 answers (tests/kafka_ref/test_differential.py): a negative id is no producer's, so its marker is
    appended; a producer's marker in a negative epoch is INVALID_PRODUCER_EPOCH and not appended."""
    replicas = SlowReplicas(expected=2)
    coordinator = _coordinator(replicas, HOSTED)
    request = _request(api.Marker(-1, 0, True, 1, (HOSTED[0],)), api.Marker(5, -1, False, 1, (HOSTED[1],)),
                       api.Marker(5, 0, True, 1, (HOSTED[2],)))
    response = asyncio.run(asyncio.wait_for(coordinator.write_markers(request), 10.0))
    assert replicas.appended == [HOSTED[0], HOSTED[2]]
    assert [[errors.by_code(int(p.error_code)).name for t in m.topics for p in t.partitions]
            for m in response.markers] == [["NONE"], ["INVALID_PRODUCER_EPOCH"], ["NONE"]]
