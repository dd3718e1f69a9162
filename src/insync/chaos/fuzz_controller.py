"""The controller's share of the fuzz (`fuzz.run`), and the checks that the cluster's membership came through.

Given a controller, every `CONTROLLER_EVERY`th case index goes to its listener, drawn from
`CONTROLLER_API_VERSIONS` by a like share of the workers: a case's target depends only on its index, so a reported
index replays alone. A controller without an authorizer obeys a BrokerRegistration or BrokerHeartbeat from
anyone, as Kafka's does: one naming a real broker and its epoch could fence it or shut it down. So these cases name
brokers that do not exist (`FOREIGN_BROKER_IDS`; a registration then adds a fenced broker of that id), and a case
the controller would still read as a real broker's (`names_a_broker`: a mutation can make one) is skipped.
UnregisterBroker is outside the table; nothing in the brokers' table acts on a registration. After the run: the
brokers in Metadata are those before, none was fenced (`fenced`), and a new topic is created and deleted.
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

from insync.admin import ADMIN_TIMEOUT_S, admin_client, ensure_topic, kafka_error_text
from insync.chaos.fuzz_cases import FOREIGN_BROKER_IDS, advertised_pairs
from insync.chaos.fuzz_run import Target
from insync.config import ConfigError
from insync.events import EventType
from insync.waiting import WaitTimeout
from insync.wire.versions import ADVERTISED_MIN_VERSIONS, CONTROLLER_API_VERSIONS

CONTROLLER_EVERY = 4
AFTER_TOPIC_PREFIX = "fuzz-after-"
AFTER_TOPIC_DEADLINE_S = 30.0


def goes_to_controller(index: int) -> bool:
    return index % CONTROLLER_EVERY == CONTROLLER_EVERY - 1


def workers(concurrency: int) -> tuple[int, int]:
    """(the brokers', the controller's) workers of `concurrency`, in the shares of the cases each takes."""
    assert concurrency >= 1, concurrency
    controller = max(1, concurrency // CONTROLLER_EVERY)
    return max(1, concurrency - controller), controller


def controller_target(address: tuple[str, int], brokers: Iterable[int]) -> Target:
    """The controller's listener, its cases kept off the registrations of `brokers` (module docstring)."""
    return Target((address,), CONTROLLER_API_VERSIONS, advertised_pairs(CONTROLLER_API_VERSIONS,
                                                                        ADVERTISED_MIN_VERSIONS),
                  FOREIGN_BROKER_IDS, frozenset(brokers))


def fenced(since: Mapping[Path, int], brokers: Iterable[int]) -> dict[str, int]:
    """How often each of `brokers` was fenced in the events files after `since` (each file's size then)."""
    wanted = set(brokers)
    found: Counter[str] = Counter()
    for path, offset in since.items():
        with path.open("rb") as events_file:
            events_file.seek(offset)
            lines = events_file.read().decode(errors="replace").splitlines()
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line the node was writing as we read
            if event.get("type") == str(EventType.BROKER_FENCED) and event.get("broker_id") in wanted:
                found[str(event["broker_id"])] += 1
    return dict(found)


def topic_created(bootstrap: str, replication_factor: int) -> str:
    """"ok" when a new topic can be created (led in every broker's metadata) and deleted again, else why not."""
    from confluent_kafka import KafkaException

    name = f"{AFTER_TOPIC_PREFIX}{secrets.token_hex(4)}"
    try:
        ensure_topic(bootstrap, name, 1, replication_factor, {}, AFTER_TOPIC_DEADLINE_S)
    except (ConfigError, WaitTimeout) as exc:
        return f"not created: {exc}"
    admin = admin_client(bootstrap)
    try:
        admin.delete_topics([name], operation_timeout=ADMIN_TIMEOUT_S)[name].result(timeout=ADMIN_TIMEOUT_S)
    except (KafkaException, TimeoutError) as exc:
        return f"created, not deleted: {kafka_error_text(exc)}"
    return "ok"
