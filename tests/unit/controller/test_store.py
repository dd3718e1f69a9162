from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest
from ctrl_harness import CONTROLLER_ID, Harness

from insync.config import ConfigChange, ConfigOp
from insync.controller.controller import Controller
from insync.controller.store import (
    METADATA_FILE,
    LocalFileStore,
    MemoryStore,
    MetadataStoreError,
    encode_batch,
)
from insync.metadata.records import ConfigRecord, PartitionRecord, Record, TopicRecord
from insync.storage.disk import MemoryDisk

T = "00000000-0000-4000-8000-000000000001"
BATCH_1: list[Record] = [TopicRecord("t", T), ConfigRecord("t", "retention.ms", "1000")]
BATCH_2: list[Record] = [PartitionRecord(T, 0, (1, 2), (1, 2), 1, 0, 0)]


def test_memory_store_round_trip() -> None:
    store = MemoryStore()
    store.append(BATCH_1)
    store.append(BATCH_2)
    assert store.load() == BATCH_1 + BATCH_2


def test_local_file_store_round_trip(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path)
    assert store.load() == []
    store.append(BATCH_1)
    store.append(BATCH_2)
    store.close()
    assert (tmp_path / METADATA_FILE).read_bytes().count(b"\n") == 2  # one line per batch
    reopened = LocalFileStore(tmp_path)
    assert reopened.load() == BATCH_1 + BATCH_2
    reopened.close()


@pytest.mark.parametrize("cut", [1, 10, -2])
def test_torn_last_batch_is_dropped_with_a_log_line_and_cut_off(tmp_path: Path, cut: int,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    store = LocalFileStore(tmp_path)
    store.load()
    store.append(BATCH_1)
    store.append(BATCH_2)
    store.close()
    path = tmp_path / METADATA_FILE
    data = path.read_bytes()
    first_line_end = data.index(b"\n") + 1
    path.write_bytes(data[: first_line_end + (cut if cut > 0 else len(data) - first_line_end + cut)])
    reopened = LocalFileStore(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert reopened.load() == BATCH_1  # the torn batch is gone as a whole
    assert "torn last line 2" in caplog.text
    assert path.read_bytes() == data[:first_line_end]
    reopened.append(BATCH_2)  # appends start on a clean line
    reopened.close()
    again = LocalFileStore(tmp_path)
    assert again.load() == BATCH_1 + BATCH_2
    again.close()


def test_last_complete_line_with_a_bad_crc_counts_as_torn(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path)
    store.load()
    store.append(BATCH_1)
    store.append(BATCH_2)
    store.close()
    path = tmp_path / METADATA_FILE
    path.write_bytes(path.read_bytes().replace(b'"partition":0', b'"partition":1'))
    reopened = LocalFileStore(tmp_path)
    assert reopened.load() == BATCH_1
    reopened.close()


def test_corrupt_line_before_the_end_is_an_error_naming_the_line(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path)
    store.load()
    store.append(BATCH_1)
    store.append(BATCH_2)
    store.append(BATCH_1)
    store.close()
    path = tmp_path / METADATA_FILE
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"leader":1', b'"leader":2')
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(MetadataStoreError, match=r"metadata.jsonl: line 2 is corrupt: CRC mismatch"):
        LocalFileStore(tmp_path).load()
    lines[1] = b"{not json"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(MetadataStoreError, match="line 2 is corrupt"):
        LocalFileStore(tmp_path).load()


def test_local_file_store_on_a_memory_disk_keeps_every_append_through_a_crash() -> None:
    disk = MemoryDisk()
    store = LocalFileStore("/controller", disk)
    assert store.load() == []
    disk.crash()  # the empty file was created durably
    store.append(BATCH_1)
    store.append(BATCH_2)
    disk.crash()  # append returns only once the batch is fsynced
    assert LocalFileStore("/controller", disk).load() == BATCH_1 + BATCH_2


@pytest.mark.parametrize("seed", range(8))
def test_local_file_store_on_a_memory_disk_recovers_from_a_torn_append(seed: int) -> None:
    disk = MemoryDisk()
    store = LocalFileStore("/controller", disk)
    store.load()
    store.append(BATCH_1)
    disk.append(f"/controller/{METADATA_FILE}", encode_batch(BATCH_2))  # a crash before append's fsync ...
    disk.crash(torn_tail=True, rng=random.Random(seed))  # ... keeps a random prefix of the batch
    reopened = LocalFileStore("/controller", disk)
    assert reopened.load() == BATCH_1  # the torn batch is gone as a whole (these seeds tear it)
    reopened.append(BATCH_2)
    disk.crash()
    assert LocalFileStore("/controller", disk).load() == BATCH_1 + BATCH_2  # appended on a clean line


def test_controller_restarted_on_a_local_file_store_rebuilds_the_same_image(tmp_path: Path) -> None:
    h = Harness(store=LocalFileStore(tmp_path))
    h.start(1, 2, 3)
    h.controller.create_topic("a", 3, 3, {"min.insync.replicas": 2}, h.now)
    h.controller.create_topic("b", 1, 1, {}, h.now)
    h.controller.delete_topic("b", h.now)
    h.controller.alter_broker_configs("", [ConfigChange("log.retention.ms", ConfigOp.SET, "60000")], h.now)
    h.controller.alter_broker_configs("2", [ConfigChange("log.retention.ms", ConfigOp.SET, "30000")], h.now)
    h.advance(20_000)
    h.heartbeat_all(1, 2)
    h.controller.tick(h.now)  # broker 3 fenced, leaderships moved
    before = h.controller.image
    h.controller.close()

    restarted = Controller(CONTROLLER_ID, h.config, LocalFileStore(tmp_path), h.now, random.Random(1))
    after = restarted.image
    assert after.offset == before.offset + 1  # plus the new ControllerChangeRecord
    assert after.controller_epoch == before.controller_epoch + 1
    assert (after.topics_by_id, after.topic_ids_by_name, after.brokers, after.topic_configs) == (
        before.topics_by_id, before.topic_ids_by_name, before.brokers, before.topic_configs)
    assert after.broker_configs == {"": {"log.retention.ms": "60000", "min.insync.replicas": "1"},
                                    "2": {"log.retention.ms": "30000"}}
    # the restarted controller gives live brokers a fresh session rather than fencing them at once
    restarted.tick(h.now + 1)
    assert not restarted.image.brokers[1].fenced
    restarted.close()
