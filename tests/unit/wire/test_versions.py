from __future__ import annotations

import io

import pytest
from apis_helpers import client_request, wire
from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.serial import entity_writer

from insync import errors
from insync.protocol.codec import encode_response
from insync.protocol.kio import response_class
from insync.wire import versions

ELR = "eligible.leader.replicas.version"

TELEMETRY_APIS = (71, 72)  # GetTelemetrySubscriptions, PushTelemetry: librdkafka calls them when advertised


@pytest.mark.parametrize("table", [versions.BROKER_API_VERSIONS, versions.CONTROLLER_API_VERSIONS])
def test_tables_are_within_kio_and_kafka_floors(table: dict[int, tuple[int, int]]) -> None:
    for api_key, (low, high) in table.items():
        for version in range(low, high + 1):
            load_request_schema(api_key, version)
            load_response_schema(api_key, version)
        with pytest.raises(KioIndexError):  # kio (Kafka 4.x schemas) has nothing below Kafka 4.0's floors
            load_request_schema(api_key, low - 1)
    assert not set(TELEMETRY_APIS) & set(table)


def test_kafka_floors_and_client_needs() -> None:
    table = versions.BROKER_API_VERSIONS
    assert table[versions.PRODUCE][0] == 3 and table[versions.FETCH] == (4, 17)
    assert table[versions.METADATA][0] == 0 and table[versions.METADATA][1] >= 12
    assert table[versions.API_VERSIONS] == (0, 4)
    assert versions.BROKER_REGISTRATION not in table and versions.ALTER_PARTITION not in table


def test_the_controller_serves_shared_apis_at_the_brokers_versions() -> None:
    broker, controller = versions.BROKER_API_VERSIONS, versions.CONTROLLER_API_VERSIONS
    shared = controller.keys() & broker.keys()
    assert {versions.FETCH, versions.API_VERSIONS, versions.CREATE_TOPICS, versions.SASL_AUTHENTICATE} <= shared
    assert {key: controller[key] for key in shared} == {key: broker[key] for key in shared}
    assert controller.keys() - shared == {versions.ALTER_PARTITION, versions.BROKER_REGISTRATION,
                                          versions.BROKER_HEARTBEAT}
    assert versions.PRODUCE not in controller and versions.JOIN_GROUP not in controller


@pytest.mark.parametrize("version", [0, 3])
def test_produce_is_advertised_from_v0_as_kafka_and_v0_to_v2_close_the_connection(version: int) -> None:
    """Kafka 4.x lists Produce 0-13 for librdkafka's sake but serves v3+ only; its SocketServer closes the
    connection on a v0-v2 request, and so does insync (no answer is made)."""
    request = client_request(18, version, client_software_name="t", client_software_version="1")
    body = wire(versions.respond(request, versions.BROKER_API_VERSIONS))
    advertised = {int(k.api_key): (k.min_version, k.max_version) for k in body.api_keys}
    assert advertised[versions.PRODUCE] == (0, 13) and versions.BROKER_API_VERSIONS[versions.PRODUCE] == (3, 13)
    assert advertised[versions.FETCH] == versions.BROKER_API_VERSIONS[versions.FETCH]  # the others as served
    assert all(versions.unsupported_api_response(versions.PRODUCE, v, versions.BROKER_API_VERSIONS) is None
               for v in (0, 1, 2))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_response(version: int) -> None:
    request = client_request(18, version, client_software_name="confluent-kafka-python",
                             client_software_version="2.16.1-rdkafka-2.16.1")
    body = wire(versions.respond(request, versions.BROKER_API_VERSIONS))
    assert body.error_code == 0
    listed = {a.api_key: (a.min_version, a.max_version) for a in body.api_keys}
    assert listed == {**versions.BROKER_API_VERSIONS, versions.PRODUCE: (0, 13)}  # Produce as Kafka lists it
    if version >= 3:  # tagged fields at their defaults are not written (kcat's librdkafka 2.0.2 needs this)
        assert body.supported_features == () and body.finalized_features == ()
        buffer = io.BytesIO()
        entity_writer(type(body))(buffer, body)
        assert buffer.getvalue().endswith(b"\x00\x00\x00\x00\x00")  # throttle 0, then an empty tag buffer


