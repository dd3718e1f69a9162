"""The tables one `insync analyze` run builds (`job.build_tables`) and the report reads (`report.collect`).

Their own module so the job, which renders the report, and the report, which reads the job's tables, do not
import each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame


@dataclass(frozen=True, slots=True)
class Tables:
    events: DataFrame
    malformed: DataFrame
    isr_changes: DataFrame
    intervals: DataFrame
    flapping_episodes: DataFrame
    episodes: DataFrame
    per_broker: DataFrame
    data_at_risk: DataFrame
    # The summary's counts (job.SUMMARY_KEYS; ignored_lines: well-formed Kafka lines that are no event), observed
    # as the tables were written.
    counted: dict[str, Any]
    partitions_with_replicas: int  # the partitions whose replica set the events name
    first_ms: int | None  # the first and last event times (None when there is no event)
    last_ms: int | None
