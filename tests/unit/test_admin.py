"""`insync topics describe`'s partition line, as kafka-topics.sh prints it: adding and removing replicas while a
reassignment runs, and the replication factor without the replicas being removed; the text of an admin error."""

from __future__ import annotations

import concurrent.futures

from insync.admin import PartitionRow, kafka_error_text


def test_a_partition_being_reassigned_shows_its_adding_and_removing_replicas() -> None:
    row = PartitionRow("t", "id", 0, 1, (2, 3, 4, 1), (1, 2, 3), 2, (), (), reassignment=((4,), (1,)))
    assert row.line() == ("\tTopic: t\tTopicId: id\tPartition: 0\tLeader: 1\tReplicas: 2,3,4,1\tIsr: 1,2,3"
                          "\tAdding Replicas: 4\tRemoving Replicas: 1\tElr: \tLastKnownElr: ")
    assert row.replication_factor == 3


def test_a_partition_not_being_reassigned_shows_no_reassignment_columns() -> None:
    row = PartitionRow("t", "id", 0, 1, (1, 2), (1, 2), 1)
    assert "Adding" not in row.line() and row.replication_factor == 2


def test_an_error_without_words_is_named_by_its_kind() -> None:
    assert kafka_error_text(concurrent.futures.TimeoutError()) == "TimeoutError: no answer from the cluster in time"
    assert kafka_error_text(ValueError("bad")) == "bad" and kafka_error_text(ValueError()) == "ValueError"
