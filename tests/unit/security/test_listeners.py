from __future__ import annotations

import pytest

from insync.config import BrokerConfig, ConfigError
from insync.security.listeners import Endpoint, broker_listeners, controller_endpoint


def test_one_plaintext_listener_is_bound_advertised_and_used_between_brokers() -> None:
    listeners = broker_listeners(BrokerConfig({}).listeners)
    plain = Endpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")
    assert listeners.bound == listeners.advertised == (plain,)
    assert listeners.inter_broker == plain and listeners.controller_protocol == "PLAINTEXT"
    assert controller_endpoint(BrokerConfig({}).listeners) == Endpoint("CONTROLLER", "127.0.0.1", 9093, "PLAINTEXT")


def test_several_listeners_advertise_by_name_and_peers_use_the_inter_broker_one() -> None:
    listeners = broker_listeners(BrokerConfig({
        "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://0.0.0.0:9094,CONTROLLER://127.0.0.1:9093",
        "advertised.listeners": "EXTERNAL://kafka.example.com:19094",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL,CONTROLLER:SSL",
        "inter.broker.listener.name": "INTERNAL", "controller.listener.names": "CONTROLLER"}).listeners)
    assert [str(e) for e in listeners.bound] == ["INTERNAL://127.0.0.1:9092", "EXTERNAL://0.0.0.0:9094"]
    assert [str(e) for e in listeners.advertised] == ["INTERNAL://127.0.0.1:9092",
                                                      "EXTERNAL://kafka.example.com:19094"]
    assert listeners.advertised[1].uses_tls and not listeners.inter_broker.uses_tls
    assert listeners.inter_broker.name == "INTERNAL" and listeners.controller_protocol == "SSL"


def test_security_inter_broker_protocol_names_the_listener_when_no_name_is_given() -> None:
    listeners = broker_listeners(BrokerConfig({"listeners": "PLAINTEXT://h:1,SSL://h:2",
                                               "security.inter.broker.protocol": "SSL"}).listeners)
    assert listeners.inter_broker.name == "SSL"


def test_the_controller_listens_on_its_named_listener() -> None:
    config = BrokerConfig({"listeners": "CONTROLLER://127.0.0.1:9093", "controller.listener.names": "CONTROLLER",
                           "listener.security.protocol.map": "CONTROLLER:SSL"})
    assert controller_endpoint(config.listeners) == Endpoint("CONTROLLER", "127.0.0.1", 9093, "SSL")


@pytest.mark.parametrize(("values", "message"), [
    ({"listeners": "SECRET://h:1"}, "No security protocol defined for listener SECRET"),
    ({"listeners": "PLAINTEXT://h:1,PLAINTEXT://h:2"}, "Each listener must have a different name"),
    ({"listeners": "PLAINTEXT://h:1,SSL://h:1", "inter.broker.listener.name": "SSL"},
     "Each listener must have a different port"),
    ({"listeners": "PLAINTEXT://h"}, "is not NAME://host:port"),
    ({"advertised.listeners": "SSL://h:1"}, "advertised.listeners listener names must be equal to or a subset"),
    ({"listeners": "PLAINTEXT://h:1,SSL://h:2", "inter.broker.listener.name": "OTHER"},
     "must be a listener name defined in advertised.listeners"),
    ({"listeners": "SSL://h:2,SASL_SSL://h:3"}, "The valid options based on currently configured listeners"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "NAME:PROTOCOL"),
    ({"listeners": "CONTROLLER://h:1"}, "names no broker listener"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}, "Only one of"),
])
def test_bad_listener_configs_are_refused_naming_what_is_wrong(values: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        broker_listeners(BrokerConfig({**values}).listeners)
