"""BrokerNode's driver logic that needs no sockets: requests the core never answers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from insync.broker.messages import ConsumerFetchRequest
from insync.config import BrokerConfig
from insync.server import broker_node
from insync.server.broker_node import BrokerNode


def test_a_request_the_core_never_answers_fails_after_the_request_timeout(tmp_path: Path) -> None:
    config = BrokerConfig({"node.id": 1, "log.dirs": str(tmp_path / "logs"), "listeners": "PLAINTEXT://127.0.0.1:0",
                           "controller.quorum.voters": "0@127.0.0.1:1"})

    async def scenario() -> None:
        node = BrokerNode(config)
        node.core.handle = lambda now_ms, source, message: []  # type: ignore[method-assign]  # never answers
        call = asyncio.create_task(node.call(ConsumerFetchRequest(7, (), 500, 1024)))
        await asyncio.sleep(0)
        started_ms = node._now()
        node._expire_waiters(started_ms + broker_node.REQUEST_TIMEOUT_MS - 1_000)
        await asyncio.sleep(0)
        assert not call.done()
        node._expire_waiters(started_ms + broker_node.REQUEST_TIMEOUT_MS + 1_000)
        with pytest.raises(TimeoutError):
            await call
        assert not node._waiters
        node.log_manager.close()

    asyncio.run(scenario())
