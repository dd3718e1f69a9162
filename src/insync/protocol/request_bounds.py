"""Array counts in a request checked against the bytes left, before kio's native reader sees them.

kio's reader (Rust) reserves room for an array's elements as soon as it reads the count, so a 60-byte request
declaring billions of elements makes the allocation fail and aborts the whole process. Kafka's parser refuses such
a count ("tried to allocate a collection of size N, but there are only M bytes remaining"); `check_arrays` does
the same: it walks the request's layout as kio would read it and raises `ValueError` at the first array whose count
exceeds the bytes after it (every element takes at least one byte), that is null where the schema does not allow
it, or at a length that runs past the end. The walk follows a plan compiled once per schema: a run of fixed-size
fields is one skip, a string is skipped by its length, and an array of fixed-size elements is checked as count x
width with no loop. Values (UTF-8, booleans, durations) are left to kio's reader, which refuses them next. Tagged
fields are walked inside their declared size; unknown tags are skipped as kio does.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from typing import Any

from kio.serial._parse import get_reader
from kio.serial.errors import DecodeError
from kio.serial.readers import read_unsigned_varint

DEPTH_MAX = 16  # kio's request schemas nest at most 4 entities deep

# The bytes of each fixed-size kio type. Strings, bytes and records carry their length first: an unsigned varint
# (one more than the length) in flexible versions, else `_LENGTHS`.
_WIDTHS = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "timedelta_i32": 4,
           "int64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8, "uuid": 16}
_LENGTHS = {"string": struct.Struct(">h"), "bytes": struct.Struct(">i"), "records": struct.Struct(">i")}
_COUNT = struct.Struct(">i")  # of a legacy array

# A compiled walk is a tuple of operations (code, argument, array element, nullable, field name): skip a run of
# fixed-size fields, a string or an array (after its length or count), the tagged fields, a nullable struct.
_SKIP, _SIZED, _TAGS, _OPTIONAL, _DEEP = range(5)


@dataclasses.dataclass(frozen=True, slots=True)
class _Layout:
    """How one value is walked: `ops` in order; `width` when every instance takes the same bytes, `prefix` when
    it is fixed-size fields (that many bytes) followed by tagged fields."""
    ops: tuple[Op, ...]
    width: int | None
    prefix: int | None


Op = tuple[int, Any, _Layout | None, bool, str]
_LAYOUTS: dict[tuple[type, int], _Layout] = {}
_REQUESTS: dict[type, tuple[Op, ...]] = {}  # the walk of each request schema, found without building a key


def check_arrays(buf: bytes, offset: int, cls: type) -> int:
    """Walk entity `cls` at `offset` of `buf`; the offset after it. ValueError on a count past the end."""
    ops = _REQUESTS.get(cls)
    if ops is None:
        ops = _REQUESTS[cls] = _entity_layout(cls, 0).ops
    try:
        return _walk(buf, offset, len(buf), ops)
    except (IndexError, struct.error, DecodeError) as exc:  # a length or count read past the end
        raise ValueError(f"request of {len(buf)} bytes ends inside a field ({exc})") from None


def _walk(buf: bytes, pos: int, end: int, ops: tuple[Op, ...]) -> int:
    """Values are read up to the end of `buf`, counts and tagged fields checked against `end`, as kio reads them."""
    for code, arg, element, nullable, name in ops:
        if code == _SKIP:
            pos += arg
            if pos > len(buf):
                raise ValueError(f"request of {len(buf)} bytes ends inside a field")
        elif code == _SIZED:  # `arg` reads a legacy length; a compact one is one more (0 for null), mostly one byte
            if arg is not None:
                size = arg.unpack_from(buf, pos)[0]
                pos += arg.size
            else:
                size = buf[pos]
                if size < 0x80:
                    pos += 1
                else:
                    size, read = read_unsigned_varint(buf, pos)
                    pos += read
                size -= 1
            if element is not None:
                pos = _array(buf, pos, end, size, element, nullable, name)
            elif size >= 0:
                pos += size
                if pos > len(buf):
                    raise ValueError(f"field {name} of {size} bytes past the end")
            elif size != -1 or not nullable:
                raise ValueError(f"non-nullable field {name} was serialized as null" if size == -1
                                 else f"field {name} of {size} bytes")
        elif code == _TAGS:
            pos = pos + 1 if buf[pos] == 0 else _tags(buf, pos, end, arg)
        elif code == _OPTIONAL:  # a nullable struct opens with a presence byte
            present = buf[pos] if pos < end else 0
            pos += 1
            if present == 1:
                pos = _walk(buf, pos, end, arg)
        else:
            assert code == _DEEP, code
            raise ValueError("request nests deeper than any schema")
    return pos


def _array(buf: bytes, pos: int, end: int, count: int, element: _Layout, nullable: bool, name: str) -> int:
    if count < 0:
        if not nullable:  # kio would read it as None, which no handler expects (Kafka's parser's wording)
            raise ValueError(f"non-nullable field {name} was serialized as null")
        return pos
    if count > end - pos:
        raise ValueError(f"array {name} of {count} elements in {end - pos} bytes")
    if element.width is not None:
        pos += count * element.width
        if pos > len(buf):
            raise ValueError(f"array {name} of {count} elements past the end")
        return pos
    if element.prefix is not None:
        # Each element is its fixed fields then its tagged-field count: when every count is 0 (one byte each, read
        # as one strided slice) the array is count x (prefix + 1) bytes.
        stride = element.prefix + 1
        counts = buf[pos + element.prefix:pos + count * stride:stride]
        if len(counts) == count and counts.count(0) == count:
            return pos + count * stride
    for _ in range(count):  # bounded by the check above
        pos = _walk(buf, pos, end, element.ops)
    return pos


def _tags(buf: bytes, pos: int, end: int, tagged: dict[int, tuple[Op, ...]]) -> int:
    count, pos = _varint(buf, pos)
    for _ in range(min(count, end - pos + 1)):  # bounded by the bytes left: each tag takes at least one
        tag, pos = _varint(buf, pos)
        length, pos = _varint(buf, pos)
        if pos + length > end:
            raise ValueError(f"tagged field {tag} of {length} bytes past the end")
        ops = tagged.get(tag)
        if ops is not None:
            _walk(buf, pos, pos + length, ops)
        pos += length
    return pos


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at `pos` and the offset after it."""
    value, size = read_unsigned_varint(buf, pos)
    return int(value), pos + int(size)


