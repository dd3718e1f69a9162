"""The `crash` fault: power loss on one node, then a restart.

The node is killed (SIGKILL), every file its `JournalingDisk` wrote loses what was written since its last fsync
(`storage.power_loss.lose_unsynced`), and the node starts again on what is left, as after a power cut. The node
must have been started with `fault.injection.power.loss.enable=true`: without the journal there is no knowing
what was durable, so the fault is refused, naming the setting.
"""

from __future__ import annotations

import random
import signal
from pathlib import Path

from insync.chaos import cluster
from insync.config import BrokerConfig, ConfigError
from insync.storage.power_loss import JOURNAL_FILE, PowerCut, lose_unsynced

POWER_LOSS_CONFIG = "fault.injection.power.loss.enable"


def crash(spec: cluster.ClusterSpec, node_id: int, torn_tail: bool = False, rng: random.Random | None = None,
          restart: bool = True) -> tuple[cluster.ClusterSpec, PowerCut]:
    """Kill node `node_id`, drop its unsynced bytes and (unless `restart` is False) start it again."""
    node = spec.node(node_id)
    config = BrokerConfig.from_sources(node.config_path)
    if not config.storage.power_loss_journal:
        raise ConfigError(f"node {node_id} was not started with {POWER_LOSS_CONFIG}=true, so what it fsynced is "
                          f"unknown; restart it with --config {POWER_LOSS_CONFIG}=true to crash it")
    spec = cluster.stop_node(spec, node_id, deadline_s=0, sig=signal.SIGKILL)
    cut = lose_unsynced(Path(config.log_dirs()[0]) / JOURNAL_FILE, torn_tail, rng)
    if restart:
        spec = cluster.start_node(spec, node_id)
        cluster.wait_listening(spec.node(node_id))
    return spec, cut
