"""Config keys are read by name only in the config modules: every other module takes a typed, frozen object that
`BrokerConfig` builds once (`config.replication` with its `fetch` settings, `config.groups`, `config.listeners` and
the others config.py defines), as `IsrPolicy` and `FetcherConfig` do.

A read by name is a call of one of `BrokerConfig`'s accessors (`get_int`, `get_bool`, `get_str`, `get_list`,
`effective`, `is_explicit`, `listener_setting`) whose arguments hold a broker key, written out or as a string
constant of the module, or a key computed there (an f-string: `listener.name.{l}.ssl.client.auth`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from insync.config_keys import BROKER_CONFIGS

SRC = Path(__file__).resolve().parents[2] / "src" / "insync"
ACCESSORS = frozenset({"get_int", "get_bool", "get_str", "get_list", "effective", "is_explicit", "listener_setting"})
CONFIG_MODULES = ("config.py", "config_keys.py", "config_validation.py", "config_reference.py",
                  "config_synonyms.py", "security_config.py")


def keys_read_by_name(source: str) -> set[str]:
    """The broker keys `source` reads through a BrokerConfig accessor, by literal or module-level constant."""
    tree = ast.parse(source)
    constants = {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 for target in node.targets if isinstance(target, ast.Name)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ACCESSORS:
            found.update(key for arg in node.args for key in _strings(arg, constants) if key in BROKER_CONFIGS)
            found.update(f"a key computed on line {arg.lineno}" for arg in node.args
                         if any(isinstance(n, ast.JoinedStr) for n in ast.walk(arg)))
    return found


def _strings(expression: ast.expr, constants: dict[str, str]) -> Iterator[str]:
    for node in ast.walk(expression):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
        elif isinstance(node, ast.Name) and node.id in constants:
            yield constants[node.id]


def test_config_keys_are_read_by_name_only_in_the_config_modules() -> None:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        module = str(path.relative_to(SRC))
        keys = keys_read_by_name(path.read_text(encoding="utf-8"))
        if keys:
            found[module] = tuple(sorted(keys))
    assert "config.py" in found, "no read found in config.py: the accessors or the paths are wrong"
    outside = {module: keys for module, keys in found.items() if module not in CONFIG_MODULES}
    assert outside == {}, ("read config values from a typed config that config.py builds "
                           "(BrokerConfig.replication, ...), not by key")


def test_the_scan_sees_literals_constants_and_conditional_keys() -> None:
    source = ('LAG = "replica.lag.time.max.ms"\n'
              'def f(config, leader):\n'
              '    config.get_int(LAG)\n'
              '    config.get_int("leader.replication.throttled.rate" if leader else "node.id")\n'
              '    config.get("num.partitions")\n'  # a dict's get: not an accessor of BrokerConfig
              '    config.get_str("not.a.key")\n'
              '    config.listener_setting(leader, "ssl.client.auth")\n'
              '    config.is_explicit(f"listener.name.{leader}.sasl.jaas.config")\n')
    assert keys_read_by_name(source) == {"replica.lag.time.max.ms", "leader.replication.throttled.rate", "node.id",
                                         "ssl.client.auth", "a key computed on line 8"}
