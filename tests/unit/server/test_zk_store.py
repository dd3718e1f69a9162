"""The ZooKeeper metadata store against a real ZooKeeper server (one per module, a chroot per test)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from insync.chaos.cluster import free_ports
from insync.chaos.zookeeper import ZooKeeperServer, available
from insync.config import ConfigError
from insync.controller.store import ControllerFencedError
from insync.errors import KafkaException
from insync.metadata.image import MetadataImage
from insync.metadata.records import (
    ClusterIdRecord,
    ConfigRecord,
    ControllerChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from insync.server.zk_store import ZooKeeperStore

ORDERS = "5f2b6c1e-8a3d-4f6e-9b7a-1c2d3e4f5a6b"
LOGS = "0b1c2d3e-4f5a-4b6c-8d7e-8f9a0b1c2d3e"
ORDERS_AGAIN = "ffffffff-0000-4000-8000-000000000001"
BROKERS: list[Record] = [RegisterBrokerRecord(b, b, f"inc-{b}", "127.0.0.1", 9090 + b) for b in (1, 2, 3)]
CREATE_ORDERS: list[Record] = [
    TopicRecord("orders", ORDERS),
    PartitionRecord(ORDERS, 0, (1, 2, 3), (1, 2, 3), 1, 0, 0),
    PartitionRecord(ORDERS, 1, (2, 3, 1), (2, 3), 2, 0, 0),
]
CREATE_LOGS: list[Record] = [TopicRecord("logs", LOGS), PartitionRecord(LOGS, 0, (3,), (3,), 3, 0, 0)]
ORDERS_0 = "/brokers/topics/orders/partitions/0/state"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    reason = available()
    if reason is not None:
        pytest.fail(f"ZooKeeper is part of the setup: {reason}")
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), free_ports(1)[0]) as zk:
        yield zk


@pytest.fixture
def connect(server: ZooKeeperServer) -> str:
    return server.connect(f"/test-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def plain(server: ZooKeeperServer, connect: str) -> Iterator[KazooClient]:
    """A bare client in the test's chroot: an operator, or a controller acting outside the store."""
    root = KazooClient(hosts=server.connect())
    root.start(timeout=5)
    root.ensure_path(connect[connect.index("/"):])
    root.stop()
    root.close()
    client = KazooClient(hosts=connect)
    client.start(timeout=5)
    yield client
    client.stop()
    client.close()


def until(seconds: float) -> Callable[[], bool]:
    deadline = time.monotonic() + seconds
    return lambda: time.monotonic() > deadline


def elected(connect: str, node_id: int) -> ZooKeeperStore:
    store = ZooKeeperStore(connect, node_id, session_timeout_ms=3000)
    assert store.campaign(until(5))
    store.load()
    return store


def znode_json(client: KazooClient, path: str) -> tuple[object, int]:
    data, stat = client.get(path)
    return json.loads(data), stat.version


def test_append_and_load_round_trip_across_a_restart(connect: str) -> None:
    batches: list[list[Record]] = [[ControllerChangeRecord(1, 1), *BROKERS], CREATE_ORDERS, CREATE_LOGS,
                                   [ConfigRecord("orders", "retention.ms", "1000")]]
    first = ZooKeeperStore(connect, 1)
    assert first.campaign(until(5))
    assert first.load() == []
    for batch in batches:
        first.append(batch)
    first.close()
    first.close()  # idempotent

    second = elected(connect, 1)
    records = second.load()
    assert records == [r for batch in batches for r in batch]
    image = MetadataImage.from_records(records)
    assert image.topic("orders") is not None and image.topic("logs") is not None
    assert image == MetadataImage.from_records([r for batch in batches for r in batch])
    assert second.controller_epoch == 2
    second.append([PartitionChangeRecord(ORDERS, 0, (1, 2), None, 0, 1)])  # versions were read back on load
    second.close()


