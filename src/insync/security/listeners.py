"""A node's listeners, as Kafka configures them: `listeners`, `advertised.listeners`,
`listener.security.protocol.map`, `inter.broker.listener.name` (or `security.inter.broker.protocol`) and
`controller.listener.names`.

Each listener is `NAME://host:port`; its name picks its security protocol in the map (a controller listener
not in the map is PLAINTEXT, as in Kafka). A broker listens on every listener of `listeners` that is not a
controller listener, and registers each one's advertised address (`advertised.listeners` by name, else the
listener's own), so that Metadata can answer each client with the address of the listener it came in on. Brokers
reach each other on the inter-broker listener, and the controller with the first controller listener's protocol.
The controller listens on the listener of `listeners` named in `controller.listener.names`, or else on insync's
`controller.listener`. Errors use Kafka's wording where Kafka has one.
"""

from __future__ import annotations

from dataclasses import dataclass

from insync.config import ConfigError, ListenerConfig
from insync.security_config import SECURITY_PROTOCOLS

DEFAULT_CONTROLLER_LISTENER = "CONTROLLER"
LISTENERS_MAX = 16
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: str

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in TLS_PROTOCOLS


@dataclass(frozen=True, slots=True)
class BrokerListeners:
    """What a broker binds, what it registers (same names, same order) and which listener peers use."""

    bound: tuple[Endpoint, ...]
    advertised: tuple[Endpoint, ...]
    inter_broker: Endpoint  # the advertised endpoint brokers reach each other on
    controller_protocol: str  # how this broker reaches the controller

    def __post_init__(self) -> None:
        assert self.bound and [e.name for e in self.bound] == [e.name for e in self.advertised]
        assert self.inter_broker in self.advertised


def protocol_map(settings: ListenerConfig) -> dict[str, str]:
    result: dict[str, str] = {}
    for entry in settings.security_protocol_map:
        name, colon, protocol = entry.partition(":")
        if not colon or not name or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"invalid value {entry!r} in listener.security.protocol.map: expected "
                              f"NAME:PROTOCOL with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}")
        result[name.upper()] = protocol
    return result


def parse_endpoint(url: str, protocols: dict[str, str], key: str, controller_names: tuple[str, ...] = ()) -> Endpoint:
    """`SSL://127.0.0.1:9093` with its protocol; ConfigError naming `key` and the entry when malformed."""
    name, sep, address = url.strip().partition("://")
    host, colon, port = address.rpartition(":")
    if not sep or not name or not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{key} entry {url!r} is not NAME://host:port")
    name = name.upper()
    protocol = protocols.get(name)
    if protocol is None and name in controller_names:
        protocol = "PLAINTEXT"
    if protocol is None:
        raise ConfigError(f"No security protocol defined for listener {name} ({key}); "
                          "listener.security.protocol.map names NAME:PROTOCOL")
    return Endpoint(name, host.strip("[]"), int(port), protocol)


def controller_names(settings: ListenerConfig) -> tuple[str, ...]:
    return tuple(n.upper() for n in settings.controller_listener_names or ()) or (DEFAULT_CONTROLLER_LISTENER,)


def _endpoints(settings: ListenerConfig, urls: tuple[str, ...], key: str) -> tuple[Endpoint, ...]:
    """The endpoints of `urls`, the value of `key`."""
    if len(urls) > LISTENERS_MAX:
        raise ConfigError(f"{key} names {len(urls)} listeners; at most {LISTENERS_MAX}")
    endpoints = tuple(parse_endpoint(url, protocol_map(settings), key, controller_names(settings)) for url in urls)
    names = [e.name for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(f"Each listener must have a different name, {key}: {','.join(urls)}")
    return endpoints


def broker_listeners(settings: ListenerConfig) -> BrokerListeners:
    controllers = controller_names(settings)
    bound = tuple(e for e in _endpoints(settings, settings.listeners, "listeners") if e.name not in controllers)
    if not bound:
        raise ConfigError("listeners names no broker listener (only controller listeners: "
                          f"{','.join(settings.listeners)})")
    ports = [e.port for e in bound if e.port]
    if len(set(ports)) != len(ports):
        raise ConfigError(f"Each listener must have a different port, listeners: {','.join(map(str, bound))}")
    advertised_by_name = {e.name: e for e in _endpoints(settings, settings.advertised_listeners,
                                                        "advertised.listeners")}
    unknown = sorted(set(advertised_by_name) - {e.name for e in bound})
    if unknown:
        raise ConfigError(f"advertised.listeners listener names must be equal to or a subset of the ones defined "
                          f"in listeners. Found {','.join(unknown)}")
    advertised = tuple(advertised_by_name.get(e.name, e) for e in bound)
    return BrokerListeners(bound, advertised, _inter_broker(settings, advertised),
                           protocol_map(settings).get(controllers[0], "PLAINTEXT"))


def _inter_broker(settings: ListenerConfig, advertised: tuple[Endpoint, ...]) -> Endpoint:
    name, protocol = settings.inter_broker_listener_name, settings.security_inter_broker_protocol
    if name is None and protocol is None and len(advertised) == 1:
        return advertised[0]  # insync's shortcut: a broker with one listener uses it, whatever it is named
    if name is not None and protocol is not None:
        raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
    wanted = (name or protocol or "PLAINTEXT").upper()
    for endpoint in advertised:
        if endpoint.name == wanted:
            return endpoint
    raise ConfigError(f"inter.broker.listener.name must be a listener name defined in advertised.listeners. The "
                      f"valid options based on currently configured listeners are "
                      f"{','.join(e.name for e in advertised)}")


def controller_endpoint(settings: ListenerConfig) -> Endpoint:
    """Where the controller listens: the first of `listeners` named in controller.listener.names, else
    insync's `controller.listener`."""
    names = controller_names(settings)
    if settings.controller_listener_names is not None:
        for endpoint in _endpoints(settings, settings.listeners, "listeners"):
            if endpoint.name in names:
                return endpoint
    return parse_endpoint(settings.controller_listener or "", protocol_map(settings), "controller.listener", names)
