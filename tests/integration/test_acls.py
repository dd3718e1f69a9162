"""The ACL matrix on a real broker (issue 22): for each API, a principal without the permission is refused with
Kafka's error and one with it succeeds, through confluent-kafka over SASL_PLAINTEXT/PLAIN.

One cluster for the module: a controller and one broker with the standard authorizer, a PLAINTEXT listener (the
harness's and the inter-broker one, whose User:ANONYMOUS is a super user, as Kafka's PLAINTEXT inter-broker
listener must be) and a SASL_PLAINTEXT one with users admin (a super user), alice and bob. The admin creates the
resources and gives alice exactly what each row needs (`ACLS`); bob has nothing, so the default rule refuses him
(allow.everyone.if.no.acl.found is false). Each row runs bob first, then alice.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import FAST, started, wait_until
from insync.chaos import cluster
from insync.chaos.cluster import ClusterSpec

pytestmark = pytest.mark.timeout(240)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw" '
        'user_admin="admin-pw" user_alice="alice-pw" user_bob="bob-pw";')
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPICS = ("md", "pr", "fe", "lo", "dt", "cp", "dc", "ac", "dr")
OK = "OK"
# alice's ACLs: (resource type, name, operation); each row below names the one it uses.
ACLS = (("TOPIC", "md", "DESCRIBE"), ("TOPIC", "pr", "WRITE"), ("TOPIC", "fe", "READ"), ("TOPIC", "lo", "DESCRIBE"),
        ("TOPIC", "ct", "CREATE"), ("TOPIC", "ct2", "CREATE"), ("TOPIC", "dt", "DELETE"), ("TOPIC", "cp", "ALTER"),
        ("TOPIC", "dc", "DESCRIBE_CONFIGS"), ("TOPIC", "ac", "ALTER_CONFIGS"), ("TOPIC", "dr", "DELETE"),
        ("GROUP", "gr", "READ"), ("GROUP", "oc", "READ"), ("GROUP", "of", "DESCRIBE"), ("GROUP", "dg", "DESCRIBE"),
        ("GROUP", "lg", "DESCRIBE"), ("GROUP", "dl", "DELETE"), ("GROUP", "od", "DELETE"),
        ("BROKER", "kafka-cluster", "ALTER"), ("TRANSACTIONAL_ID", "tx", "WRITE"), ("TRANSACTIONAL_ID", "txf", "WRITE"),
        ("GROUP", "tg", "READ"))


class Secured:
    def __init__(self, spec: ClusterSpec, sasl_port: int) -> None:
        self.spec = spec
        self.sasl_port = sasl_port

    def conf(self, user: str) -> dict[str, Any]:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-pw"}

    def events(self, kind: str) -> list[dict[str, Any]]:
        lines = (self.spec.node(1).log_dir / "events.jsonl").read_text().splitlines()
        return [e for e in map(json.loads, lines) if e["type"] == kind]

    def stdout(self) -> str:
        return (Path(self.spec.node(1).directory) / "stdout.log").read_text(errors="replace")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:

    spec = cluster.layout(str(tmp_path_factory.mktemp("acls")), 1, 0, FAST)
    (sasl_port,) = cluster.free_ports(1)
    for node in (spec.controller, spec.node(1)):
        node.config_path.write_text(node.config_path.read_text() + f"authorizer.class.name={STANDARD_AUTHORIZER}\n"
                                    "super.users=User:admin;User:ANONYMOUS\n")
    broker = spec.node(1)
    listeners = f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    text = re.sub(r"^listeners=.*$", f"listeners={listeners}", broker.config_path.read_text(), flags=re.MULTILINE)
    broker.config_path.write_text(text + "inter.broker.listener.name=PLAINTEXT\nsasl.enabled.mechanisms=PLAIN\n"
                                  f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}\n")
    with started(spec) as spec:
        cluster.wait_listening(spec.node(1))
        cluster.wait_registered(spec, 30)
        secured = Secured(spec, sasl_port)
        _prepare(secured)
        yield secured


def _prepare(secured: Secured) -> None:
    """As admin: the topics, a record in each, the groups ListGroups and DeleteGroups need, alice's ACLs."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(secured.conf("admin"))
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS]).values():
        future.result()
    producer = Producer(secured.conf("admin"))
    for topic in TOPICS:
        producer.produce(topic, b"record")
    assert producer.flush(30) == 0
    for group in ("lg", "dl", "od"):
        _commit_offset(admin, group)
    bindings = [AclBinding(getattr(ResourceType, kind), name, ResourcePatternType.LITERAL, "User:alice", "*",
                           getattr(AclOperation, operation), AclPermissionType.ALLOW) for kind, name, operation in ACLS]
    for future in admin.create_acls(bindings).values():
        future.result()
    every_acl = _filter_all()
    # the broker applies the controller's records a moment later
    wait_until(lambda: len(admin.describe_acls(every_acl).result()) >= len(bindings), 30, "the broker sees alice's ACLs")


