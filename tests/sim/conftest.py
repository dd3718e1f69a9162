from __future__ import annotations

import pytest


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Simulation tests print the seed of a failing run and the command that reproduces it."""
    if call.excinfo is not None and call.when == "call":
        seed = getattr(item, "callspec", None)
        params = seed.params if seed is not None else {}
        if "seed" in params:
            scenario = params.get("scenario", item.name)
            print(f"\nfailing seed {params['seed']}: insync sim run {scenario} --seed {params['seed']}")
