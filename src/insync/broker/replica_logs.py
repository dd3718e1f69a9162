"""What a broker tells the controller about its offline partitions, for unclean recovery (KIP-966).

For every partition it hosts whose leader is -1 in its metadata image, the broker reports its own log: log start,
log end and the latest leader epochs of its leader-epoch cache (`controller.unclean_recovery.ReplicaLog`), at the
partition's leader epoch. No replica of an offline partition appends, so the report stays true until the
partition gets a leader (a new leader epoch) or the broker restarts (a new broker epoch); the controller keeps
it only that long. Only a caught-up broker reports: before, its partitions may be a previous life's.
"""

from __future__ import annotations

from collections.abc import Mapping

from insync.broker.metadata import BrokerMetadata
from insync.controller.unclean_recovery import REPORTED_EPOCHS_MAX, ReplicaLog, ReplicaLogReport
from insync.storage.log import Log
from insync.types import NO_LEADER, BrokerId, TopicPartition


def offline_replica_logs(broker_id: BrokerId, metadata: BrokerMetadata,
                         logs: Mapping[TopicPartition, Log]) -> tuple[ReplicaLogReport, ...]:
    """`logs`: the logs of the partitions this broker hosts."""
    reports = []
    for tp, log in logs.items():
        registration = metadata.registration(tp)
        topic_id = metadata.topic_id(tp.topic)
        if registration is None or topic_id is None or registration.leader != NO_LEADER:
            continue
        epochs = tuple(log.leader_epoch_cache.epoch_entries[-REPORTED_EPOCHS_MAX:])
        reports.append(ReplicaLogReport(topic_id, tp.partition, registration.leader_epoch,
                                        ReplicaLog(broker_id, log.log_start_offset, log.log_end_offset, epochs)))
    assert len(reports) <= len(logs)
    return tuple(reports)
