"""A group coordinator on a fake broker core for the server's unit tests, and the partition's answers to its
appends."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from insync import errors
from insync.broker.messages import PartitionProduceResult, ProduceRequest, ProduceResponse
from insync.config import BrokerConfig
from insync.server.group_coordinator import GroupCoordinator
from insync.types import OFFSETS_TOPIC, Offset, TopicPartition

E = errors.BY_NAME
OFFSETS = TopicPartition(OFFSETS_TOPIC, 0)


class Appends:
    """The partition's answers to the coordinator's appends, in order; what it was asked to append."""

    def __init__(self, *answers: str) -> None:
        self.answers, self.requests = list(answers), list[ProduceRequest]()

    async def __call__(self, request: ProduceRequest) -> ProduceResponse:
        self.requests.append(request)
        error = E[self.answers.pop(0)] if self.answers[0] != "NONE" else errors.NONE
        return ProduceResponse(0, (PartitionProduceResult(OFFSETS, error, Offset(100 + len(self.requests))),))


def coordinator(appends: Appends) -> GroupCoordinator:
    partitions = {0: SimpleNamespace(leader=1), 1: SimpleNamespace(leader=1)}
    image = SimpleNamespace(topic=lambda name: SimpleNamespace(partitions=partitions) if name in (
        OFFSETS_TOPIC, "t") else None)
    core: Any = SimpleNamespace(metadata=SimpleNamespace(image=image), leader_epoch=lambda tp: 5,
                                leader_states=lambda: [])
    empty_log = SimpleNamespace(log_start_offset=0, log_end_offset=0)
    log_manager: Any = SimpleNamespace(get=lambda tp: empty_log)
    config = BrokerConfig({"offsets.topic.num.partitions": "1"})
    return GroupCoordinator(config.groups, core, log_manager, None, appends, lambda: 1_000)  # type: ignore[arg-type]
