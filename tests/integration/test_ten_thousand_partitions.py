"""10,000 partitions, RF 3 on 3 brokers, as real processes: SIGKILL and restart the controller, then a broker;
every partition is led again, as every live broker's own metadata says.

Fencing the killed broker changes every partition, more records than one metadata batch holds: the controller
commits them in several batches. A CreateTopics request of more partitions than one batch holds is refused whole
with Kafka's error. The phases' durations and the load average print with `-s`.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import start, wait_until
from insync.admin_requests import METADATA, METADATA_VERSION, request
from insync.chaos import cluster
from insync.protocol.kio import build, nested, request_class

# Minutes of both cores for the four processes (creating 30,000 replicas, then fencing a broker that is in 10,000
# ISRs): `make test-long` runs it, not make test or CI.
pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(900)]

TOPICS = {"big": 9_000, "small": 1_000}  # one CreateTopics request of 10,000 partitions, the most one may ask
LED_TIMEOUT_S = 300
# Kafka's defaults rather than the suite's short ones: a broker opening thousands of partitions at once is busy
# for seconds, and a forwarded CreateTopics may wait as long as a session.
KAFKA_TIMEOUTS = ["broker.session.timeout.ms=9000", "replica.lag.time.max.ms=30000"]
REQUEST_TIMEOUT_S = 180
# A killed broker loads its 10,000 logs (recovering their tails) before it listens, as Kafka's LogManager does before
# the socket server starts: on a loaded two-core machine that takes longer than a plain restart's deadline.
RESTART_LISTENING_S = 150


def leaders(address: str) -> list[int]:
    """The leader of every partition of TOPICS in the broker's own metadata (-1 for none, or a missing partition)."""
    cls = request_class(METADATA, METADATA_VERSION)
    body = request(address, build(cls, topics=tuple(build(nested(cls, "MetadataRequestTopic"), name=name)
                                                    for name in TOPICS), allow_auto_topic_creation=False),
                   REQUEST_TIMEOUT_S)
    out = []
    for topic in body.topics:
        known = {int(p.partition_index): int(p.leader_id) for p in topic.partitions}
        out.extend(known.get(p, -1) for p in range(TOPICS.get(topic.name, 0)))
    return out


def led_everywhere(spec: cluster.ClusterSpec, dead: int | None = None) -> bool:
    """Every live broker knows a leader other than `dead` for every partition."""
    live = [b for b in spec.brokers if b.node_id != dead]
    return all(len(found) == sum(TOPICS.values()) and all(leader not in (-1, dead) for leader in found)
               for found in (leaders(b.address) for b in live))


def timed(what: str, spec: cluster.ClusterSpec, dead: int | None = None) -> float:
    started = time.monotonic()
    wait_until(lambda: led_everywhere(spec, dead), LED_TIMEOUT_S, what)
    elapsed_s = time.monotonic() - started
    print(f"{what}: {elapsed_s:.1f} s, load average {os.getloadavg()[0]:.2f}")
    return elapsed_s


def create_topics(spec: cluster.ClusterSpec, topics: dict[str, int]) -> dict[str, Any]:
    """One CreateTopics request; each topic's exception, or None when created."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({**spec.client_settings(), "bootstrap.servers": spec.bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=count, replication_factor=3)
                                   for name, count in topics.items()], operation_timeout=REQUEST_TIMEOUT_S,
                                  request_timeout=REQUEST_TIMEOUT_S)
    outcomes: dict[str, Any] = {}
    for name, future in futures.items():
        try:
            outcomes[name] = future.result(timeout=2 * REQUEST_TIMEOUT_S)
        except Exception as exc:  # a KafkaException carrying the topic's KafkaError
            outcomes[name] = exc.args[0]
    return outcomes


def test_ten_thousand_partitions_are_led_again_after_the_controller_and_a_broker_restart(tmp_path: Path) -> None:
    spec = start(tmp_path, extra=KAFKA_TIMEOUTS)
    try:
        refused = create_topics(spec, {"too-many": 10_001})["too-many"]
        assert (refused.name(), refused.str()) == ("POLICY_VIOLATION",
                                                   "Excessively large number of partitions per request.")
        created = create_topics(spec, TOPICS)
        assert created == {"big": None, "small": None}, {k: str(v) for k, v in created.items()}
        timed("10,000 partitions created and led", spec)

        spec = cluster.stop_node(spec, cluster.CONTROLLER_ID, deadline_s=0, sig=signal.SIGKILL)
        spec = cluster.start_node(spec, cluster.CONTROLLER_ID)
        cluster.wait_listening(spec.controller)
        timed("every partition led after the controller's restart", spec)

        victim = 1
        spec = cluster.stop_node(spec, victim, deadline_s=0, sig=signal.SIGKILL)
        timed(f"every partition led again after broker {victim} was killed", spec, dead=victim)

        spec = cluster.start_node(spec, victim)
        restarted = time.monotonic()
        cluster.wait_listening(spec.node(victim), RESTART_LISTENING_S)
        print(f"broker {victim} listening again: {time.monotonic() - restarted:.1f} s, load average "
              f"{os.getloadavg()[0]:.2f}")
        timed(f"every partition led on all brokers after broker {victim}'s restart", spec)
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
