"""Tests mirror modules (STYLE.md 8): `tests/unit/<package>/test_<module>.py` tests `src/insync/<package>/<module>.py`,
and a suffix after the module's name names an aspect (`storage/test_log_recovery.py`). pytest imports test modules
by path (`--import-mode=importlib`), so two may share a basename; the helper modules tests import by name are on
pyproject.toml's `pythonpath` instead, where a basename must be unique, and no test module imports another."""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
UNIT = TESTS / "unit"
SRC = ROOT / "src" / "insync"

# Unit tests of no one module, each with why.
CROSS_CUTTING = {
    "test_comments.py": "the comments and module docstrings of every module in src/",
    "test_layers.py": "the import graph and module sizes of all of src/insync",
    "test_test_module_names.py": "this file: the layout of tests/",
    "tools/test_compat_runner.py": "tools/compat/run_librdkafka_tests.py, a script outside src/",
    "wire/test_api_fuzz.py": "every translator of wire/ under Hypothesis-built requests",
}


def unit_test_modules() -> list[str]:
    return sorted(str(path.relative_to(UNIT)) for path in UNIT.rglob("test_*.py"))


def mirrored_module(test_path: str) -> str | None:
    """The module of src/insync that `test_path` (relative to tests/unit) mirrors, or None."""
    relative = Path(test_path)
    package = SRC.joinpath(*relative.parent.parts)
    if not package.is_dir():
        return None
    name = relative.stem.removeprefix("test_")
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    modules |= {p.name for p in package.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    for module in sorted(modules, key=len, reverse=True):
        if name == module or name.startswith(f"{module}_"):
            return str((package / module).relative_to(SRC.parent))
    return None


def test_every_unit_test_module_mirrors_a_module_of_src() -> None:
    unmirrored = [path for path in unit_test_modules()
                  if path not in CROSS_CUTTING and mirrored_module(path) is None]
    assert unmirrored == [], ("name each after the module it tests, tests/unit/<package>/test_<module>[_<aspect>].py,"
                              " or say in CROSS_CUTTING why it tests no one module")


def test_the_cross_cutting_list_names_existing_files_that_need_it() -> None:
    present = set(unit_test_modules())
    assert set(CROSS_CUTTING) <= present
    assert {path for path in CROSS_CUTTING if mirrored_module(path) is not None} == set()


def test_the_mirror_rule_reads_packages_modules_and_aspects() -> None:
    assert mirrored_module("storage/test_log.py") == "insync/storage/log"
    assert mirrored_module("storage/test_log_recovery.py") == "insync/storage/log"
    assert mirrored_module("storage/test_log_manager.py") == "insync/storage/log_manager"  # the longest name wins
    assert mirrored_module("spark/monitor/test_rules.py") == "insync/spark/monitor/rules"
    assert mirrored_module("test_config_reads.py") == "insync/config"
    assert mirrored_module("storage/test_storage_log.py") is None
    assert mirrored_module("tools/test_compat_runner.py") is None


def helper_modules() -> list[Path]:
    """The modules under tests/ that are neither test modules nor conftest files: what tests import by name."""
    return sorted(p for p in TESTS.rglob("*.py") if not p.name.startswith("test_") and p.name != "conftest.py"
                  and "__pycache__" not in p.parts)


def test_helper_modules_have_unique_basenames_on_the_pythonpath() -> None:
    pythonpath = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["pythonpath"]
    places: dict[str, list[str]] = defaultdict(list)
    for path in helper_modules():
        places[path.name].append(str(path.relative_to(ROOT)))
    assert {name: where for name, where in places.items() if len(where) > 1} == {}
    folders = {str(path.parent.relative_to(ROOT)) for path in helper_modules()}
    assert folders <= set(pythonpath), "add the folder of a new helper module to pyproject.toml's pythonpath"
    # `import conftest` in a test names tests/conftest.py: its folder comes first
    assert pythonpath[0] == "tests"


def test_no_test_module_imports_another() -> None:
    """What two test modules share goes into a helper module: a test module imported by name would be a second copy
    of it, under a name that another folder's test module of the same basename could take."""
    importing = []
    for path in sorted(TESTS.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            importing += [f"{path.relative_to(TESTS)}: {name}" for name in names if name.startswith("test_")]
    assert importing == []
