"""What the broker and controller roles of a node share: the cluster id, the dispatcher the listener calls (API
versions, per-API request metrics), building listeners and TLS contexts, and the node's notion of now.

Its own module so that `node.py`, the entry point that starts the roles, imports the roles and nothing imports
it back.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from typing import Any

from insync.clock import Clock
from insync.config import BrokerConfig
from insync.protocol.codec import DecodedRequest
from insync.security.listeners import Endpoint
from insync.security.sasl_client import SaslCredentials
from insync.security.scram import ScramCredential, ScramMechanism
from insync.server.acceptor import ConnectionQuotas
from insync.server.listener import Listener
from insync.server.metrics import NodeMetrics
from insync.server.request_queue import RequestQueue
from insync.server.sasl_gate import client_credentials, gate_factory
from insync.server.session import Session
from insync.server.tls import client_tls, server_tls
from insync.wire import versions

API_NAMES: dict[int, str] = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 18: "ApiVersions", 19: "CreateTopics",
    20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    32: "DescribeConfigs", 56: "AlterPartition", 60: "DescribeCluster", 62: "BrokerRegistration",
    63: "BrokerHeartbeat", 8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup",
    12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
}


class MeteredDispatcher:
    """What both roles give the listener: their ApiVersions table, the error-35 answers outside it, and per-API
    request counts and latencies around the role's own `_handle`."""

    api_versions: Mapping[int, tuple[int, int]]
    clock: Clock
    metrics: NodeMetrics

    def supported_versions(self) -> dict[int, tuple[int, int]]:
        return dict(self.api_versions)

    def unsupported_response(self, api_key: int, api_version: int) -> Any | None:
        return versions.unsupported_api_response(api_key, api_version, self.api_versions)

    def scram_credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        """A user's SCRAM credential in this node's metadata image, for its SASL listeners."""
        raise NotImplementedError

    def observe_authentication(self, listener: str, succeeded: bool) -> None:
        self.metrics.observe_authentication(listener, succeeded)

    async def handle(self, request: DecodedRequest, session: Session) -> Any:
        start = self.clock.monotonic_ms()
        try:
            return await self._handle(request, session)
        finally:
            self.metrics.observe_request(API_NAMES.get(request.api_key, str(request.api_key)),
                                         self.clock.monotonic_ms() - start)

    async def _handle(self, request: DecodedRequest, session: Session) -> Any:
        """The response body to `request` from the client of `session`, or None for none."""
        raise NotImplementedError


def make_listener(dispatcher: MeteredDispatcher, endpoint: Endpoint, config: BrokerConfig, quotas: ConnectionQuotas,
                  queue: RequestQueue, protected: bool = False) -> Listener:
    """A listener for `endpoint`, with TLS (its `ssl.*` settings) when its security protocol has it, a SASL gate
    on each connection when it is SASL_PLAINTEXT or SASL_SSL, and the node's connection `quotas` (a `protected`
    listener, the inter-broker one, accepts beyond max.connections)."""
    gate = gate_factory(config.sasl(endpoint.name), dispatcher.supported_versions(), dispatcher.scram_credential,
                        dispatcher.observe_authentication) if endpoint.security_protocol.startswith("SASL_") else None
    return Listener(dispatcher, endpoint.host, endpoint.port, config.sockets.request_max_bytes,
                    config.sockets.send_buffer_bytes, name=endpoint.name,
                    security_protocol=endpoint.security_protocol,
                    tls=server_tls(config, endpoint.name, sasl=gate is not None) if endpoint.uses_tls else None,
                    gate=gate, backlog=config.sockets.listen_backlog_size, quotas=quotas, protected=protected,
                    idle_ms=config.sockets.connections_max_idle_ms, queue=queue)


def client_tls_for(config: BrokerConfig, listener: str, security_protocol: str) -> ssl.SSLContext | None:
    """The TLS context for this node's connections to `listener`, None when its protocol has no TLS."""
    return client_tls(config, listener) if security_protocol.endswith("SSL") else None


def client_sasl_for(config: BrokerConfig, listener: str, security_protocol: str,
                    to_controller: bool) -> SaslCredentials | None:
    """This node's SASL credentials for its connections to `listener` (of the controllers, or of its peers), None
    when its protocol has no SASL."""
    if not security_protocol.startswith("SASL_"):
        return None
    return client_credentials(config.sasl(listener), *config.sasl_mechanisms.of(to_controller))


def librdkafka_settings(config: BrokerConfig, endpoint: Endpoint, to_controller: bool) -> dict[str, str]:
    """This node's client settings for `endpoint` in librdkafka's names, for the confluent-kafka clients a node
    runs itself (the __insync_events producer): its TLS files and SASL credentials, as its own connections use."""
    settings = {"security.protocol": endpoint.security_protocol}
    if endpoint.uses_tls:
        tls = config.tls(endpoint.name)
        pairs = (("ssl.ca.location", tls.truststore_location), ("ssl.ca.pem", tls.truststore_certificates),
                 ("ssl.certificate.location", tls.keystore_location), ("ssl.key.location", tls.keystore_location),
                 ("ssl.key.password", tls.key_password),
                 ("ssl.endpoint.identification.algorithm", tls.endpoint_identification_algorithm or "none"))
        settings.update({key: str(value) for key, value in pairs if value is not None})
    credentials = client_sasl_for(config, endpoint.name, endpoint.security_protocol, to_controller)
    if credentials is not None:
        settings.update({"sasl.mechanism": credentials.mechanism, "sasl.username": credentials.username,
                         "sasl.password": credentials.password})
    return settings


def steady_now(clock: Clock) -> Callable[[], int]:
    """The cores' time: the wall clock when the node starts, advanced by the monotonic clock from then on. Timers,
    ISR lag, sessions and timeouts measure intervals, which a step of the wall clock must not change (forward, it
    would expire every session at once; backward, it would stop every timer); stamps still read as wall times.
    Only storage compares record timestamps with the wall clock itself (retention, compaction lag)."""
    offset_ms = clock.now_ms() - clock.monotonic_ms()

    def now() -> int:
        return clock.monotonic_ms() + offset_ms

    return now