def _entity_layout(cls: type, depth: int) -> _Layout:
    found = _LAYOUTS.get((cls, depth))
    if found is None:
        found = _LAYOUTS[(cls, depth)] = _compile(cls, depth)
    return found


def _compile(cls: type, depth: int) -> _Layout:
    """The layout of entity `cls` nested `depth` deep: kio's order of its fields, tagged ones last."""
    assert dataclasses.is_dataclass(cls), cls
    if depth > DEPTH_MAX:
        return _Layout(((_DEEP, None, None, False, cls.__name__),), None, None)
    flexible = bool(getattr(cls, "__flexible__", False))
    hints = typing.get_type_hints(cls)
    ops: list[Op] = []
    tagged: dict[int, tuple[Op, ...]] = {}
    for spec in dataclasses.fields(cls):
        if not spec.init:
            continue
        field_ops = _field(spec, hints[spec.name], flexible, depth)
        if "tag" in spec.metadata:
            tagged[int(spec.metadata["tag"])] = tuple(field_ops)
        else:
            ops += field_ops
    if flexible:
        ops.append((_TAGS, tagged, None, False, cls.__name__))
    return _layout(ops)


def _field(spec: dataclasses.Field[Any], hint: Any, flexible: bool, depth: int) -> list[Op]:
    nullable = False
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        nullable = True
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is tuple:  # array elements are never null
        kind = typing.get_args(hint)[0]
        element = _entity_layout(kind, depth + 1) if _is_entity(kind) else _layout(_scalar(spec, flexible, False))
        return [(_SIZED, None if flexible else _COUNT, element, nullable, spec.name)]
    if not _is_entity(hint):
        return _scalar(spec, flexible, nullable)
    layout = _entity_layout(hint, depth + 1)
    return [(_OPTIONAL, layout.ops, None, True, spec.name)] if nullable else list(layout.ops)


def _is_entity(hint: Any) -> typing.TypeGuard[type]:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _scalar(spec: dataclasses.Field[Any], flexible: bool, nullable: bool) -> list[Op]:
    kafka_type = spec.metadata["kafka_type"]
    width = _WIDTHS.get(kafka_type)
    if width is not None:
        assert get_reader(kafka_type, flexible, nullable)(bytes(width), 0)[1] == width, kafka_type
        return [(_SKIP, width, None, False, spec.name)]
    assert kafka_type in _LENGTHS, f"no layout for kio type {kafka_type}"
    return [(_SIZED, None if flexible else _LENGTHS[kafka_type], None, nullable, spec.name)]


def _layout(ops: list[Op]) -> _Layout:
    """`ops` with each run of skips made one, and the layout's width or fixed prefix when it has one."""
    merged: list[Op] = []
    for op in ops:
        if op[0] == _SKIP and merged and merged[-1][0] == _SKIP:
            merged[-1] = (_SKIP, merged[-1][1] + op[1], None, False, merged[-1][4])
        else:
            merged.append(op)
    codes = [op[0] for op in merged]
    width = sum(op[1] for op in merged) if set(codes) <= {_SKIP} else None
    prefix = None
    if codes in ([_TAGS], [_SKIP, _TAGS]):
        prefix = merged[0][1] if codes[0] == _SKIP else 0
    assert width is None or prefix is None, merged
    return _Layout(tuple(merged), width, prefix)