@pytest.mark.parametrize("version", [2, 3, 4])
def test_from_v3_the_elr_feature_is_advertised_with_the_images_finalized_levels(version: int) -> None:
    from insync.metadata.image import MetadataImage
    from insync.metadata.records import ControllerChangeRecord, FeatureLevelRecord

    request = client_request(18, version, client_software_name="apache-kafka-java", client_software_version="4.1.2")
    image = MetadataImage.from_records([ControllerChangeRecord(0, 1), FeatureLevelRecord(ELR, 1)])
    body = wire(versions.respond(request, versions.BROKER_API_VERSIONS, image))
    if version < 3:
        assert not hasattr(body, "supported_features")
        return
    # v3 leaves out a feature supported from level 0, as Kafka 4 does (KIP-1022: older clients reject it).
    supported = [(ELR, 0, 1), ("transaction.version", 0, 2)] if version >= 4 else []
    assert [(f.name, f.min_version, f.max_version) for f in body.supported_features] == supported
    assert [(f.name, f.min_version_level, f.max_version_level) for f in body.finalized_features] == [(ELR, 1, 1)]
    assert body.finalized_features_epoch == 1  # the offset of the image's last record
    off = wire(versions.respond(request, versions.BROKER_API_VERSIONS,
                                image.replay(FeatureLevelRecord(ELR, 0))))  # ELR turned off: not finalized
    assert (len(off.supported_features), off.finalized_features, off.finalized_features_epoch) == (len(supported), (),
                                                                                                 2)


def test_unsupported_version_fallback_is_a_v0_body_with_api_versions_own_range() -> None:
    body = versions.unsupported_version_response(versions.BROKER_API_VERSIONS)
    assert type(body).__module__ == response_class(18, 0).__module__  # exactly the v0 class
    assert body.error_code == errors.UNSUPPORTED_VERSION.code
    # Kafka's ApiVersionsRequest.getErrorResponse lists ApiVersions alone (KIP-511)
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [
        (18, *versions.BROKER_API_VERSIONS[18])]
    frame = encode_response(18, 0, 77, body)
    assert frame[4:8] == (77).to_bytes(4, "big")  # header v0: the correlation id, no tag buffer


def test_invalid_client_software_name_is_refused() -> None:
    request = client_request(18, 3, client_software_name="bad name!", client_software_version="1.0")
    body = wire(versions.respond(request, versions.BROKER_API_VERSIONS))
    assert body.error_code == errors.INVALID_REQUEST.code and body.api_keys == ()


@pytest.mark.parametrize(("api_key", "version"), [(55, 0), (55, 2), (25, 3), (68, 0), (76, 1), (38, 3)])
def test_an_api_outside_the_table_is_answered_with_unsupported_version_in_its_own_shape(api_key: int,
                                                                                        version: int) -> None:
    body = versions.unsupported_api_response(api_key, version, versions.BROKER_API_VERSIONS)
    assert body is not None and body.error_code == errors.UNSUPPORTED_VERSION.code
    encode_response(api_key, version, 9, body)  # every field has a value the wire takes


def test_what_cannot_carry_the_error_closes_the_connection() -> None:
    table = versions.BROKER_API_VERSIONS
    assert versions.unsupported_api_response(24, 3, table) is None  # AddPartitionsToTxn v3: errors per entry
    assert versions.unsupported_api_response(55, 99, table) is None  # a version Kafka never had
    assert versions.unsupported_api_response(999, 0, table) is None  # no such API
    assert versions.unsupported_api_response(18, 9, table).api_keys  # ApiVersions: v0 listing its own range
