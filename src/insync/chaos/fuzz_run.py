"""Sending the fuzzer's cases to a target (the brokers, or the controller) over many connections, and judging
every answer. Workers (at most `concurrency`, spread over the target's addresses) each keep one connection and
take the next case index. A case whose size prefix is honest is followed by a *sentinel* (ApiVersions v0): its
answer proves the server read past the case, and the connection is reused. After a case whose size prefix lies we
end our stream instead, since the server would wait for bytes that never come, as Kafka does. Each case ends as:
- `ok` / `error`: an answer that decodes with the response schema of the frame's header, without / with an error
  code somewhere in it (a request outside the table may only be answered with an error);
- `closed`: the broker closed the connection before answering (Kafka's answer to a malformed request);
- `no_response`: the sentinel came back without an answer, which only a Produce with acks=0 may do;
- `long_wait` / `slow`: no answer within `ANSWER_TIMEOUT_S` to a request that asked to wait longer / a late answer;
- `timeout` (none in `HANG_TIMEOUT_S`) and `wrong` (an undecodable answer, a stray correlation id, a missing
  answer, an OK answer where none may be): the failures, kept (up to `PROBLEMS_MAX`) with their case index;
  `skipped`: not sent, read as a real broker's registration or heartbeat (`Target.brokers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import struct
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from insync.chaos.fuzz_cases import FuzzCase, fuzz_case, names_a_broker
from insync.protocol.codec import (
    API_VERSIONS_KEY,
    MalformedRequest,
    UnsupportedRequest,
    decode_request,
    decode_response,
    encode_request,
    request_schema,
)
from insync.protocol.kio import millis

ANSWER_TIMEOUT_S = 10.0
# Kafka bounds every request it does not hold at the client's ask by request.timeout.ms (30 s: WriteTxnMarkers'
# appends) or less (offsets.commit.timeout.ms): an answer later than this is a hang on any broker.
HANG_TIMEOUT_S = 35.0
CONNECT_TIMEOUT_S = 5.0
PROBLEMS_MAX = 50
ANSWERS_PER_CASE_MAX = 4  # the case's answer, the sentinel's, and what a lying size prefix split off
RESPONSE_BYTES_MAX = 256 * 1024 * 1024
PRODUCE_KEY = 0
OUTCOMES = ("ok", "error", "closed", "no_response", "long_wait", "slow", "timeout", "wrong", "skipped")
FAILURES = ("timeout", "wrong")
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")
KIO_NEGATIVE_TIMESTAMP = "Cannot parse negative timestamp"
_SENTINEL_FLAG = 0x40000000  # flipped into the case's correlation id so the two never match


@dataclass
class Tally:
    answers: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[str] = field(default_factory=Counter)  # valid, boundary, mutated
    apis: Counter[int] = field(default_factory=Counter)
    connections: int = 0
    problems: list[dict[str, Any]] = field(default_factory=list)
    slow: list[dict[str, Any]] = field(default_factory=list)

    def add(self, case: FuzzCase, outcome: str, detail: str) -> None:
        assert outcome in OUTCOMES, outcome
        self.answers[outcome] += 1
        self.by_kind[case.kind] += 1
        self.apis[case.api_key] += 1
        kept = self.problems if outcome in FAILURES else self.slow if outcome == "slow" else None
        if kept is not None and len(kept) < PROBLEMS_MAX:
            kept.append({"index": case.index, "api_key": case.api_key, "api_version": case.api_version,
                         "kind": case.kind, "outcome": outcome, "detail": detail})

    @property
    def failures(self) -> int:
        return sum(self.answers[o] for o in FAILURES)


@dataclass(frozen=True, slots=True)
class Target:
    addresses: tuple[tuple[str, int], ...]
    table: Mapping[int, tuple[int, int]]  # what the target serves (the brokers', or the controller's)
    pairs: tuple[tuple[int, int], ...]  # what the cases are drawn from (`fuzz_cases.advertised_pairs`)
    broker_ids: tuple[int, ...] = ()  # valid broker ids of the cases (`fuzz_case`), when not small numbers
    brokers: frozenset[int] = frozenset()  # real brokers no case may register or heartbeat for (`names_a_broker`)


async def run_cases(target: Target, seed: int, indexes: Iterable[int], concurrency: int, tally: Tally) -> None:
    """Send case `i` of `seed` for every `i` in `indexes`, at most `concurrency` at a time, into `tally`."""
    assert concurrency >= 1 and target.addresses
    counter = iter(indexes)
    workers = [_worker(target, seed, counter, target.addresses[n % len(target.addresses)], tally)
               for n in range(concurrency)]
    await asyncio.gather(*workers)


async def _worker(target: Target, seed: int, counter: Iterator[int], address: tuple[str, int], tally: Tally) -> None:
    stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    try:
        for index in counter:  # bounded: the caller passes finitely many indexes
            case = fuzz_case(seed, index, target.pairs, target.broker_ids)
            if target.brokers and names_a_broker(case.frame, target.table, target.brokers):
                tally.add(case, "skipped", "")
                continue
            if stream is None:
                stream = await asyncio.wait_for(asyncio.open_connection(*address), CONNECT_TIMEOUT_S)
                tally.connections += 1
            outcome, detail, reusable = await exchange(stream, case, target.table)
            tally.add(case, outcome, detail)
            if not reusable:
                await _close(stream)
                stream = None
    finally:
        if stream is not None:
            await _close(stream)


async def exchange(stream: tuple[asyncio.StreamReader, asyncio.StreamWriter], case: FuzzCase,
                   table: Mapping[int, tuple[int, int]]) -> tuple[str, str, bool]:
    """(outcome, detail, whether the connection may carry the next case) of sending `case` (module docstring)."""
    reader, writer = stream
    header = _header(case.frame)
    sentinel_id = (header[2] if header else 0) ^ _SENTINEL_FLAG
    try:
        writer.write(case.frame)
        if case.consistent:
            writer.write(encode_request(request_schema(API_VERSIONS_KEY, 0)(), sentinel_id))
        else:
            writer.write_eof()
        await writer.drain()
    except OSError:
        return "closed", "", False
    answer: tuple[str, str] | None = None
    started = asyncio.get_running_loop().time()
    for _ in range(ANSWERS_PER_CASE_MAX):
        try:
            payload = await asyncio.wait_for(_read_frame(reader), ANSWER_TIMEOUT_S)
        except TimeoutError:
            if answer is not None and case.consistent:  # answered, then stopped reading the connection
                return "timeout", f"the sentinel after api {case.api_key} got no answer in {ANSWER_TIMEOUT_S} s", False
            if answer is not None:
                return answer + (False,)
            silence = _silence(case, table)
            if silence[0] != "timeout":  # the long wait the request asked for
                return silence + (False,)
            try:
                payload = await asyncio.wait_for(_read_frame(reader), HANG_TIMEOUT_S - ANSWER_TIMEOUT_S)
            except TimeoutError:
                return "timeout", f"no answer in {HANG_TIMEOUT_S} s", False
            except ValueError as exc:
                return "wrong", str(exc), False
        except ValueError as exc:
            return "wrong", str(exc), False
        if payload is None:
            return (answer or ("closed", "")) + (False,)
        (correlation_id,) = _SIZE.unpack_from(payload)
        if case.consistent and correlation_id == sentinel_id:
            return (answer or _no_response(case, table)) + (True,)
        if answer is None and header is not None and correlation_id == header[2]:
            answer = judge(header[0], header[1], payload, table)
            late_s = asyncio.get_running_loop().time() - started
            if answer[0] in ("ok", "error") and late_s > ANSWER_TIMEOUT_S:
                answer = "slow", f"answered ({answer[0]}) after {late_s:.1f} s"
            if not case.consistent:
                return answer + (False,)
        elif case.consistent:
            return "wrong", f"answer with correlation id {correlation_id}", False
    return (answer or ("wrong", "more answers than requests")) + (False,)


def judge(api_key: int, api_version: int, payload: bytes, table: Mapping[int, tuple[int, int]]) -> tuple[str, str]:
    """The outcome of an answer to a request whose header named `api_key` v`api_version`."""
    served = api_key in table and table[api_key][0] <= api_version <= table[api_key][1]
    # An ApiVersions request of a version outside the table is answered in v0 (KIP-511).
    version = 0 if api_key == API_VERSIONS_KEY and not served else api_version
    try:
        _, body = decode_response(api_key, version, payload)
    except (MalformedRequest, LookupError, ValueError) as exc:
        if KIO_NEGATIVE_TIMESTAMP in str(exc):
            # Kafka writes -1 for "no time" in fields kio reads as timestamps (DescribeTransactions' start time
            # of a transaction not ongoing); kio's reader refuses it, so the answer is Kafka's own but unreadable.
            return "ok", ""
        return "wrong", f"undecodable answer to api {api_key} v{api_version}: {exc}"
    if any_error(body):
        return "error", ""
    if not served:
        return "wrong", f"answered api {api_key} v{api_version} (not served) without an error"
    return "ok", ""


def any_error(entity: Any) -> bool:
    """Whether `entity` or an entity nested in it carries an error code other than NONE."""
    for spec in dataclasses.fields(entity):
        value = getattr(entity, spec.name)
        if isinstance(value, ErrorCode):
            if value is not ErrorCode.none:
                return True
        elif isinstance(value, tuple):
            if value and dataclasses.is_dataclass(value[0]) and any(any_error(v) for v in value):
                return True
        elif dataclasses.is_dataclass(value) and any_error(value):
            return True
    return False


def _silence(case: FuzzCase, table: Mapping[int, tuple[int, int]]) -> tuple[str, str]:
    """No answer in time: a long wait the request asked for (a Fetch's max wait, a produce timeout), else a hang."""
    request = _decoded(case, table)
    if request is not None and any(millis(getattr(request.body, spec.name)) >= ANSWER_TIMEOUT_S * 1000
                                   for spec in dataclasses.fields(request.body)
                                   if isinstance(getattr(request.body, spec.name), datetime.timedelta)):
        return "long_wait", ""
    return "timeout", f"no answer in {ANSWER_TIMEOUT_S} s"  # the caller waits on, to HANG_TIMEOUT_S


def _no_response(case: FuzzCase, table: Mapping[int, tuple[int, int]]) -> tuple[str, str]:
    request = _decoded(case, table)
    if request is not None and request.api_key == PRODUCE_KEY and int(request.body.acks) == 0:
        return "no_response", ""
    return "wrong", "the sentinel was answered but the request was not"


def _decoded(case: FuzzCase, table: Mapping[int, tuple[int, int]]) -> Any:
    try:
        return decode_request(case.frame[_SIZE.size:], table)
    except (MalformedRequest, UnsupportedRequest):
        return None


def _header(frame: bytes) -> tuple[int, int, int] | None:
    """(api key, version, correlation id) the frame's header says, if it is long enough to say it."""
    if len(frame) < _SIZE.size + _HEADER.size:
        return None
    api_key, version, correlation_id = _HEADER.unpack_from(frame, _SIZE.size)
    return int(api_key), int(version), int(correlation_id)


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One response payload, or None at the end of the stream."""
    try:
        (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
        if not _SIZE.size <= size <= RESPONSE_BYTES_MAX:
            raise ValueError(f"response of {size} bytes")
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


async def _close(stream: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
    writer = stream[1]
    writer.close()
    with contextlib.suppress(OSError, TimeoutError):  # the broker may already have reset it
        await asyncio.wait_for(writer.wait_closed(), CONNECT_TIMEOUT_S)

