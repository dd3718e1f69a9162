"""A transactional workload run the same way on a Kafka cluster and an insync cluster; what clients see of it,
as plain data keyed by exchange name, for test_transactions_beside_kafka.py to compare.

confluent-kafka's transactional producer commits and aborts transactions on a topic whose leaders are placed the
same on both clusters (so offsets, markers included, are the same); a zombie is fenced by a new producer with its
transactional.id; a transaction is left open while ListOffsets and Fetch are asked under both isolation levels;
and the coordinator is asked the misuses a client library would let through (raw requests), each answer kept; and
a producer of transactions v2 (KIP-890: Produce v12 adds its partition, EndTxn v5 bumps the epoch) is played
with raw requests, its late batches and stale epochs included."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from differential import BATCH_TIMESTAMP_MS, CLOSED, Connection, masked, plain, request

from insync.chaos import cluster
from insync.protocol.records import RecordSpec, build_batch
from insync.waiting import wait_until

TOPIC = "tx"
ASSIGNMENT = ((1, 2, 3), (2, 3, 1), (3, 1, 2))  # partition p led by broker p + 1 on both clusters
MS = datetime.timedelta(milliseconds=1)
CLIENT_TIMEOUT_S = 60.0
COORDINATOR_WAIT_S = 60.0
READ_S = 30.0
QUIET_S = 3.0
TRANSACTION_MAX_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms default
Findings = dict[str, Any]


def run(spec: cluster.ClusterSpec) -> Findings:
    """The whole workload on one cluster, in order; every exchange's findings."""
    conns = [Connection(b.address) for b in spec.brokers]
    try:
        _create_topic(conns)
        found: Findings = {}
        found.update(_commit_and_abort(spec.bootstrap))
        found.update(_fencing(spec.bootstrap))
        found.update(_open_transaction(spec.bootstrap, conns))
        found.update(_client_misuse(spec.bootstrap))
        found.update(_raw_misuse(conns))
        found.update(_raw_v2(conns))
        for isolation in ("read_committed", "read_uncommitted"):
            found[f"consumer {isolation}: every record of {TOPIC}"] = read(spec.bootstrap, isolation)
        return found
    finally:
        for conn in conns:
            conn.close()


def _create_topic(conns: list[Connection]) -> None:
    topics = [{"name": TOPIC, "num_partitions": -1, "replication_factor": -1,
               "assignments": [{"partition_index": i, "broker_ids": list(r)} for i, r in enumerate(ASSIGNMENT)],
               "configs": [{"name": "min.insync.replicas", "value": "2"}]}]
    created = conns[0].send(request(19, 7, topics=topics, timeout=30_000 * MS))
    assert all(int(t.error_code) == 0 for t in created.topics), created

    def led() -> bool:
        answer = conns[0].send(request(3, 12, topics=[{"name": TOPIC}]))
        return answer != CLOSED and all(
            int(t.error_code) == 0 and all(p.leader_id == ASSIGNMENT[p.partition_index][0] and len(p.isr_nodes) == 3
                                           for p in t.partitions) for t in answer.topics)

    wait_until(led, 60.0, f"{TOPIC}'s leaders and full ISRs", interval_s=0.5)


def producer(bootstrap: str, transactional_id: str, **settings: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
                     **settings})


def _error(exc: KafkaException | KafkaError | None) -> Any:
    """A client error as the application sees it: its name and what the client says may be done next."""
    if exc is None:
        return None
    error = exc.args[0] if isinstance(exc, KafkaException) else exc
    return {"name": error.name(), "fatal": error.fatal(), "retriable": error.retriable(),
            "abortable": error.txn_requires_abort()}


def _produce(p: Producer, values: list[tuple[int, bytes]]) -> None:
    for partition, value in values:
        p.produce(TOPIC, key=b"k", value=value, partition=partition)
    assert p.flush(CLIENT_TIMEOUT_S) == 0


def _commit_and_abort(bootstrap: str) -> Findings:
    """Commit, abort, and commit again on every partition; then a transaction on one partition only."""
    p = producer(bootstrap, "committer")
    p.init_transactions(CLIENT_TIMEOUT_S)
    for round_, commit in enumerate((True, False, True)):
        p.begin_transaction()
        _produce(p, [(i % 3, b"r%d-%d" % (round_, i)) for i in range(9)])
        (p.commit_transaction if commit else p.abort_transaction)(CLIENT_TIMEOUT_S)
    p.begin_transaction()
    _produce(p, [(0, b"only-p0-%d" % i) for i in range(2)])
    p.commit_transaction(CLIENT_TIMEOUT_S)
    return {}


