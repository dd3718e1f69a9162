"""The tools' Kafka admin client: create a topic and wait for its leaders, describe every partition.

Shared by the command-line tools (`insync topics`, `insync groups`, `insync cluster status`), the chaos harness,
the benchmarks and the demo, so none of them imports another's command module. It speaks only the Kafka protocol
(confluent-kafka's AdminClient, and DescribeTopicPartitions through `admin_requests` for the ELR it drops), so it
works against any Kafka-compatible cluster. Blocking; every call is bounded by `ADMIN_TIMEOUT_S`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from insync import admin_requests, command_config, errors
from insync.config import ConfigError
from insync.waiting import wait_until

ADMIN_TIMEOUT_S = 15.0
# Partitions one request creates or adds: Kafka's controller and insync's refuse a user operation of more than
# 10,000 metadata records, and a larger topic is grown in steps (insync's controller writes several a partition).
CREATE_PARTITIONS_MAX = 2_000
T = TypeVar("T")


def admin_client(bootstrap: str) -> Any:
    """The tools' AdminClient. Keep it referenced while its futures are pending."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(command_config.confluent({"bootstrap.servers": bootstrap,
                                                 "socket.timeout.ms": int(ADMIN_TIMEOUT_S * 1000)}))


def kafka_error_text(exc: Exception) -> str:
    """"NAME: text" of the KafkaError a confluent-kafka exception carries (the broker's error name)."""
    arg = exc.args[0] if exc.args else exc
    name = getattr(arg, "name", None)
    text = getattr(arg, "str", None)
    if callable(name) and callable(text):
        return f"{name()}: {text()}"
    if str(exc):
        return str(exc)
    if isinstance(exc, TimeoutError):  # a future that timed out says nothing: against a controller's address, say
        return f"{type(exc).__name__}: no answer from the cluster in time"
    return type(exc).__name__


def ensure_topic(bootstrap: str, name: str, partitions: int, replication_factor: int,
                 configs: dict[str, str], deadline_s: float = 30.0) -> None:
    """Create the topic unless it exists (a new one of more than `CREATE_PARTITIONS_MAX` partitions in steps), then
    wait until every partition has a leader in every broker's metadata. An existing topic is never changed."""
    from confluent_kafka.admin import NewPartitions, NewTopic  # type: ignore[attr-defined]

    admin = admin_client(bootstrap)
    created = min(partitions, CREATE_PARTITIONS_MAX)
    future = admin.create_topics([NewTopic(name, num_partitions=created, replication_factor=replication_factor,
                                           config=configs)], operation_timeout=ADMIN_TIMEOUT_S)[name]
    try:
        future.result(timeout=ADMIN_TIMEOUT_S)
    except Exception as exc:
        if "TOPIC_ALREADY_EXISTS" not in kafka_error_text(exc):
            raise ConfigError(f"cannot create topic {name}: {kafka_error_text(exc)}") from None
        created = partitions  # someone else's topic: left as it is
    while created < partitions:  # bounded: each step adds CREATE_PARTITIONS_MAX
        created = min(partitions, created + CREATE_PARTITIONS_MAX)
        grown = admin.create_partitions([NewPartitions(name, created)], operation_timeout=ADMIN_TIMEOUT_S)[name]
        try:
            grown.result(timeout=ADMIN_TIMEOUT_S)
        except Exception as exc:
            raise ConfigError(f"cannot add partitions to topic {name}: {kafka_error_text(exc)}") from None
    waiting_for = "the cluster's metadata"

    def led_everywhere() -> bool:
        nonlocal waiting_for
        metadata = admin.list_topics(name, timeout=ADMIN_TIMEOUT_S)
        topic = metadata.topics.get(name)
        if topic is None or topic.error is not None or len(topic.partitions) != partitions or any(
                p.leader < 0 for p in topic.partitions.values()):
            return False
        behind = _brokers_behind(metadata.brokers.values(), name, partitions, min(ADMIN_TIMEOUT_S, deadline_s))
        waiting_for = f"broker{'s' if len(behind) > 1 else ''} {', '.join(map(str, behind))}"
        return not behind

    wait_until(led_everywhere, deadline_s,
               lambda: f"topic {name} with a leader for every partition in {waiting_for}")


def _brokers_behind(brokers: Iterable[Any], name: str, partitions: int, timeout_s: float) -> list[int]:
    """The brokers whose own metadata does not yet show a leader for every partition of the topic: metadata reaches
    brokers asynchronously, so a client that asks another broker next could still be told the topic is unknown
    (Kafka's own tests wait the same way, `waitForAllPartitionsMetadata`). A broker that cannot be reached, or
    does not answer within `timeout_s`, is behind."""
    behind = []
    for broker in brokers:
        try:
            known = admin_requests.leaders_known(f"{broker.host}:{broker.port}", name, timeout_s)
        except OSError:  # ConnectionError too
            known = None
        if known != partitions:
            behind.append(int(broker.id))
    return sorted(behind)


