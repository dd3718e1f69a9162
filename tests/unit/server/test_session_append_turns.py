"""A connection's transactional produce requests append in the order they came, whichever is verified first."""

from __future__ import annotations

import asyncio

from insync.server.session import AppendTurns


def test_a_request_verified_first_appends_after_the_one_before_it() -> None:
    async def scenario() -> list[str]:
        turns, appended = AppendTurns(), []
        first_verified = asyncio.Event()

        async def produce(name: str, verified: asyncio.Event | None) -> None:
            with turns.turn() as earlier_done:
                if verified is not None:
                    await verified.wait()  # the coordinator's answer
                await earlier_done()
                appended.append(name)

        first = asyncio.create_task(produce("first", first_verified))
        second = asyncio.create_task(produce("second", None))
        await asyncio.sleep(0.01)
        assert appended == []  # the second waits for the first, verified later
        first_verified.set()
        await asyncio.gather(first, second)
        return appended

    assert asyncio.run(scenario()) == ["first", "second"]


def test_a_request_that_gives_up_early_still_ends_its_turn_after_the_ones_before_it() -> None:
    async def scenario() -> list[str]:
        turns, appended = AppendTurns(), []
        release = asyncio.Event()

        async def slow() -> None:
            with turns.turn() as earlier_done:
                await release.wait()
                await earlier_done()
                appended.append("slow")

        async def failing() -> None:
            with turns.turn():
                raise ConnectionError("refused before its append")

        async def third() -> None:
            with turns.turn() as earlier_done:
                await earlier_done()
                appended.append("third")

        tasks = [asyncio.create_task(slow()), asyncio.create_task(failing()), asyncio.create_task(third())]
        await asyncio.sleep(0.01)
        assert appended == []  # the failed one's turn ended, but after the slow one's only
        release.set()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        assert isinstance(outcomes[1], ConnectionError)
        return appended

    assert asyncio.run(scenario()) == ["slow", "third"]


def test_a_cancelled_waiter_does_not_cancel_the_turn_it_waited_for() -> None:
    async def scenario() -> list[str]:
        turns, appended = AppendTurns(), []
        release = asyncio.Event()

        async def produce(name: str) -> None:
            with turns.turn() as earlier_done:
                await release.wait() if name == "first" else None
                await earlier_done()
                appended.append(name)

        first = asyncio.create_task(produce("first"))
        second = asyncio.create_task(produce("second"))
        third = asyncio.create_task(produce("third"))
        await asyncio.sleep(0.01)
        second.cancel()  # its connection closed while it waited
        await asyncio.sleep(0.01)
        assert appended == []  # the third still waits for the first
        release.set()
        await asyncio.gather(first, third)
        return appended

    assert asyncio.run(scenario()) == ["first", "third"]


def test_turns_hold_nothing_once_all_have_ended() -> None:
    async def scenario() -> AppendTurns:
        turns = AppendTurns()
        with turns.turn() as earlier_done:
            await earlier_done()
        return turns

    assert asyncio.run(scenario())._last is None
