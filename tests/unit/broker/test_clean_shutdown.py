"""The KIP-966 clean-shutdown marker: written durably after a clean stop, taken (and removed) at start."""

from __future__ import annotations

from insync.broker.clean_shutdown import CLEAN_SHUTDOWN_FILE, mark_clean_shutdown, take_previous_broker_epoch
from insync.storage.disk import MemoryDisk

LOG_DIR = "/broker-1"


def _disk() -> MemoryDisk:
    disk = MemoryDisk()
    disk.mkdir(LOG_DIR)
    return disk


def test_a_marker_survives_a_crash_and_is_taken_once() -> None:
    disk = _disk()
    mark_clean_shutdown(disk, LOG_DIR, 42)
    disk.crash()  # written durably: a power loss right after the clean stop keeps it
    assert disk.read_file(f"{LOG_DIR}/{CLEAN_SHUTDOWN_FILE}") == b'{"version":0,"brokerEpoch":42}'
    assert take_previous_broker_epoch(disk, LOG_DIR) == 42
    disk.crash()  # this life crashes: the next start finds no marker
    assert take_previous_broker_epoch(disk, LOG_DIR) == -1


def test_a_garbled_marker_is_no_proof_and_is_removed() -> None:
    disk = _disk()
    for body in (b"{not json", b'{"version":1,"brokerEpoch":4}', b'{"version":0,"brokerEpoch":-3}',
                 b'{"version":0,"brokerEpoch":true}'):
        disk.write_file(f"{LOG_DIR}/{CLEAN_SHUTDOWN_FILE}", body)
        assert take_previous_broker_epoch(disk, LOG_DIR) == -1
        assert not disk.exists(f"{LOG_DIR}/{CLEAN_SHUTDOWN_FILE}")
