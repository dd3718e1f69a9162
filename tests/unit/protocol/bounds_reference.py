"""A plain walk of a request's arrays to check `insync.protocol.request_bounds` against: every value read with kio's
own single-value readers, every element of every array visited, no plan but the fields' annotations. The compiled
walk must reach the same offset or refuse the same requests (tests/unit/protocol/test_request_bounds.py)."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from kio.serial._parse import get_reader
from kio.serial.readers import read_compact_array_length, read_legacy_array_length, read_unsigned_varint

from insync.protocol.request_bounds import DEPTH_MAX

_PLANS: dict[type, tuple[tuple[tuple[Any, ...], ...], dict[int, tuple[Any, ...]]]] = {}


def check_arrays(buf: bytes, offset: int, cls: type) -> int:
    """Walk entity `cls` at `offset` of `buf`; the offset after it. ValueError on a count past the end."""
    return _entity(buf, offset, len(buf), cls, 0)


def _entity(buf: bytes, pos: int, end: int, cls: type, depth: int) -> int:
    if depth > DEPTH_MAX:
        raise ValueError("request nests deeper than any schema")
    flexible = bool(getattr(cls, "__flexible__", False))
    regular, tagged = _plans(cls)
    for plan in regular:
        pos = _value(buf, pos, end, plan, flexible, depth)
    if not flexible:
        return pos
    count, size = read_unsigned_varint(buf, pos)
    pos += size
    for _ in range(min(int(count), end - pos + 1)):  # bounded by the bytes left: each tag takes at least one
        tag, size = read_unsigned_varint(buf, pos)
        pos += size
        length, size = read_unsigned_varint(buf, pos)
        pos += size
        if pos + length > end:
            raise ValueError(f"tagged field {tag} of {length} bytes past the end")
        tagged_plan = tagged.get(int(tag))
        if tagged_plan is not None:
            _value(buf, pos, pos + length, tagged_plan, flexible, depth)
        pos += length
    return pos


def _value(buf: bytes, pos: int, end: int, plan: tuple[Any, ...], flexible: bool, depth: int) -> int:
    spec, nullable, array, entity, kind, reader = plan
    if array:
        read_length = read_compact_array_length if flexible else read_legacy_array_length
        count, size = read_length(buf, pos)
        pos += size
        if count is None or count < 0:
            if not nullable:  # kio would read it as None, which no handler expects (Kafka's parser's wording)
                raise ValueError(f"non-nullable field {spec.name} was serialized as null")
            return pos
        if count > end - pos:
            raise ValueError(f"array {spec.name} of {count} elements in {end - pos} bytes")
        for _ in range(count):  # bounded by the check above
            pos = _one(buf, pos, end, entity, kind, reader, False, depth)
        return pos
    return _one(buf, pos, end, entity, kind, reader, nullable, depth)


def _one(buf: bytes, pos: int, end: int, entity: bool, kind: Any, reader: Any, nullable: bool, depth: int) -> int:
    if entity:
        if nullable:  # a nullable struct opens with a presence byte
            present = buf[pos] if pos < end else 0
            pos += 1
            if present != 1:
                return pos
        return _entity(buf, pos, end, kind, depth + 1)
    _, size = reader(buf, pos)
    return int(pos + size)


def _plans(cls: type) -> tuple[tuple[tuple[Any, ...], ...], dict[int, tuple[Any, ...]]]:
    found = _PLANS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        regular, tagged = [], {}
        for spec in dataclasses.fields(cls):
            if not spec.init:
                continue
            plan = _plan(spec, hints[spec.name], bool(getattr(cls, "__flexible__", False)))
            if "tag" in spec.metadata:
                tagged[int(spec.metadata["tag"])] = plan
            else:
                regular.append(plan)
        found = _PLANS[cls] = (tuple(regular), tagged)
    return found


def _plan(spec: dataclasses.Field[Any], hint: Any, flexible: bool) -> tuple[Any, ...]:
    """(field, nullable, array, entity, type, kio's reader of one value), read once per class."""
    nullable = False
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        nullable = True
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    array = typing.get_origin(hint) is tuple
    kind = typing.get_args(hint)[0] if array else hint
    entity = dataclasses.is_dataclass(kind)
    # Array elements are never null; a single value is read as nullable when its annotation allows None.
    reader = None if entity else get_reader(spec.metadata["kafka_type"], flexible, nullable and not array)
    return spec, nullable, array, entity, kind, reader
