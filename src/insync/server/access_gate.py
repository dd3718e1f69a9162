"""The broker's authorization gate: the `wire.authorization` checks around its routes, and their record.

With `authorizer.class.name` set, `answer` refuses what the principal may not ask (`wire.access_refusals`),
else lets the route answer and shows the principal only what it may see (`wire.access_views`); `checked` gives
Produce, Fetch and the queries their per-topic and per-request refusals. Every denial goes to the
`kafka.authorizer.logger` logger at INFO in Kafka's audit wording (so a log4j-style configuration that routes
that logger to its own file works the same way) and to events.jsonl as a `denied` event. Without an authorizer
`access` is None and nothing here runs.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from insync import errors
from insync.config import BrokerConfig
from insync.events import Event, EventType
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.server.event_log import EventLog
from insync.server.session import Session
from insync.wire import access_refusals, access_views, acls, versions
from insync.wire.authorization import (
    TOPIC_OPERATIONS,
    Authorization,
    RequestAccess,
    deny_partitions,
    deny_topics,
    request_error,
)
from insync.wire.entities import Decoded
from insync.wire.metadata import MetadataQuery

authorizer_log = logging.getLogger("kafka.authorizer.logger")  # Kafka's logger name
ACL_APIS = frozenset((versions.DESCRIBE_ACLS, versions.CREATE_ACLS, versions.DELETE_ACLS))


class AccessGate:
    def __init__(self, config: BrokerConfig, broker_id: int, event_log: EventLog, now: Callable[[], int],
                 image: Callable[[], MetadataImage]) -> None:
        self.config = config
        self._image = image  # the broker's current metadata image, whose ACLs decide
        self.authorization = Authorization(config.authorizer)
        self._broker_id = broker_id
        self._event_log = event_log
        self._now = now

    @property
    def enabled(self) -> bool:
        return self.authorization.enabled

    def access(self, image: MetadataImage, request: DecodedRequest, session: Session) -> RequestAccess | None:
        """The request's view of the authorizer (None without one), for the connection's principal."""
        return self.authorization.access(image, session.principal, session.peer.rpartition(":")[0], request.api_key)

    async def answer(self, request: DecodedRequest, session: Session,
                     route: Callable[[DecodedRequest], Awaitable[Any]]) -> Any:
        """The answer to `request`: the route's, as far as the principal may ask and see. The ACL APIs are refused
        without an authorizer (SECURITY_DISABLED, as Kafka's); DescribeAcls is answered here from the image, the
        other two by the controller."""
        if request.api_key in ACL_APIS and not self.enabled:
            return acls.refuse_disabled(request)
        image = self._image()
        access = self.access(image, request, session)
        if access is None:
            return await route(request)
        try:
            refused = access_refusals.refusal(request, access, self.config, image)
            if isinstance(refused, access_refusals.Split):  # some topics refused, the others go on
                return refused.merge(await route(refused.permitted))
            if refused is not None:
                return refused
            if request.api_key == versions.DESCRIBE_ACLS:
                return acls.describe_acls(request, image)
            return access_views.view(request, await route(request), access)
        finally:
            self.note(access)

    def controller_refusal(self, request: DecodedRequest, session: Session) -> Any | None:
        """At a controller: the refusal of a principal without ClusterAction (`access_refusals`), or None."""
        access = self.access(self._image(), request, session)
        if access is None:
            return None
        try:
            return access_refusals.controller_refusal(request, access, self.config, self._image())
        finally:
            self.note(access)

    def metadata_query(self, request: DecodedRequest, query: MetadataQuery, session: Session, image: MetadataImage
                       ) -> tuple[MetadataQuery, tuple[str, ...], RequestAccess | None]:
        """The Metadata query without the topics the principal may not see, those, and the access to answer with
        (`metadata_view`)."""
        access = self.access(image, request, session)
        if access is None:
            return query, (), None
        return *access_views.metadata_query(query, access, image), access

    def metadata_view(self, request: DecodedRequest, answer: Any, access: RequestAccess | None,
                      denied: tuple[str, ...]) -> Any:
        if access is None:
            return answer
        self.note(access)
        return access_views.metadata_view(request, answer, access, denied)

    def checked(self, decoded: Decoded[Any], request: DecodedRequest, session: Session) -> Decoded[Any]:
        """`decoded` with the refusals the principal earns: the whole request's (a follower fetch without
        CLUSTER_ACTION, ...) or its topics' (`deny_topics`)."""
        access = self.access(self._image(), request, session)
        if access is None or decoded.error is not errors.NONE:
            return decoded
        try:
            error = request_error(request, access)
            if error is not errors.NONE and request.api_key == versions.PRODUCE:
                return deny_partitions(decoded, error)
            if error is not errors.NONE:
                return dataclasses.replace(decoded, error=error)
            operation = TOPIC_OPERATIONS.get(request.api_key)
            return decoded if operation is None else deny_topics(decoded, access, operation)
        finally:
            self.note(access)

    def note(self, access: RequestAccess) -> None:
        """Each refusal in the authorizer log and as a `denied` event (once: the list is emptied)."""
        if not access.denials:
            return
        now_ms = self._now()
        for denial in access.denials:
            authorizer_log.info(denial.message)
        self._event_log.write(Event(now_ms, self._broker_id, EventType.DENIED, fields={
            "principal": d.principal, "host": d.host, "operation": d.operation, "resource_type": d.resource_type,
            "resource": d.resource, "api": d.api}) for d in access.denials)
        access.denials.clear()
