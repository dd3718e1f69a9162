"""A blocking Kafka client for one partition, for the Spark source's tasks: Fetch from the leader, raw records.

A Spark task reads one offset range of one partition in one thread, and needs the records as the broker sent
them (decoded in bulk by `arrow_records`), not a client library's object per record, so it speaks the protocol
itself: ApiVersions, Metadata (the leader), Fetch (no session) and ListOffsets (for data-loss checks), both at
`kafka.isolation.level` (read_committed: up to the last stable offset, with the aborted transactions listed).
Fetch responses are read where they were received (`fetch_wire`): a `FetchResult`'s records are a view into the
receive buffer, which the next response overwrites. Versions: Fetch and Metadata up to 12 (later ones
name topics by id only), ListOffsets up to 7, each the highest the broker also supports, which brokers without
the old versions (Kafka 4) serve too. With `ReaderSecurity` each connection starts with TLS and/or a SASL
exchange; a refused authentication is a `FetchError` (retrying cannot fix a wrong password). A connection or
leader-change error drops the connection and looks the leader up again on the next call, the caller seeing an
empty, retriable answer bounded by `kafkaConsumer.pollTimeoutMs`; a non-retriable error raises `FetchError`.
"""

from __future__ import annotations

import logging
import socket
import struct
from dataclasses import dataclass
from typing import Any

from insync import errors
from insync.errors import KafkaError
from insync.protocol.codec import decode_response, encode_request
from insync.protocol.kio import build, duration, error_of, nested, request_class
from insync.security.sasl_client import SaslCredentials
from insync.spark.source import fetch_wire
from insync.spark.source.client_security import ReaderSecurity
from insync.wire import sasl_exchange

API_VERSIONS, FETCH, LIST_OFFSETS, METADATA = 18, 1, 2, 3
# The highest version this client sends of each API (Fetch and Metadata 13+ name topics by id only).
VERSIONS_MAX = {FETCH: 12, METADATA: 12, LIST_OFFSETS: 7}
VERSIONS_MIN = {FETCH: 4, METADATA: 1, LIST_OFFSETS: 1}
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1  # Kafka's isolation levels in Fetch and ListOffsets
LIST_OFFSETS_ISOLATION_MIN = 2  # the first ListOffsets version that carries an isolation level
RESPONSE_BYTES_MAX = 256 * 1024 * 1024
CLIENT_ID = "insync-spark-source"
NETWORK_EXCEPTION = errors.BY_NAME["NETWORK_EXCEPTION"]
log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
# Errors after which the leader may have moved: look it up again and retry.
LEADER_ERRORS = frozenset(errors.BY_NAME[name].code for name in (
    "NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "LEADER_NOT_AVAILABLE",
    "REPLICA_NOT_AVAILABLE", "KAFKA_STORAGE_ERROR", "UNKNOWN_TOPIC_OR_PARTITION", "OFFSET_NOT_AVAILABLE",
    "NETWORK_EXCEPTION", "REQUEST_TIMED_OUT"))


class FetchError(RuntimeError):
    """A broker refused a request for a reason retrying cannot fix; the message names partition and error."""


@dataclass(frozen=True, slots=True)
class FetchResult:
    """One partition's part of a Fetch response. `error` NONE: `records` holds whole batches (maybe the last one
    cut short); otherwise `records` is empty and the watermarks are -1."""

    error: KafkaError
    records: bytes | memoryview  # a view into the receive buffer: valid until the fetcher's next call
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int = -1
    aborted: tuple[tuple[int, int], ...] | None = None  # read_committed only: (producer id, first offset) each

    @property
    def end_offset(self) -> int:
        """Where this isolation level's reading ends (Kafka's consumer's end offset): the high watermark, or under
        read_committed the last stable offset, up to which the broker answers."""
        return self.high_watermark if self.aborted is None else self.last_stable_offset


