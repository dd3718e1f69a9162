"""A broker whose every log dir failed halts once, shortly after, with Kafka's status."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from insync.server import halt


def test_the_halt_comes_once_after_the_answers_already_decided(monkeypatch: pytest.MonkeyPatch) -> None:
    exits: list[int] = []
    monkeypatch.setattr(halt.os, "_exit", exits.append)
    monkeypatch.setattr(halt.logging, "shutdown", lambda: None)  # the test process keeps its handlers
    halter = halt.Halter()
    core: Any = SimpleNamespace(halt_message=None)

    async def run() -> None:
        halter.check(core)
        core.halt_message = "Shutdown broker because all log dirs in /d have failed"
        halter.check(core)
        halter.check(core)
        assert exits == []  # not yet: the responses decided meanwhile still go out
        await asyncio.sleep(halt.HALT_AFTER_S * 3)

    asyncio.run(run())
    assert exits == [halt.HALT_STATUS] and halter.scheduled
