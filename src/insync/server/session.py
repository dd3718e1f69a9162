"""A client connection as request handlers see it: where it comes from, the listener it came in on, and who it is.

The listener makes one `Session` per connection and hands it with every request. `principal` is the one field that
changes: ANONYMOUS until authentication says otherwise (a TLS client certificate at accept, SASL once its
exchange completes), then read by every handler (the authorizer, the logs). It is the same object for the
connection's whole life, so a handler holding it sees a re-authentication.
"""

from __future__ import annotations

from dataclasses import dataclass

from insync.security.listeners import Endpoint
from insync.security.principal import ANONYMOUS, KafkaPrincipal


@dataclass(slots=True)
class Session:
    peer: str  # host:port of the client
    listener: Endpoint  # the listener's bound endpoint (its name picks the advertised address Metadata answers)
    principal: KafkaPrincipal = ANONYMOUS

    @property
    def client_host(self) -> str:
        """The client's address without its port, as Kafka shows a member's host (`/127.0.0.1`)."""
        return "/" + self.peer.rpartition(":")[0]