def _commit_offset(admin: Any, group: str) -> None:
    """Commit offset 0 of "fe" for `group` and read it back. The first commit after __consumer_offsets is created
    was seen acknowledged and then missing (offset -1001, the group not listed), so it is retried: a few times."""
    for _ in range(5):  # bounded
        admin.alter_consumer_group_offsets(_offsets(group))[group].result(30)
        committed = admin.list_consumer_group_offsets(_offsets(group, None))[group].result(30)
        if committed.topic_partitions[0].offset == 0:
            return
        time.sleep(0.5)
    raise AssertionError(f"group {group}'s offset commit never took")


def _filter_all() -> Any:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                            AclPermissionType.ANY)


def _error(exc: BaseException) -> str:
    """The Kafka error name an admin future or a client raised."""
    error = exc.args[0] if exc.args else None
    return str(error.name()) if hasattr(error, "name") else repr(exc)


def _admin_result(call: Callable[[Any], Any]) -> Callable[[dict[str, Any]], str]:
    """A row whose action is one AdminClient call returning futures (a dict, or one future)."""
    def run(conf: dict[str, Any]) -> str:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(conf)  # kept until its futures resolve: a destroyed client fails them (_DESTROY)
        outcome = call(admin)
        futures = list(outcome.values()) if isinstance(outcome, dict) else [outcome]
        try:
            for future in futures:
                future.result(timeout=30)
        except KafkaException as exc:
            return _error(exc)
        return OK
    return run


def _metadata(conf: dict[str, Any]) -> str:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(conf)
    topic = admin.list_topics(topic="md", timeout=30).topics["md"]
    return OK if topic.error is None else str(topic.error.name())


def _produce(conf: dict[str, Any], idempotent: bool = False) -> str:
    from confluent_kafka import Producer

    outcomes: list[Any] = []
    producer = Producer({**conf, "enable.idempotence": idempotent, "message.timeout.ms": 10_000})
    producer.produce("pr", b"x", on_delivery=lambda error, _: outcomes.append(error))
    producer.flush(20)
    error = outcomes[0] if outcomes else producer.flush(0)
    if error is not None and getattr(error, "name", None) and error.name() == "_FATAL":
        return str(error.str())
    return OK if error is None else str(error.name())


