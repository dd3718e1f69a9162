from __future__ import annotations

from insync.sim.scheduler import START_MS, Scheduler


def test_callbacks_run_in_time_order_with_ties_in_scheduling_order() -> None:
    scheduler = Scheduler(seed=1)
    seen: list[str] = []
    scheduler.after(10, lambda: seen.append("b"))
    scheduler.after(5, lambda: seen.append("a"))
    scheduler.after(10, lambda: seen.append("c"))
    assert scheduler.run_until(START_MS + 100) == 3
    assert seen == ["a", "b", "c"]
    assert scheduler.now_ms == START_MS + 100


def test_clock_jumps_to_each_timer_and_cancel_skips() -> None:
    scheduler = Scheduler(seed=1)
    times: list[int] = []
    timer = scheduler.after(1_000_000, lambda: times.append(-1))
    scheduler.after(3_600_000, lambda: times.append(scheduler.elapsed_ms))
    timer.cancel()
    scheduler.run_until(START_MS + 4_000_000)
    assert times == [3_600_000]


def test_callbacks_scheduled_during_the_run_at_the_same_time_still_run() -> None:
    scheduler = Scheduler(seed=1)
    seen: list[int] = []
    def outer() -> None:
        scheduler.after(0, lambda: seen.append(scheduler.elapsed_ms))

    scheduler.after(0, outer)
    scheduler.run_until(START_MS)
    assert seen == [0]


def test_same_seed_same_random_choices() -> None:
    first = [Scheduler(seed=7).uniform_ms(0, 1000) for _ in range(3)]
    again = [Scheduler(seed=7).uniform_ms(0, 1000) for _ in range(3)]
    assert first == again
    assert Scheduler(seed=7).rng.random() != Scheduler(seed=8).rng.random()