def test_campaign_wins_a_free_controller_znode_and_creates_the_chroot(server: ZooKeeperServer,
                                                                        connect: str) -> None:
    chroot = connect[connect.index("/"):]
    root = KazooClient(hosts=server.connect())
    root.start(timeout=5)
    assert root.exists(chroot) is None
    store = ZooKeeperStore(connect, 7)
    assert root.exists(chroot) is not None
    plain = KazooClient(hosts=connect)
    plain.start(timeout=5)
    assert store.campaign(until(5))
    assert store.controller_epoch == 1
    body, _version = znode_json(plain, "/controller")
    assert isinstance(body, dict) and body["version"] == 1 and body["brokerid"] == 7
    assert body["timestamp"].isdigit()
    assert plain.get("/controller_epoch")[0] == b"1"
    store.close()
    assert plain.exists("/controller") is None  # a clean close hands the election on at once
    for client in (plain, root):
        client.stop()
        client.close()


def test_a_standby_waits_for_the_active_controller_then_wins_with_the_next_epoch(connect: str) -> None:
    active = elected(connect, 1)
    standby = ZooKeeperStore(connect, 2)
    won: list[bool] = []
    campaign = threading.Thread(target=lambda: won.append(standby.campaign(until(10), poll_s=0.05)))
    campaign.start()
    time.sleep(0.5)
    assert campaign.is_alive() and not won  # /controller is held
    active.close()
    campaign.join(5)
    assert won == [True]
    assert standby.controller_epoch == 2
    standby.close()


def test_campaign_gives_up_when_told_to_stop(connect: str) -> None:
    active = elected(connect, 1)
    standby = ZooKeeperStore(connect, 2)
    started = time.monotonic()
    assert not standby.campaign(until(0.3), poll_s=0.05)
    assert time.monotonic() - started < 2
    standby.close()
    active.close()


def test_a_zombie_controller_is_fenced_and_nothing_of_its_batch_is_stored(connect: str,
                                                                          plain: KazooClient) -> None:
    zombie = elected(connect, 1)
    zombie.append(BROKERS)
    lost = threading.Event()
    zombie.on_lost(lost.set)
    plain.delete("/controller")  # as if its session had expired while it was paused
    assert lost.wait(5)
    successor = elected(connect, 2)
    assert successor.controller_epoch == 2

    with pytest.raises(ControllerFencedError, match="/controller_epoch"):
        zombie.append(CREATE_ORDERS)
    assert successor.load() == BROKERS
    assert plain.exists("/brokers/topics/orders") is None
    successor.append(CREATE_ORDERS)  # the successor goes on
    zombie.close()
    assert plain.exists("/controller") is not None  # the zombie's close left the successor's znode alone
    successor.close()


def test_on_lost_fires_when_the_session_expires_and_appends_are_refused(connect: str) -> None:
    store = elected(connect, 1)
    lost = threading.Event()
    store.on_lost(lost.set)
    session_id, password = store._client.client_id  # another connection closing the session expires it
    hijack = KazooClient(hosts=connect, client_id=(session_id, password))
    hijack.start(timeout=5)
    hijack.stop()
    hijack.close()
    assert lost.wait(10)
    with pytest.raises(ControllerFencedError):
        store.append(BROKERS)
    store.close()