def _consume(conf: dict[str, Any], group: str | None) -> str:
    """One record of "fe": assigned without a group, or through the consumer group `group`."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": group or "unused", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    if group is None:
        consumer.assign([TopicPartition("fe", 0, OFFSET_BEGINNING)])
    else:
        consumer.subscribe(["fe"])
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            return OK if message.error() is None else str(message.error().name())
        return "TIMEOUT"
    finally:
        consumer.close()


def _transaction(conf: dict[str, Any]) -> str:
    """A transaction as transactional id "txf": a record to "pr" and "fe"'s offset for group "tg", committed (the
    coordinator found, the producer id initialised, the partition and the offsets added, the offsets committed, the
    transaction ended)."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    producer = Producer({**conf, "transactional.id": "txf", "message.timeout.ms": 10_000})
    consumer = Consumer({**conf, "group.id": "tg"})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("pr", b"in a transaction")
        producer.send_offsets_to_transaction([TopicPartition("fe", 0, 1)], consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
    except KafkaException as exc:
        return _error(exc)
    finally:
        consumer.close()
    return OK


def _listed_transactions(secured: Secured, user: str) -> str:
    """Whether ListTransactions shows "tx" (its producer id initialised by the InitProducerId row)."""
    from insync.protocol.kio import error_of

    answer = _raw(secured.sasl_port, user, 66, 1, state_filters=(), producer_id_filters=(), duration_filter=-1)
    if error_of(answer.error_code).name != "NONE":
        return str(error_of(answer.error_code).name)
    return OK if "tx" in {str(t.transactional_id) for t in answer.transaction_states} else "NOT_LISTED"


def _list_groups(conf: dict[str, Any]) -> str:
    """Whether ListGroups shows group "lg" (its offsets committed at setup); a few tries, as the coordinator may
    still be loading them."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(conf)
    for _ in range(10):  # bounded: ten tries, half a second apart
        listed = admin.list_consumer_groups().result(timeout=30)
        if "lg" in {g.group_id for g in listed.valid}:
            return OK
        time.sleep(0.5)
    return "NOT_LISTED"


def _cluster_operations(conf: dict[str, Any]) -> str:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(conf)
    described = admin.describe_cluster(include_authorized_operations=True).result(timeout=30)
    names = {op.name for op in described.authorized_operations or ()}
    return OK if {"ALTER", "DESCRIBE"} <= names else f"OPERATIONS {sorted(names)}"


def _topic_operations(conf: dict[str, Any]) -> str:
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(conf)
    future = admin.describe_topics(TopicCollection(["md"]), include_authorized_operations=True)["md"]
    try:
        described = future.result(timeout=30)
    except KafkaException as exc:
        return _error(exc)
    names = {op.name for op in described.authorized_operations or ()}
    return OK if names == {"DESCRIBE"} else f"OPERATIONS {sorted(names)}"


def _acl(name: str) -> Any:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:carol", "*", AclOperation.READ,
                      AclPermissionType.ALLOW)


def _acl_filter() -> Any:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBindingFilter(ResourceType.TOPIC, "carol-topic", ResourcePatternType.ANY, None, None, AclOperation.ANY,
                            AclPermissionType.ANY)


def _offsets(group: str, offset: int | None = 0) -> Any:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    partition = TopicPartition("fe", 0) if offset is None else TopicPartition("fe", 0, offset)
    return [ConsumerGroupTopicPartitions(group, [partition])]


def _latest(topic: str) -> Any:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    return {TopicPartition(topic, 0): OffsetSpec.latest()}


def _new_topic() -> list[Any]:
    from confluent_kafka.admin import NewTopic

    return [NewTopic("ct", 1, 1)]


def _resource(name: str) -> Any:
    from confluent_kafka.admin import ConfigResource

    return ConfigResource("TOPIC", name)


def _alteration() -> Any:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    return ConfigResource("TOPIC", "ac", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])


def _partitions() -> list[Any]:
    from confluent_kafka.admin import NewPartitions

    return [NewPartitions("cp", 2)]


def _raw(port: int, user: str, api_key: int, version: int, **fields: Any) -> Any:
    """One request built by kio, sent over an authenticated SASL/PLAIN connection of insync's own client: the
    APIs confluent-kafka has no call for, or checks from metadata before it sends them."""
    from insync.protocol.kio import build, request_class
    from insync.security.sasl_client import SaslCredentials
    from insync.server.client import KafkaConnection

    async def send() -> Any:
        connection = KafkaConnection("127.0.0.1", port, sasl=SaslCredentials("PLAIN", user, f"{user}-pw"))
        try:
            return await connection.request(build(request_class(api_key, version), **fields), 30)
        finally:
            await connection.close()

    return asyncio.run(send())


def _entity(api_key: int, version: int, entity: str, /, **fields: Any) -> Any:
    from insync.protocol.kio import build, nested, request_class

    return build(nested(request_class(api_key, version), entity), **fields)


def _raw_row(api_key: int, version: int, error_at: Callable[[Any], Any], **fields: Any) -> Action:
    """A row sending one raw request; its outcome is the error name `error_at` finds in the answer."""
    def run(secured: Secured, user: str) -> str:
        from insync.protocol.kio import error_of

        return error_of(error_at(_raw(secured.sasl_port, user, api_key, version, **fields))).name
    return run


def _client(action: Callable[[dict[str, Any]], str]) -> Action:
    return lambda secured, user: action(secured.conf(user))


Action = Callable[[Secured, str], str]
SECOND = datetime.timedelta(seconds=1)
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED = ("TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED",
                                              "CLUSTER_AUTHORIZATION_FAILED")
TXN_DENIED = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
# (API, what bob gets, what alice gets, action)
MATRIX: list[tuple[str, str, str, Action]] = [
    ("Metadata", TOPIC_DENIED, OK, _client(_metadata)),
    ("Metadata topic_authorized_operations", TOPIC_DENIED, OK, _client(_topic_operations)),
    ("DescribeTopicPartitions", TOPIC_DENIED, "NONE", _raw_row(
        75, 0, lambda r: r.topics[0].error_code, topics=(_entity(75, 0, "TopicRequest", name="md"),),
        response_partition_limit=100, cursor=None)),
    ("Produce", TOPIC_DENIED, OK, _client(_produce)),
    ("InitProducerId", CLUSTER_DENIED, "NONE", _raw_row(
        22, 4, lambda r: r.error_code, transactional_id=None, transaction_timeout=60 * SECOND, producer_id=-1,
        producer_epoch=-1)),
    ("FindCoordinator/InitProducerId/AddPartitionsToTxn/AddOffsetsToTxn/TxnOffsetCommit/EndTxn", TXN_DENIED, OK,
     _client(_transaction)),
    ("InitProducerId (transactional)", TXN_DENIED, "NONE", _raw_row(
        22, 4, lambda r: r.error_code, transactional_id="tx", transaction_timeout=60 * SECOND, producer_id=-1,
        producer_epoch=-1)),
    ("AddPartitionsToTxn: the id, then the topics", TXN_DENIED, TOPIC_DENIED, _raw_row(
        24, 3, lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        v3_and_below_transactional_id="tx", v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
        v3_and_below_topics=(_entity(24, 3, "AddPartitionsToTxnTopic", name="fe", partitions=(0,)),))),
    ("AddOffsetsToTxn: the id, then the group", TXN_DENIED, GROUP_DENIED, _raw_row(
        25, 3, lambda r: r.error_code, transactional_id="tx", producer_id=1, producer_epoch=0, group_id="md")),
    ("TxnOffsetCommit: the id, then the group", TXN_DENIED, GROUP_DENIED, _raw_row(
        28, 3, lambda r: r.topics[0].partitions[0].error_code, transactional_id="tx", group_id="md", producer_id=1,
        producer_epoch=0, generation_id=-1, member_id="", group_instance_id=None, topics=(_entity(
            28, 3, "TxnOffsetCommitRequestTopic", name="fe", partitions=(_entity(
                28, 3, "TxnOffsetCommitRequestPartition", partition_index=0, committed_offset=1,
                committed_leader_epoch=-1, committed_metadata=""),)),))),
    ("EndTxn", TXN_DENIED, "INVALID_PRODUCER_ID_MAPPING", _raw_row(
        26, 3, lambda r: r.error_code, transactional_id="tx", producer_id=1, producer_epoch=0,
        committed=True)),
    ("ListTransactions", "NOT_LISTED", OK, _listed_transactions),
    ("WriteTxnMarkers (alice: ALTER on the cluster)", CLUSTER_DENIED, "UNKNOWN_TOPIC_OR_PARTITION", _raw_row(
        27, 1, lambda r: r.markers[0].topics[0].partitions[0].error_code, markers=(_entity(
            27, 1, "WritableTxnMarker", producer_id=1, producer_epoch=0, transaction_result=True,
            coordinator_epoch=0, topics=(_entity(27, 1, "WritableTxnMarkerTopic", name="no-such-topic",
                                                 partition_indexes=(0,)),)),))),
    ("Fetch", TOPIC_DENIED, "NONE", _raw_row(
        1, 12, lambda r: r.responses[0].partitions[0].error_code, replica_id=-1, max_wait=0 * SECOND, min_bytes=0,
        max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
        topics=(_entity(1, 12, "FetchTopic", topic="fe", partitions=(_entity(
            1, 12, "FetchPartition", partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 20),)),))),
    ("ListOffsets", TOPIC_DENIED, "NONE", _raw_row(
        2, 7, lambda r: r.topics[0].partitions[0].error_code, replica_id=-1, isolation_level=0,
        topics=(_entity(2, 7, "ListOffsetsTopic", name="lo", partitions=(
            _entity(2, 7, "ListOffsetsPartition", partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))),
    ("OffsetForLeaderEpoch", TOPIC_DENIED, "NONE", _raw_row(
        23, 4, lambda r: r.topics[0].partitions[0].error_code, replica_id=-1,
        topics=(_entity(23, 4, "OffsetForLeaderTopic", topic="lo", partitions=(
            _entity(23, 4, "OffsetForLeaderPartition", partition=0, current_leader_epoch=-1, leader_epoch=0),)),))),
    ("DeleteRecords", TOPIC_DENIED, "NONE", _raw_row(
        21, 2, lambda r: r.topics[0].partitions[0].error_code, timeout=5 * SECOND,
        topics=(_entity(21, 2, "DeleteRecordsTopic", name="dr", partitions=(
            _entity(21, 2, "DeleteRecordsPartition", partition_index=0, offset=1),)),))),
    ("DescribeProducers", TOPIC_DENIED, "NONE", _raw_row(
        61, 0, lambda r: r.topics[0].partitions[0].error_code,
        topics=(_entity(61, 0, "TopicRequest", name="fe", partition_indexes=(0,)),))),
    ("CreateTopics", TOPIC_DENIED, OK, _client(_admin_result(lambda a: a.create_topics(_new_topic())))),
    ("DeleteTopics", TOPIC_DENIED, OK, _client(_admin_result(lambda a: a.delete_topics(["dt"])))),
    ("CreatePartitions", TOPIC_DENIED, OK, _client(_admin_result(lambda a: a.create_partitions(_partitions())))),
    ("DescribeConfigs", TOPIC_DENIED, OK, _client(_admin_result(lambda a: a.describe_configs([_resource("dc")])))),
    ("IncrementalAlterConfigs", TOPIC_DENIED, OK, _client(_admin_result(
        lambda a: a.incremental_alter_configs([_alteration()])))),
    ("FindCoordinator/JoinGroup/SyncGroup (group)", GROUP_DENIED, OK, _client(lambda conf: _consume(conf, "gr"))),
    ("OffsetCommit", GROUP_DENIED, OK, _client(_admin_result(
        lambda a: a.alter_consumer_group_offsets(_offsets("oc"))))),
    ("OffsetFetch", GROUP_DENIED, OK, _client(_admin_result(
        lambda a: a.list_consumer_group_offsets(_offsets("of", None))))),
    ("DescribeGroups", GROUP_DENIED, OK, _client(_admin_result(lambda a: a.describe_consumer_groups(["dg"])))),
    ("ListGroups", "NOT_LISTED", OK, _client(_list_groups)),
    ("OffsetDelete", GROUP_DENIED, "NONE", _raw_row(
        47, 0, lambda r: r.error_code, group_id="od", topics=(_entity(47, 0, "OffsetDeleteRequestTopic", name="fe",
            partitions=(_entity(47, 0, "OffsetDeleteRequestPartition", partition_index=0),)),))),
    ("DeleteGroups", GROUP_DENIED, OK, _client(_admin_result(lambda a: a.delete_consumer_groups(["dl"])))),
    ("DescribeCluster cluster_authorized_operations", "OPERATIONS []", OK, _client(_cluster_operations)),
    ("CreateAcls", CLUSTER_DENIED, OK, _client(_admin_result(lambda a: a.create_acls([_acl("carol-topic")])))),
    ("DescribeAcls", CLUSTER_DENIED, "NONE", _raw_row(
        29, 3, lambda r: r.error_code, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1)),
    ("DeleteAcls", CLUSTER_DENIED, OK, _client(_admin_result(lambda a: a.delete_acls([_acl_filter()])))),
    ("ElectLeaders", CLUSTER_DENIED, "NONE", _raw_row(
        43, 2, lambda r: r.error_code, election_type=0, timeout=5 * SECOND,
        topic_partitions=(_entity(43, 2, "TopicPartitions", topic="pr", partitions=(0,)),))),
    ("ListPartitionReassignments", CLUSTER_DENIED, "NONE", _raw_row(
        46, 0, lambda r: r.error_code, timeout=5 * SECOND, topics=None)),
    ("AlterPartitionReassignments", CLUSTER_DENIED, "NONE", _raw_row(
        45, 0, lambda r: r.error_code, timeout=5 * SECOND, topics=())),
    ("DescribeUserScramCredentials", CLUSTER_DENIED, "NONE", _raw_row(50, 0, lambda r: r.error_code, users=None)),
    ("AlterUserScramCredentials", CLUSTER_DENIED, "NONE", _raw_row(
        51, 0, lambda r: r.results[0].error_code, deletions=(), upsertions=(_entity(
            51, 0, "ScramCredentialUpsertion", name="carol", mechanism=2, iterations=4096, salt=b"salt",
            salted_password=bytes(64)),))),
    ("DescribeLogDirs", CLUSTER_DENIED, "NONE", _raw_row(35, 4, lambda r: r.error_code, topics=None)),
    ("AlterReplicaLogDirs", CLUSTER_DENIED, "LOG_DIR_NOT_FOUND", _raw_row(
        34, 2, lambda r: r.results[0].partitions[0].error_code, dirs=(_entity(34, 2, "AlterReplicaLogDir",
            path="/nonexistent", topics=(_entity(34, 2, "AlterReplicaLogDirTopic", name="fe", partitions=(0,)),)),))),
]


@pytest.mark.parametrize(("api", "refusal", "success", "action"), MATRIX, ids=[row[0] for row in MATRIX])
def test_acl_matrix(secured: Secured, api: str, refusal: str, success: str, action: Action) -> None:
    assert action(secured, "bob") == refusal, f"{api}: bob, without the permission"
    assert action(secured, "alice") == success, f"{api}: alice, with it"


def test_denials_are_logged_and_recorded_as_events(secured: Secured) -> None:
    _metadata(secured.conf("bob"))
    line = ("Principal = User:bob is Denied operation = DESCRIBE from host = 127.0.0.1 on resource = "
            "Topic:LITERAL:md for request = METADATA with resourceRefCount = 1 based on rule DefaultDeny")
    assert line in secured.stdout()
    denied = [e for e in secured.events("denied") if e["resource"] == "md"]
    assert denied and (denied[0]["principal"], denied[0]["operation"], denied[0]["api"]) == (
        "User:bob", "DESCRIBE", "METADATA")


def test_insync_acls_adds_lists_and_removes_with_kafka_acls_flags(secured: Secured, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from insync.cli.main import main

    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=admin\n"
                      "sasl.password=admin-pw\n")
    common = ["acls", "--bootstrap-server", f"127.0.0.1:{secured.sasl_port}", "--command-config", str(config)]
    assert main([*common, "--add", "--allow-principal", "User:carol", "--consumer", "--topic", "cli-t",
                 "--group", "cli-g"]) == 0
    assert ("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=cli-t, patternType=LITERAL)`: \n"
            " \t(principal=User:carol, host=*, operation=READ, permissionType=ALLOW) \n") in capsys.readouterr().out

    def listed(done: Callable[[str], bool]) -> str:
        """`--list` for carol until `done` holds of its output: the broker answers from its copy of the ACLs,
        which follows the controller's a moment later."""
        deadline = time.monotonic() + 15
        while True:  # bounded by the deadline
            assert main([*common, "--list", "--principal", "User:carol"]) == 0
            out = capsys.readouterr().out
            if done(out) or time.monotonic() > deadline:
                return out
            time.sleep(0.1)

    out = listed(lambda text: text.count("principal=User:carol") == 3)
    assert "name=cli-g, patternType=LITERAL" in out and "operation=DESCRIBE" in out
    assert main([*common, "--remove", "--force", "--topic", "cli-t", "--group", "cli-g"]) == 0
    assert capsys.readouterr().out.count("Removed ACL (principal=User:carol") == 3
    assert listed(lambda text: text == "") == ""
    bob = tmp_path / "bob.properties"
    bob.write_text(config.read_text().replace("admin", "bob"))
    assert main([*common[:-1], str(bob), "--add", "--allow-principal", "User:bob", "--operation", "All",
                 "--cluster"]) == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in capsys.readouterr().err


def test_only_the_topics_refused_are_refused(secured: Secured) -> None:
    """As Kafka: alice may create ct2, not ct3; one request asks for both."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(secured.conf("alice"))
    futures = admin.create_topics([NewTopic("ct2", 1, 1), NewTopic("ct3", 1, 1)])
    futures["ct2"].result(30)
    with pytest.raises(KafkaException) as refused:
        futures["ct3"].result(30)
    assert _error(refused.value) == TOPIC_DENIED


def test_transactional_batches_need_write_on_their_transactional_id(secured: Secured) -> None:
    """Kafka refuses a Produce of transactional batches whole unless the principal may WRITE its transactional id;
    alice may, and her batch goes on to the partition leader's own checks (no transaction began: not refused so)."""
    from insync.protocol.kio import error_of
    from insync.protocol.records import build_batch

    batch = build_batch([(None, b"x")], producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True)

    def produce(user: str) -> str:
        answer = _raw(secured.sasl_port, user, 0, 9, transactional_id="tx", acks=-1, timeout=5 * SECOND,
                      topic_data=(_entity(0, 9, "TopicProduceData", name="pr", partition_data=(_entity(
                          0, 9, "PartitionProduceData", index=0, records=batch),)),))
        return str(error_of(answer.responses[0].partition_responses[0].error_code).name)

    assert produce("bob") == TXN_DENIED
    assert produce("alice") not in (TXN_DENIED, TOPIC_DENIED, "NONE")
