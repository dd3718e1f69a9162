"""Failed log directories as the controller learns them from heartbeats (KIP-858's OfflineLogDirs).

A broker whose log directory failed names it in every heartbeat of that life (`broker.dir_failure`). The first
heartbeat that names a directory makes the controller take the broker's replicas in it out of their ISRs and
move their leaderships to other eligible replicas, as Kafka's `ReplicationControlManager.handleDirectoriesOffline`
does; later heartbeats naming it change nothing, so a replica that rejoins an ISR through its healthy
directories is not shrunk again. Which directory holds each replica is not assigned in the metadata yet (Kafka's
PartitionRecord.Directories and AssignReplicasToDirs), so every replica of the broker counts as in the failed
directory: safe, and exact for a broker with one log directory (which halts before it could heartbeat). What
was handled is soft state, per broker life, like the sessions: a new controller acts on the next heartbeat again,
which finds nothing left to change.
"""

from __future__ import annotations

from insync.controller.replication_control import ElectionPolicy, TopicPartitionChange, leaving_broker_changes
from insync.events import LeaderChangeReason
from insync.limits import BROKERS_MAX
from insync.metadata.image import MetadataImage
from insync.types import BrokerId

LOG_DIRS_MAX = 64  # per broker, as the broker's failure channel


class OfflineLogDirs:
    def __init__(self) -> None:
        self._handled: dict[BrokerId, tuple[int, frozenset[str]]] = {}  # broker -> (broker epoch, dirs acted on)

    def newly_offline(self, broker_id: BrokerId, broker_epoch: int, offline: tuple[str, ...]) -> tuple[str, ...]:
        """The directories of `offline` not acted on yet in this life of the broker (and mark them acted on)."""
        if len(offline) > LOG_DIRS_MAX:
            raise ValueError(f"broker {broker_id} reports {len(offline)} offline log dirs, more than {LOG_DIRS_MAX}")
        epoch, handled = self._handled.get(broker_id, (broker_epoch, frozenset()))
        if epoch != broker_epoch:
            handled = frozenset()  # a new life: it recovered its directories at start
        new = tuple(sorted(set(offline) - handled))
        if new or broker_id in self._handled:
            assert broker_id in self._handled or len(self._handled) < BROKERS_MAX
            self._handled[broker_id] = (broker_epoch, handled | set(offline))
        return new


def offline_dir_changes(image: MetadataImage, broker_id: BrokerId, policy: ElectionPolicy
                        ) -> list[TopicPartitionChange]:
    """The broker's replicas out of every ISR, their leaderships moved (see the module docstring for which)."""
    assert broker_id in image.brokers, broker_id
    return leaving_broker_changes(image, broker_id, str(LeaderChangeReason.LOG_DIR_FAILURE), policy)