def _fencing(bootstrap: str) -> Findings:
    """A zombie's open transaction is aborted by a new producer with its id; the zombie's next send and its
    commit fail as fenced."""
    zombie = producer(bootstrap, "fenced")
    zombie.init_transactions(CLIENT_TIMEOUT_S)
    zombie.begin_transaction()
    _produce(zombie, [(1, b"zombie-1")])
    current = producer(bootstrap, "fenced")
    current.init_transactions(CLIENT_TIMEOUT_S)
    current.begin_transaction()
    _produce(current, [(1, b"current-1")])
    current.commit_transaction(CLIENT_TIMEOUT_S)
    # No delivery callback: confluent-kafka calls it with the fatal error already raised (a SystemError).
    zombie.produce(TOPIC, key=b"k", value=b"zombie-2", partition=2)
    return {"fencing: the zombie's flush": _raised(lambda: zombie.flush(CLIENT_TIMEOUT_S)),
            "fencing: the zombie's commit": _raised(lambda: zombie.commit_transaction(CLIENT_TIMEOUT_S))}


def _raised(call: Callable[[], object]) -> Any:
    """The client error `call` raises, None if it returns."""
    try:
        call()
    except KafkaException as exc:
        return _error(exc)
    return None


def _open_transaction(bootstrap: str, conns: list[Connection]) -> Findings:
    """While a transaction on partition 1 is open: ListOffsets latest and a Fetch from 0, under both isolation
    levels, at the partition's leader; then the same after it commits."""
    p = producer(bootstrap, "open")
    p.init_transactions(CLIENT_TIMEOUT_S)
    p.begin_transaction()
    _produce(p, [(1, b"open-%d" % i) for i in range(4)])
    leader = conns[ASSIGNMENT[1][0] - 1]
    found = _partition_views(leader, "while a transaction is open")
    p.commit_transaction(CLIENT_TIMEOUT_S)
    # EndTxn is answered once the commit is decided; the markers, and with them the last stable offset, follow.
    wait_until(lambda: _latest(leader, 0) == _latest(leader, 1), 30.0, "the commit marker below the high watermark")
    found.update(_partition_views(leader, "after it commits"))
    return found


def _list_latest(leader: Connection, isolation: int) -> Any:
    return leader.send(request(2, 7, replica_id=-1, isolation_level=isolation, topics=[
        {"name": TOPIC, "partitions": [{"partition_index": 1, "timestamp": -1, "current_leader_epoch": -1}]}]))


def _latest(leader: Connection, isolation: int) -> int:
    return int(_list_latest(leader, isolation).topics[0].partitions[0].offset)


