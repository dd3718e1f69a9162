"""Requests insync does not serve are answered, never met by a closed connection: an API outside the ApiVersions
table (DescribeQuorum, the transactions' and share groups' APIs) gets UNSUPPORTED_VERSION (35) in that API's
own response, and the connection goes on serving; every version of what the table lists is answered, as
kafka-python's group admin calls use them."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import _read, wait_until
from insync.admin import ensure_topic
from insync.chaos.cluster import ClusterSpec
from insync.protocol.codec import decode_response, encode_request
from insync.protocol.kio import build, build_defaults, request_class
from insync.wire import versions

pytestmark = pytest.mark.timeout(90)

UNSUPPORTED_VERSION = 35
DESCRIBE_QUORUM, CREATE_DELEGATION_TOKEN, DESCRIBE_DELEGATION_TOKEN, CONSUMER_GROUP_HEARTBEAT, SHARE_GROUP_HEARTBEAT = \
    55, 38, 41, 68, 76


@pytest.fixture
def connection(insync_cluster: ClusterSpec) -> Iterator[socket.socket]:
    host, port = insync_cluster.node(1).address.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        yield sock


def exchange(sock: socket.socket, body: Any, correlation_id: int) -> Any:
    sock.sendall(encode_request(body, correlation_id))
    size = struct.unpack(">i", _read(sock, 4))[0]
    answered_id, response = decode_response(body.__api_key__, body.__version__, _read(sock, size))
    assert answered_id == correlation_id
    return response


@pytest.mark.parametrize(("api_key", "version"), [
    (DESCRIBE_QUORUM, 0), (DESCRIBE_QUORUM, 2), (CREATE_DELEGATION_TOKEN, 3), (DESCRIBE_DELEGATION_TOKEN, 3),
    (CONSUMER_GROUP_HEARTBEAT, 0), (SHARE_GROUP_HEARTBEAT, 1)])
def test_an_api_outside_the_table_gets_unsupported_version_and_the_connection_stays(
        connection: socket.socket, api_key: int, version: int) -> None:
    assert api_key not in versions.BROKER_API_VERSIONS
    response = exchange(connection, build_defaults(request_class(api_key, version)), 7)
    assert int(response.error_code) == UNSUPPORTED_VERSION
    # The same connection still answers what the table lists.
    listed = exchange(connection, build(request_class(versions.API_VERSIONS, 3), client_software_name="t",
                                        client_software_version="1"), 8)
    assert int(listed.error_code) == 0 and DESCRIBE_QUORUM not in {int(k.api_key) for k in listed.api_keys}


def test_every_listed_version_of_the_group_lookups_is_answered(insync_cluster: ClusterSpec,
                                                               connection: socket.socket) -> None:
    from confluent_kafka import Consumer

    ensure_topic(insync_cluster.bootstrap, "described-groups", 1, 3, {})
    consumer = Consumer({"bootstrap.servers": insync_cluster.bootstrap, "group.id": "described"})
    consumer.subscribe(["described-groups"])
    try:
        wait_until(lambda: consumer.poll(0.2) is None and bool(consumer.assignment()), 30, "the consumer assigned")
        low, high = versions.BROKER_API_VERSIONS[versions.FIND_COORDINATOR]
        for version in range(low, high + 1):
            cls = request_class(versions.FIND_COORDINATOR, version)
            found = exchange(connection, build(cls, key="described", key_type=0, coordinator_keys=("described",)),
                             version)
            codes = [found.error_code] if version < 4 else [c.error_code for c in found.coordinators]
            assert [int(c) for c in codes] == [0], (version, found)
        low, high = versions.BROKER_API_VERSIONS[versions.DESCRIBE_GROUPS]
        for version in range(low, high + 1):
            cls = request_class(versions.DESCRIBE_GROUPS, version)
            coordinator = _coordinator_connection(insync_cluster, "described")
            with coordinator:
                body = build(cls, groups=("described",), include_authorized_operations=False)
                [group] = exchange(coordinator, body, 100 + version).groups
            assert (int(group.error_code), group.group_state, len(group.members)) == (0, "Stable", 1), version
    finally:
        consumer.close()


def test_kafka_python_group_admin_calls(insync_cluster: ClusterSpec) -> None:
    """kafka-python finds the coordinator, describes and lists groups; it asks nothing the table does not list
    (its quorum call fails in the client, naming the API)."""
    from confluent_kafka import Consumer
    from kafka.admin import KafkaAdminClient
    from kafka.errors import IncompatibleBrokerVersion

    ensure_topic(insync_cluster.bootstrap, "python-groups", 1, 3, {})
    consumer = Consumer({"bootstrap.servers": insync_cluster.bootstrap, "group.id": "python-described"})
    consumer.subscribe(["python-groups"])
    admin = KafkaAdminClient(bootstrap_servers=insync_cluster.bootstrap, request_timeout_ms=15_000)
    try:
        wait_until(lambda: consumer.poll(0.2) is None and bool(consumer.assignment()), 30, "the consumer assigned")
        described = admin.describe_groups(["python-described"])["python-described"]
        assert (described["error"], described["group_state"], len(described["members"])) == (None, "Stable", 1)
        assert "python-described" in {g["group_id"] for g in admin.list_groups()}
        if hasattr(admin, "describe_metadata_quorum"):
            with pytest.raises(IncompatibleBrokerVersion, match="DescribeQuorum"):
                admin.describe_metadata_quorum()
        assert admin.describe_groups(["python-described"])["python-described"]["error"] is None  # still connected
    finally:
        admin.close()
        consumer.close()


def _coordinator_connection(spec: ClusterSpec, group: str) -> socket.socket:
    """A connection to the group's coordinator (DescribeGroups is answered there)."""
    host, port = spec.node(1).address.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        cls = request_class(versions.FIND_COORDINATOR, 3)

        def coordinator() -> Any:
            found = exchange(sock, build(cls, key=group, key_type=0), 1)
            return found if int(found.error_code) == 0 else None

        found = wait_until(coordinator, 10, f"a coordinator for group {group}")
    return socket.create_connection((found.host, int(found.port)), timeout=10)
