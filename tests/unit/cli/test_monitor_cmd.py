"""`insync monitor`'s refusals: bad thresholds before any Spark starts, a cluster without `__insync_events`, no
Kafka cluster at the address given with `--kafka-logs`."""

from __future__ import annotations

import pytest

from insync.chaos.cluster import free_ports
from insync.cli.main import main


def test_a_negative_threshold_is_refused_naming_the_flag() -> None:
    with pytest.raises(SystemExit, match="--urp-ms must be >= 0, got -1"):
        main(["monitor", "--bootstrap-server", "127.0.0.1:1", "--urp-ms", "-1"])


def test_no_events_topic_is_a_monitor_error_saying_what_to_check() -> None:
    pytest.importorskip("pyspark")
    from insync.spark.monitor.job import MonitorError, wait_for_events_topic

    with pytest.raises(MonitorError, match="no __insync_events topic at .* insync.events.topic.enable=true"):
        wait_for_events_topic(f"127.0.0.1:{free_ports(1)[0]}", 1.0)


def test_no_kafka_cluster_is_a_monitor_error_naming_the_address() -> None:
    pytest.importorskip("pyspark")
    from insync.spark.monitor.job import MonitorError, wait_for_kafka

    port = free_ports(1)[0]
    with pytest.raises(MonitorError, match=f"no Kafka cluster answered at 127.0.0.1:{port} within 1 s"):
        wait_for_kafka(f"127.0.0.1:{port}", 1.0)
