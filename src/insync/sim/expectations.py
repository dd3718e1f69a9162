"""A scenario's `[expect]` table: bounds on result figures, checked after the run.

Keys name a numeric result field, optionally with a suffix: `lost_acked = 0` (exact), `isr_shrinks_min = 1`,
`urp_ms_max = 15000`. `produce_errors.NOT_ENOUGH_REPLICAS_min = 1` reaches into the error counts, and
`invariant_violations = 0` counts the list. Tests assert the finer, seed-specific claims themselves; these
bounds are what `insync sim run` and `sweep` report as the scenario's expected outcome.
"""

from __future__ import annotations

from typing import Any

from insync.config import ConfigError
from insync.sim.result import SimResult


def _value(result: SimResult, name: str) -> float:
    data = result.to_dict(with_events=False)
    if name.startswith("produce_errors."):
        return float(result.produce_errors.get(name.split(".", 1)[1], 0))
    if name not in data:
        raise ConfigError(f"[expect] names unknown result field {name!r}")
    value = data[name]
    if isinstance(value, list):
        return float(len(value))
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"[expect] field {name!r} is not a number")
    return float(value)


def check_expectations(expect: dict[str, Any], result: SimResult) -> list[str]:
    failures: list[str] = []
    fields = result.to_dict(with_events=False)
    for key, bound in sorted(expect.items()):
        if key in fields:
            name, compare = key, "=="  # a field whose own name ends in _max, e.g. failed_partitions_max
        elif key.endswith("_min"):
            name, compare = key[:-4], ">="
        elif key.endswith("_max"):
            name, compare = key[:-4], "<="
        else:
            name, compare = key, "=="
        actual = _value(result, name)
        ok = {">=": actual >= bound, "<=": actual <= bound, "==": actual == bound}[compare]
        if not ok:
            failures.append(f"{name} = {actual:g}, expected {compare} {bound}")
    return failures
