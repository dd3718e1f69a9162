"""A run's history, as Jepsen keeps one: every client and fault operation, one JSON object a line.

Each `Op` has `time_ms` since the run began, the `process` that did it (`p0`, `c1`, `r0`, `nemesis`, `final`),
a `type` and a function `f`. `type` is Jepsen's: `invoke` when an operation begins, then `ok` (it happened),
`fail` (it certainly did not) or `info` (unknown: it may or may not be in the log). `f` is one of `F`: `send` (a
produce), `poll` (ok with `records` in the order the client returned them, written only when records came),
`commit`, `assign` and `seek` (info), `start`/`stop` (the nemesis: `fault` names it), and `complete-read` (read
`partition` from its log start to `offset`, its high watermark, nothing missing).
Also: an idempotent producer's `epoch-bump` (info, `label`: the id and epoch its client moved to), a consumer's
`client-error` (info, `error`: what its client reported on `partition`), a transactional producer's `txn-init`,
`txn-begin`, `txn-commit`, `txn-abort` (`txn` names the transaction, as in its sends). A reader's `assign` names
its isolation level in `label` (read_committed when not). Values are unique within a run (`<process>-<n>`): a
completion names its invoke by value. `HistoryWriter` appends from client threads under one lock.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from insync.config import ConfigError

TYPES = ("invoke", "ok", "fail", "info")
F = ("send", "poll", "commit", "assign", "seek", "start", "stop", "skip", "complete-read", "txn-init", "txn-begin",
     "txn-commit", "txn-abort", "epoch-bump", "client-error")
Record = tuple[int, int, str]  # (partition, offset, value)
# Delivery errors after which the record may be in the log anyway: its send's outcome is unknown (`info`).
INFO_ERRORS = frozenset({"_MSG_TIMED_OUT", "_TIMED_OUT", "REQUEST_TIMED_OUT", "_PURGE_QUEUE", "_PURGE_INFLIGHT"})


@dataclass(frozen=True, slots=True)
class Op:
    time_ms: float
    process: str
    type: str
    f: str
    value: str | None = None
    label: str | None = None
    partition: int | None = None
    offset: int | None = None
    records: tuple[Record, ...] = ()
    partitions: tuple[int, ...] = ()
    error: str | None = None
    fault: str | None = None
    txn: str | None = None

    def __post_init__(self) -> None:
        assert self.type in TYPES, self.type
        assert self.f in F, self.f

    def to_json(self) -> str:
        data: dict[str, Any] = {"time_ms": round(self.time_ms, 3), "process": self.process, "type": self.type,
                                "f": self.f}
        for name in ("value", "label", "partition", "offset", "error", "fault", "txn"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        if self.records:
            data["records"] = [list(r) for r in self.records]
        if self.partitions:
            data["partitions"] = list(self.partitions)
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Op:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        if data.get("type") not in TYPES:
            raise ValueError(f"type must be one of {', '.join(TYPES)}, got {data.get('type')!r}")
        if data.get("f") not in F:
            raise ValueError(f"f must be one of {', '.join(F)}, got {data.get('f')!r}")
        records = tuple((int(p), int(o), str(v)) for p, o, v in data.pop("records", []))
        partitions = tuple(int(p) for p in data.pop("partitions", []))
        unknown = set(data) - {"time_ms", "process", "type", "f", "value", "label", "partition", "offset", "error",
                               "fault", "txn"}
        if unknown:
            raise ValueError(f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(sorted(unknown))}")
        return cls(**{**data, "time_ms": float(data["time_ms"]), "process": str(data["process"])},
                   records=records, partitions=partitions)


def read_history(path: str | Path) -> list[Op]:
    ops = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                ops.append(Op.from_json(line))
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"{path}:{number}: not a history operation: {exc}") from None
    return ops


class HistoryWriter:
    """Appends ops to `path` as they happen, stamped with milliseconds since the writer was made."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._start = time.monotonic()
        self._lock = threading.Lock()
        self._handle: IO[str] | None = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.count = 0

    def now_ms(self) -> float:
        return (time.monotonic() - self._start) * 1000.0

    def append(self, process: str, type_: str, f: str, **fields: Any) -> Op:
        with self._lock:  # stamped under the lock, so the file is in time order
            op = Op(self.now_ms(), process, type_, f, **fields)
            assert self._handle is not None, "history already closed"
            self._handle.write(op.to_json() + "\n")
            self.count += 1
        return op

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None


def send_outcome(error: Any) -> str:
    """The type of a send's completion whose delivery report carries the client's `error`."""
    return "info" if error.name() in INFO_ERRORS or error.retriable() else "fail"


def pad(value: str, size: int) -> bytes:
    """A record's payload: the history's value, then padding to `size` bytes."""
    head = value.encode() + b":"
    return head + b"x" * max(0, size - len(head))


def unpad(payload: bytes | None) -> str:
    return (payload or b"").split(b":", 1)[0].decode(errors="replace")
