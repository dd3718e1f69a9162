"""Request frames for the protocol fuzzer, built from kio's schemas, sans-IO and deterministic.

`fuzz_case(seed, index, table)` draws one (api key, version) pair the table advertises and builds a request of
that schema field by field from the dataclass fields kio generates (their `kafka_type` and annotations): *valid*
values (small numbers, names from small pools, well-formed record batches), *boundary* values (-1, the type's
minimum and maximum, empty and long strings, null where the field is nullable, empty and large arrays), or a
valid or boundary frame *mutated* as bytes (flipped bytes, a truncation, a size prefix that lies, a garbage tail,
a boundary integer written over a length prefix, an api key or version outside the table). Each case depends
only on (seed, index), so a reported index replays alone. Names come from pools of scratch names (`SCRATCH_*`)
so the requests act on the fuzzer's own topics and groups and cannot reach topics it does not own, and so the
state they create on a broker stays bounded however many are sent. Cases for a controller draw valid broker ids
from `FOREIGN_BROKER_IDS`, and `names_a_broker` finds any that a server would still read as a broker's own
registration or heartbeat for a real broker (which could fence it or take it down), so the caller can hold it back.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import struct
import types
import typing
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.index import UnknownEntity
from kio.schema.errors import ErrorCode

from insync.protocol.codec import (
    MalformedRequest,
    UnsupportedRequest,
    decode_request,
    encode_request,
    request_schema,
)
from insync.protocol.records import RecordSpec, build_batch
from insync.wire.versions import BROKER_HEARTBEAT, BROKER_REGISTRATION

SCRATCH_TOPICS = ("fuzz-scratch-0", "fuzz-scratch-1", "fuzz-scratch-2")
SCRATCH_GROUPS = ("fuzz-group-0", "fuzz-group-1")
SCRATCH_IDS = ("fuzz-txn-0", "fuzz-txn-1")
PLAIN_STRINGS = ("", "fuzz", "a.b-c_d", "User:fuzz", "*")
LONG_STRING_CHARS = (250, 1000, 32767)  # just over Kafka's topic-name limit, long, the int16 length maximum
ARRAY_VALID_MAX = 3
ARRAY_HUGE = (100, 1000)  # top-level arrays of numbers or strings in a boundary case
ARRAY_HUGE_ENTITIES = (50, 200)  # top-level arrays of nested entities
ARRAY_NESTED_HUGE = (20,)  # deeper arrays stay smaller so a case stays under a megabyte
BYTES_HUGE = 64 * 1024
VERSION_GAP_MAX = 4  # Produce v0-v2 are advertised though only v3 on is served
NESTING_MAX = 8  # kio's deepest request schemas nest 4 levels
CLIENT_ID = "fuzz"
# Broker ids no cluster of insync's harness has (brokers are 1..N, controllers 0 and 1001..): a registration or
# heartbeat built with one exercises the controller without touching a real broker's registration.
FOREIGN_BROKER_IDS = (900, 901)
BROKER_SELF_APIS = (BROKER_REGISTRATION, BROKER_HEARTBEAT)

KIND_VALID = "valid"
KIND_BOUNDARY = "boundary"
KIND_MUTATED = "mutated"
KINDS = (KIND_VALID, KIND_BOUNDARY, KIND_MUTATED)

_INT_RANGES = {"int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
               "int64": (-(2**63), 2**63 - 1), "uint16": (0, 2**16 - 1)}
_MS_I32 = (-1, 0, 2**31 - 1)
_MS_I64 = (-1, 0, 10**15)  # the largest a `timedelta` keeps exactly is far below 2**63 ms
_EPOCH_MS = 1_700_000_000_000
_SIZE = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class FuzzCase:
    index: int
    api_key: int  # the schema the case was built from (a mutation may have changed the frame's header)
    api_version: int
    kind: str
    frame: bytes  # size prefix included

    @property
    def consistent(self) -> bool:
        """The size prefix counts exactly the bytes after it, so the broker sees one frame and then our next."""
        return len(self.frame) >= _SIZE.size and _SIZE.unpack_from(self.frame)[0] == len(self.frame) - _SIZE.size


def advertised_pairs(table: Mapping[int, tuple[int, int]], floors: Mapping[int, int]) -> tuple[tuple[int, int], ...]:
    """Every (api key, version) of `table`, from the advertised floor (`floors`, else the table's own)."""
    pairs = [(key, version) for key, (low, high) in sorted(table.items())
             for version in range(floors.get(key, low), high + 1)]
    assert pairs, "an empty table advertises nothing to fuzz"
    return tuple(pairs)


def fuzz_case(seed: int, index: int, pairs: tuple[tuple[int, int], ...], broker_ids: tuple[int, ...] = ()) -> FuzzCase:
    """Case `index` of the run seeded `seed` (module docstring); valid `broker_id` fields come from `broker_ids`
    when it is given, else are small numbers like every other id."""
    assert index >= 0 and pairs
    rng = random.Random(f"{seed}:{index}")
    api_key, version = rng.choice(pairs)
    kind = rng.choices(KINDS, weights=(4, 3, 3))[0]
    correlation_id = index % 2**31
    boundary = kind == KIND_BOUNDARY or (kind == KIND_MUTATED and rng.random() < 0.5)
    frame = _encoded(rng, api_key, version, correlation_id, boundary, broker_ids)
    if kind == KIND_MUTATED:
        frame = mutate(rng, frame, pairs)
    return FuzzCase(index, api_key, version, kind, frame)


def _encoded(rng: random.Random, api_key: int, version: int, correlation_id: int, boundary: bool,
             broker_ids: tuple[int, ...]) -> bytes:
    """The frame of a request with generated values; a boundary value kio refuses to write (a string past its
    length type) gives way to a valid request, decided by the same generator so the case stays reproducible."""
    cls = _schema(api_key, version)
    client_id = rng.choice((None, "", "x" * 300)) if boundary and rng.random() < 0.2 else CLIENT_ID
    try:
        frame = encode_request(Values(rng, boundary, broker_ids).entity(cls, 0), correlation_id, client_id)
    except (ValueError, TypeError, OverflowError, struct.error):
        frame = encode_request(Values(rng, False, broker_ids).entity(cls, 0), correlation_id, CLIENT_ID)
    return frame[:6] + struct.pack(">h", version) + frame[8:]  # `_schema` may have built a later version


def _schema(api_key: int, version: int) -> type:
    """The request schema of `version`, or for a version advertised but not served (Produce v0-v2, which kio
    does not know) the first later one kio has: the frame then says `version` over a later body."""
    for candidate in range(version, version + VERSION_GAP_MAX + 1):
        try:
            cls = request_schema(api_key, candidate)
        except UnknownEntity:
            continue
        assert isinstance(cls, type)
        return cls
    raise AssertionError(f"kio has no request schema for api {api_key} near version {version}")


class Values:
    """Values for every field of a kio entity: valid ones, or (with `boundary`) mostly the edges of each type."""

    def __init__(self, rng: random.Random, boundary: bool, broker_ids: tuple[int, ...] = ()) -> None:
        self.rng = rng
        self.boundary = boundary
        self.broker_ids = broker_ids

    def entity(self, cls: type, depth: int) -> Any:
        assert dataclasses.is_dataclass(cls) and depth <= NESTING_MAX, (cls, depth)
        return cls(**{plan.spec.name: self.field(plan, depth) for plan in _plans(cls)})

    def field(self, plan: _Plan, depth: int) -> Any:
        edge = self.boundary and self.rng.random() < 0.5
        if plan.nullable and edge and self.rng.random() < 0.3:
            return None
        if plan.array:
            return self.array(plan, depth, edge)
        if plan.entity:
            return self.entity(plan.kind, depth + 1)
        return self.scalar(plan.spec, plan.kind, edge)

    def array(self, plan: _Plan, depth: int, edge: bool) -> tuple[Any, ...]:
        huge = ARRAY_HUGE_ENTITIES if plan.entity else ARRAY_HUGE
        count = self.rng.choice((0, self.rng.choice(huge if depth == 0 else ARRAY_NESTED_HUGE))) if edge \
            else self.rng.randint(0, ARRAY_VALID_MAX)
        # The elements of a large array are valid ones: a thousand boundary strings would make a case of megabytes.
        values = self if count <= ARRAY_VALID_MAX else Values(self.rng, False, self.broker_ids)
        if plan.entity:
            return tuple(values.entity(plan.kind, depth + 1) for _ in range(count))
        return tuple(values.scalar(plan.spec, plan.kind, edge and values.boundary and self.rng.random() < 0.5)
                     for _ in range(count))

    def scalar(self, spec: dataclasses.Field[Any], kind: Any, edge: bool) -> Any:
        kafka_type = spec.metadata.get("kafka_type")
        rng = self.rng
        if kafka_type in _INT_RANGES:
            low, high = _INT_RANGES[kafka_type]
            if edge:
                return kind(rng.choice((low, high, -1, 0)) if low < 0 else rng.choice((low, high)))
            if spec.name == "broker_id" and self.broker_ids:
                return kind(rng.choice(self.broker_ids))
            return kind(_valid_int(rng, spec.name, low))
        if kafka_type == "bool":
            return rng.random() < 0.5
        if kafka_type == "string":
            return kind(self.string(spec.name, edge))
        if kafka_type == "bytes":
            return rng.choice((b"", b"\x00" * BYTES_HUGE)) if edge else rng.randbytes(rng.randint(0, 16))
        if kafka_type == "records":
            return kind(self.records(edge))
        if kafka_type == "uuid":
            return rng.choice((uuid.UUID(int=0), uuid.UUID(int=2**128 - 1))) if edge \
                else uuid.UUID(int=rng.getrandbits(128))
        if kafka_type in ("timedelta_i32", "timedelta_i64"):
            ms = rng.choice(_MS_I32 if kafka_type == "timedelta_i32" else _MS_I64) if edge else rng.randint(0, 500)
            return kind(datetime.timedelta(milliseconds=ms))
        if kafka_type == "datetime_i64":
            ms = rng.choice((0, 2**40)) if edge else _EPOCH_MS + rng.randint(0, 10**6)
            return kind(datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC))
        if kafka_type == "float64":
            return kind(rng.choice((0.0, -0.0, 1e308, -1e308)) if edge else rng.uniform(0, 1000))
        if kafka_type == "error_code":
            return ErrorCode.none if not edge else rng.choice(list(ErrorCode))
        raise AssertionError(f"kio field {spec.name} of kafka_type {kafka_type!r} has no generator")

    def string(self, name: str, edge: bool) -> str:
        rng = self.rng
        if edge:
            return rng.choice(("", "\u00e9\u0000/..", "x" * rng.choices(LONG_STRING_CHARS, weights=(8, 4, 1))[0]))
        if "topic" in name or name == "name":
            return rng.choice(SCRATCH_TOPICS)
        if "group" in name:
            return rng.choice(SCRATCH_GROUPS)
        if "transactional" in name:
            return rng.choice(SCRATCH_IDS)
        return rng.choice(PLAIN_STRINGS)

    def records(self, edge: bool) -> bytes:
        rng = self.rng
        if edge:
            batch = bytearray(build_batch([RecordSpec(None, b"fuzz")], base_timestamp=_EPOCH_MS))
            batch[rng.randrange(len(batch))] ^= 0xFF  # a damaged batch: wrong CRC, size or header
            return rng.choice((b"", rng.randbytes(rng.randint(1, 100)), bytes(batch)))
        count = rng.randint(1, 3)
        return build_batch([RecordSpec(rng.choice((None, b"k")), rng.randbytes(rng.randint(0, 32)))
                            for _ in range(count)], base_timestamp=_EPOCH_MS)


