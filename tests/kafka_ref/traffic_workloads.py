"""Real clients' workloads at their own defaults, recorded through the proxy (traffic_proxy.py): confluent-kafka
(librdkafka) and kafka-python, each a producer (idempotent, acks=all), a consumer group (subscribe, poll,
commit, close) and an admin client. Deterministic: fixed topic names under one prefix, fixed keys and values,
one consumer per group (a group of several would make a replay's JoinGroup wait for members that only join
later), and each workload done before the next starts."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

PREFIX = "traffic."
# Topics every cluster gets before the workloads (explicit assignments on the single broker, node 1).
TOPICS = {f"{PREFIX}orders": 3, f"{PREFIX}kp": 2}
GROUPS = (f"{PREFIX}cg", f"{PREFIX}kpg")
RECORDS = 40
POLL_DEADLINE_S = 60.0
ADMIN_TIMEOUT_S = 30.0


def _values(count: int) -> list[tuple[bytes, bytes]]:
    return [(b"k%d" % i, b"v%d" % i) for i in range(count)]


def confluent_producer(bootstrap: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for key, value in _values(RECORDS):
        producer.produce(f"{PREFIX}orders", value=value, key=key)
    assert producer.flush(ADMIN_TIMEOUT_S) == 0, "confluent-kafka: records left unacknowledged"


def confluent_consumer(bootstrap: str) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUPS[0], "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([f"{PREFIX}orders"])
        received = 0
        deadline = time.monotonic() + POLL_DEADLINE_S
        while received < RECORDS and time.monotonic() < deadline:  # bounded by the deadline
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                received += 1
        assert received == RECORDS, f"confluent-kafka consumer: {received} of {RECORDS} records"
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def confluent_admin(bootstrap: str) -> None:
    from confluent_kafka import KafkaException, TopicCollection, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"{PREFIX}admin"
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(ADMIN_TIMEOUT_S)
    calls: list[Callable[[], object]] = [
        lambda: admin.describe_topics(TopicCollection([f"{PREFIX}orders", topic])),
        lambda: admin.describe_configs([ConfigResource(ResourceType.TOPIC, f"{PREFIX}orders")]),
        lambda: {"groups": admin.list_consumer_groups()},
        lambda: admin.describe_consumer_groups([GROUPS[0], f"{PREFIX}nope"]),
        lambda: admin.list_offsets({TopicPartition(f"{PREFIX}orders", p): spec for p, spec in
                                    ((0, OffsetSpec.earliest()), (1, OffsetSpec.latest()))}),
        lambda: admin.delete_records([TopicPartition(f"{PREFIX}orders", 0, 2)]),
        lambda: admin.delete_topics([topic]),
    ]
    for call in calls:
        for future in dict(call()).values():
            # An answer with an error (the unknown group) is an exchange like any other.
            with contextlib.suppress(KafkaException):
                future.result(ADMIN_TIMEOUT_S)


def kafka_python_producer(bootstrap: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    try:
        for key, value in _values(RECORDS):
            producer.send(f"{PREFIX}kp", key=key, value=value)
        producer.flush(ADMIN_TIMEOUT_S)
    finally:
        producer.close()


def kafka_python_consumer(bootstrap: str) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUPS[1], auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        consumer.subscribe([f"{PREFIX}kp"])
        received = 0
        deadline = time.monotonic() + POLL_DEADLINE_S
        while received < RECORDS and time.monotonic() < deadline:  # bounded by the deadline
            received += sum(len(batch) for batch in consumer.poll(timeout_ms=1000).values())
        assert received == RECORDS, f"kafka-python consumer: {received} of {RECORDS} records"
        consumer.commit()
    finally:
        consumer.close()


def kafka_python_admin(bootstrap: str) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.errors import KafkaError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    topic = f"{PREFIX}kpadmin"
    try:
        for call in (lambda: admin.create_topics([NewTopic(topic, 1, 1)]),
                     lambda: admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, f"{PREFIX}kp")]),
                     admin.describe_cluster, admin.list_groups,
                     lambda: admin.describe_groups([GROUPS[1], f"{PREFIX}nope"]),
                     admin.describe_log_dirs, lambda: admin.delete_topics([topic])):
            with contextlib.suppress(KafkaError):  # an answer with an error is an exchange like any other
                call()
    finally:
        admin.close()


WORKLOADS: tuple[tuple[str, Callable[[str], None]], ...] = (
    ("confluent-kafka producer", confluent_producer),
    ("confluent-kafka consumer", confluent_consumer),
    ("confluent-kafka admin", confluent_admin),
    ("kafka-python producer", kafka_python_producer),
    ("kafka-python consumer", kafka_python_consumer),
    ("kafka-python admin", kafka_python_admin),
)
