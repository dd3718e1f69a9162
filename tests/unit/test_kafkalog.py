import logging

from insync import kafkalog


def test_shrink_line_matches_kafka_36_wording() -> None:
    removed = [{"broker": 3, "leo": 950, "last_caught_up_ms": 1700000000000}]
    message = kafkalog.partition_prefix("t", 0, 1) + kafkalog.shrink_message([1, 2, 3], [1, 2], 1100, 1100, removed)
    assert message == ("[Partition t-0 broker=1] Shrinking ISR from 1,2,3 to 1,2. Leader: (highWatermark: 1100, "
                       "endOffset: 1100). Out of sync replicas: (brokerId: 3, endOffset: 950, "
                       "lastCaughtUpTimeMs: 1700000000000).")


def test_unknown_values_print_unknown_and_commit_line_spacing() -> None:
    message = kafkalog.shrink_message([1, 2], [1], 5, 5, [{"broker": 2, "leo": -1, "last_caught_up_ms": None}])
    assert message.endswith("(brokerId: 2, endOffset: unknown, lastCaughtUpTimeMs: unknown).")
    assert kafkalog.isr_updated_message([1, 2], 7, False) == "ISR updated to 1,2  and version updated to 7"
    assert kafkalog.isr_updated_message([1], 8, True) == "ISR updated to 1 (under-min-isr) and version updated to 8"


def test_leader_follower_min_isr_failed_lines() -> None:
    assert kafkalog.leader_message("t", 0, 5, 1100, 1100, [1, 2, 3], 4) == (
        "Leader t-0 starts at leader epoch 5 from offset 1100 with high watermark 1100 ISR [1,2,3] "
        "addingReplicas [] removingReplicas []. Previous leader epoch was 4.")
    assert kafkalog.follower_message("t", 0, 5, 1100, 1100, 4) == (
        "Follower t-0 starts at leader epoch 5 from offset 1100 with high watermark 1100. "
        "Previous leader epoch was 4.")
    assert kafkalog.min_isr_message([1], 2, "t", 0) == (
        "The size of the current ISR Set(1) is insufficient to satisfy the min.isr requirement of 2 for "
        "partition t-0")
    assert kafkalog.failed_message("t", 3) == "Partition t-3 marked as failed"


def test_formatter_is_log4j_layout_in_utc() -> None:
    record = logging.LogRecord("kafka.cluster.Partition", logging.WARNING, "", 0, "hello", None, None)
    record.created = 1709294401.234
    record.msecs = 234
    assert kafkalog.KafkaLogFormatter().format(record) == (
        "[2024-03-01 12:00:01,234] WARN hello (kafka.cluster.Partition)")