def _valid_int(rng: random.Random, name: str, low: int) -> int:
    """A small value the broker can act on: a partition, a broker id, a count, an offset, or -1 where allowed."""
    if name == "acks":
        return rng.choice((-1, 0, 1))
    if low < 0 and rng.random() < 0.15:
        return -1
    return rng.randint(0, 3)


def names_a_broker(frame: bytes, table: Mapping[int, tuple[int, int]], broker_ids: frozenset[int]) -> bool:
    """Whether a server serving `table` could read a BrokerRegistration or BrokerHeartbeat of a broker in
    `broker_ids` from `frame`: each frame its size prefixes split it into is decoded as the server would."""
    at = 0
    while at + _SIZE.size <= len(frame):  # `at` grows by at least the prefix each time
        (size,) = _SIZE.unpack_from(frame, at)
        if size < 0 or at + _SIZE.size + size > len(frame):
            return False  # the server refuses the prefix, or waits for bytes the stream's end never brings
        try:
            request = decode_request(frame[at + _SIZE.size:at + _SIZE.size + size], table)
        except (MalformedRequest, UnsupportedRequest):
            pass
        else:
            if request.api_key in BROKER_SELF_APIS and int(request.body.broker_id) in broker_ids:
                return True
        at += _SIZE.size + size
    return False