def test_partition_state_znodes_hold_kafkas_json_with_versions(connect: str, plain: KazooClient) -> None:
    store = elected(connect, 1)
    store.append(BROKERS)
    store.append(CREATE_ORDERS)
    assert znode_json(plain, "/brokers/topics/orders") == (
        {"version": 2, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]}, "adding_replicas": {},
         "removing_replicas": {}}, 0)
    assert znode_json(plain, ORDERS_0) == (
        {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1, 2, 3]}, 0)

    store.append([PartitionChangeRecord(ORDERS, 0, (2, 3), 2, 1, 1)])
    assert znode_json(plain, ORDERS_0) == (
        {"controller_epoch": 1, "leader": 2, "version": 1, "leader_epoch": 1, "isr": [2, 3]}, 1)
    store.append([PartitionChangeRecord(ORDERS, 0, (2, 3, 1), None, 1, 2)])  # ISR-only
    assert znode_json(plain, ORDERS_0)[1] == 2
    assert znode_json(plain, "/brokers/topics/orders/partitions/1/state")[1] == 0  # untouched

    store.append([PartitionRecord(ORDERS, 2, (3, 1, 2), (3, 1, 2), 3, 0, 0)])  # a partition added later
    topic, version = znode_json(plain, "/brokers/topics/orders")
    assert isinstance(topic, dict) and topic["partitions"]["2"] == [3, 1, 2] and version == 1
    store.close()


def test_a_state_znode_changed_behind_the_controllers_back_refuses_the_append(connect: str,
                                                                               plain: KazooClient) -> None:
    store = elected(connect, 1)
    store.append([*BROKERS, *CREATE_ORDERS])
    plain.set(ORDERS_0, b"{}")
    with pytest.raises(ControllerFencedError, match=ORDERS_0):
        store.append([PartitionChangeRecord(ORDERS, 0, (1, 2), None, 0, 1)])
    assert len(store.load()) == len(BROKERS) + len(CREATE_ORDERS)
    store.close()


def test_a_removed_topics_znodes_are_deleted(connect: str, plain: KazooClient) -> None:
    store = elected(connect, 1)
    store.append([*BROKERS, *CREATE_ORDERS, *CREATE_LOGS])
    store.append([PartitionChangeRecord(ORDERS, 1, (2,), None, 0, 1)])
    store.append([RemoveTopicRecord(LOGS)])
    assert plain.exists("/brokers/topics/logs") is None
    assert plain.get_children("/brokers/topics") == ["orders"]

    # removed and created again under the same name, in one batch
    store.append([RemoveTopicRecord(ORDERS), TopicRecord("orders", ORDERS_AGAIN),
                  PartitionRecord(ORDERS_AGAIN, 0, (3,), (3,), 3, 0, 0)])
    assert plain.get_children("/brokers/topics/orders/partitions") == ["0"]
    assert znode_json(plain, ORDERS_0) == (
        {"controller_epoch": 1, "leader": 3, "version": 1, "leader_epoch": 0, "isr": [3]}, 0)
    store.close()


def test_a_batch_over_zookeepers_limit_is_refused_and_nothing_is_stored(connect: str) -> None:
    store = elected(connect, 1)
    before = store.load()
    with pytest.raises(KafkaException, match="1 MB"):
        store.append([ConfigRecord("orders", "big", "x" * 1_000_000)])
    assert store.load() == before
    store.close()


def test_an_unreachable_zookeeper_is_a_config_error_naming_it(tmp_path: Path) -> None:
    connect = f"127.0.0.1:{free_ports(1)[0]}/insync"
    started = time.monotonic()
    with pytest.raises(ConfigError, match=connect):
        ZooKeeperStore(connect, 1, connect_timeout_s=0.5)
    assert time.monotonic() - started < 3


def test_a_malformed_connect_string_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="host:port"):
        ZooKeeperStore("localhost/insync", 1)


def test_the_cluster_id_is_stored_with_the_batches_and_mirrored_in_kafkas_znode(connect: str,
                                                                              plain: KazooClient) -> None:
    store = elected(connect, 1)
    store.append([ClusterIdRecord("MkU3OEVBNTcwNTJENDM2Qg"), ControllerChangeRecord(1, 1)])
    store.close()
    assert znode_json(plain, "/cluster/id") == ({"version": "1", "id": "MkU3OEVBNTcwNTJENDM2Qg"}, 0)
    assert MetadataImage.from_records(elected(connect, 2).load()).cluster_id == "MkU3OEVBNTcwNTJENDM2Qg"
