"""What a Spark task of the `insync` source runs: one offset range of one partition (`RangePartition`), read by
`kafka_io.RangeFetch` from the partition's leader."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from insync.spark.source import kafka_io, worker_gc
from insync.spark.source.kafka_io import OffsetRange
from insync.spark.source.options import SourceOptions

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReadSettings:
    """What a task needs besides its range: everything travels in the input partition (pickled)."""

    client_conf: tuple[tuple[str, str], ...]
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int

    @classmethod
    def of(cls, options: SourceOptions) -> ReadSettings:
        return cls(tuple(sorted(options.client_conf.items())), options.include_headers,
                   options.fail_on_data_loss, options.poll_timeout_ms)


class RangePartition(InputPartition):
    """One Spark task: an offset range of one partition, and how to read it."""

    def __init__(self, offset_range: OffsetRange, settings: ReadSettings, leader: tuple[str, int] | None) -> None:
        super().__init__(offset_range)
        self.range = offset_range
        self.settings = settings
        self.leader = leader  # as the driver last saw it


def read_partition(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The body of every read task (batch and streaming)."""
    if not isinstance(partition, RangePartition):
        return  # Spark asks for one placeholder partition when a plan has none
    s = partition.settings
    fetch = kafka_io.RangeFetch(partition.range, dict(s.client_conf), include_headers=s.include_headers,
                                fail_on_data_loss=s.fail_on_data_loss, poll_timeout_ms=s.poll_timeout_ms,
                                leader=partition.leader)
    yield from fetch.batches()
    worker_gc.settle_after_task()  # pyspark's collection after each task then skips the imported modules
    if fetch.losses:
        log.warning("insync source: %s read %d records and skipped %d lost offsets", partition.range,
                    fetch.rows, sum(loss.skipped for loss in fetch.losses))
