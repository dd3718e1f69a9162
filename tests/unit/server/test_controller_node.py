"""ControllerNode's answers that need no socket and no metadata store: SASL requests on a listener without SASL."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from insync.config import BrokerConfig
from insync.protocol.codec import decode_request, encode_request, request_schema
from insync.protocol.kio import build_defaults
from insync.server.controller_node import ControllerNode
from insync.wire.versions import CONTROLLER_API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE


def test_sasl_requests_on_a_plaintext_controller_listener_are_an_illegal_sasl_state(tmp_path: Path) -> None:
    """Both are in the controller's table; without a SASL gate in front they reach the node, which answers them
    as Kafka's ControllerApis does, not with an exception that closes the connection."""
    config = BrokerConfig({"node.id": 0, "process.roles": "controller", "log.dirs": str(tmp_path / "data"),
                           "controller.listener": "CONTROLLER://127.0.0.1:0",
                           "controller.quorum.voters": "0@127.0.0.1:1"})

    async def answers() -> list[Any]:
        node = ControllerNode(config)
        try:
            out = []
            for api_key, version in ((SASL_HANDSHAKE, 1), (SASL_AUTHENTICATE, 2)):
                frame = encode_request(build_defaults(request_schema(api_key, version)), 5)
                out.append(await node._answer(decode_request(frame[4:], CONTROLLER_API_VERSIONS)))
            return out
        finally:
            node.event_log.close()

    handshake, authenticate = asyncio.run(answers())
    assert handshake.error_code is ErrorCode.illegal_sasl_state
    assert authenticate.error_code is ErrorCode.illegal_sasl_state
    assert authenticate.error_message == "SaslAuthenticate request received after successful authentication"
