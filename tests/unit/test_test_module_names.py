"""Test modules have unique basenames: pytest imports them by basename (no `__init__.py` in tests/), and two
modules of one name stop the whole run's collection with "import file mismatch"."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_basename_is_unique() -> None:
    paths: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        paths[path.name].append(str(path.relative_to(TESTS)))
    assert paths, "no test modules found"
    assert {name: where for name, where in paths.items() if len(where) > 1} == {}
