"""The controller authorizes brokers (issue 22): with the standard authorizer on every node and every listener
SASL_PLAINTEXT/PLAIN, a broker that authenticates as `admin` (a super user) registers; one that authenticates as
`alice` (a valid user without ClusterAction) is refused CLUSTER_AUTHORIZATION_FAILED, logged by the controller in
Kafka's words, until an ACL grants alice ClusterAction on the cluster, when it registers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import FAST, started, wait_until
from insync.chaos import cluster
from insync.chaos.cluster import ClusterSpec

pytestmark = pytest.mark.timeout(120)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = 'user_admin="admin-pw" user_alice="alice-pw"'
MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule required"


def secure(node: cluster.NodeSpec, user: str) -> None:
    """Every listener SASL_PLAINTEXT; the node authenticates as `user`; the authorizer on, admin a super user."""
    jaas = f'{MODULE} username="{user}" password="{user}-pw" {USERS};'
    text = node.config_path.read_text().replace("listeners=PLAINTEXT://", "listeners=SASL_PLAINTEXT://")
    node.config_path.write_text(text + "".join(f"{k}={v}\n" for k, v in {
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.controller.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin",
    }.items()))


def admin_conf(spec: ClusterSpec) -> dict[str, Any]:
    return {"bootstrap.servers": spec.node(1).address, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-pw"}


def brokers_seen(spec: ClusterSpec) -> set[int]:
    from confluent_kafka.admin import AdminClient

    try:
        return set(AdminClient(admin_conf(spec)).list_topics(timeout=5).brokers)
    except Exception:  # noqa: BLE001 - starting up: nobody answers yet
        return set()


def wait_for_brokers(spec: ClusterSpec, wanted: set[int], seconds: float) -> None:
    wait_until(lambda: brokers_seen(spec) == wanted, seconds,
               lambda: f"brokers {sorted(wanted)} registered, and no other (seen: {sorted(brokers_seen(spec))})")


def controller_log(spec: ClusterSpec) -> str:
    return (Path(spec.controller.directory) / "stdout.log").read_text(errors="replace")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSpec]:

    spec = cluster.layout(str(tmp_path_factory.mktemp("acl-ctl")), 2, 0, FAST)
    for node in spec.nodes:
        secure(node, "alice" if node.node_id == 2 else "admin")
    with started(spec) as spec:
        yield spec


def test_a_broker_without_cluster_action_cannot_register_until_granted(secured: ClusterSpec) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    denied = ("Principal = User:alice is Denied operation = CLUSTER_ACTION from host = 127.0.0.1 on resource = "
              "Cluster:LITERAL:kafka-cluster for request = BROKER_REGISTRATION")
    wait_for_brokers(secured, {1}, 30)
    # Broker 2 keeps trying: refused twice, and still not registered.
    wait_until(lambda: controller_log(secured).count(denied) >= 2, 30, "broker 2's registration refused twice")
    assert brokers_seen(secured) == {1}
    admin = AdminClient(admin_conf(secured))
    grant = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW)
    admin.create_acls([grant])[grant].result(15)
    wait_for_brokers(secured, {1, 2}, 30)