def _partition_views(leader: Connection, when: str) -> Findings:
    found: Findings = {}
    for isolation, name in ((0, "read_uncommitted"), (1, "read_committed")):
        found[f"ListOffsets latest, {name}, {when}"] = masked(plain(_list_latest(leader, isolation)))
        fetched = leader.send(request(1, 12, replica_id=-1, max_wait=0 * MS, min_bytes=0, max_bytes=1 << 20,
                                      isolation_level=isolation, session_epoch=-1, topics=[
            {"topic": TOPIC, "partitions": [{"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                             "current_leader_epoch": -1, "log_start_offset": -1}]}]))
        found[f"Fetch from 0, {name}, {when}"] = _fetch_view(fetched)
    return found


def _fetch_view(fetched: Any) -> Any:
    """A Fetch answer without its records' bytes (batch timestamps differ): the offsets and aborted lists."""
    if fetched == CLOSED:
        return CLOSED
    view = []
    for topic in fetched.responses:
        for p in topic.partitions:
            aborted = [{"first_offset": int(a.first_offset)} for a in p.aborted_transactions or ()]
            view.append({"error_code": int(p.error_code), "high_watermark": int(p.high_watermark),
                         "last_stable_offset": int(p.last_stable_offset), "aborted_transactions": aborted,
                         "record_bytes_present": bool(p.records)})
    return view


def _client_misuse(bootstrap: str) -> Findings:
    found: Findings = {}
    p = producer(bootstrap, "misuse")
    p.init_transactions(CLIENT_TIMEOUT_S)
    found["client: commit without begin"] = _raised(lambda: p.commit_transaction(CLIENT_TIMEOUT_S))
    too_long = producer(bootstrap, "too-long", **{"transaction.timeout.ms": TRANSACTION_MAX_TIMEOUT_MS + 1})
    found["client: transaction.timeout.ms above transaction.max.timeout.ms"] = _raised(
        lambda: too_long.init_transactions(CLIENT_TIMEOUT_S))
    return found


def coordinator(conns: list[Connection], transactional_id: str, key_type: int = 1) -> Connection:
    """The connection to `transactional_id`'s coordinator (a group's with `key_type` 0), once it has one (the
    first ask creates the topic)."""
    def found() -> Any:
        answer = conns[0].send(request(10, 3, key=transactional_id, key_type=key_type))
        return answer if answer != CLOSED and int(answer.error_code) == 0 else None

    node_id = int(wait_until(found, COORDINATOR_WAIT_S, f"a coordinator for {transactional_id!r}",
                             interval_s=0.5).node_id)
    return conns[node_id - 1]  # node ids are 1..n on both launchers


def _ask(conn: Connection, body: Any, retries: int = 20) -> Any:
    """`body`'s answer, asked again while the coordinator says it is loading or busy."""
    answer = conn.send(body)
    for _ in range(retries):  # bounded
        if answer == CLOSED or int(getattr(answer, "error_code", 0)) not in (14, 51):
            break
        time.sleep(0.5)
        answer = conn.send(body)
    return answer


def _raw_misuse(conns: list[Connection]) -> Findings:
    """The coordinator's and a leader's answers to misuse a client library would not send."""
    tid = "raw"
    coord = coordinator(conns, tid)
    found: Findings = {"InitProducerId: a timeout above transaction.max.timeout.ms": masked(plain(_ask(coord, request(
        22, 4, transactional_id=tid, transaction_timeout=(TRANSACTION_MAX_TIMEOUT_MS + 1) * MS, producer_id=-1,
        producer_epoch=-1))))}
    first = _ask(coord, request(22, 4, transactional_id=tid, transaction_timeout=60_000 * MS, producer_id=-1,
                                producer_epoch=-1))
    found["InitProducerId: a new transactional id"] = masked(plain(first))
    pid, epoch = int(first.producer_id), int(first.producer_epoch)
    txn = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch}
    found["EndTxn: commit with no transaction begun"] = plain(_ask(coord, request(26, 3, **txn, committed=True)))
    found["EndTxn: an unknown producer id"] = plain(_ask(coord, request(
        26, 3, transactional_id=tid, producer_id=pid + 1000, producer_epoch=epoch, committed=False)))
    records = build_batch([RecordSpec(key=b"k", value=b"unadded")], base_timestamp=BATCH_TIMESTAMP_MS,
                          producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True)
    produced = conns[ASSIGNMENT[0][0] - 1].send(request(0, 9, transactional_id=tid, acks=-1, timeout=10_000 * MS,
        topic_data=[{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}]))
    found["Produce: a transactional batch to a partition not added"] = masked(plain(produced))
    found["AddPartitionsToTxn: an unknown topic"] = plain(_ask(coord, request(
        24, 3, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": "no-such-topic", "partitions": [0]}, {"name": TOPIC, "partitions": [0]}])))
    again = _ask(coord, request(22, 4, transactional_id=tid, transaction_timeout=60_000 * MS, producer_id=-1,
                                producer_epoch=-1))
    found["InitProducerId: the same id again"] = masked(plain(again))
    found["AddPartitionsToTxn: the fenced epoch"] = plain(_ask(coord, request(
        24, 3, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": TOPIC, "partitions": [0]}])))
    found["EndTxn: the fenced epoch"] = plain(_ask(coord, request(26, 3, **txn, committed=True)))
    return found


def _produce_raw(conn: Connection, version: int, tid: str, pid: int, epoch: int, sequence: int, value: str,
             partition: int = 0) -> Any:
    """A transactional batch of one record, asked again while its leader answers CONCURRENT_TRANSACTIONS (the
    previous transaction's markers being written), as a producer of transactions v2 retries it."""
    records = build_batch([RecordSpec(key=b"k", value=value.encode())], base_timestamp=BATCH_TIMESTAMP_MS,
                          producer_id=pid, producer_epoch=epoch, base_sequence=sequence, is_transactional=True)
    body = request(0, version, transactional_id=tid, acks=-1, timeout=10_000 * MS,
                   topic_data=[{"name": TOPIC, "partition_data": [{"index": partition, "records": records}]}])
    answer = conn.send(body)
    for _ in range(20):  # bounded
        codes = [] if answer == CLOSED else [int(p.error_code) for t in answer.responses
                                             for p in t.partition_responses]
        if 51 not in codes:
            break
        time.sleep(0.5)
        answer = conn.send(body)
    return masked(plain(answer))


def _txn_offset_commit(conns: list[Connection], tid: str, pid: int, epoch: int) -> Any:
    """A TxnOffsetCommit v5 of a new group, asked again (its coordinator found again) while the group's offsets
    partition is not ready yet on its coordinator, as a client retries."""
    group = f"{tid}-group"
    body = request(28, 5, transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
                   generation_id=-1, member_id="", group_instance_id=None,
                   topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                           "committed_leader_epoch": -1, "committed_metadata": ""}]}])
    answer = coordinator(conns, group, key_type=0).send(body)
    for _ in range(20):  # bounded
        codes = [] if answer == CLOSED else [int(p.error_code) for t in answer.topics for p in t.partitions]
        if not set(codes) & {14, 15, 16}:  # loading, not available, not the coordinator
            break
        time.sleep(0.5)
        answer = coordinator(conns, group, key_type=0).send(body)
    return plain(answer)


def _raw_v2(conns: list[Connection]) -> Findings:
    """Transactions v2 as a client of them sends it: each EndTxn answers the next epoch, which the markers carry,
    so the old epoch's late batch is refused and cannot open a hanging transaction."""
    tid = "raw-v2"
    coord, leader = coordinator(conns, tid), conns[ASSIGNMENT[0][0] - 1]
    first = _ask(coord, request(22, 5, transactional_id=tid, transaction_timeout=60_000 * MS, producer_id=-1,
                                producer_epoch=-1))
    pid = int(first.producer_id)
    found: Findings = {}

    def end(name: str, epoch: int, commit: bool) -> None:
        found[f"EndTxn v5: {name}"] = masked(plain(_ask(coord, request(
            26, 5, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit))))

    end("an abort with no transaction begun", 0, False)
    found["Produce v12: the first batch adds its partition"] = _produce_raw(leader, 12, tid, pid, 1, 0, "v2-committed")
    end("commit", 1, True)
    end("the commit again, a retry", 1, True)
    found["Produce v12: the old epoch's late batch"] = _produce_raw(leader, 12, tid, pid, 1, 1, "v2-late")
    found["Produce v11: a batch to a partition not added"] = _produce_raw(
        conns[ASSIGNMENT[1][0] - 1], 11, tid, pid, 2, 0, "v2-unadded", partition=1)
    found["Produce v12: the next transaction in the new epoch"] = _produce_raw(leader, 12, tid, pid, 2, 0, "v2-aborted")
    found["TxnOffsetCommit v5: adds the offsets partition"] = _txn_offset_commit(conns, tid, pid, 2)
    end("abort", 2, False)
    end("the abort again, a retry", 2, False)  # answered once the markers are written
    end("a fenced epoch", 1, False)
    end("commit after the abort", 3, True)
    return found


def read(bootstrap: str, isolation: str, topic: str = TOPIC, partitions: int = 3) -> list[tuple[int, int, str]]:
    """Every (partition, offset, value) an assigned consumer of `isolation` reads from the beginning."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, int, str]] = []
    last_read = [time.monotonic()]

    def quiet() -> bool:
        """Read what came; true once nothing has come for QUIET_S (the log read to its end)."""
        messages = [m for m in consumer.consume(num_messages=500, timeout=0.5) if m.error() is None]
        if messages:
            last_read[0] = time.monotonic()
        got.extend((int(m.partition() or 0), int(m.offset() or 0), (m.value() or b"").decode()) for m in messages)
        return time.monotonic() - last_read[0] >= QUIET_S

    try:
        wait_until(quiet, READ_S, f"{isolation}: the records of {topic} read to the end", interval_s=0.05)
    finally:
        consumer.close()
    return sorted(got)
