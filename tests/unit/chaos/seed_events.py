"""Hand-made seed runs for the seed scripts' unit tests: the events a broker writes, as events.jsonl has them."""

from __future__ import annotations

from typing import Any

from insync.chaos.seed_model import SeedRun

LAG = 1000


def shrink(ts_ms: int, broker: int, caught_up_ms: int, reason: str = "stuck") -> dict[str, Any]:
    return {"type": "isr_shrink", "ts_ms": ts_ms, "partition": 0, "isr_before": [1, 2, 3], "isr_after": [1, 2],
            "removed": [{"broker": broker, "leo": 5, "last_caught_up_ms": caught_up_ms, "reason": reason}]}


def expand(ts_ms: int, broker: int) -> dict[str, Any]:
    return {"type": "isr_expand", "ts_ms": ts_ms, "partition": 0, "added": [{"broker": broker, "leo": 9}]}


def seed_run(events: list[dict[str, Any]], side: str = "real", **figures: Any) -> SeedRun:
    lag_ms = figures.pop("lag_ms", LAG)
    values: dict[str, Any] = {"acked": 100, "lost": 0, "duplicated": 0, "not_enough_replicas": 0, "urp_s": 1.0,
                              "under_min_isr_s": 0.0, "offline_s": 0.0, **figures}
    return SeedRun(side, lag_ms, tuple(events), **values)


def event(kind: str, ts_ms: int, partition: int | None = 0, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "ts_ms": ts_ms, "partition": partition, **fields}
