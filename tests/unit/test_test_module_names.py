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


def test_conftest_helpers_are_imported_at_module_level() -> None:
    """`conftest` is a module name tests/ and tests/spark/ both have: imported inside a function it resolves to
    whichever was loaded last, which under pytest-xdist depends on what the worker ran before."""
    late = [f"{path.relative_to(TESTS)}:{n}" for path in TESTS.rglob("test_*.py")
            for n, line in enumerate(path.read_text().splitlines(), 1) if line.startswith(" ") and
            line.lstrip().startswith(("from conftest import", "import conftest"))]
    assert late == []
