"""Differential conformance: the same request sequences to a Kafka cluster and an insync cluster, the responses
compared field by field.

Both clusters get the same state first (topics with explicit replica assignments, so leaders agree; the same
record batches). Then every API and version both advertise receives its empty request (every field at its zero),
and the scenarios below receive requests with content: the happy path and Kafka's errors. A response becomes a
plain tree (entities -> dicts, error codes -> ints, durations -> ms), fields that must differ are masked (cluster
and topic ids, throttle times, hosts and ports, timestamps set by the broker, ids the broker makes up), lists are
compared unordered, and every differing leaf is reported with its path."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import re
import socket
import struct
import time
import tomllib
import typing
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from insync.protocol.codec import decode_response, encode_request
from insync.protocol.kio import build_defaults, request_class
from insync.protocol.records import RecordSpec, build_batch

TIMEOUT_S = 15.0
CLOSED = "<connection closed>"
MASKED = frozenset({
    "throttle_time_ms", "cluster_id", "topic_id", "host", "port", "controller_id", "session_id", "member_id",
    "log_append_time_ms", "timestamp", "incarnation_id", "broker_epoch", "authorized_operations",
    "cluster_authorized_operations", "topic_authorized_operations", "finalized_features_epoch", "leader_id",
    "generation_id", "node_id", "coordinator_key", "rack", "end_point", "lowest_supported_version",
    "producer_id", "log_dir",
    "usable_bytes",  # both clusters' log dirs share one file system, whose free space moves between the answers
})
# Topics made the same way on both clusters: name -> replica assignments (leaders are the first replicas).
TOPICS = {"d": ((1, 2, 3), (2, 3, 1), (3, 1, 2)), "small": ((1, 2, 3),)}
SMALL_MAX_BYTES = 1024
# Both clusters store the same bytes; a recent time, so neither's retention (7 days) deletes them during the run.
BATCH_TIMESTAMP_MS = int(time.time()) // 3600 * 3600 * 1000


class Connection:
    """One socket to one broker; requests and responses in order; a closed connection is a result too."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._sock: socket.socket | None = None
        self._correlation = 0

    def send(self, body: Any, wire_version: int | None = None) -> Any:
        """`body`'s response; with `wire_version`, the header claims that version instead (an ApiVersions of a
        version the broker does not know, answered as v0)."""
        if self._sock is None:
            host, port = self.address.rsplit(":", 1)
            self._sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
        self._correlation += 1
        api_key, version = int(body.__api_key__), int(body.__version__)
        frame = bytearray(encode_request(body, self._correlation, "differential"))
        if wire_version is not None:
            struct.pack_into(">h", frame, 6, wire_version)  # after the size and the api key
            version = 0
        try:
            self._sock.sendall(frame)
            size = struct.unpack(">i", _read(self._sock, 4))[0]
            _, response = decode_response(api_key, version, _read(self._sock, size))
            return response
        except (OSError, ConnectionError, EOFError):
            self.close()
            return CLOSED

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _read(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:  # bounded: each pass reads at least a byte or ends
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise EOFError("closed")
        out += chunk
    return out


def plain(value: Any) -> Any:
    """A kio entity as JSON-like data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return value


def masked(value: Any, also: frozenset[str] = frozenset()) -> Any:
    """Masked fields (MASKED and `also`) replaced by "*"; lists sorted, so order does not count."""
    if isinstance(value, dict):
        return {k: "*" if k in MASKED or k in also else masked(v, also) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((masked(v, also) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def differences(kafka: Any, insync: Any, path: str = "") -> Iterator[str]:
    """Each differing leaf as `path: kafka=... insync=...`."""
    if isinstance(kafka, dict) and isinstance(insync, dict):
        for key in sorted(kafka.keys() | insync.keys()):
            yield from differences(kafka.get(key, "<absent>"), insync.get(key, "<absent>"), f"{path}.{key}")
    elif _named(kafka) and _named(insync):  # topics, groups, configs: matched by name, order aside
        by_name = [{item["name"]: item for item in side} for side in (kafka, insync)]
        for name in sorted(by_name[0].keys() | by_name[1].keys()):
            yield from differences(by_name[0].get(name, "<absent>"), by_name[1].get(name, "<absent>"),
                                   f"{path}[{name}]")
    elif isinstance(kafka, list) and isinstance(insync, list) and len(kafka) == len(insync):
        for i, (k, s) in enumerate(zip(kafka, insync, strict=True)):
            yield from differences(k, s, f"{path}[{i}]")
    elif kafka != insync:
        yield f"{path or '.'}: kafka={_short(kafka)} insync={_short(insync)}"


def _named(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) and "name" in v for v in value) \
        and len({v["name"] for v in value}) == len(value)


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 300 else text[:300] + "..."


def request(api_key: int, version: int, **values: Any) -> Any:
    """A request of any version from values given once (nested entities as dicts or lists of dicts)."""
    cls = request_class(api_key, version)
    return _build(cls, values)


def _build(cls: type, values: dict[str, Any]) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    given: dict[str, Any] = {}
    for name, value in values.items():
        if name not in fields:
            continue
        kind = _entity(fields[name].type)
        if isinstance(value, list) and value and isinstance(value[0], dict):
            value = tuple(_build(kind, v) for v in value)
        elif isinstance(value, dict):
            value = _build(kind, value)
        elif isinstance(value, list):
            value = tuple(value)
        given[name] = value
    return build_defaults(cls, **given)


def _entity(kind: Any) -> Any:
    """The entity class of a field typed `X`, `X | None`, `tuple[X, ...]` or `tuple[X, ...] | None`."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if typing.get_origin(kind) is not tuple and args:  # a union with None
        return _entity(args[0])
    return args[0] if typing.get_origin(kind) is tuple else kind


def batch(values: list[bytes], corrupt: bool = False) -> bytes:
    """A v2 batch of `values` with keys and a fixed timestamp, so both clusters store the same bytes."""
    built = bytearray(build_batch([RecordSpec(key=b"k%d" % i, value=v) for i, v in enumerate(values)],
                                  base_timestamp=BATCH_TIMESTAMP_MS))
    if corrupt:
        built[-1] ^= 0xFF  # the last record's last byte: the CRC no longer matches
    return bytes(built)


@dataclass(frozen=True)
class Scenario:
    """Requests to one broker (`broker`: 1-based index into the cluster's brokers), in order; each gives a row."""

    name: str
    api_key: int
    make: Callable[[int], Any]  # version -> request
    broker: int | str = 1  # or a group: its coordinator on each side
    versions: str = "latest"  # "latest" or "all" (every version both advertise)
    since: int = 0  # no version below this one (a field the request needs came with it)
    settle_s: float = 0.0  # wait after it: what it changed reaches every broker asynchronously


Rows = list[tuple[str, list[str]]]  # (exchange name, its differing lines)


def listed(path: Path) -> dict[str, Any]:
    """A differences file: exchange-name prefix -> {reason, differences (regular expressions)}."""
    return tomllib.loads(path.read_text())


def check_listed(rows: Rows, kept: dict[str, Any], report: Path, title: str, preface: list[str] | None = None
                 ) -> None:
    """Write the report of `rows` to `report`; fail on a differing line no entry of `kept` explains, and on an
    entry no differing exchange needs any more."""
    differing = [(name, found) for name, found in rows if found]
    lines = [f"# {title}: {len(rows)} exchanges, {len(differing)} differ", "", *(preface or [])]
    for name, found in differing:
        entry = _entry(name, kept)
        reason = "NOT LISTED" if entry is None else entry["reason"]
        lines += [f"## {name}", f"listed: {reason}", *(f"- `{line}`" for line in found[:40]), ""]
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("\n".join(lines) + "\n")
    unexplained = {name: lines for name, found in rows if (lines := _unexplained(name, found, kept))}
    assert not unexplained, (f"{len(unexplained)} of {len(rows)} exchanges differ in ways not listed (see {report}): "
                             f"{unexplained}")
    needed = {prefix for prefix in kept for name, found in rows if found and name.startswith(prefix)}
    assert set(kept) == needed, f"listed but no longer differing (remove them): {sorted(set(kept) - needed)}"


def _entry(name: str, kept: dict[str, Any]) -> dict[str, Any] | None:
    return next((entry for prefix, entry in kept.items() if name.startswith(prefix)), None)


def _unexplained(name: str, found: list[str], kept: dict[str, Any]) -> list[str]:
    """The differing lines of an exchange that its listed entry does not explain."""
    entry = _entry(name, kept)
    patterns = [] if entry is None else [re.compile(p) for p in entry["differences"]]
    return [line for line in found if not any(p.search(line) for p in patterns)]
