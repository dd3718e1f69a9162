"""A broker's several listeners in the metadata image: what a client on each listener is told."""

from __future__ import annotations

import pytest

from insync.metadata.image import MetadataImage
from insync.metadata.records import RecordError, RegisterBrokerRecord, record_from_dict
from insync.types import BrokerId

TWO = RegisterBrokerRecord(BrokerId(1), 1, "i1", "10.0.0.1", 9092, None,
                           ("INTERNAL://10.0.0.1:9092", "EXTERNAL://kafka-1.example.com:19092"))
INTERNAL_ONLY = RegisterBrokerRecord(BrokerId(2), 2, "i2", "10.0.0.2", 9092, None, ("INTERNAL://10.0.0.2:9092",))


def test_each_listener_sees_every_broker_at_its_own_address_and_not_those_without_it() -> None:
    image = MetadataImage.from_records([TWO, INTERNAL_ONLY])
    external = image.as_seen_on("EXTERNAL")
    assert {b: (r.host, r.port) for b, r in external.brokers.items()} == {1: ("kafka-1.example.com", 19092)}
    internal = image.as_seen_on("INTERNAL")
    assert {b: (r.host, r.port) for b, r in internal.brokers.items()} == {1: ("10.0.0.1", 9092),
                                                                          2: ("10.0.0.2", 9092)}
    assert image.brokers[1].endpoint("OTHER") is None


def test_brokers_with_one_address_are_answered_from_the_image_itself() -> None:
    legacy = RegisterBrokerRecord(BrokerId(3), 3, "i3", "h3", 9003)  # written before brokers had several listeners
    image = MetadataImage.from_records([legacy, INTERNAL_ONLY])
    assert image.as_seen_on("EXTERNAL") is image
    assert image.brokers[3].endpoint("ANY") == ("h3", 9003)


def test_listeners_survive_the_json_form_and_a_bad_one_is_refused() -> None:
    assert record_from_dict(TWO.to_dict()) == TWO
    with pytest.raises(RecordError, match="not all NAME://host:port"):
        RegisterBrokerRecord(BrokerId(1), 1, "i1", "h", 1, None, ("h:1",))
