"""BrokerApis, the answers to clients' APIs, on a broker that needs no sockets: the API routes, a fetch the core
never sees."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from pathlib import Path
from typing import Any

import pytest

from insync import errors
from insync.config import BrokerConfig
from insync.protocol.codec import decode_request, encode_request
from insync.protocol.kio import build, nested, request_class
from insync.server import broker_apis
from insync.server.broker_node import BrokerNode
from insync.server.session import Session
from insync.wire import versions


def test_every_api_the_broker_advertises_has_a_route_and_only_those() -> None:
    assert set(broker_apis.ROUTES) == set(versions.BROKER_API_VERSIONS)


@pytest.mark.parametrize("replica_id", [-1, 2])
def test_a_fetch_of_unknown_topic_ids_alone_is_answered_unknown_topic_id(tmp_path: Path, replica_id: int) -> None:
    """A consumer still fetching a deleted topic (librdkafka's 0107_topic_recreate) names only ids the broker does
    not know: each is answered UNKNOWN_TOPIC_ID, as Kafka does, and the connection stays up."""
    config = BrokerConfig({"node.id": 1, "log.dirs": str(tmp_path / "logs"), "listeners": "PLAINTEXT://127.0.0.1:0",
                           "controller.quorum.voters": "0@127.0.0.1:1"})
    cls = request_class(1, 13)
    partition = build(nested(cls, "FetchPartition"), partition=0, fetch_offset=0, partition_max_bytes=100)
    topic = build(nested(cls, "FetchTopic"), topic_id=uuid.uuid4(), partitions=(partition,))
    body = build(cls, replica_id=replica_id, max_wait=datetime.timedelta(0), min_bytes=1, session_id=0,
                 session_epoch=-1, topics=(topic,), forgotten_topics_data=())
    request = decode_request(encode_request(body, 42)[4:], versions.BROKER_API_VERSIONS)

    async def scenario() -> Any:
        node = BrokerNode(config)
        try:
            return await node.apis.fetch(request, Session("127.0.0.1:50000", node.endpoints.bound[0]))
        finally:
            node.log_manager.close()

    response = asyncio.run(scenario())
    assert response.error_code == 0 and response.responses[0].partitions[0].error_code == errors.UNKNOWN_TOPIC_ID.code
