"""The import graph of src/insync keeps DESIGN.md 2's layers: no import runs up the layers, and no import cycle;
and no module is over 800 lines (the hard limit; 600 is the aim).

The graph is read with `ast` from every module, so it holds every `import` and `from ... import`: at module
level, inside functions, and under `if TYPE_CHECKING:` (a cycle hidden in a function is still a cycle). A part
is a subpackage or a top-level module of `insync`. `LAYERS` is DESIGN.md 2's layer list, top to bottom, one line
of the drawing per entry; parts on one line are peers, which may import each other (but not in a cycle). A part
that is not in `LAYERS` fails the test: a new package or core module is placed in the DESIGN first.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("demo",),
    ("spark",),
    # the real-process harness, with the admin client library it shares with the CLI and the Maven runner that
    # fetches the reference Kafka and Spark's connector for it (not in DESIGN's drawing)
    ("chaos", "bench", "admin", "admin_requests", "maven"),
    ("server",),
    ("sim",),
    ("wire",),
    ("broker",),
    ("controller",),
    ("groups", "transactions"),
    ("replication",),
    ("metadata",),
    # security (issue 22): principals, SASL state, the authorizer; pure types and algorithms that the metadata
    # image can hold (ACLs, SCRAM credentials) and every layer above can call; it imports nothing above storage
    ("security",),
    ("storage",),
    ("protocol",),
    # core, with Kafka's log wording (kafkalog), the allocator tuning (malloc) and the polling wait of the harness
    # and the tests (waiting), which import nothing of insync
    ("errors", "config", "config_keys", "config_validation", "config_reference", "config_synonyms", "security_config", "command_config", "properties", "clock", "limits", "events", "types", "faults", "kafkalog", "malloc", "waiting"),
)
LAYER_OF = {part: depth for depth, parts in enumerate(LAYERS) for part in parts}
# DESIGN.md 2: spark/'s data source and its log analysis share nothing.
INDEPENDENT = (("insync.spark.source", "insync.spark.analysis"),)


def module_names(src: Path) -> dict[str, Path]:
    """Every module under src/insync by dotted name; a package by its own name (its __init__.py)."""
    names = {}
    for path in sorted((src / "insync").rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imported(module: str, path: Path, known: set[str]) -> Iterator[str]:
    """The insync modules `module` imports, wherever the import statement is."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.split(".")[0] == "insync")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            if base.split(".")[0] != "insync":
                continue
            for alias in node.names:  # `from insync.spark.source import kafka_io` imports a module, not a name
                yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base


def import_graph(src: Path) -> dict[str, set[str]]:
    names = module_names(src)
    known = set(names)
    graph = {module: set() for module in names}
    for module, path in names.items():
        graph[module] = {target for target in imported(module, path, known) if target != module}
    return graph


def part(module: str) -> str:
    return module.split(".")[1] if module.count(".") else module


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a part on a higher line of LAYERS (or of a part not in LAYERS at all)."""
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            source_part, target_part = part(module), part(target)
            if source_part == target_part or source_part == "insync" or target_part == "insync":
                continue
            if source_part not in LAYER_OF or target_part not in LAYER_OF:
                found.append(f"{module} -> {target} (part not in LAYERS)")
            elif LAYER_OF[target_part] < LAYER_OF[source_part]:
                found.append(f"{module} -> {target}")
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None and child in graph:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if child is not None:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while not component or component[-1] != node:
                    component.append(stack.pop())
                    on_stack.discard(component[-1])
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def part_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    parts: dict[str, set[str]] = {}
    for module, targets in graph.items():
        parts.setdefault(part(module), set()).update(part(t) for t in targets if part(t) != part(module))
    return parts


def test_no_import_runs_up_the_layers() -> None:
    assert upward_imports(import_graph(SRC)) == []


def test_no_import_cycle_between_modules() -> None:
    assert cycles(import_graph(SRC)) == []


def test_no_import_cycle_between_parts() -> None:
    assert cycles(part_graph(import_graph(SRC))) == []


def test_spark_source_and_analysis_share_nothing() -> None:
    graph = import_graph(SRC)
    for one, other in INDEPENDENT:
        crossing = [f"{m} -> {t}" for m, targets in sorted(graph.items()) for t in sorted(targets)
                    if (m.startswith(one) and t.startswith(other)) or (m.startswith(other) and t.startswith(one))]
        assert crossing == []


# STYLE.md 5: modules aim under 600 lines; past that a module is split where it holds two jobs, never folded to fit
MODULE_LINES_AIM = 600
MODULE_LINES_MAX = 800  # the hard limit


def test_no_module_is_over_800_lines() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in module_names(SRC).items()}
    over = {name: n for name, n in sizes.items() if n > MODULE_LINES_MAX}
    assert over == {}, (f"over the hard limit of {MODULE_LINES_MAX} lines: split each by responsibility (aim under "
                        f"{MODULE_LINES_AIM}), never fold docstrings or signatures to fit")


def test_the_graph_sees_function_local_and_relative_imports(tmp_path: Path) -> None:
    package = tmp_path / "insync" / "server"
    package.mkdir(parents=True)
    (tmp_path / "insync" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "node.py").write_text("def serve():\n    from insync.server import broker_node\n")
    (package / "broker_node.py").write_text("from . import node\nfrom ..cli import main\n")
    (tmp_path / "insync" / "cli").mkdir()
    (tmp_path / "insync" / "cli" / "__init__.py").write_text("")
    (tmp_path / "insync" / "cli" / "main.py").write_text("")
    graph = import_graph(tmp_path)
    assert graph["insync.server.node"] == {"insync.server.broker_node"}
    assert graph["insync.server.broker_node"] == {"insync.server.node", "insync.cli.main"}
    assert cycles(graph) == [["insync.server.broker_node", "insync.server.node"]]
    assert upward_imports(graph) == ["insync.server.broker_node -> insync.cli.main"]