def mutate(rng: random.Random, frame: bytes, pairs: tuple[tuple[int, int], ...]) -> bytes:
    """`frame` damaged in one of seven ways (module docstring)."""
    assert len(frame) > _SIZE.size
    body = bytearray(frame[_SIZE.size:])
    choice = rng.randrange(7)
    if choice == 0:  # flipped bytes
        for _ in range(rng.randint(1, 8)):
            body[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
    elif choice == 1:  # truncated, with an honest size
        del body[rng.randrange(len(body)):]
    elif choice == 2:  # the size prefix lies
        return _SIZE.pack(rng.choice((0, 7, len(body) - 1, len(body) + 1, len(body) + 1000, 2**31 - 1, -1))) \
            + bytes(body)
    elif choice == 3:  # a garbage tail inside the frame
        body += rng.randbytes(rng.randint(1, 64))
    elif choice == 4:  # a boundary integer over some length or count in the body
        width, value = rng.choice(((1, 0x80), (1, 0xFF), (2, 0x7FFF), (2, 0xFFFF), (4, 0x7FFFFFFF), (4, 0xFFFFFFFF)))
        at = rng.randrange(max(1, len(body) - width))
        body[at:at + width] = value.to_bytes(width, "big")
    elif choice == 5:  # a header naming another API or an unsupported version
        key, version = rng.choice(pairs)
        body[0:4] = struct.pack(">hh", rng.choice((key, -1, 999)), rng.choice((version, version + 100, -1)))
    else:  # noise
        body = bytearray(rng.randbytes(rng.randint(0, 200)))
    return _SIZE.pack(len(body)) + bytes(body)


@dataclass(frozen=True, slots=True)
class _Plan:
    """How to fill one field of a kio entity, read once per class from its annotations."""

    spec: dataclasses.Field[Any]
    nullable: bool
    array: bool
    entity: bool  # the value (or each element of the array) is a nested kio entity
    kind: Any  # the value's type (of each element, for an array)


_PLANS: dict[type, tuple[_Plan, ...]] = {}


def _plans(cls: type) -> tuple[_Plan, ...]:
    found = _PLANS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = _PLANS[cls] = tuple(_plan(spec, hints[spec.name]) for spec in dataclasses.fields(cls) if spec.init)
    return found


def _plan(spec: dataclasses.Field[Any], hint: Any) -> _Plan:
    nullable, kind = _unwrap_optional(hint)
    array = typing.get_origin(kind) is tuple
    if array:
        kind = typing.get_args(kind)[0]
    return _Plan(spec, nullable, array, dataclasses.is_dataclass(kind), kind)


def _unwrap_optional(hint: Any) -> tuple[bool, Any]:
    """(nullable, the type without None)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        assert len(args) == 1, hint
        return True, args[0]
    return False, hint
