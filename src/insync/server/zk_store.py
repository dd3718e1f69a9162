"""`metadata.store=zookeeper`: the metadata records in ZooKeeper, with controller election and epoch fencing.

Under the chroot of `zookeeper.connect` the store uses Kafka's ZooKeeper-era layout (`/controller`,
`/controller_epoch`, `/brokers/topics/<topic>[/partitions/<p>/state]`, `/cluster/id`) plus the batches, one
persistent sequential znode each under `/insync/metadata/`. `campaign()` creates `/controller` and bumps
`/controller_epoch` in one transaction, so whoever holds the znode holds the newest epoch. Every `append()` is one
transaction too: a version check of `/controller_epoch`, the batch znode and the partition state znodes it
touches, so a controller paused while another won stores nothing and gets `ControllerFencedError`, as does one
whose session is gone. The batches are the source of truth; the Kafka-layout znodes are a mirror for operators
and Kafka tooling, consistent because they change in the same transaction. The store keeps a `MetadataImage` for
topic names, partitions and znode versions. A znode and a transaction hold at most 1 MB, so a larger batch is
refused with INVALID_REQUEST before anything is written. Brokers never talk to ZooKeeper.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import EventType

from insync import errors
from insync.config import ConfigError
from insync.controller.store import ControllerFencedError, MetadataStoreError, decode_batch, encode_batch
from insync.errors import KafkaException
from insync.metadata.image import MetadataImage
from insync.metadata.records import (
    ClusterIdRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RecordError,
)

log = logging.getLogger(__name__)

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BATCHES = "/insync/metadata"
BATCH_PREFIX = f"{BATCHES}/batch-"
TOPICS = "/brokers/topics"
CLUSTER_ID = "/cluster/id"
MAX_TRANSACTION_BYTES = 1_000_000  # ZooKeeper's jute.maxbuffer is 1 MiB per znode and per request


@dataclass(frozen=True, slots=True)
class _Write:
    """One znode operation of an append's transaction; `version` is checked (-1 for a create)."""

    op: str  # "create" | "set" | "delete"
    path: str
    data: bytes = b""
    version: int = -1


def _split_connect(connect: str) -> tuple[str, str]:
    hosts, slash, chroot = connect.partition("/")
    if not hosts or any(not h.rpartition(":")[2].isdigit() for h in hosts.split(",")):
        raise ConfigError(f"zookeeper.connect={connect!r}: expected host:port[,host:port...][/chroot]")
    return hosts, (slash + chroot).rstrip("/")


def _failure(results: list[Any]) -> tuple[int, Exception] | None:
    """The operation that failed a transaction (ZooKeeper reports the others as rolled back), or None."""
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(result, RolledBackError | RuntimeInconsistency):
            return index, result
    return None


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