@dataclass(frozen=True, slots=True)
class PartitionRow:
    topic: str
    topic_id: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int
    elr: tuple[int, ...] | None = None  # None: the cluster does not answer DescribeTopicPartitions (Kafka < 3.7)
    last_known_elr: tuple[int, ...] = ()
    reassignment: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # (adding, removing) while reassigned

    def matches(self, under_replicated: bool, under_min_isr: bool, unavailable: bool) -> bool:
        if not (under_replicated or under_min_isr or unavailable):
            return True
        return ((under_replicated and len(self.isr) < len(self.replicas))
                or (under_min_isr and len(self.isr) < self.min_isr)
                or (unavailable and self.leader < 0))

    @property
    def replication_factor(self) -> int:
        """Kafka's: while a reassignment runs, the replicas it keeps (those being removed do not count)."""
        return len(self.replicas) - (0 if self.reassignment is None else len(self.reassignment[1]))

    def line(self) -> str:
        return (f"\tTopic: {self.topic}\tTopicId: {self.topic_id}\tPartition: {self.partition}"
                f"\tLeader: {self.leader if self.leader >= 0 else 'none'}"
                f"\tReplicas: {','.join(map(str, self.replicas))}\tIsr: {','.join(map(str, self.isr))}"
                + ("" if self.reassignment is None else f"\tAdding Replicas: {','.join(map(str, self.reassignment[0]))}"
                   f"\tRemoving Replicas: {','.join(map(str, self.reassignment[1]))}")
                + ("" if self.elr is None else f"\tElr: {','.join(map(str, self.elr))}"
                   f"\tLastKnownElr: {','.join(map(str, self.last_known_elr))}"))


def describe_rows(bootstrap: str, names: Iterable[str] = ()) -> list[PartitionRow]:
    """Every partition of the named topics (all topics when none are named), with its topic's min ISR."""
    admin = admin_client(bootstrap)
    metadata = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    wanted = list(names) or sorted(metadata.topics)
    unknown = [name for name in wanted if name not in metadata.topics]
    if unknown:
        raise ConfigError(f"unknown topic{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
    min_isr = _min_isr_by_topic(admin, wanted)
    topic_ids = _topic_ids(admin, wanted)
    elr = _elr_by_partition(bootstrap, wanted)
    reassigning = _reassignments(bootstrap)
    rows = []
    for name in wanted:
        topic = metadata.topics[name]
        for pid in sorted(topic.partitions):
            partition = topic.partitions[pid]
            elr_row, last_known = elr.get((name, pid), (None, ()))
            rows.append(PartitionRow(name, topic_ids.get(name, ""), pid, partition.leader,
                                     tuple(partition.replicas), tuple(partition.isrs), min_isr.get(name, 1),
                                     elr_row, last_known, reassigning.get((name, pid))))
    return rows



def _elr_by_partition(bootstrap: str, names: list[str]
                      ) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
    """(ELR, last known ELR) per partition from DescribeTopicPartitions, which confluent-kafka sends for
    `describe_topics` but whose ELR it drops; empty when no bootstrap broker answers it."""
    described = first_answer(bootstrap,
                              lambda a: admin_requests.describe_topic_partitions(a, names, ADMIN_TIMEOUT_S)[0])
    return {(d.topic, d.partition): (d.elr, d.last_known_elr) for d in described or ()}


def _reassignments(bootstrap: str) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
    """(adding, removing) replicas of each partition being reassigned, from ListPartitionReassignments, as
    kafka-topics.sh shows them; empty when no bootstrap broker answers it."""
    answer = first_answer(bootstrap, lambda a: admin_requests.list_partition_reassignments(a, ADMIN_TIMEOUT_S))
    if answer is None or answer[0] is not errors.NONE:
        return {}
    return {(r.topic, r.partition): (r.adding, r.removing) for r in answer[1]}


def first_answer(bootstrap: str, ask: Callable[[str], T]) -> T | None:
    """`ask`'s answer from the first bootstrap broker that gives one; None when none does (unreachable, or a broker
    without the API, which closes the connection)."""
    for address in bootstrap.split(","):
        try:
            return ask(address.strip())
        except OSError:
            continue
    return None


def _topic_ids(admin: Any, names: list[str]) -> dict[str, str]:
    from confluent_kafka import TopicCollection

    result: dict[str, str] = {}
    if not names:
        return result
    for name, future in admin.describe_topics(TopicCollection(names), request_timeout=ADMIN_TIMEOUT_S).items():
        try:
            result[name] = str(future.result(timeout=ADMIN_TIMEOUT_S).topic_id or "")
        except Exception:
            continue  # brokers without topic ids: the column stays empty
    return result


def _min_isr_by_topic(admin: Any, names: list[str]) -> dict[str, int]:
    from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]

    result: dict[str, int] = {}
    if not names:
        return result
    futures = admin.describe_configs([ConfigResource("topic", name) for name in names],
                                     request_timeout=ADMIN_TIMEOUT_S)
    for resource, future in futures.items():
        try:
            entries = future.result(timeout=ADMIN_TIMEOUT_S)
        except Exception:
            continue  # a broker without DescribeConfigs: fall back to Kafka's default of 1
        entry = entries.get("min.insync.replicas")
        if entry is not None and entry.value is not None:
            result[resource.name] = int(entry.value)
    return result
