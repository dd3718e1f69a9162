"""Scenario files: a cluster, a workload, a fault plan and the expected outcome, in TOML.

Scenarios ship inside the package (`insync/scenarios/<name>.toml`) so `insync sim run stuck-follower` works from
any installation; a path to a `.toml` file works too. `--set key=value` overrides any value by its dotted path
(`broker.replica.lag.max.messages=4`, `producers.0.acks=1`); the value is read as a TOML literal when it parses
as one, else as a string. The merged document is the effective configuration a result reports.
Sections: top-level `name`, `description`, `seed`, `duration_s` (virtual seconds of workload and faults),
`quiesce_s` (afterwards every fault is healed and the cluster runs on before the final checks); `[cluster]`
(`brokers`), `[broker]` (broker configs by Kafka name), `[topic]` (`name`, `partitions`, `replication_factor`,
`configs`), `[network]` (`latency_ms`, `jitter_ms`, `drop_rate`, `reorder`), `[[producers]]` (fields of
`ProducerSpec` except topic/partitions), `[consumers]` (`count`), `[transactions]` (fields of `TxnSpec`:
transactional producers), `[ctp]` (fields of `CtpSpec`: a consume-transform-produce processor over the topic's
three partitions, whose input the `[transactions]` producers write), `[[faults]]`, `[chaos]` (`faults.py`), `[expect]`.
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from insync.config import BrokerConfig, ConfigError
from insync.sim import ctp_workload
from insync.sim.ctp_workload import CtpSpec
from insync.sim.network import LinkConfig
from insync.sim.txn_workload import TxnSpec
from insync.sim.workload import ProducerSpec

_TOP_LEVEL = {"name", "description", "seed", "duration_s", "quiesce_s", "cluster", "broker", "topic", "network",
              "producers", "consumers", "transactions", "ctp", "faults", "chaos", "expect"}
_PRODUCER_FIELDS = {f.name for f in fields(ProducerSpec)} - {"topic", "partitions"}
_Spec = TypeVar("_Spec", TxnSpec, CtpSpec)


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str = "t"
    partitions: int = 1
    replication_factor: int = 3
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    seed: int
    duration_ms: int
    quiesce_ms: int
    brokers: int
    broker_config: dict[str, object]
    topic: TopicSpec
    network: LinkConfig
    producers: tuple[ProducerSpec, ...]
    consumers: int
    transactions: TxnSpec | None
    ctp: CtpSpec | None
    faults: tuple[dict[str, Any], ...]
    chaos: dict[str, Any] | None
    expect: dict[str, Any]
    document: dict[str, Any]  # the effective configuration, as merged from the file and the overrides


def scenario_names() -> list[str]:
    root = resources.files("insync") / "scenarios"
    return sorted(entry.name[:-5] for entry in root.iterdir() if entry.name.endswith(".toml"))


def load_document(name_or_path: str) -> dict[str, Any]:
    """The raw TOML of a packaged scenario (by name) or of a file (by path)."""
    path = Path(name_or_path)
    if name_or_path.endswith(".toml") or path.exists():
        if not path.is_file():
            raise ConfigError(f"no scenario file {name_or_path}")
        text = path.read_text()
    else:
        entry = resources.files("insync") / "scenarios" / f"{name_or_path}.toml"
        if not entry.is_file():
            raise ConfigError(f"unknown scenario {name_or_path!r}; known: {', '.join(scenario_names())}")
        text = entry.read_text()
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"scenario {name_or_path}: {exc}") from None


def apply_overrides(document: dict[str, Any], overrides: dict[str, str]) -> dict[str, Any]:
    """A copy of `document` with each dotted `key=value` set (lists are indexed by number)."""
    merged = copy.deepcopy(document)
    for dotted, raw in overrides.items():
        parts = dotted.split(".")
        if parts[0] == "broker" and len(parts) > 1:
            parts = ["broker", ".".join(parts[1:])]  # broker config names contain dots themselves
        elif parts[0] == "topic" and len(parts) > 2 and parts[1] == "configs":
            parts = ["topic", "configs", ".".join(parts[2:])]
        target: Any = merged
        for part in parts[:-1]:
            if isinstance(target, list):
                if not part.isdigit() or int(part) >= len(target):
                    raise ConfigError(f"--set {dotted}: no list item {part}")
                target = target[int(part)]
            else:
                target = target.setdefault(part, {})
            if not isinstance(target, dict | list):
                raise ConfigError(f"--set {dotted}: {part} is not a table")
        if isinstance(target, list):
            raise ConfigError(f"--set {dotted}: cannot replace a whole list item")
        target[parts[-1]] = _literal(raw)
    return merged


def _literal(raw: str) -> object:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def load_scenario(name_or_path: str, overrides: dict[str, str] | None = None, seed: int | None = None) -> Scenario:
    document = apply_overrides(load_document(name_or_path), overrides or {})
    if seed is not None:
        document["seed"] = seed
    return parse_scenario(document)


def parse_scenario(document: dict[str, Any]) -> Scenario:
    unknown = sorted(set(document) - _TOP_LEVEL)
    if unknown:
        raise ConfigError(f"unknown scenario keys: {', '.join(unknown)}")
    name = str(document.get("name", "unnamed"))
    broker_config = dict(document.get("broker", {}))
    BrokerConfig(broker_config)  # validates every key and value now, naming the bad one
    topic_doc = dict(document.get("topic", {}))
    topic = TopicSpec(str(topic_doc.get("name", "t")), int(topic_doc.get("partitions", 1)),
                      int(topic_doc.get("replication_factor", 3)),
                      {k: str(v) for k, v in dict(topic_doc.get("configs", {})).items()})
    brokers = int(dict(document.get("cluster", {})).get("brokers", 3))
    if not 1 <= topic.replication_factor <= brokers:
        raise ConfigError(f"replication_factor {topic.replication_factor} needs 1..{brokers} brokers")
    try:
        network = LinkConfig(**dict(document.get("network", {})))
    except TypeError as exc:
        raise ConfigError(f"[network]: {exc}") from None
    producers = tuple(_producer(topic, dict(p)) for p in document.get("producers", []))
    if "ctp" in document and ("transactions" not in document or topic.partitions != ctp_workload.PARTITIONS):
        raise ConfigError(f"[ctp] needs [transactions] (its input's producers) and a topic of "
                          f"{ctp_workload.PARTITIONS} partitions (input, output, offsets)")
    return Scenario(
        name=name,
        description=str(document.get("description", "")),
        seed=int(document.get("seed", 0)),
        duration_ms=round(float(document.get("duration_s", 60)) * 1000),
        quiesce_ms=round(float(document.get("quiesce_s", 30)) * 1000),
        brokers=brokers,
        broker_config=broker_config,
        topic=topic,
        network=network,
        producers=producers,
        consumers=int(dict(document.get("consumers", {})).get("count", 0)),
        transactions=_section(TxnSpec, "transactions", document["transactions"]) if "transactions" in document
        else None,
        ctp=_section(CtpSpec, "ctp", document["ctp"]) if "ctp" in document else None,
        faults=tuple(dict(f) for f in document.get("faults", [])),
        chaos=dict(document["chaos"]) if "chaos" in document else None,
        expect=dict(document.get("expect", {})),
        document=document,
    )


def _producer(topic: TopicSpec, doc: dict[str, Any]) -> ProducerSpec:
    unknown = sorted(set(doc) - _PRODUCER_FIELDS - {"start_s", "stop_s"})
    if unknown:
        raise ConfigError(f"unknown producer keys: {', '.join(unknown)}")
    if "start_s" in doc:
        doc["start_ms"] = round(float(doc.pop("start_s")) * 1000)
    if "stop_s" in doc:
        doc["stop_ms"] = round(float(doc.pop("stop_s")) * 1000)
    try:
        return ProducerSpec(topic=topic.name, partitions=topic.partitions, **doc)
    except (TypeError, AssertionError) as exc:
        raise ConfigError(f"[[producers]]: invalid {doc}: {exc}") from None


def _section(spec: type[_Spec], name: str, doc: dict[str, Any]) -> _Spec:
    """The spec dataclass of a table whose keys are its fields (a TOML array of a tuple field is a tuple)."""
    known = {f.name for f in fields(spec)}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ConfigError(f"unknown [{name}] keys: {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    try:
        values: dict[str, Any] = {key: tuple(value) if isinstance(value, list) else value for key, value in doc.items()}
        return spec(**values)
    except (TypeError, AssertionError) as exc:
        raise ConfigError(f"[{name}]: invalid {doc}: {exc}") from None