class _Connection:
    """One blocking TCP connection to one broker, one request at a time, versions agreed by ApiVersions."""

    def __init__(self, host: str, port: int, timeout_s: float, security: ReaderSecurity) -> None:
        self.address = f"{host}:{port}"
        sock = socket.create_connection((host, port), timeout=timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock if security.tls is None else security.tls.wrap_socket(sock, server_hostname=host)
        self._correlation = 0
        self._buffer = bytearray()  # reused for every response: a fresh one per fetch would be zeroed each time
        self.versions: dict[int, int] = {}
        if security.sasl is not None:
            self._authenticate(security.sasl)
        body = self.request(build(request_class(API_VERSIONS, 0)), API_VERSIONS)
        if error_of(body.error_code) is not errors.NONE:
            raise FetchError(f"{self.address} refused ApiVersions v0: {error_of(body.error_code).name}")
        for entry in body.api_keys:
            key = int(entry.api_key)
            if key in VERSIONS_MAX:
                best = min(VERSIONS_MAX[key], int(entry.max_version))
                if best >= max(VERSIONS_MIN[key], int(entry.min_version)):
                    self.versions[key] = best
        missing = sorted(set(VERSIONS_MAX) - set(self.versions))
        if missing:
            raise FetchError(f"{self.address} supports no version of API key(s) {missing} this reader speaks "
                             f"(it needs {VERSIONS_MIN} to {VERSIONS_MAX})")

    def _authenticate(self, credentials: SaslCredentials) -> None:
        try:
            sasl_exchange.run(credentials, lambda body: self.request(body, int(body.__api_key__)))
        except sasl_exchange.SaslRefused as exc:
            raise FetchError(f"{self.address} {exc}") from None

    def request(self, body: Any, api_key: int) -> Any:
        return self.receive(self.send(body), api_key, int(body.__version__))

    def send(self, body: Any) -> int:
        """Write a request; returns its correlation id for `receive`."""
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        self._sock.sendall(encode_request(body, self._correlation, CLIENT_ID))
        return self._correlation

    def receive(self, correlation_id: int, api_key: int, version: int) -> Any:
        """The response to the request sent with `correlation_id` (requests are answered in order): a kio
        entity, or for Fetch a `fetch_wire.FetchView` into the receive buffer."""
        payload = self._receive_payload()
        if api_key == FETCH:
            try:
                view = fetch_wire.parse(payload, version)
            except fetch_wire.MalformedResponse as exc:
                raise ConnectionError(f"{self.address} sent a Fetch v{version} response that does not parse: "
                                      f"{exc}") from None
            correlation, response = view.correlation_id, view
        else:
            correlation, response = decode_response(api_key, version, payload)
        if correlation != correlation_id:
            raise ConnectionError(f"{self.address} answered correlation id {correlation}, not {correlation_id}")
        return response

    def _receive_payload(self) -> memoryview:
        (size,) = _SIZE.unpack(self._read(_SIZE.size))
        if not 4 <= size <= RESPONSE_BYTES_MAX:
            raise ConnectionError(f"response of {size} bytes from {self.address}")
        return self._read(size)

    def _read(self, size: int) -> memoryview:
        """The next `size` bytes, in the reused buffer (overwritten by the next read)."""
        if len(self._buffer) < size:
            self._buffer = bytearray(size)
        view = memoryview(self._buffer)[:size]
        got = 0
        while got < size:  # bounded: each pass reads at least one byte or raises
            n = self._sock.recv_into(view[got:])
            if n == 0:
                raise ConnectionError(f"connection to {self.address} closed")
            got += n
        return view.toreadonly()  # kio reads only immutable buffers; this saves copying a response to bytes

    def close(self) -> None:
        self._sock.close()


# The bootstrap server that last answered a lookup in this process (pyspark reuses its workers): asked first, so a
# paused or dead server first in the list holds up only the first lookup after it stopped, not every one.
_answered_last: tuple[str, int] | None = None


class PartitionFetcher:
    """Fetch and ListOffsets for one partition, from its current leader. Close it (or use `with`)."""

    def __init__(self, bootstrap_servers: str, topic: str, partition: int, *, partition_max_bytes: int,
                 max_wait_ms: int, timeout_s: float, security: ReaderSecurity | None = None,
                 leader: tuple[str, int] | None = None, read_committed: bool = False) -> None:
        self.bootstrap = [_host_port(s) for s in bootstrap_servers.split(",") if s.strip()]
        assert self.bootstrap, "the driver checked kafka.bootstrap.servers"
        self.topic, self.partition = topic, partition
        self.partition_max_bytes = partition_max_bytes
        self.max_wait_ms = max_wait_ms
        self.timeout_s = timeout_s
        self.security = security or ReaderSecurity()
        self.isolation_level = READ_COMMITTED if read_committed else READ_UNCOMMITTED
        self._leader: _Connection | None = None
        # The leader the caller knows of, tried once before any lookup: a lookup asks the bootstrap servers in
        # turn, and one that is paused holds each lookup for `timeout_s`.
        self._known_leader = leader
        self._in_flight: tuple[int, int] | None = None  # (offset, correlation id) of a prefetch

    def __enter__(self) -> PartitionFetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._in_flight = None
        if self._leader is not None:
            self._leader.close()
            self._leader = None

    def prefetch(self, offset: int) -> None:
        """Send the Fetch for `offset` now, so the broker prepares it while the caller decodes the previous one;
        the next `fetch(offset)` takes its answer. Errors wait for that call."""
        assert self._in_flight is None, "one prefetch at a time"
        try:
            leader = self._connect_leader()
            self._in_flight = (offset, leader.send(self._fetch_request(leader, offset)))
        except (OSError, ConnectionError, _Retriable):
            self.close()

    def fetch(self, offset: int) -> FetchResult:
        """Records from `offset` (the broker waits up to `max_wait_ms` for some); retriable trouble comes back
        as an error result with the connection dropped."""
        try:
            leader = self._connect_leader()
            in_flight, self._in_flight = self._in_flight, None
            if in_flight is not None and in_flight[0] == offset:
                correlation_id = in_flight[1]
            else:
                if in_flight is not None:  # prefetched another offset: take that answer and drop it
                    leader.receive(in_flight[1], FETCH, leader.versions[FETCH])
                correlation_id = leader.send(self._fetch_request(leader, offset))
            body = leader.receive(correlation_id, FETCH, leader.versions[FETCH])
        except (OSError, ConnectionError) as exc:
            return self._retry_later(NETWORK_EXCEPTION, exc)
        except _Retriable as exc:
            return self._retry_later(exc.error, exc)
        top = error_of(body.error_code)
        if top is not errors.NONE:
            return self._result_of_error(top)
        for p in body.partitions:
            if p.topic == self.topic and p.partition == self.partition:
                error = error_of(p.error_code)
                if error is not errors.NONE:
                    return self._result_of_error(error)
                committed = self.isolation_level == READ_COMMITTED
                return FetchResult(errors.NONE, p.records, p.high_watermark, p.log_start_offset,
                                   p.last_stable_offset, (p.aborted_transactions or ()) if committed else None)
        raise FetchError(f"{self._leader_address()} answered a Fetch for {self.topic}-{self.partition} without it")

    def _fetch_request(self, leader: _Connection, offset: int) -> Any:
        cls = request_class(FETCH, leader.versions[FETCH])
        part = build(nested(cls, "FetchPartition"), partition=self.partition, current_leader_epoch=-1,
                     fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
                     partition_max_bytes=self.partition_max_bytes)
        topic = build(nested(cls, "FetchTopic"), topic=self.topic, partitions=(part,))
        return build(cls, replica_id=-1, max_wait=duration(self.max_wait_ms), min_bytes=1,
                     max_bytes=self.partition_max_bytes, isolation_level=self.isolation_level, session_id=0,
                     session_epoch=-1, topics=(topic,), forgotten_topics_data=(), rack_id="")

    def watermarks(self) -> tuple[int, int] | None:
        """(log start offset, latest offset) from the leader: the high watermark, or under read_committed the last
        stable offset; None when it could not be asked just now."""
        if self._in_flight is not None:
            self.close()  # a prefetched answer would come first; this path is rare (stalls), so reconnect
        try:
            leader = self._connect_leader()
            return self._list_offset(leader, EARLIEST_TIMESTAMP), self._list_offset(leader, LATEST_TIMESTAMP)
        except (OSError, ConnectionError) as exc:
            self._retry_later(NETWORK_EXCEPTION, exc)
            return None
        except _Retriable:
            return None

    def _list_offset(self, leader: _Connection, timestamp: int) -> int:
        cls = request_class(LIST_OFFSETS, leader.versions[LIST_OFFSETS])
        part = build(nested(cls, "ListOffsetsPartition"), partition_index=self.partition, current_leader_epoch=-1,
                     timestamp=timestamp, max_num_offsets=1)
        topic = build(nested(cls, "ListOffsetsTopic"), name=self.topic, partitions=(part,))
        if self.isolation_level == READ_COMMITTED and leader.versions[LIST_OFFSETS] < LIST_OFFSETS_ISOLATION_MIN:
            raise FetchError(f"{leader.address} answers ListOffsets up to v{leader.versions[LIST_OFFSETS]} only, "
                             f"which has no isolation level: kafka.isolation.level=read_committed needs "
                             f"v{LIST_OFFSETS_ISOLATION_MIN}")
        body = leader.request(build(cls, replica_id=-1, isolation_level=self.isolation_level, topics=(topic,)),
                              LIST_OFFSETS)
        for t in body.topics:
            for p in t.partitions:
                if t.name == self.topic and int(p.partition_index) == self.partition:
                    error = error_of(p.error_code)
                    if error is not errors.NONE:
                        self._result_of_error(error)
                        raise _Retriable(error)
                    return int(p.offset)
        raise FetchError(f"{leader.address} answered ListOffsets for {self.topic}-{self.partition} without it")

    def _result_of_error(self, error: KafkaError) -> FetchResult:
        if error.code in LEADER_ERRORS:
            return self._retry_later(error, None)
        if error is errors.OFFSET_OUT_OF_RANGE:
            return FetchResult(error, b"", -1, -1)  # the caller checks the watermarks: data loss or not
        raise FetchError(f"reading {self.topic}-{self.partition} from {self._leader_address()}: {error.name} "
                         f"({error.message})")

    def _retry_later(self, error: KafkaError, exc: BaseException | None) -> FetchResult:
        """Drop the connection (the leader is looked up again) and answer `error`; the caller's stall timeout
        reports a partition that stays unreachable."""
        log.debug("fetching %s-%d: %s (%s); looking for the leader again", self.topic, self.partition, error.name,
                  exc)
        self.close()
        return FetchResult(error, b"", -1, -1)

    def _leader_address(self) -> str:
        return self._leader.address if self._leader is not None else "?"

    def _connect_leader(self) -> _Connection:
        if self._leader is not None:
            return self._leader
        known, self._known_leader = self._known_leader, None
        host, port = known if known is not None else self._find_leader()
        self._leader = _Connection(host, port, self.timeout_s, self.security)
        return self._leader

    def _find_leader(self) -> tuple[str, int]:
        """Ask the bootstrap servers, in turn, for the partition's leader, the one that answered this process last
        first; raises _Retriable if none knows."""
        global _answered_last
        last: BaseException | None = None
        for host, port in sorted(self.bootstrap, key=lambda server: server != _answered_last):
            try:
                conn = _Connection(host, port, self.timeout_s, self.security)
            except (OSError, ConnectionError) as exc:
                last = exc
                continue
            try:
                cls = request_class(METADATA, conn.versions[METADATA])
                topic = build(nested(cls, "MetadataRequestTopic"), name=self.topic, topic_id=None)
                body = conn.request(build(cls, topics=(topic,), allow_auto_topic_creation=False,
                                          include_cluster_authorized_operations=False,
                                          include_topic_authorized_operations=False), METADATA)
            except (OSError, ConnectionError) as exc:
                last = exc
                continue
            finally:
                conn.close()
            _answered_last = (host, port)
            return self._leader_in(body)
        raise _Retriable(NETWORK_EXCEPTION, f"no bootstrap server answered: {last}")

    def _leader_in(self, body: Any) -> tuple[str, int]:
        brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in body.brokers}
        for t in body.topics:
            if t.name != self.topic:
                continue
            error = error_of(t.error_code)
            if error is not errors.NONE:
                raise _Retriable(error)
            for p in t.partitions:
                if int(p.partition_index) == self.partition and int(p.leader_id) in brokers:
                    return brokers[int(p.leader_id)]
        raise _Retriable(errors.LEADER_NOT_AVAILABLE)


class _Retriable(Exception):
    """The partition is not readable just now (no leader known, a leader change): try again later."""

    def __init__(self, error: KafkaError, detail: str = "") -> None:
        super().__init__(f"{error.name} {detail}".strip())
        self.error = error


def _host_port(server: str) -> tuple[str, int]:
    host, _, port = server.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bootstrap server {server!r} is not host:port")
    return host.strip("[]"), int(port)
