"""Building and reading kio entities of any version with one mechanism.

kio generates one class per API version (`kio.schema.fetch.v13.response.FetchResponse`), each with only the
fields that version has, and nested classes (`FetchableTopicResponse`, ...) in the same module. Callers
describe an entity once, with every field any version knows, and `build` keeps the ones the target class
declares: a field a version lacks is dropped, a required field nobody gave fails loudly (a programmer error).
Reading goes the other way with `field_or`: a field absent from an old version reads as its Kafka default.

Kafka's wire conventions live here too: error codes as kio's `ErrorCode`, durations as `timedelta`, topic ids
as `uuid.UUID` (the metadata image keeps them as strings). The broker's translators (`insync.wire`) and the
Spark source's client both build on these.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import sys
import typing
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from insync import errors
from insync.errors import KafkaError
from insync.protocol.codec import request_schema, response_schema

ZERO_UUID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: "no topic id"

_FIELD_NAMES: dict[type, frozenset[str]] = {}


def field_names(cls: type) -> frozenset[str]:
    """The fields `cls` declares (cached: the translators ask on every request)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = frozenset(f.name for f in dataclasses.fields(cls))
        _FIELD_NAMES[cls] = names
    return names


def has_field(entity_or_cls: Any, name: str) -> bool:
    cls = entity_or_cls if isinstance(entity_or_cls, type) else type(entity_or_cls)
    return name in field_names(cls)


def build(cls: type, /, **values: Any) -> Any:
    """An instance of `cls` from the values it declares; the others are for other versions."""
    assert dataclasses.is_dataclass(cls), cls
    names = field_names(cls)
    return cls(**{name: value for name, value in values.items() if name in names})


def build_defaults(cls: type, /, **values: Any) -> Any:
    """An instance of `cls` with `values` and every other field at its zero: absent or empty for what may be,
    0, "", False, a zero duration or uuid for the rest, nested entities built the same way. For answers that
    carry nothing but an error (a request this broker does not serve)."""
    assert dataclasses.is_dataclass(cls), cls
    given = {name: value for name, value in values.items() if name in field_names(cls)}
    for field in dataclasses.fields(cls):
        if field.name not in given and field.default is dataclasses.MISSING \
                and field.default_factory is dataclasses.MISSING:
            given[field.name] = _zero(field.type)
    return cls(**given)


def _zero(kind: Any) -> Any:
    if typing.get_origin(kind) is tuple:
        return ()
    if type(None) in typing.get_args(kind):
        return None
    assert isinstance(kind, type), kind
    if dataclasses.is_dataclass(kind):
        return build_defaults(kind)
    if issubclass(kind, enum.Enum):
        return next(iter(kind))  # ErrorCode.none, the first member, is 0
    if issubclass(kind, uuid.UUID):
        return ZERO_UUID
    parse: Any = kind  # kio's sized types (i32, i32Timedelta, TZAware) parse a value of their base type
    if issubclass(kind, datetime.datetime):
        return parse(datetime.datetime.fromtimestamp(0, datetime.UTC))
    base = next(base for base in (datetime.timedelta, int, str, bytes) if issubclass(kind, base))  # bool: int
    return parse(base())


def nested(cls: type, name: str) -> type:
    """A nested entity class (`FetchableTopicResponse`) of the same version as `cls`."""
    found = getattr(sys.modules[cls.__module__], name)
    assert isinstance(found, type) and dataclasses.is_dataclass(found), (cls, name)
    return found


def field_or(entity: Any, name: str, default: Any) -> Any:
    """`entity.name`, or Kafka's default when this version has no such field."""
    return getattr(entity, name) if has_field(entity, name) else default


def request_class(api_key: int, version: int) -> type:
    cls = request_schema(api_key, version)
    assert isinstance(cls, type)
    return cls


def response_class(api_key: int, version: int) -> type:
    cls = response_schema(api_key, version)
    assert isinstance(cls, type)
    return cls


def check_body(body: Any, api_key: int) -> int:
    """The version of a kio entity of `api_key` (its class carries both)."""
    assert int(body.__api_key__) == api_key, (type(body), api_key)
    return int(body.__version__)


def code(error: KafkaError) -> ErrorCode:
    return ErrorCode(error.code)


# An error message may quote a client's string (up to 32,767 bytes): cut, it still fits a non-flexible version's.
ERROR_MESSAGE_MAX = 1024


def error_message(message: str | None) -> str | None:
    """`message` cut to `ERROR_MESSAGE_MAX` characters, for an answer's error message field."""
    return None if message is None else message[:ERROR_MESSAGE_MAX]


def error_of(value: ErrorCode | int) -> KafkaError:
    return errors.by_code(int(value))


def millis(value: datetime.timedelta) -> int:
    return round(value.total_seconds() * 1000)


def duration(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


NO_THROTTLE = duration(0)


def wire_uuid(topic_id: str | None) -> uuid.UUID:
    """The image's topic id string as a wire UUID; unknown is Kafka's zero UUID."""
    return ZERO_UUID if not topic_id else uuid.UUID(topic_id)