class ZooKeeperStore:
    """A `MetadataStore` in ZooKeeper; `campaign()` before `append()`, `load()` after winning."""

    def __init__(self, connect: str, node_id: int, *, session_timeout_ms: int = 6000,
                 connect_timeout_s: float = 10.0) -> None:
        assert node_id >= 0 and session_timeout_ms > 0 and connect_timeout_s > 0
        hosts, chroot = _split_connect(connect)
        self.connect = connect
        self.node_id = node_id
        if chroot:  # kazoo does not create the chroot: do it through a client without one
            bootstrap = self._start(hosts, session_timeout_ms, connect_timeout_s)
            try:
                bootstrap.ensure_path(chroot)
            finally:
                bootstrap.stop()
                bootstrap.close()
        self._client = self._start(hosts + chroot, session_timeout_ms, connect_timeout_s)
        self._client.ensure_path(BATCHES)
        self._client.ensure_path(TOPICS)
        self._epoch: int | None = None
        self._epoch_version = -1  # the zk version of /controller_epoch this node set when it won
        self._image: MetadataImage | None = None
        self._loaded_epoch: int | None = None  # the epoch held when load() last ran
        self._versions: dict[str, int] = {}  # zk versions of the /brokers/topics znodes that exist
        self._callbacks: list[Callable[[], None]] = []
        self._lost = False  # our session was lost after winning: every append is refused
        self._deposed = False  # lost, or /controller deleted: on_lost() callbacks registered late fire at once
        self._closing = False
        self._client.add_listener(self._on_state)

    def _start(self, hosts: str, session_timeout_ms: int, connect_timeout_s: float) -> KazooClient:
        client = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000)
        try:
            client.start(timeout=connect_timeout_s)
        except client.handler.timeout_exception as exc:  # start() already stopped the client
            raise ConfigError(f"zookeeper.connect={self.connect}: no ZooKeeper answered at {hosts} within "
                              f"{connect_timeout_s:g} s") from exc
        return client

    # ---- election

    def campaign(self, should_stop: Callable[[], bool], poll_s: float = 0.2) -> bool:
        """Block until this node holds /controller and a new epoch (True), or `should_stop()` (False)."""
        assert self._epoch is None, "campaign() once per store"
        assert poll_s > 0
        while not should_stop():  # bounded by should_stop: a standby waits as long as the caller lets it
            try:
                outcome = self._try_win()
                if outcome == "won":
                    break
                if outcome == "taken":
                    self._wait_for_vacancy(should_stop, poll_s)
            except KazooException as exc:  # ZooKeeper unreachable for now: a standby keeps trying
                log.warning("Controller %d: campaign interrupted (%r); retrying", self.node_id, exc)
                time.sleep(poll_s)
        else:
            return False
        assert self._epoch is not None and self._epoch_version >= 0
        self._client.exists(CONTROLLER, watch=self._on_controller_event)
        log.info("Controller %d holds %s with controller epoch %d", self.node_id, CONTROLLER, self._epoch)
        return True

    def _try_win(self) -> str:
        """One attempt: "won", "taken" (another node holds /controller) or "race" (the epoch moved)."""
        try:
            data, stat = self._client.get(CONTROLLER_EPOCH)
            epoch, version = int(data.decode()) + 1, stat.version
        except NoNodeError:
            epoch, version = 1, -1
        body = {"version": 1, "brokerid": self.node_id, "timestamp": str(int(time.time() * 1000))}
        transaction = self._client.transaction()
        transaction.create(CONTROLLER, _dumps(body), ephemeral=True)
        if version < 0:
            transaction.create(CONTROLLER_EPOCH, str(epoch).encode())
        else:
            transaction.set_data(CONTROLLER_EPOCH, str(epoch).encode(), version=version)
        results = transaction.commit()
        failure = _failure(results)
        if failure is None:
            self._epoch = epoch
            self._epoch_version = 0 if version < 0 else results[1].version
            return "won"
        index, error = failure
        if index == 0 and isinstance(error, NodeExistsError):
            return "taken"
        if index == 1 and isinstance(error, BadVersionError | NodeExistsError | NoNodeError):
            return "race"
        raise error  # anything else is ZooKeeper refusing us (the chroot deleted, no access): retried slowly

    def _wait_for_vacancy(self, should_stop: Callable[[], bool], poll_s: float) -> None:
        """Return once /controller changed (or our connection wavered), or should_stop() is true."""
        changed = threading.Event()
        stat = self._client.exists(CONTROLLER, watch=lambda _event: changed.set())
        if stat is None:
            return
        if stat.ephemeralOwner == self._client.client_id[0]:
            # Ours from an attempt whose reply was lost, with an epoch we did not record: give it up, try again.
            self._client.delete(CONTROLLER, version=stat.version)
            return
        while not changed.wait(poll_s):  # bounded by should_stop
            if should_stop() or self._client.state != KazooState.CONNECTED:
                return  # after a session loss the watch may be gone: the caller looks again

    @property
    def controller_epoch(self) -> int:
        assert self._epoch is not None, "campaign() has not won"
        return self._epoch

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Call `callback` (on a kazoo thread, perhaps more than once) when this node stops being the controller:
        its session is lost or /controller is no longer its znode. Called at once if that already happened."""
        assert self._epoch is not None, "on_lost() after campaign() won"
        self._callbacks.append(callback)
        if self._deposed:
            callback()

    def _on_state(self, state: str) -> None:
        # kazoo's connection thread: must not block, so only flags and callbacks
        if state == KazooState.LOST and self._epoch is not None and not self._closing:
            self._lost = True
            log.error("Controller %d: ZooKeeper session lost", self.node_id)
            self._fire()

    def _on_controller_event(self, event: Any) -> None:
        # kazoo's callback thread, which close() joins: no blocking calls here, or closing would deadlock
        if self._closing:
            return
        if event.type == EventType.DELETED:  # by our session's end or by someone else: ours no more either way
            log.error("Controller %d: %s was deleted", self.node_id, CONTROLLER)
            self._fire()
        else:  # a one-shot watch: arm it again
            self._client.exists_async(CONTROLLER, watch=self._on_controller_event)

    def _fire(self) -> None:
        self._deposed = True
        for callback in list(self._callbacks):
            callback()

    # ---- metadata

    def load(self) -> list[Record]:
        """Every batch appended so far, in order; also reads the versions of the partition state znodes."""
        try:
            names = sorted(self._client.get_children(BATCHES), key=lambda name: int(name.rpartition("-")[2]))
            replies = [(f"{BATCHES}/{name}", self._client.get_async(f"{BATCHES}/{name}")) for name in names]
            records: list[Record] = []
            for path, reply in replies:
                data, _stat = reply.get()
                try:
                    records.extend(decode_batch(data))
                except (ValueError, RecordError) as exc:
                    raise MetadataStoreError(f"{self.connect}{path} is corrupt: {exc}") from exc
            image = MetadataImage.from_records(records)
            self._versions = self._read_versions(image)
        except KazooException as exc:
            raise ControllerFencedError(f"ZooKeeper at {self.connect} failed while loading: {exc!r}") from exc
        self._image = image
        self._loaded_epoch = self._epoch
        return records

    def _read_versions(self, image: MetadataImage) -> dict[str, int]:
        paths = [path for topic in image.topics_by_id.values()
                 for path in (_topic_path(topic.name), f"{_topic_path(topic.name)}/partitions")]
        paths += [path for view in image.all_partitions()
                  for path in (_partition_path(view.topic, view.partition), _state_path(view.topic, view.partition))]
        replies = [(path, self._client.exists_async(path)) for path in paths]
        stats = [(path, reply.get()) for path, reply in replies]
        return {path: stat.version for path, stat in stats if stat is not None}

    def append(self, records: Sequence[Record]) -> None:
        """Store `records` as one batch, fenced by the controller epoch; ControllerFencedError if refused."""
        assert records
        assert self._epoch is not None, "append() before campaign() won"
        assert self._image is not None and self._loaded_epoch == self._epoch, "load() after winning, then append()"
        if self._lost or self._client.state != KazooState.CONNECTED:
            raise ControllerFencedError(f"controller {self.node_id} is not connected to ZooKeeper "
                                        f"({self._client.state}); another controller may be active")
        batch = encode_batch(records)
        image = self._image.replay_all(records)
        writes = _plan(self._image, image, records, self._versions, self._epoch)
        size = len(batch) + sum(len(w.data) for w in writes)
        if size >= MAX_TRANSACTION_BYTES:  # e.g. a topic of thousands of partitions: refused, nothing stored
            raise KafkaException(errors.INVALID_REQUEST, (
                f"a metadata batch of {len(records)} records is {size} bytes with its state znodes, over ZooKeeper's "
                "1 MB request limit (chunking is not implemented): create fewer partitions at once"))
        results = self._commit(batch, writes)
        for write, result in zip(writes, results[2:], strict=True):
            if write.op == "delete":
                del self._versions[write.path]
            else:
                self._versions[write.path] = 0 if write.op == "create" else result.version
        self._image = image

    def _commit(self, batch: bytes, writes: list[_Write]) -> list[Any]:
        transaction = self._client.transaction()
        transaction.check(CONTROLLER_EPOCH, self._epoch_version)
        transaction.create(BATCH_PREFIX, batch, sequence=True)
        for write in writes:
            if write.op == "create":
                transaction.create(write.path, write.data)
            elif write.op == "set":
                transaction.set_data(write.path, write.data, version=write.version)
            else:
                transaction.delete(write.path, version=write.version)
        try:
            results: list[Any] = transaction.commit()
        except KazooException as exc:  # the outcome is unknown: stopping is the only safe answer
            raise ControllerFencedError(f"ZooKeeper at {self.connect} failed during an append: {exc!r}") from exc
        failure = _failure(results)
        if failure is not None:
            index, error = failure
            what = [CONTROLLER_EPOCH, BATCH_PREFIX, *(w.path for w in writes)][index]
            raise ControllerFencedError(f"controller {self.node_id} (epoch {self._epoch}) was fenced: "
                                        f"{what} refused the append ({type(error).__name__})")
        assert len(results) == len(writes) + 2, results
        return results

    def close(self) -> None:
        """Give up /controller if it is still ours and disconnect; idempotent."""
        if self._closing:
            return
        self._closing = True
        try:
            stat = self._client.exists(CONTROLLER) if self._epoch is not None and not self._lost else None
            if stat is not None and stat.ephemeralOwner == self._client.client_id[0]:
                self._client.delete(CONTROLLER, version=stat.version)
        except KazooException as exc:  # the session ends below anyway, and with it the ephemeral znode
            log.warning("Controller %d: could not delete %s on close: %r", self.node_id, CONTROLLER, exc)
        finally:
            self._client.stop()
            self._client.close()


def _topic_path(topic: str) -> str:
    assert topic and "/" not in topic, topic
    return f"{TOPICS}/{topic}"


def _partition_path(topic: str, partition: int) -> str:
    return f"{_topic_path(topic)}/partitions/{partition}"


def _state_path(topic: str, partition: int) -> str:
    return f"{_partition_path(topic, partition)}/state"


def _plan(old: MetadataImage, new: MetadataImage, records: Sequence[Record], versions: dict[str, int],
          controller_epoch: int) -> list[_Write]:
    """The /brokers/topics writes that mirror a batch: deletes of removed topics (children first), then topic
    znodes with new partitions, then the state of every partition the batch touched. `versions` are the zk
    versions of the znodes that exist; a znode missing from them is created."""
    existing = set(versions)
    writes: list[_Write] = []
    for topic in old.topics_by_id.values():
        if topic.topic_id not in new.topics_by_id:
            prefix = _topic_path(topic.name)
            doomed = [p for p in existing if p == prefix or p.startswith(prefix + "/")]
            for path in sorted(doomed, key=lambda p: p.count("/"), reverse=True):
                writes.append(_Write("delete", path, version=versions[path]))
                existing.discard(path)
    touched = sorted({(r.topic_id, r.partition) for r in records
                      if isinstance(r, PartitionRecord | PartitionChangeRecord) and r.topic_id in new.topics_by_id})
    for topic_id in sorted({r.topic_id for r in records if isinstance(r, PartitionRecord)} & set(new.topics_by_id)):
        topic = new.topics_by_id[topic_id]
        body = _dumps({"version": 2, "partitions": {str(p): list(reg.replicas)
                                                    for p, reg in sorted(topic.partitions.items())},
                       "adding_replicas": {}, "removing_replicas": {}})
        writes += _upsert([(_topic_path(topic.name), body), (f"{_topic_path(topic.name)}/partitions", None)],
                          versions, existing)
    for record in records:
        if isinstance(record, ClusterIdRecord):  # once, in a new store's first batch
            body = _dumps({"version": "1", "id": record.cluster_id})
            writes += _upsert([(CLUSTER_ID.rpartition("/")[0], None), (CLUSTER_ID, body)], versions, existing)
    for topic_id, partition in touched:
        topic = new.topics_by_id[topic_id]
        reg = topic.partitions[partition]
        state = _dumps({"controller_epoch": controller_epoch, "leader": reg.leader, "version": 1,
                        "leader_epoch": reg.leader_epoch, "isr": list(reg.isr)})
        writes += _upsert([(_partition_path(topic.name, partition), None),
                           (_state_path(topic.name, partition), state)], versions, existing)
    return writes


def _upsert(znodes: list[tuple[str, bytes | None]], versions: dict[str, int], existing: set[str]) -> list[_Write]:
    """Create the znodes (parents first) that do not exist, and set, version-checked, those that do and have
    data; None marks a znode that only holds children (`partitions`, `<p>`), created empty and never set."""
    assert znodes
    writes: list[_Write] = []
    for path, data in znodes:
        if path not in existing:
            writes.append(_Write("create", path, data or b""))
            existing.add(path)
        elif data is not None:
            writes.append(_Write("set", path, data, versions[path]))
    return writes
