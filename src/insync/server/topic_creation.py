"""Topics a broker creates by itself when a Metadata request names them (Kafka's `AutoTopicCreationManager`).

With `auto.create.topics.enable` (Kafka's default, true) a Metadata request that allows auto-creation and names a
legal topic nobody created makes the broker send the controller a CreateTopics for it, with the broker's own
`num.partitions` and `default.replication.factor` and no config overrides, as Kafka does. The Metadata answer
does not wait: it says LEADER_NOT_AVAILABLE (`apis.metadata`), and the client asks again until the topic and its
leaders are in the broker's image. `__consumer_offsets` is created by the group coordinator, with its own
settings, as Kafka creates internal topics with theirs.

A name is sent once at a time (clients retry their metadata every 100 ms or so while they wait); at most
IN_FLIGHT_MAX names are being created at once, and names past that wait for a later request. A refusal from the
controller (a replication factor above the live brokers, say) is logged once per name and reason, and the next
request for the name tries again, as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from insync import errors
from insync.config import AutoCreateConfig
from insync.server.client import FailoverConnection
from insync.types import OFFSETS_TOPIC
from insync.wire import topics
from insync.wire.internal import NewTopic

log = logging.getLogger("insync.broker")

IN_FLIGHT_MAX = 1000  # names being created at once
REFUSALS_REMEMBERED_MAX = 1000  # (name, reason) pairs already logged
CREATE_TIMEOUT_MS = 30_000


class TopicCreator:
    def __init__(self, config: AutoCreateConfig, controller: FailoverConnection,
                 spawn: Callable[[Coroutine[Any, Any, None]], None], create_offsets_topic: Callable[[], None]) -> None:
        self.enabled = config.enable
        self._num_partitions = config.num_partitions
        self._replication_factor = config.replication_factor
        self._controller = controller
        self._spawn = spawn
        self._create_offsets_topic = create_offsets_topic
        self._in_flight: set[str] = set()
        self._refusals_logged: set[tuple[str, str]] = set()

    def create(self, names: tuple[str, ...]) -> None:
        """Start creating `names` (legal, unknown to the image) unless they are being created already."""
        if OFFSETS_TOPIC in names:
            self._create_offsets_topic()
        room = IN_FLIGHT_MAX - len(self._in_flight)
        new = tuple(n for n in names if n != OFFSETS_TOPIC and n not in self._in_flight)[:max(0, room)]
        if not new:
            return
        self._in_flight.update(new)
        self._spawn(self._create(new))

    async def _create(self, names: tuple[str, ...]) -> None:
        body = topics.create_topics_request(
            tuple(NewTopic(n, self._num_partitions, self._replication_factor, ()) for n in names), CREATE_TIMEOUT_MS)
        try:
            response = await self._controller.request(body, CREATE_TIMEOUT_MS / 1000)
        except (ConnectionError, OSError, TimeoutError) as exc:
            log.info("Auto-creating topics %s: the controller did not answer (%s)", ", ".join(names), exc or "timeout")
            return
        finally:
            self._in_flight.difference_update(names)
        for result in response.topics:
            error = errors.by_code(int(result.error_code))
            if error in (errors.NONE, errors.TOPIC_ALREADY_EXISTS):
                continue
            refusal = (result.name, f"{error.name} {result.error_message or ''}")
            if refusal not in self._refusals_logged:
                if len(self._refusals_logged) >= REFUSALS_REMEMBERED_MAX:
                    self._refusals_logged.clear()
                self._refusals_logged.add(refusal)
                log.warning("Could not auto-create topic %s: %s (num.partitions=%d, default.replication.factor=%d)",
                            result.name, refusal[1], self._num_partitions, self._replication_factor)
