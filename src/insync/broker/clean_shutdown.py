"""The clean-shutdown marker (KIP-966): how a restarting broker proves its log lost nothing.

A broker that stops cleanly has flushed every log; it then writes `.kafka_cleanshutdown` in its log dir, as
Kafka's `CleanShutdownFileHandler` does, holding the broker epoch of the life that ended:
`{"version":0,"brokerEpoch":42}`. On start the broker reads the marker and deletes it at once, so a crash
later in this life leaves none. It registers with that epoch as `PreviousBrokerEpoch` (-1 without a marker);
the controller treats a registration whose previous epoch is not the registered one as an unclean shutdown,
and takes the broker out of every ISR and ELR, since the unflushed tail it acknowledged may be gone.

A marker that cannot be read is no proof: it counts as an unclean shutdown, the safe side.
"""

from __future__ import annotations

import json
import logging

from insync.storage.disk import Disk

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
MARKER_VERSION = 0
MARKER_BYTES_MAX = 1024  # the marker is one small JSON object; anything larger is not ours
NO_PREVIOUS_EPOCH = -1

logger = logging.getLogger(__name__)


def take_previous_broker_epoch(disk: Disk, log_dir: str) -> int:
    """The broker epoch the marker in `log_dir` holds (NO_PREVIOUS_EPOCH without a valid one); removes it."""
    path = f"{log_dir}/{CLEAN_SHUTDOWN_FILE}"
    if not disk.exists(path):
        return NO_PREVIOUS_EPOCH
    epoch = NO_PREVIOUS_EPOCH
    if disk.size(path) <= MARKER_BYTES_MAX:
        try:
            data = json.loads(disk.read_file(path))
        except ValueError:
            data = None
        if isinstance(data, dict) and data.get("version") == MARKER_VERSION:
            value = data.get("brokerEpoch")
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                epoch = value
    if epoch == NO_PREVIOUS_EPOCH:
        logger.warning("%s is not a valid clean-shutdown marker: registering as after an unclean shutdown", path)
    disk.remove(path)
    return epoch


def mark_clean_shutdown(disk: Disk, log_dir: str, broker_epoch: int) -> None:
    """Write the marker durably (temporary file, fsync, rename); call only once every log is flushed."""
    assert broker_epoch >= 0, broker_epoch
    path = f"{log_dir}/{CLEAN_SHUTDOWN_FILE}"
    body = json.dumps({"version": MARKER_VERSION, "brokerEpoch": broker_epoch}, separators=(",", ":"))
    disk.write_file(f"{path}.tmp", body.encode())
    disk.fsync(f"{path}.tmp")
    disk.rename(f"{path}.tmp", path)
